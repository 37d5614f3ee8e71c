"""Scenario files: parsing, overrides, sweeps and validation.

A scenario is a TOML document (or the equivalent mapping)::

    name = "mixed"
    seed = 7
    users = 100_000
    repetitions = 10

    [domain]                       # integers | grid | categorical
    kind = "integers"
    low = 0
    high = 99

    [dataset]                      # a dataset plugin and its parameters
    name = "binomial"
    p = 0.5

    [cohorts.careful]              # who applies which report plan
    share = "1/3"                  # a number or an exact fraction
    reports = [{ mechanism = "krr", eps = 0.5, repeat = 2 }]

    estimators = ["ibu", "inv-p"]  # or [estimators.label] tables with name = ...
    metrics = ["tv", "emd"]

    [sweep.eps]                    # one axis of the results
    path = "cohorts.careful.reports.0.eps"
    values = [0.5, 1, 2]

Every field can be overridden with ``key.path=value`` strings (``--set`` on
the command line). Several sweep axes form a grid. Everything a run needs is
validated before the first user is simulated: plugins exist, parameters are
valid, data files are readable.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import secrets
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..base.errors import LdpsimError, ScenarioError, did_you_mean
from ..estimation.estimator import Estimator
from ..model.dataset import Dataset
from ..model.domains import Domain, make_domain
from ..model.mechanism import Mechanism
from ..model.metric import Metric
from ..plugin.registry import Registry, get_registry

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
    "sweep": "[sweep.<axis>] tables with path and values",
}
REQUIRED = ("domain", "dataset", "cohorts", "estimators", "metrics")
RESERVED_AXES = {"rep", "estimator", "metric", "value", "row", "col"}
UNSWEEPABLE = {"name", "description", "seed", "repetitions", "sweep", "domain", "estimators", "metrics"}
REPORT_KEYS = ("mechanism", "repeat")
COHORT_KEYS = ("share", "reports", "dataset")
SHARE_TOL = 1e-9
MAX_SEED = 2**63 - 1


# --------------------------------------------------------------------- paths
def parse_path(path: str) -> list[str | int]:
    """``"cohorts.a.reports[0].eps"`` or ``"cohorts.a.reports.0.eps"`` -> parts."""
    parts: list[str | int] = []
    for raw in path.replace("[", ".").replace("]", "").split("."):
        if raw == "":
            raise ScenarioError(
                f"'{path}' is not a valid field path", hint="write fields like cohorts.all.reports.0.eps"
            )
        parts.append(int(raw) if raw.isdigit() else raw)
    return parts


def show_path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def set_path(doc: dict, path: str, value: Any) -> None:
    """Assign ``value`` at ``path``; every container above it must exist."""
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


def _step(node: Any, part: str | int, where: Sequence[str | int], path: str) -> Any:
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


def parse_override(text: str) -> tuple[str, Any]:
    """``"key.path=value"``; the value is read as TOML, else taken as a plain string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"override '{text}' is not KEY=VALUE", field="--set", hint="write e.g. --set users=1000")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


# ------------------------------------------------------------------- model
@dataclass(frozen=True)
class Axis:
    """A sweep axis: the fields it sets and the values it takes."""

    name: str
    paths: tuple[str, ...]
    values: tuple[Any, ...]
    labels: tuple[Any, ...]


@dataclass(frozen=True)
class Point:
    """One grid point: its index along each axis and its resolved document."""

    index: tuple[int, ...]
    coords: dict[str, Any]
    document: dict


@dataclass(frozen=True)
class Scenario:
    """A validated scenario, ready to run."""

    name: str
    description: str
    seed: int
    repetitions: int
    axes: tuple[Axis, ...]
    document: dict
    estimator_labels: tuple[str, ...]
    metric_labels: tuple[str, ...]
    text: str | None = None
    source: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    overrides: tuple[str, ...] = ()
    #: the plugin instances validation built (data files read once), reused by the run
    builder: Builder | None = field(default=None, compare=False, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a.values) for a in self.axes)

    def points(self) -> Iterator[Point]:
        for index in itertools.product(*(range(len(a.values)) for a in self.axes)):
            doc = copy.deepcopy(self.document)
            coords = {}
            for axis, i in zip(self.axes, index):
                for path in axis.paths:
                    set_path(doc, path, copy.deepcopy(axis.values[i]))
                coords[axis.name] = axis.labels[i]
            yield Point(index, coords, doc)

    def resolved_json(self) -> str:
        return json.dumps(self.document, sort_keys=True, default=str)


@dataclass
class Cohort:
    name: str
    users: int
    plan: tuple[Mechanism, ...]
    dataset: Dataset | None = None  # None: the scenario's dataset


@dataclass
class Setup:
    """The concrete objects of one grid point."""

    domain: Domain
    dataset: Dataset
    users: int
    cohorts: list[Cohort]
    estimators: dict[str, Estimator]
    metrics: dict[str, Metric]


# ----------------------------------------------------------------- loading
def load_scenario(
    source: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] = (),
    *,
    registry: Registry | None = None,
    base_dir: str | Path | None = None,
) -> Scenario:
    """Read, override and validate a scenario; raise LdpsimError on any problem.

    ``overrides`` is a mapping of field paths to values, or ``"path=value"``
    strings as given to ``--set``. Relative data paths are resolved against
    ``base_dir``: by default the scenario file's folder (the current folder
    for a mapping).
    """
    text, doc, path = _read(source)
    if base_dir is None:
        base_dir = path.parent if path is not None else Path.cwd()
    base_dir = Path(base_dir).resolve()
    doc = _normalize(doc)
    applied = []
    items = overrides.items() if isinstance(overrides, Mapping) else (parse_override(o) for o in overrides)
    for key, value in items:
        set_path(doc, key, value)
        applied.append(f"{key}={json.dumps(value, default=str)}")
    doc = _normalize(doc)  # an override may have used the list shorthand
    _check_fields(doc)
    axes = _axes(doc)
    for key in (o.split("=", 1)[0] for o in applied):
        for axis in axes:
            shadowing = [p for p in axis.paths if _related(key, p)]
            if shadowing and parse_path(key)[0] != "sweep":
                raise ScenarioError(
                    f"override '{key}' has no effect: sweep '{axis.name}' sets '{shadowing[0]}' at every point",
                    field="--set",
                    hint=f"override sweep.{axis.name}.values instead",
                )
    seed = doc.get("seed")
    if seed is None:
        seed = doc["seed"] = secrets.randbits(63)  # recorded in the results, so the run can be repeated
    scenario = Scenario(
        name=_str_field(doc, "name", path.stem if path is not None else "scenario"),
        description=_str_field(doc, "description", ""),
        seed=_int_field(doc, "seed", 0, MAX_SEED),
        repetitions=_int_field(doc, "repetitions", 1, 10**7, default=1),
        axes=axes,
        document=doc,
        estimator_labels=tuple(doc["estimators"]),
        metric_labels=tuple(doc["metrics"]),
        text=text,
        source=path,
        base_dir=base_dir,
        overrides=tuple(applied),
    )
    object.__setattr__(scenario, "builder", check_setups(scenario, registry or get_registry()))
    return scenario


def _read(source: str | Path | Mapping[str, Any]) -> tuple[str | None, dict, Path | None]:
    if isinstance(source, Mapping):
        return None, copy.deepcopy(dict(source)), None
    path = Path(source)
    if not path.is_file():
        raise ScenarioError(f"scenario file '{path}' not found", hint="check the path")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read '{path}' ({exc})", hint="give a UTF-8 TOML file") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"invalid TOML: {exc}", hint="fix the syntax at that line") from None
    return text, doc, path


def _normalize(doc: dict) -> dict:
    """Expand shorthands: ``estimators = ["ibu"]`` -> ``{"ibu": {}}`` (same for metrics)."""
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


def _check_fields(doc: dict) -> None:
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


def _str_field(doc: dict, key: str, default: str) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str):
        raise ScenarioError(f"must be a string, got {value!r}", field=key, hint=f'write {key} = "..."')
    return value


def _int_field(doc: dict, key: str, low: int, high: int, default: int | None = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ScenarioError(f"must be an integer in {low}..{high}, got {value!r}", field=key, hint=FIELDS[key])
    return value


def _axes(doc: dict) -> tuple[Axis, ...]:
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
        extra = set(spec) - {"path", "values", "labels"}
        if extra:
            key = sorted(extra)[0]
            raise ScenarioError(
                f"unknown field '{key}'", field=where, hint=did_you_mean(key, ["path", "values", "labels"])
            )
        paths = spec.get("path")
        paths = [paths] if isinstance(paths, str) else paths
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
            raise ScenarioError("needs path: a field path or a list of them", field=where, hint='e.g. path = "users"')
        for p in paths:
            head = str(parse_path(p)[0])
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
        axes.append(Axis(name, tuple(paths), tuple(values), tuple(labels)))
    return tuple(axes)


def _default_labels(values: list, where: str) -> list:
    if all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
        return list(values)
    names = [v.get("name") if isinstance(v, dict) else None for v in values]
    if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return names
    raise ScenarioError("values are tables or lists", field=where, hint="add labels = [...] naming each value")


# ---------------------------------------------------------------- building
def check_setups(scenario: Scenario, registry: Registry) -> Builder:
    """Build every grid point once, so a bad value fails before the run starts; return the builder."""
    builder = Builder(scenario.base_dir, registry)
    for point in scenario.points():
        builder.setup(point, scenario.axes)
    return builder


class Builder:
    """Turns resolved documents into plugin instances, reusing identical ones."""

    def __init__(self, base_dir: Path, registry: Registry | None = None):
        self.base_dir = base_dir
        self.registry = registry or get_registry()
        self._cache: dict[str, Any] = {}

    def setup(self, point: Point, axes: Sequence[Axis] = ()) -> Setup:
        try:
            return self._setup(point.document)
        except LdpsimError as exc:
            swept = [a for a in axes if exc.field and any(_related(exc.field, p) for p in a.paths)]
            if swept:  # say which sweep value is at fault
                where = ", ".join(f"{a.name}={point.coords[a.name]}" for a in swept)
                raise type(exc)(f"{exc.problem} (at sweep point {where})", field=exc.field, hint=exc.hint) from None
            raise

    def _setup(self, doc: dict) -> Setup:
        domain = make_domain(doc["domain"])
        dataset = self._plugin("dataset", doc["dataset"], "dataset", domain)
        users = doc.get("users", dataset.size)
        if users is None:
            raise ScenarioError(
                "missing field 'users'", hint=f"add users = <count>: dataset '{dataset.name}' has no fixed size"
            )
        if isinstance(users, float) and users.is_integer():
            users = int(users)
        if isinstance(users, bool) or not isinstance(users, int) or users < 1:
            raise ScenarioError(
                f"must be a positive integer, got {users!r}", field="users", hint="e.g. users = 100_000"
            )
        if dataset.size is not None and users > dataset.size and not getattr(dataset, "replace", False):
            raise ScenarioError(
                f"asks for {users} users but the dataset has {dataset.size} records",
                field="users",
                hint=f"use at most {dataset.size} users or set dataset.replace = true",
            )
        cohorts = self._cohorts(doc["cohorts"], domain, users, dataset)
        estimators = {
            label: self._plugin("estimator", spec, f"estimators.{label}", default_name=label, dataset=dataset)
            for label, spec in doc["estimators"].items()
        }
        metrics = {
            label: self._plugin("metric", spec, f"metrics.{label}", default_name=label)
            for label, spec in doc["metrics"].items()
        }
        for label, metric in metrics.items():
            try:
                metric.check_domain(domain)
            except LdpsimError as exc:
                raise exc.at(f"metrics.{label}") from None
        return Setup(domain, dataset, users, cohorts, estimators, metrics)

    def _cohorts(self, spec: Any, domain: Domain, users: int, dataset: Dataset) -> list[Cohort]:
        shares = []
        plans = []
        datasets = []
        for name, cohort in spec.items():
            where = f"cohorts.{name}"
            if not isinstance(cohort, dict):
                raise ScenarioError("must be a table", field=where, hint="give share and reports")
            extra = set(cohort) - set(COHORT_KEYS)
            if extra:
                key = sorted(extra)[0]
                raise ScenarioError(f"unknown field '{key}'", field=where, hint=did_you_mean(key, COHORT_KEYS))
            shares.append(_share(cohort.get("share", 1 if len(spec) == 1 else None), f"{where}.share"))
            own = None
            if "dataset" in cohort:
                own = self._plugin("dataset", cohort["dataset"], f"{where}.dataset", domain)
            datasets.append(own)
            plans.append(self._plan(cohort.get("reports"), f"{where}.reports", domain, own or dataset))
        total = sum(shares)
        if abs(float(total) - 1.0) > SHARE_TOL:
            raise ScenarioError(
                f"shares sum to {float(total):.12g}, not 1",
                field="cohorts",
                hint='adjust the shares (exact fractions like share = "1/3" help)',
            )
        counts = _apportion(users, shares)
        return [Cohort(name, c, plan, own) for name, c, plan, own in zip(spec, counts, plans, datasets)]

    def _plan(self, reports: Any, where: str, domain: Domain, dataset: Dataset) -> tuple[Mechanism, ...]:
        if not isinstance(reports, list) or not reports:
            raise ScenarioError(
                "needs a non-empty list of reports", field=where, hint='e.g. reports = [{ mechanism = "krr", eps = 1 }]'
            )
        plan: list[Mechanism] = []
        for i, report in enumerate(reports):
            spot = f"{where}[{i}]"
            if not isinstance(report, dict) or "mechanism" not in report:
                raise ScenarioError(
                    "must be a table with a mechanism", field=spot, hint='e.g. { mechanism = "krr", eps = 1 }'
                )
            params = dict(report)
            repeat = params.pop("repeat", 1)
            if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
                raise ScenarioError(
                    f"must be a positive integer, got {repeat!r}",
                    field=f"{spot}.repeat",
                    hint="how many times users report",
                )
            name = params.pop("mechanism")
            mech = self._plugin(
                "mechanism", {"name": name, **params}, spot, domain, name_key="mechanism", dataset=dataset
            )
            plan.extend([mech] * repeat)
        return tuple(plan)

    def _plugin(
        self,
        kind: str,
        spec: Any,
        where: str,
        domain: Domain | None = None,
        *,
        default_name: str | None = None,
        name_key: str = "name",
        dataset: Dataset | None = None,
    ) -> Any:
        if not isinstance(spec, dict):
            raise ScenarioError("must be a table", field=where, hint=f"give {name_key} = ... and parameters")
        params = dict(spec)
        name = params.pop("name", default_name)
        if name is None:
            raise ScenarioError(
                f"has no {name_key}", field=where, hint=f'add {name_key} = "..." (see `ldpsim list {kind}s`)'
            )
        try:
            entry = self.registry.get(kind, name)
        except LdpsimError as exc:
            raise exc.at(f"{where}.{name_key}") from None
        for key, param in entry.cls.parameters().items():
            value = params.get(key)
            if "path" in param.kinds and isinstance(value, str):
                params[key] = str(self.base_dir / value)
            if "distribution" in param.kinds and value == "dataset":
                known = dataset.distribution() if dataset is not None else None
                if known is None:
                    raise ScenarioError(
                        'is "dataset" but the dataset\'s distribution is unknown',
                        field=f"{where}.{key}",
                        hint="give the distribution as a list of numbers",
                    )
                params[key] = known.tolist()
        cache_key = json.dumps([kind, name, params, domain.spec() if domain else None], sort_keys=True, default=str)
        if cache_key not in self._cache:
            args = (domain,) if domain is not None else ()
            try:
                self._cache[cache_key] = entry.cls(*args, **params)
            except LdpsimError as exc:
                raise exc.at(where) from None
        return self._cache[cache_key]


def _related(field: str, path: str) -> bool:
    """Whether one field path lies inside the other."""
    a, b = parse_path(field), parse_path(path)
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _share(value: Any, where: str) -> Fraction:
    if value is None:
        raise ScenarioError("is missing", field=where, hint='give each cohort a share, e.g. share = 0.5 or "1/3"')
    try:
        share = Fraction(value) if isinstance(value, str) else Fraction(value).limit_denominator(10**12)
    except (ValueError, ZeroDivisionError, TypeError):
        raise ScenarioError(
            f"'{value}' is not a number or fraction", field=where, hint='write e.g. 0.25 or "1/4"'
        ) from None
    if isinstance(value, bool) or not 0 <= share <= 1:
        raise ScenarioError(f"must be in [0, 1], got {value!r}", field=where, hint="shares are fractions of the users")
    return share


def _apportion(users: int, shares: Sequence[Fraction]) -> list[int]:
    """Users per cohort: exact shares rounded by largest remainder, summing to ``users``."""
    total = sum(shares)
    exact = [users * s / total for s in shares]
    counts = [math.floor(e) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: users - sum(counts)]:
        counts[i] += 1
    return counts
