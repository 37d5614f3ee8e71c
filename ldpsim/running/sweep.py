"""Sweeps: a scenario's ``[sweep.<axis>]`` tables as axes, and the grid of points they span.

Each axis sets one or more fields (paths) to each of its values in turn;
several axes form a grid, and each grid point is the scenario's document with
those fields set.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..base.errors import ScenarioError
from .paths import parse_path, set_path
from .schema import require_known

#: names of the results' other dimensions, which an axis cannot take
RESERVED_AXES = {"rep", "estimator", "metric", "value", "row", "col", "round"}
#: top-level fields fixed for a whole scenario (its identity, its randomness, the shape of its results)
UNSWEEPABLE = {"name", "description", "seed", "repetitions", "sweep", "domain", "estimators", "metrics"}
AXIS_KEYS = ("path", "values", "labels", "label", "units")
#: fixed tables whose plugins' parameters may still be swept ("metrics.<label>.<param>", e.g. a
#: level that follows the mechanisms'), as long as the labels and plugin names stay the same
TUNABLE = ("estimators", "metrics")


@dataclass(frozen=True)
class Axis:
    """A sweep axis: the fields it sets and the values it takes.

    Attributes
    ----------
    name
        The axis's name, a dimension of the results.
    paths
        The field paths it sets, all to the same value.
    values
        The values it takes, in order.
    labels
        The results' coordinates along the axis, one per value.
    label, units
        What the axis means and its unit, for figures ("number of users", "users"); empty: the
        field's own long name (``ldpsim.results.labels.axis_long_name``), no unit.
    """

    name: str
    paths: tuple[str, ...]
    values: tuple[Any, ...]
    labels: tuple[Any, ...]
    label: str = ""
    units: str = ""


@dataclass(frozen=True)
class Point:
    """One grid point: its index along each axis, its label on each, and its resolved document."""

    index: tuple[int, ...]
    coords: dict[str, Any]
    document: dict


def parse_axes(doc: dict) -> tuple[Axis, ...]:
    """The axes of a document's ``sweep`` table, checked (paths, values, labels).

    Raises
    ------
    ScenarioError
        On a reserved or unknown name, a path into a field fixed for the
        scenario, no values, or labels that are missing, repeated or not
        numbers and strings.
    """
    sweeps = doc.get("sweep", {})
    if not isinstance(sweeps, dict):
        raise ScenarioError("must be a table of axes", field="sweep", hint="write [sweep.<axis>] with path and values")
    axes = []
    for name, spec in sweeps.items():
        where = f"sweep.{name}"
        if name in RESERVED_AXES:
            raise ScenarioError(f"axis name '{name}' is reserved", field=where, hint="rename the axis")
        if not isinstance(spec, dict):
            raise ScenarioError("must be a table", field=where, hint="give path and values")
        require_known(spec, AXIS_KEYS, where)
        paths = spec.get("path")
        paths = [paths] if isinstance(paths, str) else paths
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
            raise ScenarioError("needs path: a field path or a list of them", field=where, hint='e.g. path = "users"')
        for p in paths:
            parts = parse_path(p)
            head = str(parts[0])
            if head in TUNABLE and len(parts) >= 3 and parts[2] != "name":
                continue  # a parameter of one labelled estimator or metric: the results' labels stay fixed
            if head in UNSWEEPABLE:
                raise ScenarioError(
                    f"cannot sweep '{p}'",
                    field=f"{where}.path",
                    hint=f"'{head}' is fixed for a scenario; run separate scenarios",
                )
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise ScenarioError("needs a non-empty list of values", field=where, hint="e.g. values = [0.5, 1, 2]")
        labels = spec.get("labels")
        if labels is None:
            labels = _default_labels(values, where)
        if not isinstance(labels, list) or len(labels) != len(values):
            raise ScenarioError("needs one label per value", field=f"{where}.labels", hint=f"give {len(values)} labels")
        if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in labels):
            raise ScenarioError("labels must be numbers or strings", field=f"{where}.labels", hint="use short strings")
        if len(set(map(str, labels))) != len(labels):
            raise ScenarioError("has repeated labels", field=f"{where}.labels", hint="make each label unique")
        if any(isinstance(v, str) for v in labels):
            labels = [str(v) for v in labels]  # one coordinate type: strings if any label is one
        for key in ("label", "units"):
            if not isinstance(spec.get(key, ""), str):
                raise ScenarioError("must be a string", field=f"{where}.{key}", hint=f'write {key} = "..."')
        axes.append(
            Axis(name, tuple(paths), tuple(values), tuple(labels), spec.get("label", ""), spec.get("units", ""))
        )
    return tuple(axes)


def _default_labels(values: list, where: str) -> list:
    """The values themselves if they are numbers or strings, else the tables' distinct ``name`` fields."""
    if all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
        return list(values)
    names = [v.get("name") if isinstance(v, dict) else None for v in values]
    if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return names
    raise ScenarioError("values are tables or lists", field=where, hint="add labels = [...] naming each value")


#: the types of a TOML document's leaves, which copying leaves as they are (immutable)
_ATOMS = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A deep copy of a document: its tables and arrays copied, its strings and numbers shared.

    ``copy.deepcopy``'s memo and dispatch made a pass over 002-fig6a's 20 points 0.6 ms (0.2 ms this
    way), and a run makes five passes before its first task (checks, checkpoint, tasks, memory,
    provenance); anything but tables, arrays and immutable leaves still goes through ``copy.deepcopy``.
    """
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def grid_points(document: dict, axes: tuple[Axis, ...]) -> Iterator[Point]:
    """Every grid point, the last axis varying fastest; each document is a fresh copy."""
    for index in itertools.product(*(range(len(a.values)) for a in axes)):
        doc = _copied(document)
        coords = {}
        for axis, i in zip(axes, index):
            for path in axis.paths:
                set_path(doc, path, _copied(axis.values[i]))
            coords[axis.name] = axis.labels[i]
        yield Point(index, coords, doc)
