"""The plugin catalogue of the docs, generated at build time from what ``ldpsim list`` prints.

``ldpsim list KIND`` lists the installed plugins of a kind and ``ldpsim list KIND NAME`` documents
one in full; both read everything from the plugins' own declarations (docstrings, ``Param``
attributes, class attributes). The directive ::

    ```{ldpsim-catalogue} mechanisms
    ```

runs the command through its public entry point (the ``ldpsim`` console script, in this process)
and puts its output on the page verbatim: the listing, then a section per plugin with its full
documentation. The catalogue therefore says exactly what the command says, and cannot drift.
Pages using it are rebuilt on every build, since an installed plugin may have changed.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

#: ANSI escape sequences, which rich prints only when forced to (FORCE_COLOR): removed
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

KINDS = ("mechanisms", "estimators", "datasets", "metrics", "executors", "attacks", "protocols", "open_datasets")


def _entry_point() -> Callable[[], Any]:
    """The function behind the ``ldpsim`` command, wherever the package defines it."""
    scripts = [ep for ep in entry_points(group="console_scripts") if ep.name == "ldpsim"]
    if not scripts:
        raise ExtensionError("the ldpsim command is not installed (pip install -e '.[docs]')")
    main: Callable[[], Any] = scripts[0].load()
    return main


def ldpsim_output(*args: str) -> str:
    """What ``ldpsim ARGS`` prints on stdout; an ``ExtensionError`` with its stderr if it fails."""
    main = _entry_point()
    stdout, stderr = io.StringIO(), io.StringIO()
    argv, code = sys.argv, 0
    sys.argv = ["ldpsim", *args]
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        sys.argv = argv
    if code != 0:
        raise ExtensionError(f"`ldpsim {' '.join(args)}` exited with {code}: {stderr.getvalue().strip()}")
    return ANSI.sub("", stdout.getvalue()).rstrip() + "\n"


def plugin_names(listing: str) -> list[str]:
    """The plugin names of an ``ldpsim list KIND`` listing: lines indented by exactly two spaces."""
    return [line.split()[0] for line in listing.splitlines() if re.match(r"  \S", line)]


def _text_block(text: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = "text"
    return block


class CatalogueDirective(SphinxDirective):
    """``ldpsim list KIND`` verbatim, then a section per plugin with ``ldpsim list KIND NAME``."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        kind = self.arguments[0]
        if kind not in KINDS:
            raise self.error(f"ldpsim-catalogue: unknown kind {kind!r}; one of {', '.join(KINDS)}")
        self.env.note_reread()  # an installed plugin may have changed: read the page on every build
        try:
            listing = ldpsim_output("list", kind)
        except ExtensionError as error:
            raise self.error(str(error)) from error
        result: list[nodes.Node] = [
            nodes.paragraph("", "", nodes.literal(text=f"ldpsim list {kind}")),
            _text_block(listing),
        ]
        for name in plugin_names(listing):
            try:
                text = ldpsim_output("list", kind[:-1], name)
            except ExtensionError as error:
                raise self.error(str(error)) from error
            section = nodes.section(
                ids=[nodes.make_id(f"{kind[:-1]}-{name}")], names=[nodes.fully_normalize_name(name)]
            )
            section += nodes.title(name, "", nodes.literal(text=name))
            section += nodes.paragraph("", "", nodes.literal(text=f"ldpsim list {kind[:-1]} {name}"))
            section += _text_block(text)
            self.state.document.note_implicit_target(section, section)
            result.append(section)
        return result


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive."""
    app.add_directive("ldpsim-catalogue", CatalogueDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
