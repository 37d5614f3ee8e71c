"""One task: a (grid point, repetition) simulated, estimated and scored.

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
matrix, else the mechanism's sampler on users grouped by value, in chunks, chunk ``i > 0`` from the
child ``(i, report)`` of that stream; see :mod:`ldpsim.theory.sampling`) and ``(3, cohort)`` for the value
counts of a cohort with its own dataset; a sharded run (``shards``) draws the same chunks from the same
streams in several tasks (:mod:`.shards`). An attacker cohort holds no value and draws its fake reports from
``(2, cohort, 0)`` (:class:`ldpsim.Attack`); the truth is then the honest users' distribution. A cohort with ``observe = "expected"`` draws no
reports (its expected report counts, :mod:`.expected`); its stream is unused. A task's result
therefore depends only on the scenario and its own position in the grid, not
on the worker that ran it or on the other tasks; raising ``repetitions`` keeps
the earlier repetitions identical.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from ..base.threads import holds_one_blas_thread, one_blas_thread, one_blas_thread_for_good
from ..estimation.backend import NATIVE, resolve_backend
from ..estimation.estimator import Estimator
from ..estimation.observations import Observations
from ..model.memoized import MemoizedMechanism
from ..model.metric import Metric
from ..model.variables import DOMAIN, Variable
from ..plugin.registry import get_registry
from ..results.noisy import noisy_distribution
from ..results.variables import CORE, PRIVACY_LEVELS, declared
from .build import Builder, Cohort, Setup
from .scenario import Scenario
from .shards import simulate_sharded
from .shuffled import cohort_central
from .simulation import cohort_values, draw_cohort
from .sweep import Point


@dataclass(frozen=True)
class Task:
    point: Point
    rep: int
    seed: int
    base_dir: Path
    run: str  # identifies the run, so worker processes know when to rebuild plugins
    rounds: int = 0  # estimate after each of this many rounds (0: once, after all)

    @property
    def key(self) -> tuple[int, ...]:
        return (*self.point.index, self.rep)


@dataclass(frozen=True)
class TaskResult:
    """What one task produced: a value per declared variable (:func:`ldpsim.results.variables.declared`).

    ``values[name]`` is indexed like the variable's dims without the run's: ``scores`` is
    (metrics, estimators), ``estimate`` (estimators, values), ``truth`` (values), ``users`` a
    scalar; a task estimating after every round puts the round after the estimators (``error``
    (metrics, estimators, rounds)) for the variables declared with ``ROUND``. An optional
    variable the task could not give (``noisy`` on bit vectors) is absent.
    """

    key: tuple[int, ...]
    values: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]


class TaskRow(NamedTuple):
    """A task's values before they are arrays: variable ``name``'s value is ``np.asarray(values[name],
    dtypes[name])`` (:meth:`result`).

    A batch of rows becomes one array per variable, each in one conversion over the batch
    (``ldpsim.running.runner``), where converting every run's dozen small values was a tenth of a
    sub-millisecond run; the values, bit for bit, are those of :func:`run_task`.
    """

    key: tuple[int, ...]
    values: dict[str, Any]
    #: each variable's declared dtype, by name (shared by the rows of one sweep point)
    dtypes: Mapping[str, Any]

    def result(self) -> TaskResult:
        """The row as a :class:`TaskResult`."""
        return TaskResult(self.key, _arrays(self.values, self.dtypes))


def _arrays(values: Mapping[str, Any], dtypes: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {name: np.asarray(value, dtype=dtypes[name]) for name, value in values.items()}


_worker_builder: dict[tuple[str, int], Builder] = {}


def _builder_for(task: Task) -> Builder:
    """This process's builder for the task's run (and registry); earlier runs' are dropped."""
    registry = get_registry()
    key = (task.run, id(registry))
    if key not in _worker_builder:
        _worker_builder.clear()
        _worker_builder[key] = Builder(task.base_dir, registry)
    return _worker_builder[key]


@contextmanager
def shared_builder(run: str, builder: Builder | None) -> Iterator[None]:
    """Inside, ``builder`` is this process's builder for the run ``run``: worker processes forked meanwhile start
    with it (a copy of the parent's memory) instead of building every sweep point's plugins again.

    A pool of a sweep's workers otherwise rebuilds, in every worker, the setups the parent already
    built when it checked the scenario; workers started otherwise (spawned, on other machines) find
    no builder here and build their own as before. The numbers are the same either way: a setup is
    a function of the scenario. Found only under the builder's own registry (see :func:`_builder_for`).
    """
    if builder is None:
        yield
        return
    key = (run, id(builder.registry))
    _worker_builder.clear()
    _worker_builder[key] = builder
    try:
        yield
    finally:
        _worker_builder.pop(key, None)


def simulate(task: Task, builder: Builder | None = None) -> tuple[Setup, np.ndarray, Observations]:
    """A task's population: its setup, the distribution of true values, the aggregated reports."""
    setup = (builder or _builder_for(task)).setup(task.point)
    key = task.key
    if setup.shards is not None:  # split into shards, drawn here one after the other (see .shards)
        return (setup, *simulate_sharded(setup, task.seed, key))
    shares, held, honest = cohort_values(setup, task.seed, key)
    groups = [draw_cohort(setup, task.seed, key, c, share) for c, share in enumerate(shares)]
    truth = held / honest  # the honest users' distribution
    return setup, truth, Observations(setup.domain, [g for g in groups if g is not None])


def run_task(task: Task, builder: Builder | None = None) -> TaskResult:
    """Simulate one population, estimate, and score the estimates.

    BLAS runs single-threaded inside a task: a threaded reduction may sum in a
    different order with another thread count, and tasks running side by side
    on a pool would otherwise oversubscribe the cores (5-10x slower when the
    machine is busy). Parallelism comes from running tasks side by side. A
    worker process keeps the limit once set; in the main process it holds for
    the task, or for the whole run inside :func:`one_blas_thread`.
    """
    return task_row(task, builder).result()


def task_row(task: Task, builder: Builder | None = None) -> TaskRow:
    """:func:`run_task`'s values before they are arrays (see :class:`TaskRow`), under the same BLAS limit."""
    if holds_one_blas_thread():
        return _run_task(task, builder)
    if multiprocessing.parent_process() is not None:  # a pool's worker: limit it once, for good
        one_blas_thread_for_good()
        return _run_task(task, builder)
    with one_blas_thread():
        return _run_task(task, builder)


@dataclass(slots=True)
class _Run:
    """The task-level values the ``source="task"`` variables read (by their ``attr``); made once per task
    (slotted, not frozen: a frozen dataclass sets each field through ``object.__setattr__``)."""

    truth: np.ndarray
    noisy: np.ndarray | None
    distinct_reports: int
    users: int
    simulation_seconds: float
    privacy_over_time: np.ndarray | None = None
    central_eps: np.ndarray | None = None
    central_delta: np.ndarray | None = None


#: how :func:`_estimated` fills a variable: the metrics' scores, a field of every Estimate, a plugin's output
_SCORES, _FIELD, _OUTPUT = range(3)


@dataclass(frozen=True)
class _Recipe:
    """What every task of one setup computes, sorted out once per setup (see :func:`_recipe`).

    A sweep of sub-millisecond runs spent as long on its per-run bookkeeping as on the runs:
    declaring the variables again, asking each variable where its value comes from, the cohorts'
    privacy levels. These depend on the setup alone, so they are found once and read by every task.
    """

    variables: tuple[Variable, ...]
    #: (how, name, key, variable) for each variable an estimate fills, in declaration order (the values'
    #: order): a variable's ``key`` is a property, read thousands of times per sweep otherwise
    steps: tuple[tuple[int, str, str, Variable], ...]
    #: (name, key) of the variables read from the task itself (:class:`_Run`), in declaration order
    task_variables: tuple[tuple[str, str], ...]
    #: every variable's dtype, by name (the rows' :attr:`TaskRow.dtypes`)
    dtypes: Mapping[str, Any]
    estimators: tuple[Estimator, ...]
    metrics: tuple[Metric, ...]
    #: whether some estimator or metric declares outputs of its own (else every estimate's extras are empty)
    outputs: bool
    #: :func:`cohort_privacy` of the setup's cohorts (copied into each task's result)
    privacy: np.ndarray | None
    #: :func:`.shuffled.cohort_central` of the setup's cohorts: (central eps, central delta), or None
    central: tuple[np.ndarray, np.ndarray] | None


def _recipe(setup: Setup) -> _Recipe:
    """The setup's :class:`_Recipe`, made by the first task that runs on it."""
    found = setup.derived.get("recipe")
    if found is None:
        estimators, metrics = tuple(setup.estimators.values()), tuple(setup.metrics.values())
        variables = declared([*estimators, *metrics])
        steps = []
        for var in variables:
            if var.source == "task":
                continue
            if var.source == "metric" and var.name in _CORE_NAMES:  # the metrics' scores: one per (metric, estimate)
                how = _SCORES
            elif var.name in _CORE_NAMES:  # a field of every Estimate
                how = _FIELD
            else:  # a plugin's declared output
                how = _OUTPUT
            steps.append((how, var.name, var.key, var))
        found = _Recipe(
            variables,
            tuple(steps),
            tuple((var.name, var.key) for var in variables if var.source == "task"),
            MappingProxyType({var.name: var.dtype for var in variables}),
            estimators,
            metrics,
            any(step[0] == _OUTPUT for step in steps),
            cohort_privacy(setup.cohorts),
            cohort_central(setup.cohorts),
        )
        setup.derived["recipe"] = found
    return found


def _run_task(task: Task, builder: Builder | None) -> TaskRow:
    started = time.perf_counter()
    setup, truth, observations = simulate(task, builder)
    return finish_row(task, setup, truth, observations, time.perf_counter() - started)


def task_builder(task: Task) -> Builder:
    """This process's builder for the task's run (a worker's, built once per run; see :func:`shared_builder`)."""
    return _builder_for(task)


def finish_row(task: Task, setup: Setup, truth: np.ndarray, observations: Observations, simulated: float) -> TaskRow:
    """A simulated task estimated and scored (what :func:`task_row` does after :func:`simulate`, in ``simulated`` s)."""
    recipe = _recipe(setup)
    values: dict[str, Any]
    if task.rounds:  # after every round, from the same users: the prefixes of their report sequences
        per_round = [
            _arrays(_estimated(setup, truth, observations.prefix(t), recipe), recipe.dtypes)
            for t in range(1, task.rounds + 1)
        ]
        values = _by_round(recipe.variables, per_round, setup.domain.size)
    else:
        values = _estimated(setup, truth, observations, recipe)
    run = _Run(
        truth,
        noisy_distribution(observations),
        observations.n_distinct,
        setup.users,
        simulated,
        None if recipe.privacy is None else recipe.privacy.copy(),
        *((None, None) if recipe.central is None else (recipe.central[0].copy(), recipe.central[1].copy())),
    )
    for name, key in recipe.task_variables:
        value = getattr(run, key)
        if value is not None:
            values[name] = value
    return TaskRow(task.key, values, recipe.dtypes)


#: the core variables by name: ``declared`` lets a plugin output reuse one only with the same declaration,
#: so a name says it; comparing whole declarations was a tenth of a small run
_CORE_NAMES = frozenset(var.name for var in CORE)


def _estimated(setup: Setup, truth: np.ndarray, observations: Observations, recipe: _Recipe) -> dict[str, Any]:
    """The values of the estimates' and metrics' variables for one set of observations (as :class:`TaskRow`'s)."""
    metrics, domain = recipe.metrics, setup.domain
    # the native numpy path unless the scenario names another backend (resolved once per process, then cached)
    backend = None if (setup.backend, setup.precision) == NATIVE else resolve_backend(setup.backend, setup.precision)
    estimates = [estimator.estimate(observations, backend=backend) for estimator in recipe.estimators]
    # tuples, not lists, in what a task returns: tuples of numbers leave the garbage collector's view, where a
    # batch of lists held to the batch's end made its full collections longer and more frequent
    scores = tuple(
        tuple([metric(est.distribution, truth, domain, est.extras) for est in estimates]) for metric in metrics
    )
    extras: list[dict[str, Any]] = [{} for _ in estimates]  # estimators' and metrics' declared outputs
    if recipe.outputs:  # without declared outputs every estimate's extras are empty
        for e, est in enumerate(estimates):
            extras[e].update(est.extras)
            for metric in metrics:
                if type(metric).outputs:
                    extras[e].update(metric.output_values(est.distribution, truth, domain))
    given = any(extras)  # else every optional output is absent, and the others are all fill values
    values: dict[str, Any] = {}
    for how, name, key, var in recipe.steps:
        if how == _FIELD:
            values[name] = tuple([getattr(est, key) for est in estimates])
        elif how == _SCORES:  # (metrics, estimators), also without metrics
            values[name] = scores if metrics else np.empty((0, len(estimates)))
        elif given or not var.optional:  # the fill value where an estimate has none
            found = [x.get(name) for x in extras]
            if var.optional and all(v is None for v in found):
                continue  # no estimate gave it: absent from this task's result
            values[name] = _stack(var, found, domain.size)
    return values


def _by_round(
    variables: tuple[Variable, ...], per_round: list[dict[str, np.ndarray]], size: int
) -> dict[str, np.ndarray]:
    """Each round's values stacked on a round axis after the variable's lead dims (per-round
    variables), or the last round's (variables declared without ``ROUND``)."""
    values: dict[str, np.ndarray] = {}
    for var in variables:
        found = [v.get(var.name) for v in per_round]
        given = [v for v in found if v is not None]
        if not given:
            continue
        if not var.per_round:
            if found[-1] is not None:
                values[var.name] = found[-1]
            continue
        shape = np.shape(given[0])
        filled = [v if v is not None else var.empty(shape) for v in found]
        values[var.name] = np.stack(filled, axis=var.lead)
    return values


def cohort_privacy(cohorts: Sequence[Cohort]) -> np.ndarray | None:
    """(cohorts, 3) eps_1, eps_tau, eps_inf of each cohort whose plan is one memoized mechanism (NaN for the
    others); None if no cohort has one, so scenarios without memoized mechanisms keep their variables."""
    rows = np.full((len(cohorts), len(PRIVACY_LEVELS)), np.nan)
    for c, cohort in enumerate(cohorts):
        if len(cohort.plan) == 1 and isinstance(cohort.plan[0], MemoizedMechanism):
            levels = cohort.plan[0].privacy_over_time
            rows[c] = levels.eps_1, levels.eps_tau, levels.eps_inf
    return None if np.isnan(rows).all() else rows


def _stack(var: Variable, found: list[np.ndarray | None], size: int) -> np.ndarray:
    """One array over the estimators from each estimate's value of ``var`` (None: not given)."""
    given = [v for v in found if v is not None]
    if given:
        shape = np.shape(given[0])
    elif var.item_dims == (DOMAIN,):
        shape = (size,)
    elif not var.item_dims:
        shape = ()
    else:
        raise ValueError(f"output '{var.name}' was declared but no estimate gave it, so its shape is unknown")
    out = var.empty((len(found), *shape))
    for e, value in enumerate(found):
        if value is not None:
            if np.shape(value) != shape:
                raise ValueError(
                    f"output '{var.name}' has shape {np.shape(value)} for one estimate, {shape} for another"
                )
            out[e] = value
    return out


def tasks(scenario: Scenario) -> list[Task]:
    run = uuid.uuid4().hex
    return [
        Task(point, rep, scenario.seed, scenario.base_dir, run, scenario.rounds)
        for point in scenario.points()
        for rep in range(scenario.repetitions)
    ]
