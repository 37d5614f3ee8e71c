"""Running a scenario: one task per (grid point, repetition).

Plugin instances (and the data files they read) are built once per run: the
loaded scenario's builder serves tasks in this process; each worker process
builds its own for the run and drops those of earlier runs, so a data file
edited between two runs is read again.

Randomness is derived, never shared: task ``(i, j, ..., rep)`` seeds its
generators from ``SeedSequence(seed, spawn_key=(i, j, ..., rep, stream, ...))``
with stream 0 for the dataset's value counts (``Dataset.sample_counts``), 1
for splitting them among the cohorts (sequential multivariate hypergeometric
draws, in cohort order), ``(2, cohort, report)`` for each report of each
cohort (one multinomial per value for a single report through a finite
matrix, else the mechanism's sampler on users grouped by value, in chunks;
see :mod:`ldpsim.simulation`) and ``(3, cohort)`` for the value counts of a
cohort with its own dataset. A task's result
therefore depends only on the scenario and its own position in the grid, not
on the worker that ran it or on the other tasks; raising ``repetitions`` keeps
the earlier repetitions identical.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from ..estimation.observations import Observations
from ..estimation.unbiased import check_unbiased_memory
from ..plugin.registry import get_registry
from ..results.noisy import noisy_distribution
from .build import Builder, Setup
from .checkpoint import Checkpoint
from .executors import check as check_executor
from .executors import run_all
from .paths import parse_override
from .scenario import Scenario, load_scenario
from .simulation import check_simulation_memory, cohort_group, split_counts
from .sweep import Point

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Task:
    point: Point
    rep: int
    seed: int
    base_dir: Path
    run: str  # identifies the run, so worker processes know when to rebuild plugins

    @property
    def key(self) -> tuple[int, ...]:
        return (*self.point.index, self.rep)


@dataclass(frozen=True)
class TaskResult:
    key: tuple[int, ...]
    truth: np.ndarray  # (K,)
    estimates: np.ndarray  # (E, K)
    errors: np.ndarray  # (M, E)
    iterations: np.ndarray  # (E,)
    loglik: np.ndarray  # (E,)
    seconds: np.ndarray  # (E,)
    converged: np.ndarray  # (E,)
    distinct: int
    users: int
    noisy: np.ndarray | None = None  # (K,) reports read as domain values; None where not defined (ldpsim.noisy)
    gap: np.ndarray | None = None  # (E,) bound on L(MLE) - L(estimate), nats (Estimate.gap)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


_worker_builder: dict[tuple[str, int], Builder] = {}


def _builder_for(task: Task) -> Builder:
    """This process's builder for the task's run (and registry); earlier runs' are dropped."""
    registry = get_registry()
    key = (task.run, id(registry))
    if key not in _worker_builder:
        _worker_builder.clear()
        _worker_builder[key] = Builder(task.base_dir, registry)
    return _worker_builder[key]


def simulate(task: Task, builder: Builder | None = None) -> tuple[Setup, np.ndarray, Observations]:
    """A task's population: its setup, the distribution of true values, the aggregated reports."""
    setup = (builder or _builder_for(task)).setup(task.point)
    key = task.key
    counts = setup.dataset.sample_counts(setup.users, _rng(task.seed, *key, 0))
    shares = split_counts(counts, [cohort.users for cohort in setup.cohorts], _rng(task.seed, *key, 1))
    held = np.zeros(setup.domain.size, dtype=np.int64)
    groups = []
    for c, (cohort, share) in enumerate(zip(setup.cohorts, shares)):
        if not cohort.users:
            continue
        if cohort.dataset is not None:  # heterogeneous users: this cohort draws its own values
            share = cohort.dataset.sample_counts(cohort.users, _rng(task.seed, *key, 3, c))
        held += share
        rngs = [_rng(task.seed, *key, 2, c, j) for j in range(len(cohort.plan))]
        groups.append(cohort_group(cohort.plan, share, rngs))
    truth = held / setup.users
    return setup, truth, Observations(setup.domain, [g for g in groups if g is not None])


def run_task(task: Task, builder: Builder | None = None) -> TaskResult:
    """Simulate one population, estimate, and score the estimates.

    BLAS runs single-threaded inside a task: a threaded reduction may sum in a
    different order with another thread count, and tasks running side by side
    on a pool would otherwise oversubscribe the cores (5-10x slower when the
    machine is busy). Parallelism comes from running tasks side by side.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _run_task(task, builder)


def _run_task(task: Task, builder: Builder | None) -> TaskResult:
    setup, truth, observations = simulate(task, builder)

    n_est, n_met = len(setup.estimators), len(setup.metrics)
    estimates = np.empty((n_est, setup.domain.size))
    errors = np.empty((n_met, n_est))
    iterations = np.empty(n_est, dtype=np.int64)
    loglik = np.empty(n_est)
    seconds = np.empty(n_est)
    converged = np.empty(n_est, dtype=bool)
    gap = np.empty(n_est)
    for e, estimator in enumerate(setup.estimators.values()):
        est = estimator.estimate(observations)
        estimates[e] = est.distribution
        iterations[e], loglik[e], seconds[e], converged[e] = est.iterations, est.loglik, est.seconds, est.converged
        gap[e] = est.gap
        for m, metric in enumerate(setup.metrics.values()):
            errors[m, e] = metric(est.distribution, truth, setup.domain)
    noisy = noisy_distribution(observations)
    return TaskResult(
        task.key,
        truth,
        estimates,
        errors,
        iterations,
        loglik,
        seconds,
        converged,
        observations.n_distinct,
        setup.users,
        noisy=noisy,
        gap=gap,
    )


def tasks(scenario: Scenario) -> list[Task]:
    run = uuid.uuid4().hex
    return [
        Task(point, rep, scenario.seed, scenario.base_dir, run)
        for point in scenario.points()
        for rep in range(scenario.repetitions)
    ]


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
    from ..results.assemble import assemble

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
    return assemble(scenario, results, wall_seconds=time.perf_counter() - started)


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
