"""``ldpsim list`` and ``ldpsim new``: the installed plugins, and a scenario to start from."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ..base.errors import LdpsimError, did_you_mean
from ..base.untrusted import printable
from .cli_console import err, out, user_errors


def list_plugins(
    kind: Annotated[
        str | None,
        typer.Argument(
            metavar="[KIND|NAME]",
            help="mechanisms, estimators, datasets, metrics, executors or attacks; or a plugin's name",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Argument(help="a plugin of KIND, documented in full (e.g. `list mechanism krr`)")
    ] = None,
) -> None:
    """List the installed plugins, or document one: `ldpsim list krr`."""
    from ..plugin.catalogue import catalogue

    with user_errors():
        listing = catalogue()
        kinds = list(listing)
        if kind is not None:
            singular = kind[:-1] if kind.endswith("s") else kind
            if name is None and singular in listing:
                kinds = [singular]
            else:  # a plugin to document in full, or a mistake to explain: the classes themselves
                from ..plugin.registry import get_registry
                from .plugin_doc import find_entries

                found, documented = find_entries(get_registry(), kind, name)
                if documented:
                    _document_plugins(documented)
                    return
                kinds = [str(found)]
    for k in kinds:
        out.print(f"[bold]{k}s[/bold]")
        for entry in listing[k]:
            domains = entry["domains"]
            # a third party's texts are shown, never interpreted: no markup, no control characters
            name, summary = escape(printable(entry["name"])), escape(printable(entry["summary"]))
            out.print(f"  [bold]{name}[/bold]  {summary}", soft_wrap=True)
            out.print(
                printable(f"      plugin {entry['origin']}" + (f"; domains: {', '.join(domains)}" if domains else "")),
                markup=False,
                soft_wrap=True,
            )
            for describe, doc in entry["parameters"]:
                line = f"      {describe}" + (f"  -- {doc}" if doc else "")
                out.print(printable(line), markup=False, soft_wrap=True)
        out.print()


def _document_plugins(entries: list) -> None:
    """Print the full documentation of each entry (``ldpsim list NAME``)."""
    from .plugin_doc import describe

    for i, entry in enumerate(entries):
        if i:
            out.print()
        for line in describe(entry):
            out.print(printable(line), markup=False, soft_wrap=True)


def new(
    name: Annotated[
        str,
        typer.Argument(
            help="the scenario's name; writes NAME.toml (NAME may start with an existing folder: runs/my-study). "
            "The name is 1-100 letters (a-z, A-Z), digits, '-', '_' or '.', starting with a letter or digit"
        ),
    ],
    from_: Annotated[
        str, typer.Option("--from", metavar="TEMPLATE", help="basic (k-RR at three levels) or quickstart (001 Fig. 2)")
    ] = "basic",
) -> None:
    """Write NAME.toml, a commented scenario to start from (never over an existing file).

    The name (NAME's last part, less a final .toml) becomes the file's name and the scenario's
    `name`: 1-100 letters (a-z, A-Z), digits, '-', '_' or '.', starting with a letter or digit.
    """
    with user_errors():
        target = write_template(name, from_)
    err.print(
        f"wrote {target}: edit it, then `ldpsim run {target} --dry-run` and `ldpsim run {target}`",
        markup=False,
        soft_wrap=True,
    )


#: the scenarios ``ldpsim new --from`` starts from: files in ldpsim/output/templates
TEMPLATES = ("basic", "quickstart")

#: the longest scenario name ``ldpsim new`` writes: NAME.toml, and the NAME.nc and NAME.png made from it,
#: stay far below the 255 bytes file systems allow a file name, and a name stays readable in a table
MAX_NAME = 100
#: a scenario name ``ldpsim new`` writes: it becomes a file name and a TOML string as it is, so it is a plain
#: word (no quote, backslash, space, control character or path separator to escape), never a hidden file
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NAME_RULE = f"1-{MAX_NAME} letters (a-z, A-Z), digits, '-', '_' or '.', starting with a letter or digit (e.g. my-study)"


def scenario_name(name: str) -> tuple[Path, str]:
    """``(target, stem)`` of ``ldpsim new NAME``: the file to write and the scenario's name.

    Raises
    ------
    LdpsimError
        If the name (NAME's last part, less a final ``.toml``) breaks :data:`NAME_PATTERN` or
        :data:`MAX_NAME`, or the folder part holds a control character.
    """
    folder, _, last = name.rpartition("/")
    stem = last[: -len(".toml")] if last.endswith(".toml") else last
    if not stem:
        problem = "no scenario name given" if not name else f"{name!r} names no scenario, only a folder or .toml"
    elif len(stem) > MAX_NAME:
        problem = f"the scenario name is {len(stem)} characters long, more than {MAX_NAME}"
    elif not NAME_PATTERN.fullmatch(stem):
        odd = next((c for c in stem if not (c.isascii() and (c.isalnum() or c in "._-"))), None)
        problem = f"the scenario name {stem!r} " + (f"has {odd!r}" if odd else f"starts with {stem[0]!r}")
    elif not folder.isprintable():  # the path is written into the file's comments, line by line
        problem = f"the folder {folder!r} has a control character"
    else:
        return Path(f"{folder}/{stem}.toml" if folder else f"{stem}.toml"), stem
    raise LdpsimError(problem, field="NAME", hint=f"give {NAME_RULE}")


def write_template(name: str, template: str = "basic") -> Path:
    """Write the scenario ``template`` as ``NAME.toml`` (``name`` may be a path); refuse to overwrite a file.

    The name follows :func:`scenario_name`'s rule.
    """
    from importlib.resources import files

    if template not in TEMPLATES:
        raise LdpsimError(f"unknown template '{template}'", field="--from", hint=did_you_mean(template, TEMPLATES))
    target, stem = scenario_name(name)
    if target.exists():
        raise LdpsimError(f"{target} already exists", hint="choose another name, or move the file away first")
    text = (files(__package__) / "templates" / f"{template}.toml").read_text(encoding="utf-8")
    text = text.replace("__FILE__", shlex.quote(str(target))).replace("__NAME__", stem)
    try:
        with open(target, "x", encoding="utf-8") as fh:  # "x": a file created meanwhile is not overwritten
            fh.write(text)
    except FileExistsError:
        raise LdpsimError(f"{target} already exists", hint="choose another name, or move the file away first") from None
    except OSError as exc:
        raise LdpsimError(f"cannot write {target} ({exc.strerror})", hint="choose a folder you can write to") from None
    return target
