"""The scenario document's top level: which fields exist, which are required, their types, and shorthands.

What lies inside the tables (plugins and their parameters, cohorts) is
checked by building it (:mod:`.build`); the sweep by :mod:`.sweep`.
"""

from __future__ import annotations

from typing import Any

from ..base.errors import ScenarioError, did_you_mean

#: every top-level field, with the hint an error about it gives
FIELDS = {
    "name": "a short name for the scenario",
    "description": "what the scenario shows",
    "seed": "root seed of all randomness (an integer >= 0)",
    "users": "number of users (optional for datasets backed by a file)",
    "repetitions": "independent runs per sweep point",
    "domain": "the values users hold: [domain] kind = integers | grid | categorical",
    "dataset": "where true values come from: [dataset] name = ... and parameters",
    "cohorts": "[cohorts.<name>] tables with share and reports",
    "estimators": "estimator names, or [estimators.<label>] tables",
    "metrics": "metric names, or [metrics.<label>] tables",
    "sweep": "[sweep.<axis>] tables with path and values (and optionally labels, and label and units for figures)",
    "rounds": 'when to estimate: "last" (after all rounds, the default) or "every" (after each round, a results dimension round)',
    "observe": 'how reports are observed: "sampled" (drawn, the default) or "expected" (their exact expected counts)',
    "plot": "the default figure of `ldpsim plot`: [plot] kind = ..., and its options (hue, col, row, at, ...)",
    "backend": 'where the estimators\' passes run: "numpy" (the default), "cupy" or "torch" (a GPU), or "auto"',
    "precision": 'of the passes on a backend: "float64" (the default) or "float32" (two-valued likelihoods)',
    "shards": 'split each run\'s users into this many shards, simulated apart and merged (an integer >= 1, or "auto")',
    "passes": 'where a sharded run\'s reports are estimated: "merged" (here, the default) or "shards" (each pass a map-reduce over them)',
}
#: the top-level ``kind`` of a heavy-hitter scenario (run by :mod:`.open_runs`; a frequency scenario has no kind)
OPEN_KIND = "heavy-hitters"
#: the values of the top-level ``rounds`` field
ROUNDS = ("last", "every")
#: what a ``[plot]`` table may set: the options of ``ldpsim plot`` (checked against the results when plotting)
PLOT_FIELDS = ("kind", "metric", "estimator", "sweep", "at", "hue", "col", "row", "rep", "robust", "xscale", "yscale")
REQUIRED = ("domain", "dataset", "cohorts", "estimators", "metrics")
#: the largest seed: results store it as an int64
MAX_SEED = 2**63 - 1
#: the deepest nesting of tables and lists a scenario may hold. The deepest shipped scenario nests 7 levels;
#: reading, copying and checking a document recurse once per level, so one nested thousands deep (or a
#: mapping that holds itself) would end in a RecursionError instead of a message
MAX_DEPTH = 32


def check_depth(doc: Any) -> None:
    """Refuse a document nesting tables and lists more than :data:`MAX_DEPTH` levels deep (without recursing).

    Raises
    ------
    ScenarioError
        Naming the top-level field that nests too deep.
    """
    stack: list[tuple[Any, int, str | None]] = [(doc, 0, None)]
    while stack:
        node, depth, top = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if depth >= MAX_DEPTH:
            raise ScenarioError(
                f"nests tables and lists more than {MAX_DEPTH} levels deep",
                field=top,
                hint=f"a scenario nests at most {MAX_DEPTH} levels (the shipped ones 7 at most)",
            )
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((value, depth + 1, str(key) if top is None else top) for key, value in items)


def normalize(doc: dict) -> dict:
    """Expand shorthands in place: ``estimators = ["ibu"]`` -> ``{"ibu": {}}`` (same for metrics); return ``doc``.

    Raises
    ------
    ScenarioError
        If such a list holds something other than names, or a name twice.
    """
    for key in ("estimators", "metrics"):
        value = doc.get(key)
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ScenarioError(
                    "must be a list of names or a table of tables", field=key, hint=f'write {key} = ["a", "b"]'
                )
            if len(set(value)) != len(value):
                raise ScenarioError(
                    "lists a name twice", field=key, hint=f"use [{key}.<label>] tables for two variants"
                )
            doc[key] = {v: {} for v in value}
    return doc


def require_known(table: dict, known: tuple[str, ...], where: str) -> None:
    """Refuse the first (alphabetically) field of ``table`` that is not in ``known``, suggesting the closest."""
    extra = set(table) - set(known)
    if extra:
        key = sorted(extra)[0]
        raise ScenarioError(f"unknown field '{key}'", field=where, hint=did_you_mean(key, known))


def check_fields(doc: dict) -> None:
    """Refuse unknown top-level fields, missing required ones, and tables that are not (non-empty) tables.

    Raises
    ------
    ScenarioError
        Naming the closest known field, or, for a required field TOML put
        inside an earlier table, that table.
    """
    for key in doc:
        if key not in FIELDS:
            raise ScenarioError(f"unknown field '{key}'", hint=did_you_mean(key, FIELDS))
    for key in REQUIRED:
        if key not in doc:
            stray = _find_key(doc, key)
            if stray:
                raise ScenarioError(
                    f"missing field '{key}': it sits inside [{stray}]",
                    hint="in TOML every key after a [table] header belongs to that table; move it above the first [table]",
                )
            raise ScenarioError(f"missing field '{key}'", hint=f"add {key}: {FIELDS[key]}")
    for key in ("domain", "dataset", "cohorts", "estimators", "metrics"):
        if not isinstance(doc[key], dict) or not doc[key]:
            raise ScenarioError("must be a non-empty table", field=key, hint=FIELDS[key])
    if "plot" in doc:
        if not isinstance(doc["plot"], dict):
            raise ScenarioError("must be a table", field="plot", hint=FIELDS["plot"])
        require_known(doc["plot"], PLOT_FIELDS, "plot")
    for key in ("estimators", "metrics"):
        for label, spec in doc[key].items():
            if not isinstance(spec, dict):
                raise ScenarioError(
                    "must be a table", field=f"{key}.{label}", hint=f"write [{key}.{label}] with name = ..."
                )


def _find_key(node: Any, key: str, where: str = "") -> str | None:
    """The table path holding ``key`` somewhere below the top level, if any."""
    if isinstance(node, dict):
        for k, v in node.items():
            inner = f"{where}.{k}" if where else k
            if isinstance(v, dict):
                if key in v:
                    return inner
                found = _find_key(v, key, inner)
                if found:
                    return found
    return None


def str_field(doc: dict, key: str, default: str) -> str:
    """The string at top-level ``key`` (``default`` if absent).

    Raises
    ------
    ScenarioError
        If the value is not a string.
    """
    value = doc.get(key, default)
    if not isinstance(value, str):
        raise ScenarioError(f"must be a string, got {value!r}", field=key, hint=f'write {key} = "..."')
    return value


def int_field(doc: dict, key: str, low: int, high: int, default: int | None = None) -> int:
    """The integer at top-level ``key`` (``default`` if absent), in ``low..high``; ``3.0`` counts as 3.

    Raises
    ------
    ScenarioError
        If the value is not an integer (a bool is not) or out of range.
    """
    value = doc.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ScenarioError(f"must be an integer in {low}..{high}, got {value!r}", field=key, hint=FIELDS[key])
    return value
