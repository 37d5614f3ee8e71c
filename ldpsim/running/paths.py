"""The field-path language of scenarios: ``cohorts.all.reports[0].eps`` names one field of a document.

Overrides (``--set path=value``) and sweep axes address fields this way, and
errors name the field at fault the same way.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from typing import Any

from ..base.errors import ScenarioError, did_you_mean
from .schema import MAX_DEPTH

Part = str | int


def parse_path(path: str) -> list[Part]:
    """Split a field path into keys and list indices.

    Parameters
    ----------
    path
        ``"cohorts.a.reports[0].eps"`` or, equivalently, ``"cohorts.a.reports.0.eps"``.

    Returns
    -------
    list of str or int
        ``["cohorts", "a", "reports", 0, "eps"]``: digits are list indices.

    Raises
    ------
    ScenarioError
        If a part is empty (``"a..b"``, a trailing dot).
    """
    parts: list[Part] = []
    for raw in path.replace("[", ".").replace("]", "").split("."):
        if raw == "":
            raise ScenarioError(
                f"'{path}' is not a valid field path", hint="write fields like cohorts.all.reports.0.eps"
            )
        parts.append(int(raw) if raw.isdigit() else raw)
    return parts


def show_path(parts: Sequence[Part]) -> str:
    """The path as errors print it: ``cohorts.a.reports[0].eps``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def set_path(doc: dict, path: str, value: Any) -> None:
    """Assign ``value`` at ``path`` in ``doc`` (in place).

    Every container above the field must exist, so a misspelt path fails with
    the closest existing key instead of creating a field nothing reads.

    Raises
    ------
    ScenarioError
        If a container on the way is missing or the index is out of range.
    """
    parts = parse_path(path)
    node: Any = doc
    for depth, part in enumerate(parts[:-1]):
        node = _step(node, part, parts[: depth + 1], path)
    last = parts[-1]
    if isinstance(node, list):
        if not isinstance(last, int) or not -len(node) <= last < len(node):
            raise ScenarioError(
                f"has no item {last}", field=show_path(parts[:-1]), hint=f"'{path}' must index 0..{len(node) - 1}"
            )
        node[last] = value
    elif isinstance(node, dict):
        node[str(last)] = value
    else:
        raise ScenarioError("is not a table", field=show_path(parts[:-1]), hint=f"'{path}' cannot be set")


def _step(node: Any, part: Part, where: Sequence[Part], path: str) -> Any:
    if isinstance(node, dict):
        key = str(part)
        if key not in node:
            raise ScenarioError(
                f"'{path}' does not exist: no field '{key}'",
                field=show_path(where[:-1]) or None,
                hint=did_you_mean(key, node) if node else "check the path",
            )
        return node[key]
    if isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
        return node[part]
    raise ScenarioError(f"'{path}' does not exist", field=show_path(where), hint="check the path")


def parse_override(text: str, flag: str = "--set", example: str = "users=1000") -> tuple[str, Any]:
    """Split ``"key.path=value"`` as given to ``--set`` (or ``flag``, named in errors with ``example``).

    The value is read as TOML (``1e3``, ``true``, ``[1, 2]``); a comma list of
    numbers (``0.1,0.2,0.7``) is a list, so a vector or distribution is written
    the same way for every flag; anything else is a plain string (``uniform``).

    Raises
    ------
    ScenarioError
        If there is no ``=`` or no key, or a list or table is not TOML (the
        usual cause: strings in it without quotes).
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"'{text}' is not KEY=VALUE", field=flag, hint=f"write e.g. {flag} {example}")
    return key, parse_value(raw, f"{flag} {key}")


def parse_value(raw: str, field: str | None = None) -> Any:
    """One command-line value: TOML, a comma list of numbers, or else a plain string.

    Raises
    ------
    ScenarioError
        If ``raw`` opens a list or table (``[``, ``{``) that is not TOML; the
        hint quotes its bare words, the usual fix (``[ibu,mle]`` becomes
        ``["ibu", "mle"]``).
    """
    raw = raw.strip()
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    except RecursionError:  # tomllib recurses once per level of nesting
        raise ScenarioError(
            "nests lists or tables too deeply to read", field=field, hint=f"a value nests at most {MAX_DEPTH} levels"
        ) from None
    if "," in raw and raw[:1] not in "[{":
        try:
            items = tomllib.loads(f"v = [{raw}]")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):  # too deep for a list of numbers anyway
            items = None
        if items and all(isinstance(x, int | float) and not isinstance(x, bool) for x in items):
            return items
    if raw[:1] in "[{":
        problem = f"'{raw}' is not a TOML list or table"
        if raw[:1] == "[" and raw.endswith("]"):
            items = [_quoted(item) for item in raw[1:-1].split(",") if item.strip()]
            fix = "[" + ", ".join(items) + "]"
            raise ScenarioError(
                f"{problem}: strings in a list need quotes",
                field=field,
                hint=f"write {fix} (in single quotes for the shell: '{fix}')",
            )
        raise ScenarioError(problem, field=field, hint='quote strings, e.g. {name = "uniform"}')
    return raw


def _quoted(item: str) -> str:
    """One list item as TOML: kept when it already is (a number, a quoted string), else quoted."""
    item = item.strip()
    try:
        tomllib.loads(f"v = {item}")
    except tomllib.TOMLDecodeError:
        return '"' + item.strip("\"'") + '"'
    return item


def related(field: str, path: str) -> bool:
    """Whether one field path lies inside the other (or they are the same field)."""
    a, b = parse_path(field), parse_path(path)
    n = min(len(a), len(b))
    return a[:n] == b[:n]
