"""Running a scenario: every task (grid point x repetition) on an executor, then one results dataset.

What one task does, and how its randomness is derived, is in :mod:`ldpsim.running.tasks`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import xarray as xr

from ..estimation.unbiased import check_unbiased_memory
from ..results.assemble import Layout, assemble
from ..results.variables import declared
from .build import Builder
from .checkpoint import Checkpoint
from .executors import check as check_executor
from .executors import run_all
from .paths import parse_override
from .provenance import provenance
from .scenario import Scenario, load_scenario
from .simulation import check_simulation_memory
from .tasks import Task, TaskResult, run_task, simulate, tasks

__all__ = ["Task", "TaskResult", "execute", "preflight", "run_scenario", "run_task", "simulate", "tasks"]

Progress = Callable[[int, int], None]


def execute(
    scenario: Scenario,
    *,
    executor: str = "serial",
    workers: int | None = None,
    scheduler: str | None = None,
    jobs: int | None = None,
    checkpoint: Checkpoint | None = None,
    progress: Progress | None = None,
) -> xr.Dataset:
    """Run every task of a loaded scenario and assemble the results.

    ``executor`` is ``serial``, ``processes`` (``workers`` processes, default:
    the CPUs) or ``dask`` (the cluster at ``scheduler``, or a local one of
    ``workers`` processes); ``jobs=N`` is short for N processes. With a
    ``checkpoint``, its finished tasks are not run again and every task that
    finishes is saved to it. The numbers never depend on these choices.
    """
    if jobs is not None:
        executor, workers = ("processes" if jobs > 1 else "serial"), jobs
    check_executor(executor, workers, scheduler)
    todo = tasks(scenario)
    preflight(scenario)
    done = checkpoint.load() if checkpoint is not None else {}
    results: list[TaskResult] = [done[t.key] for t in todo if t.key in done]
    started = time.perf_counter()
    if progress:
        progress(len(results), len(todo))
    rest = [t for t in todo if t.key not in done]
    for result in run_all(
        rest, run_task, executor=executor, workers=workers, scheduler=scheduler, builder=scenario.builder
    ):
        if checkpoint is not None:
            checkpoint.save(result)
        results.append(result)
        if progress:
            progress(len(results), len(todo))
    wall_seconds = time.perf_counter() - started
    return assemble(layout(scenario), results, attrs=provenance(scenario, wall_seconds=wall_seconds))


def layout(scenario: Scenario) -> Layout:
    """The shape of a scenario's results: sweep axes, repetitions, domain, estimators, metrics, variables."""
    builder = scenario.builder or Builder(scenario.base_dir)
    setup = builder.setup(next(iter(scenario.points())))
    plugins = [*setup.estimators.values(), *setup.metrics.values()]
    return Layout(scenario.axes, scenario.repetitions, setup.domain, setup.estimators, setup.metrics, declared(plugins))


def preflight(scenario: Scenario) -> None:
    """Refuse, before any task runs, a sweep point whose simulation or matrix inversion would not fit in memory."""
    builder = scenario.builder or Builder(scenario.base_dir)
    for point in scenario.points():
        setup = builder.setup(point)
        check_simulation_memory(setup)
        if any(est.inverts_matrices for est in setup.estimators.values()):
            check_unbiased_memory([cohort.plan for cohort in setup.cohorts])


def run_scenario(
    source: str | os.PathLike | Mapping[str, Any],
    *,
    set: Sequence[str] = (),  # noqa: A002  (mirrors the CLI's --set)
    jobs: int | None = None,
    executor: str = "serial",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
    **overrides: Any,
) -> xr.Dataset:
    """Run a scenario file or mapping and return its results as an xarray Dataset.

    Keyword overrides set top-level fields (``users=1000``); nested fields use
    ``__`` for dots (``cohorts__all__reports__0__eps=2``) or ``set=["path=value"]``.
    ``executor``, ``workers``, ``scheduler`` and ``jobs`` are those of :func:`execute`.
    """
    merged: dict[str, Any] = dict(parse_override(text) for text in set)
    merged.update({k.replace("__", "."): v for k, v in overrides.items()})
    scenario = load_scenario(source, merged)
    return execute(scenario, executor=executor, workers=workers, scheduler=scheduler, jobs=jobs, progress=progress)
