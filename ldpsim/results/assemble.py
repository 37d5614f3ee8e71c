"""Result datasets: assembly, provenance, atomic netCDF4 files, summaries.

Layout (``<sweeps>`` is one dimension per sweep axis, in scenario order;
``<domain>`` is ``value`` for 1-D domains, ``row, col`` for grids):

* ``error(metric, estimator, <sweeps>, rep)``
* ``estimate(estimator, <sweeps>, rep, <domain>)``
* ``truth(<sweeps>, rep, <domain>)``: the empirical distribution of the users' true values
* ``noisy(<sweeps>, rep, <domain>)``: the empirical distribution of the reports read as domain values
  (:mod:`ldpsim.noisy`), NaN where that means nothing; absent when it means nothing anywhere
* ``iterations``, ``loglik``, ``seconds``, ``converged`` ``(estimator, <sweeps>, rep)``
* ``gap(estimator, <sweeps>, rep)``: a bound on L(MLE) - L(estimate) in nats (KKT certificate);
  coordinate ``stop_rule(estimator)`` names each estimator's stopping rule
* ``distinct_reports(<sweeps>, rep)``, ``users(<sweeps>)``

Coordinates carry ``long_name`` and ``units`` (:mod:`ldpsim.labels`), each
metric's are in ``metric_long_name`` and ``metric_units``. Attributes record
the scenario text, the overrides, the resolved scenario, the seed, ldpsim's
version, every plugin used with its version, and each dataset's description
(``datasets``: where the values come from, e.g. check-ins left outside a box).
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..base.atomic import atomic_path
from ..base.errors import LdpsimError
from ..plugin.registry import get_registry
from ..running.build import Builder
from ..running.scenario import Scenario
from .labels import describe
from .noisy import NOISY_DESCRIPTION

if TYPE_CHECKING:
    from ..running.runner import TaskResult

ENGINE = "netcdf4"


def assemble(scenario: Scenario, results: Sequence[TaskResult], *, wall_seconds: float = float("nan")) -> xr.Dataset:
    """Stack task results into one labelled dataset with full provenance."""
    from .. import __version__

    builder = scenario.builder or Builder(scenario.base_dir)
    setups = [builder.setup(point) for point in scenario.points()]
    domain = setups[0].domain
    sweeps = tuple(a.name for a in scenario.axes)
    grid = scenario.shape
    reps = scenario.repetitions
    n_est, n_met, size = len(scenario.estimator_labels), len(scenario.metric_labels), domain.size

    error = np.full((n_met, n_est, *grid, reps), np.nan)
    estimate = np.full((n_est, *grid, reps, size), np.nan)
    truth = np.full((*grid, reps, size), np.nan)
    iterations = np.zeros((n_est, *grid, reps), dtype=np.int64)
    loglik = np.full((n_est, *grid, reps), np.nan)
    seconds = np.full((n_est, *grid, reps), np.nan)
    converged = np.zeros((n_est, *grid, reps), dtype=bool)
    gap = np.full((n_est, *grid, reps), np.nan)
    distinct = np.zeros((*grid, reps), dtype=np.int64)
    noisy = np.full((*grid, reps, size), np.nan)
    has_noisy = False
    users = np.zeros(grid, dtype=np.int64)
    for res in results:
        key = res.key
        error[(slice(None), slice(None), *key)] = res.errors
        estimate[(slice(None), *key)] = res.estimates
        truth[key] = res.truth
        iterations[(slice(None), *key)] = res.iterations
        loglik[(slice(None), *key)] = res.loglik
        seconds[(slice(None), *key)] = res.seconds
        converged[(slice(None), *key)] = res.converged
        if res.gap is not None:
            gap[(slice(None), *key)] = res.gap
        distinct[key] = res.distinct
        if res.noisy is not None:
            noisy[key] = res.noisy
            has_noisy = True
        users[key[:-1]] = res.users

    per_task = ("estimator", *sweeps, "rep")
    ddims = domain.dims
    coords: dict[str, Any] = {a.name: np.asarray(a.labels) for a in scenario.axes}
    coords.update(
        rep=np.arange(reps),
        estimator=list(scenario.estimator_labels),
        metric=list(scenario.metric_labels),
        estimator_name=("estimator", [type(e).name for e in setups[0].estimators.values()]),
        stop_rule=("estimator", [e.stopping_rule for e in setups[0].estimators.values()]),
        metric_name=("metric", [type(m).name for m in setups[0].metrics.values()]),
        **domain.coords(),
    )
    if domain.name == "grid":
        coords["y"] = ("row", (np.arange(domain.rows) + 0.5) * domain.cell)
        coords["x"] = ("col", (np.arange(domain.cols) + 0.5) * domain.cell)

    ds = xr.Dataset(
        {
            "error": (
                ("metric", "estimator", *sweeps, "rep"),
                error,
                {"long_name": "distance from estimate to truth, by metric"},
            ),
            "estimate": ((*per_task, *ddims), domain.reshape(estimate), {"long_name": "estimated distribution"}),
            "truth": (
                (*sweeps, "rep", *ddims),
                domain.reshape(truth),
                {"long_name": "empirical distribution of the true values"},
            ),
            "iterations": (per_task, iterations, {"long_name": "estimator iterations (0 if not iterative)"}),
            "loglik": (
                per_task,
                loglik,
                {"long_name": "log-likelihood L(estimate) of the observations", "units": "nat"},
            ),
            "seconds": (per_task, seconds, {"long_name": "estimation time", "units": "s"}),
            "converged": (per_task, converged, {"long_name": "stopping criterion met before the iteration cap"}),
            "gap": (
                per_task,
                gap,
                {"long_name": "bound on L(MLE) - L(estimate) from the KKT conditions", "units": "nat"},
            ),
            "distinct_reports": ((*sweeps, "rep"), distinct, {"long_name": "distinct (plan, report tuple) pairs"}),
            "users": (sweeps, users, {"long_name": "number of users"}),
        },
        coords=coords,
    )
    if has_noisy:
        ds["noisy"] = (
            (*sweeps, "rep", *ddims),
            domain.reshape(noisy),
            {"long_name": "noisy distribution", "description": NOISY_DESCRIPTION},
        )
    describe(ds, scenario.axes, domain, setups[0].metrics)
    plugins: dict[str, dict[str, Any]] = {}
    datasets: dict[str, None] = {}  # descriptions in order of first use, once each
    registry = get_registry()
    for setup in setups:
        for data in (setup.dataset, *(c.dataset for c in setup.cohorts if c.dataset is not None)):
            datasets[data.description] = None
        used = [setup.dataset, *setup.estimators.values(), *setup.metrics.values()]
        used += [m for c in setup.cohorts for m in c.plan]
        for obj in used:
            entry = registry.get(obj.kind, obj.name)
            plugins[f"{entry.kind}:{entry.name}"] = {
                "plugin": entry.plugin,
                "distribution": entry.distribution,
                "version": entry.version,
            }
    ds.attrs = {
        "title": scenario.name,
        "description": scenario.description,
        "ldpsim_version": __version__,
        "seed": np.int64(scenario.seed),
        "repetitions": np.int64(reps),
        "sweeps": json.dumps({a.name: list(a.paths) for a in scenario.axes}),
        "domain": json.dumps(domain.spec()),
        "plugins": json.dumps(plugins, sort_keys=True),
        "datasets": json.dumps(list(datasets)),
        "scenario": scenario.text if scenario.text is not None else json.dumps(scenario.document, default=str),
        "scenario_source": str(scenario.source) if scenario.source else "mapping",
        "scenario_dir": str(scenario.base_dir),
        "overrides": json.dumps(list(scenario.overrides)),
        "resolved_scenario": scenario.resolved_json(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "wall_seconds": float(wall_seconds),
    }
    return ds


def check_output(path: str | os.PathLike) -> Path:
    """Fail before a run, not after it, if ``path`` cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise LdpsimError(f"'{path}' is a directory", field="output", hint="give a file name such as results.nc")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise LdpsimError(
            f"directory '{parent}' does not exist", field="output", hint="create it or choose another path"
        )
    if not os.access(parent, os.W_OK):
        raise LdpsimError(f"directory '{parent}' is not writable", field="output", hint="choose a writable location")
    if path.exists() and not os.access(path, os.W_OK):
        raise LdpsimError(f"'{path}' exists and is not writable", field="output", hint="choose another file name")
    return path


def save_results(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` as netCDF4 atomically: a reader sees the old file or the complete new one."""
    path = check_output(path)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine=ENGINE)
    return path


def open_results(path: str | os.PathLike) -> xr.Dataset:
    """Load a results file fully into memory (the file is closed on return)."""
    path = Path(path)
    if not path.is_file():
        raise LdpsimError(f"results file '{path}' not found", hint="check the path")
    try:
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds = ds.load()
    except (OSError, ValueError) as exc:
        raise LdpsimError(
            f"'{path}' is not a readable netCDF file ({exc})", hint="give a file written by `ldpsim run`"
        ) from None
    if "error" not in ds or "estimate" not in ds:
        raise LdpsimError(f"'{path}' is not an ldpsim results file", hint="give a file written by `ldpsim run`")
    return ds


def summarize(ds: xr.Dataset) -> list[dict[str, Any]]:
    """Per sweep point and estimator: mean and standard deviation of each metric over repetitions."""
    sweeps = [d for d in ds["error"].dims if d not in ("metric", "estimator", "rep")]
    mean = ds["error"].mean("rep")
    spread = ds["error"].std("rep", ddof=1) if ds.sizes["rep"] > 1 else xr.zeros_like(mean) * np.nan
    iters = ds["iterations"].mean("rep")
    secs = ds["seconds"].mean("rep")
    rows = []
    for idx in np.ndindex(*(ds.sizes[d] for d in sweeps)):
        sel = dict(zip(sweeps, idx))
        for est in ds["estimator"].values:
            row: dict[str, Any] = {d: ds[d].values[i] for d, i in sel.items()}
            row["estimator"] = str(est)
            for met in ds["metric"].values:
                at = {"estimator": est, "metric": met}
                row[str(met)] = (float(mean.isel(sel).sel(at)), float(spread.isel(sel).sel(at)))
            row["iterations"] = float(iters.isel(sel).sel(estimator=est))
            row["seconds"] = float(secs.isel(sel).sel(estimator=est))
            rows.append(row)
    return rows
