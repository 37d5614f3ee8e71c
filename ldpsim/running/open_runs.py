"""Heavy-hitter scenarios: protocols searching users' values of an open domain for the frequent ones.

A heavy-hitter scenario is a TOML file whose ``kind`` is ``"heavy-hitters"``::

    kind = "heavy-hitters"
    name = "pem-vs-treehist"
    seed = 2017
    users = 1_000_000
    repetitions = 3
    top = 64                      # the size of the top sets the scores compare

    [domain]                      # the ``bits``-bit ids (strings are hashed to them)
    kind = "open"
    bits = 32

    [dataset]                     # an open-dataset plugin and its parameters
    name = "open-zipf"
    exponent = 1.1

    [protocols.pem]               # a protocol plugin under its label
    name = "pem"
    eps = 4

    [sweep.eps]                   # sweeps, overrides and seeds as in every scenario
    path = ["protocols.pem.eps"]
    values = [1, 2, 4]

Each run (a grid point and a repetition) draws its users' values once and gives the same values to
every protocol, so protocols are compared on the same users. Its generators are
``SeedSequence(seed, spawn_key=(*point, rep, stream))``: stream 0 the values, stream ``1 + j`` the
``j``-th protocol's reports, so adding a protocol changes no other's reports. A run holds its users'
values and one protocol's reports at a time; runs go to the executor (each is one task: a run is
seconds to minutes of vectorised work), and nothing is written until the last has finished.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..base.errors import LdpsimError, ScenarioError, did_you_mean
from ..base.memory import require_memory
from ..base.threads import one_blas_thread
from ..model.heavy_hitters import FoundItems, HeavyHitterProtocol, OpenDataset
from ..model.open_domain import OpenDomain
from ..plugin.executor import Executor
from ..plugin.registry import Entry, Registry, get_registry
from ..results.found import FoundRun, found_dataset, top_k_score, true_frequencies
from ..results.io import check_output, check_overwrite, save_results
from ..results.labels import axis_long_name
from .paths import parse_override, set_path
from .provenance import record, relative_description
from .scenario import read_document
from .schema import MAX_SEED, OPEN_KIND, PLOT_FIELDS, check_depth, int_field, require_known, str_field
from .simulation import stream
from .sweep import Axis, grid_points, parse_axes

#: every top-level field of a heavy-hitter scenario, with the hint an error about it gives
FIELDS = {
    "kind": f'"{OPEN_KIND}"',
    "name": "a short name for the scenario",
    "description": "what the scenario shows",
    "seed": "root seed of all randomness (an integer >= 0)",
    "users": "number of users (optional for datasets backed by a file)",
    "repetitions": "independent runs per sweep point",
    "top": "the size of the true and found top sets the scores compare (an integer >= 1)",
    "domain": '[domain] kind = "open" and bits = 1..64',
    "dataset": "where the values come from: [dataset] name = an open dataset (`ldpsim list open_datasets`)",
    "protocols": "[protocols.<label>] tables with name = a protocol (`ldpsim list protocols`) and its parameters",
    "sweep": "[sweep.<axis>] tables with path and values (and optionally labels, and label and units for figures)",
    "plot": "the default figure of `ldpsim plot`: [plot] kind = ..., and its options",
}
REQUIRED = ("domain", "dataset", "protocols")
#: bytes a run holds per user at most: its values and the true counts' sort (8 + 16), one protocol's reports
#: and their grouping (PEM: group, seed, bucket, key and the sort of the keys, ~7 int64)
BYTES_PER_USER = 96


@dataclass(frozen=True)
class OpenSetup:
    """One grid point's plugins: the domain, the dataset, the users and each protocol by label."""

    domain: OpenDomain
    dataset: OpenDataset
    users: int | None
    protocols: dict[str, HeavyHitterProtocol]


@dataclass(frozen=True)
class OpenScenario:
    """A validated heavy-hitter scenario (the attributes of :class:`~ldpsim.running.scenario.Scenario` that
    results record, and its grid's setups)."""

    name: str
    description: str
    seed: int
    repetitions: int
    top: int
    axes: tuple[Axis, ...]
    document: dict
    labels: tuple[str, ...]
    setups: tuple[OpenSetup, ...] = field(repr=False)
    text: str | None = None
    source: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    overrides: tuple[str, ...] = ()

    def resolved_json(self) -> str:
        """The resolved document as canonical JSON (sorted keys), as the results record it."""
        return json.dumps(self.document, sort_keys=True, default=str)


def is_open_scenario(document: Mapping[str, Any]) -> bool:
    """Whether a scenario document is a heavy-hitter scenario (its ``kind``)."""
    return document.get("kind") == OPEN_KIND


def load_open_scenario(
    source: str | os.PathLike | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] = (),
    *,
    registry: Registry | None = None,
) -> OpenScenario:
    """Read, override and validate a heavy-hitter scenario: every grid point is built before any user is drawn.

    Parameters
    ----------
    source
        A TOML file, or the scenario as a mapping.
    overrides
        A mapping of field paths to values, or ``"path=value"`` strings as given to ``--set``.
    registry
        Where plugins are looked up (default: the installed plugins).

    Returns
    -------
    OpenScenario
        With every grid point's setup.

    Raises
    ------
    LdpsimError
        A one-line message naming the field and the fix.
    """
    text, doc, path = read_document(source if isinstance(source, Mapping) else Path(source))
    base_dir = (path.parent if path is not None else Path.cwd()).resolve()
    applied = []
    items = overrides.items() if isinstance(overrides, Mapping) else (parse_override(o) for o in overrides)
    for key, value in items:
        set_path(doc, key, value)
        applied.append(f"{key}={json.dumps(value, default=str)}")
    check_depth(doc)
    _check_fields(doc)
    axes = parse_axes(doc)
    if doc.get("seed") is None:
        doc["seed"] = secrets.randbits(63)
    registry = registry or get_registry()
    setups = tuple(_build(point.document, registry, base_dir) for point in grid_points(doc, axes))
    return OpenScenario(
        name=str_field(doc, "name", path.stem if path is not None else "scenario"),
        description=str_field(doc, "description", ""),
        seed=int_field(doc, "seed", 0, MAX_SEED),
        repetitions=int_field(doc, "repetitions", 1, 10**6, default=1),
        top=int_field(doc, "top", 1, 1 << 16, default=64),
        axes=axes,
        document=doc,
        labels=tuple(doc["protocols"]),
        setups=setups,
        text=text,
        source=path,
        base_dir=base_dir,
        overrides=tuple(applied),
    )


def _check_fields(doc: dict) -> None:
    for key in doc:
        if key not in FIELDS:
            raise ScenarioError(f"unknown field '{key}'", hint=did_you_mean(key, FIELDS))
    for key in REQUIRED:
        if not isinstance(doc.get(key), dict) or not doc[key]:
            raise ScenarioError(f"missing or empty table '{key}'", field=key, hint=FIELDS[key])
    for label, spec in doc["protocols"].items():
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ScenarioError(
                "must be a table with name = a protocol", field=f"protocols.{label}", hint='e.g. name = "pem"'
            )
    if "plot" in doc:
        if not isinstance(doc["plot"], dict):
            raise ScenarioError("must be a table", field="plot", hint=FIELDS["plot"])
        require_known(doc["plot"], PLOT_FIELDS, "plot")


def _build(doc: dict, registry: Registry, base_dir: Path) -> OpenSetup:
    """The plugins of one grid point, each error located at its field."""
    spec = dict(doc["domain"])
    if spec.pop("kind", None) != "open":
        raise ScenarioError('must be "open" in a heavy-hitter scenario', field="domain.kind", hint=FIELDS["domain"])
    try:
        domain = OpenDomain(**spec)
    except LdpsimError as exc:
        raise exc.at("domain") from None
    users = doc.get("users")
    if users is not None and (not isinstance(users, int) or isinstance(users, bool) or users < 1):
        raise ScenarioError(f"is {users!r}", field="users", hint="give a whole number of users >= 1")
    dataset = _plugin(registry, "open_dataset", doc["dataset"], "dataset", base_dir)
    protocols = {}
    for label, table in doc["protocols"].items():
        protocol = _plugin(registry, "protocol", table, f"protocols.{label}", base_dir)
        try:
            protocol.check_domain(domain)
        except LdpsimError as exc:
            raise exc.at(f"protocols.{label}") from None
        protocols[str(label)] = protocol
    return OpenSetup(domain, dataset, users, protocols)


def _plugin(registry: Registry, kind: str, table: dict, where: str, base_dir: Path) -> Any:
    params = dict(table)
    name = params.pop("name", None)
    if not isinstance(name, str):
        raise ScenarioError("needs name = a plugin", field=f"{where}.name", hint=f"`ldpsim list {kind}s` lists them")
    try:
        cls = registry.get(kind, name).cls
        for key, param in cls.parameters().items():
            if "path" in param.kinds and isinstance(params.get(key), str) and not Path(params[key]).is_absolute():
                params[key] = str(base_dir / params[key])
        return cls(**params)
    except LdpsimError as exc:
        raise exc.at(where) from None


@dataclass(frozen=True)
class OpenTask:
    """One run of a scenario as an executor's function: picklable, it needs nothing from the calling process."""

    scenario: OpenScenario

    def __call__(self, task: tuple[int, tuple[int, ...], int]) -> tuple[int, int, FoundRun, int]:
        point, index, rep = task  # the grid point's position, its index along each axis, the repetition
        with one_blas_thread():
            run, users = _run(self.scenario, self.scenario.setups[point], (*index, rep))
        return point, rep, run, users


def run_open_scenario(
    source: str | os.PathLike | Mapping[str, Any],
    *,
    overrides: Mapping[str, Any] | Sequence[str] = (),
    output: str | os.PathLike | None = None,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    executor: Executor | None = None,
) -> xr.Dataset:
    """Run a heavy-hitter scenario and return its results (:mod:`ldpsim.results.found`).

    Parameters
    ----------
    source
        A scenario TOML file, or the scenario as a mapping.
    overrides
        Field paths to values, or ``"path=value"`` strings as the CLI's ``--set``.
    output
        If given, the results are also written there as netCDF4, atomically, once every run finished.
    force
        Replace ``output`` even if it is not an ldpsim results file.
    progress
        Called as ``progress(done, total)`` after each run.
    executor
        Where the runs go, one task each (default: one after another in this process).

    Returns
    -------
    xarray.Dataset
        The found items, their scores against the truth, and the provenance.
    """
    scenario = load_open_scenario(source, overrides)
    if output is not None:
        check_output(output)
        inputs = [scenario.source] if scenario.source is not None else []
        for setup in scenario.setups:  # the data files too: an output must not overwrite what the run reads
            data = setup.dataset
            inputs += [getattr(data, key) for key, param in data.parameters().items() if "path" in param.kinds]
        check_overwrite(output, [path for path in inputs if path is not None], force=force)
    users = [setup.users for setup in scenario.setups]
    largest = max((u for u in users if u is not None), default=0)
    require_memory(
        BYTES_PER_USER * largest, f"a run of {largest:,} users", "run fewer users, or split the sweep into scenarios"
    )
    indices = [point.index for point in grid_points(scenario.document, scenario.axes)]
    points = len(indices)
    work = [(p, index, rep) for p, index in enumerate(indices) for rep in range(scenario.repetitions)]
    done: dict[tuple[int, int], FoundRun] = {}
    drawn = np.zeros(points, dtype=np.int64)
    started = time.perf_counter()
    results = map(OpenTask(scenario), work) if executor is None else executor.run(OpenTask(scenario), work)
    for p, rep, run, n in results:
        done[p, rep] = run
        drawn[p] = n
        if progress is not None:
            progress(len(done), len(work))
    runs = [done[p, rep] for p, _, rep in work]
    wall = time.perf_counter() - started
    axes = [(a.name, list(a.labels), _axis_attrs(a)) for a in scenario.axes]
    ds = found_dataset(axes, scenario.labels, [scenario.seed] * scenario.repetitions, drawn, runs, scenario.top)
    ds.attrs.update(_provenance(scenario, wall))
    if output is not None:
        save_results(ds, output)
    return ds


def _run(scenario: OpenScenario, setup: OpenSetup, key: tuple[int, ...]) -> tuple[FoundRun, int]:
    """One run: the users' values, then each protocol's reports and search, scored against the values."""
    sample = setup.dataset.draw(setup.domain, setup.users, stream(scenario.seed, *key, 0))
    values = setup.domain.check(sample.values, source="dataset")
    truth_items, truth_counts = np.unique(values, return_counts=True)  # sorted: what true_frequencies reads
    truth_frequency = truth_counts / values.size
    order = np.argsort(-truth_counts, kind="stable")[: scenario.top]
    found: dict[str, FoundItems] = {}
    scores, item_truth, seconds, simulated = {}, {}, {}, {}
    for j, (label, protocol) in enumerate(setup.protocols.items()):
        tic = time.process_time()
        reports = protocol.collect(setup.domain, values, stream(scenario.seed, *key, 1 + j))
        simulated[label] = time.process_time() - tic
        tic = time.process_time()
        items = protocol.find(setup.domain, reports)
        seconds[label] = time.process_time() - tic
        del reports
        found[label] = items
        item_truth[label] = true_frequencies(items.items, truth_items, truth_frequency)
        scores[label] = top_k_score(items.items, items.frequency, truth_items, truth_frequency, scenario.top)
    top = np.zeros(scenario.top, dtype=np.uint64), np.full(scenario.top, np.nan)
    top[0][: order.size], top[1][: order.size] = truth_items[order], truth_frequency[order]
    run = FoundRun(found, scores, item_truth, seconds, simulated, top[0], top[1], int(truth_items.size), sample.names)
    return run, int(values.size)


def _axis_attrs(axis: Axis) -> dict[str, str]:
    attrs = {"long_name": axis.label or axis_long_name(axis)}
    if axis.units:
        attrs["units"] = axis.units
    return attrs


def _provenance(scenario: OpenScenario, wall_seconds: float) -> dict[str, Any]:
    registry = get_registry()
    used: dict[str, Entry] = {}
    datasets: dict[str, None] = {}
    for setup in scenario.setups:
        for obj in (setup.dataset, *setup.protocols.values()):
            entry = registry.get(obj.kind, obj.name)
            used[f"{entry.kind}:{entry.name}"] = entry
        datasets[relative_description(repr(setup.dataset), setup.dataset, scenario.base_dir)] = None
    domain = scenario.setups[0].domain.spec()
    return record(scenario, domain=domain, used=used, datasets=list(datasets), wall_seconds=wall_seconds)
