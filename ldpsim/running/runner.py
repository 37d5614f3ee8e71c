"""Running a scenario: every task (grid point x repetition) on an executor, then one results dataset.

What one task does, and how its randomness is derived, is in :mod:`ldpsim.running.tasks`.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..base.atomic import FULL_DEVICE_BYTES, for_want_of_room, no_space, remove_stale, require_space
from ..base.errors import LdpsimError, ParameterError
from ..base.threads import one_blas_thread
from ..estimation.observations import round_channels
from ..estimation.unbiased import check_unbiased_memory
from ..plugin.executor import Executor
from ..plugin.registry import get_registry
from ..results.assemble import Batches, Columns, Layout, LazyResults, assemble
from ..results.io import check_output, check_overwrite, save_results
from ..results.variables import declared
from .build import Builder
from .checkpoint import Checkpoint, finished_tasks
from .open_runs import is_open_scenario, run_open_scenario
from .paths import parse_override
from .provenance import provenance
from .scenario import Scenario, load_scenario, read_document
from .shard_runs import sharded_rows
from .shards import held_users
from .simulation import check_simulation_memory
from .tasks import Task, TaskResult, TaskRow, run_task, shared_builder, simulate, task_row, tasks

__all__ = [
    "Task",
    "TaskResult",
    "execute",
    "make_executor",
    "preflight",
    "run_scenario",
    "run_task",
    "simulate",
    "tasks",
]

Progress = Callable[[int, int], None]


#: batches per worker at least, so that workers stay busy to the end whatever the tasks' durations
BATCHES_PER_WORKER = 4
#: with several workers, the last ``workers`` batches' tasks in batches of these fractions of a batch, ``workers``
#: of each, so that the workers finish together (:func:`batches`)
TAIL_FRACTIONS = (0.5, 0.25, 0.125, 0.125)
#: tasks per batch at most (a batch is what an executor dispatches)
MAX_BATCH = 64
#: a sweep of at least this many tasks on several workers first runs ``PROBE_RUNS`` of them here, timed, to
#: size its batches (:func:`batch_size`): three tasks of a thousand hold up the workers for a few per mille of
#: the run at most, however long the tasks are, and their results are kept like any other
PROBE_TASKS = 1000
#: the tasks timed, the fastest counting: the first task of a sweep point also fills its caches
PROBE_RUNS = 3
#: batches of tasks faster than ``MAX_BATCH`` per this many seconds grow to about this long: each batch handed
#: back costs a worker a few milliseconds of waiting on a busy machine (002-fig5: 113 batches of 0.3 ms runs
#: left each worker idle for a quarter of a second), while a batch much longer than this coarsens the
#: progress and lengthens the tail where one worker finishes before the other
BATCH_SECONDS = 0.1
#: the time-sized batches hold at most this many times ``MAX_BATCH`` tasks, should later sweep points' tasks
#: be much slower than the probe
MAX_BATCH_GROWTH = 8
#: finished tasks are written to the checkpoint at most this often (and on Ctrl-C or an error; the tasks
#: finished since the last write are deferred at the end, written only should the results not be): a kill
#: loses at most this many seconds of work, and a sweep of millisecond runs writes a few files, not one per
#: batch (113 writes and fsyncs were a sixth of 002-fig5's wall time), or none if it takes less
CHECKPOINT_SECONDS = 5.0
#: bytes a netCDF4 file takes beyond its variables' numbers, at least: its superblock and root group (6.4 kB
#: with one variable, measured with netCDF 4.9 / HDF5 1.14), then each variable's header (0.5-1.5 kB); lower
#: bounds, so that a file refused up front for want of room (:func:`file_bytes`) could not have been written; a
#: file takes at most about twice that bound (a small one; a large one is mostly its numbers)
FILE_BYTES = 4096
VARIABLE_BYTES = 400


class _Stacked(LazyResults[TaskResult]):
    """A batch's results held column by column: one array per variable stacked over the batch, a run's
    result made only when it is read.

    A worker sends this back: pickled there and unpickled here, a dict of a dozen small arrays per
    run cost a sub-millisecond run's own time again (about 50 us per run), and making the arrays
    run by run a tenth of it. The checkpoint and the assembly read the columns as they are
    (:meth:`columns`). A variable missing from some runs, or shaped or typed differently in some,
    is kept run by run. A run's values are views of its rows of the stacked arrays, with the bits
    its own arrays would have (:meth:`TaskRow.result`); its key is a tuple of ints, as the task's.
    """

    def __init__(
        self,
        keys: np.ndarray,
        orders: list[tuple[str, ...]],
        which: list[int],
        stacked: dict[str, np.ndarray],
        loose: list[dict[str, np.ndarray]] | None,
    ) -> None:
        self.keys, self.orders, self.which, self.stacked, self.loose = keys, orders, which, stacked, loose

    @classmethod
    def of(cls, rows: Sequence[TaskRow]) -> _Stacked:
        """The rows' values, each variable converted once for the whole batch where the rows allow it."""
        orders: dict[tuple[str, ...], int] = {}
        which = [orders.setdefault(tuple(row.values), len(orders)) for row in rows]
        shared = len({id(row.dtypes) for row in rows}) == 1  # one sweep point's rows (the usual case)
        stacked: dict[str, np.ndarray] = {}
        for name in dict.fromkeys(name for names in orders for name in names):
            if not all(name in names for names in orders):
                continue  # absent from some runs: kept run by run
            dtype = rows[0].dtypes[name]
            if not shared and any(row.dtypes[name] != dtype for row in rows):
                continue
            try:  # a ragged variable (another shape in some runs) raises
                found = np.array([row.values[name] for row in rows], dtype=dtype)
            except (ValueError, TypeError):
                continue
            if found.shape[1:] == np.shape(np.asarray(rows[0].values[name], dtype=dtype)):
                stacked[name] = found
        loose = (
            None  # every run's every value is stacked (the usual case): no dict per run
            if all(name in stacked for names in orders for name in names)
            else [
                {k: np.asarray(v, dtype=row.dtypes[k]) for k, v in row.values.items() if k not in stacked}
                for row in rows
            ]
        )
        keys = np.array([row.key for row in rows], dtype=np.int64).reshape(len(rows), -1 if rows else 0)
        return cls(keys, list(orders), which, stacked, loose)

    @classmethod
    def of_results(cls, results: Iterable[TaskResult]) -> _Stacked:
        """Finished results (a checkpoint's), held as a worker's batch is."""
        return cls.of([TaskRow(r.key, dict(r.values), {k: v.dtype for k, v in r.values.items()}) for r in results])

    def __len__(self) -> int:
        return len(self.which)

    def _item(self, i: int) -> TaskResult:
        own = self.loose[i] if self.loose is not None else {}
        stacked = self.stacked
        values = {name: stacked[name][i, ...] if name in stacked else own[name] for name in self.orders[self.which[i]]}
        return TaskResult(tuple(int(k) for k in self.keys[i]), values)

    def columns(self) -> Columns | None:
        """The batch column by column (see :func:`ldpsim.results.assemble.columns`), or None."""
        return Columns(self.keys, self.stacked) if self.loose is None else None


class _BatchRunner:
    """:func:`run_task` on a batch of tasks with the run's plugin instances in this process; a copy sent
    elsewhere builds its own.

    Executors receive this as their function and batches as their tasks: a sweep of thousands of
    millisecond runs costs a few dispatches and checkpoint files, not one of each per run. It pickles
    without the builder, whose plugins may hold large data (and need not pickle at all).
    """

    def __init__(self, builder: Builder | None) -> None:
        self.builder = builder

    def __call__(self, batch: Sequence[Task]) -> _Stacked:
        return _Stacked.of([task_row(task, self.builder) for task in batch])

    def __reduce__(self) -> tuple[type, tuple[None]]:
        return (_BatchRunner, (None,))


def batches(todo: Sequence[Task], workers: int, size: int = MAX_BATCH) -> list[list[Task]]:
    """Consecutive tasks in batches: at least ``BATCHES_PER_WORKER`` per worker, at most ``size`` tasks each
    (by default ``MAX_BATCH``; :func:`batch_size` from a timed task), the same size but for the last ones.

    With several workers the last ``workers`` batches' tasks go in batches of a half, a quarter and
    (twice) an eighth of that size, ``workers`` of each (``TAIL_FRACTIONS``): the workers then end
    within about an eighth of a batch of each other instead of one waiting out another's last whole
    batch (up to 0.1 s on 002-fig6a's 4000 sub-millisecond runs; up to a whole batch of slow runs).
    The numbers never depend on this: each task draws from its own seed.
    """
    if not todo:
        return []
    count = min(len(todo), max(BATCHES_PER_WORKER * max(workers, 1), -(-len(todo) // max(size, 1))))
    bounds = [round(i * len(todo) / count) for i in range(count + 1)]
    if workers > 1 and count > workers:  # the last `workers` batches, split into shrinking ones
        start, tail = bounds[count - workers], len(todo) - bounds[count - workers]
        steps = [fraction / workers for fraction in TAIL_FRACTIONS for _ in range(workers)]
        ends = itertools.accumulate(steps)
        bounds = [*bounds[: count - workers], start, *(start + round(tail * end) for end in ends)]
        bounds[-1] = len(todo)
    return [list(todo[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


def batch_size(seconds: float) -> int:
    """Tasks per batch for tasks taking ``seconds`` each: ``MAX_BATCH``, or more for tasks so fast that
    ``MAX_BATCH`` of them take less than ``BATCH_SECONDS`` (at most ``MAX_BATCH_GROWTH`` times more)."""
    if not seconds > 0:
        return MAX_BATCH
    return max(MAX_BATCH, min(MAX_BATCH_GROWTH * MAX_BATCH, int(BATCH_SECONDS / seconds)))


def _parallelism(runner: Executor) -> int:
    """Tasks the executor runs side by side, as far as it says (serial: 1)."""
    workers = getattr(runner, "workers", None)
    if isinstance(workers, int) and workers > 0:
        return workers
    return 1 if runner.name == "serial" else runner.cpus()


def make_executor(executor: str | Executor, *, jobs: int | None = None, **options: Any) -> Executor:
    """The executor named ``executor`` in the registry, with the options given (None: not given).

    An :class:`ldpsim.Executor` instance is returned as it is (its options were given to it);
    ``jobs=N`` is short for ``processes`` with N workers (``serial`` for 1). Raises a one-line
    :class:`ldpsim.LdpsimError` whose field is the option at fault for an unknown executor, an
    option it does not take, or an invalid value.
    """
    if jobs is not None:
        executor, options["workers"] = ("processes", jobs) if jobs > 1 else ("serial", None)
    given = {key: value for key, value in options.items() if value is not None}
    if isinstance(executor, Executor):
        if given:
            key = next(iter(given))
            raise LdpsimError(
                "is given beside an executor instance", field=key, hint=f"give {key} to the executor's constructor"
            )
        return executor
    registry = get_registry()
    try:
        cls = registry.get("executor", executor).cls
        assert issubclass(cls, Executor)  # the registry admits only Executor subclasses as executors
    except LdpsimError as exc:
        raise exc.at("executor") from None
    for key in given:
        if key not in cls.parameters():
            takers = [e.name for e in registry.entries("executor") if key in e.cls.parameters()]
            if not takers:
                raise ParameterError("no installed executor takes it", field=key, hint=f"leave the {key} out")
            names = " or ".join(takers)
            raise ParameterError(
                f"only applies to the {names} executor, not {executor}",
                field=key,
                hint=f"use the {names} executor, or leave the {key} out",
            )
    return cls(**given)


@one_blas_thread()  # the whole run, its assembly too (see ldpsim.base.threads)
def execute(
    scenario: Scenario,
    *,
    executor: str | Executor = "serial",
    workers: int | None = None,
    scheduler: str | None = None,
    jobs: int | None = None,
    checkpoint: Checkpoint | None = None,
    progress: Progress | None = None,
) -> xr.Dataset:
    """Run every task of a loaded scenario and assemble the results.

    ``executor`` names a registered executor (``serial``, ``processes``, ``dask``, or a
    plugin's) given ``workers`` and ``scheduler`` if set, or is an :class:`ldpsim.Executor`;
    ``jobs=N`` is short for N processes. With a ``checkpoint``, its finished tasks are not
    run again and the tasks that finish are saved to it every ``CHECKPOINT_SECONDS``, those
    of the last seconds deferred (:meth:`Checkpoint.flush` writes them, should the caller not
    write the results). The numbers never depend on these choices.
    """
    runner = make_executor(executor, jobs=jobs, workers=workers, scheduler=scheduler)
    todo = tasks(scenario)
    preflight(scenario)
    done = checkpoint.load(layout(scenario)) if checkpoint is not None else {}  # its arrays checked against it
    results: Batches[TaskResult] = Batches([_Stacked.of_results(done[t.key] for t in todo if t.key in done)])
    started = time.perf_counter()
    if progress:
        progress(len(results), len(todo))
    rest = [t for t in todo if t.key not in done]
    parallel = _parallelism(runner)
    unsaved: Batches[TaskResult] = Batches()
    saved_at = time.monotonic()

    def finished(batch: Sequence[TaskResult]) -> None:
        nonlocal unsaved, saved_at
        results.add(batch)
        if checkpoint is not None:
            unsaved.add(batch)
            if time.monotonic() - saved_at >= CHECKPOINT_SECONDS:
                checkpoint.save(unsaved)
                unsaved, saved_at = Batches(), time.monotonic()
        if progress:
            progress(len(results), len(todo))

    try:
        # workers forked meanwhile start with the plugins already built here
        with shared_builder(todo[0].run if todo else "", scenario.builder):
            sharded = {t.key for t in rest if t.point.document.get("shards") is not None}  # (setups are checked)
            if sharded:  # each run's shards are the executor's tasks, the runs merged and estimated here
                builder = scenario.builder or Builder(scenario.base_dir)
                for row in sharded_rows(runner, [t for t in rest if t.key in sharded], builder):
                    finished(_Stacked.of([row]))
                rest = [t for t in rest if t.key not in sharded]
            size = MAX_BATCH
            if parallel > 1 and len(rest) >= PROBE_TASKS:  # a few tasks timed here size the batches
                here, fastest = _BatchRunner(scenario.builder), math.inf
                for task in rest[:PROBE_RUNS]:
                    probe_started = time.perf_counter()
                    finished(here([task]))
                    fastest = min(fastest, time.perf_counter() - probe_started)
                size, rest = batch_size(fastest), rest[PROBE_RUNS:]
            work = batches(rest, parallel, size)
            for batch in runner.run(_BatchRunner(scenario.builder), work) if work else ():
                finished(batch)
    except BaseException:  # Ctrl-C, a failing task: the finished tasks are kept, so a resume skips them
        if checkpoint is not None and unsaved:
            with contextlib.suppress(Exception):  # the error being raised is the one to report
                checkpoint.save(unsaved)
        raise
    if checkpoint is not None and unsaved:
        checkpoint.defer(unsaved)  # written should the results not be (see run_scenario)
    if len(results) != len(todo):
        raise RuntimeError(f"executor '{runner.name}' returned {len(results)} results for {len(todo)} tasks")
    code = checkpoint.code if checkpoint is not None else None
    attrs = provenance(scenario, wall_seconds=time.perf_counter() - started, code=code)
    return assemble(layout(scenario), results, attrs=attrs, seed=scenario.seed)


def file_bytes(ds: xr.Dataset) -> int:
    """Bytes a results file of ``ds`` takes at least: its numbers, uncompressed as they are written, and the
    file's structure (labels, stored as variable-length strings, come on top)."""
    numbers = sum(var.nbytes for var in ds.variables.values() if var.dtype.kind in "biufcmM")
    return FILE_BYTES + VARIABLE_BYTES * len(ds.variables) + numbers


def layout(scenario: Scenario) -> Layout:
    """The shape of a scenario's results: sweep axes, repetitions, domain, estimators, metrics, variables."""
    builder = scenario.builder or Builder(scenario.base_dir)
    setup = builder.setup(next(iter(scenario.points())))
    plugins = [*setup.estimators.values(), *setup.metrics.values()]
    return Layout(
        scenario.axes,
        scenario.repetitions,
        setup.domain,
        setup.estimators,
        setup.metrics,
        declared(plugins),
        rounds=scenario.rounds,
        cohorts=[cohort.name for cohort in setup.cohorts],
    )


def preflight(scenario: Scenario) -> None:
    """Refuse, before any task runs, a sweep point whose simulation or matrix inversion would not fit in memory."""
    builder = scenario.builder or Builder(scenario.base_dir)
    for point in scenario.points():
        setup = builder.setup(point)
        # a run whose shards stay where they were drawn holds no more than a shard's reports in one process
        check_simulation_memory(setup, held_users(setup))
        inverting = {est.rounds for est in setup.estimators.values() if est.inverts_matrices}
        if "all" in inverting:
            check_unbiased_memory([cohort.plan for cohort in setup.cohorts])
        if "each" in inverting:  # round by round: only each round's one-report channel is inverted
            check_unbiased_memory([(c,) for cohort in setup.cohorts for c in round_channels(cohort.plan)])


@one_blas_thread()  # from the scenario's setups to the results' file (see ldpsim.base.threads)
def run_scenario(
    source: str | os.PathLike | Mapping[str, Any],
    *,
    set: Sequence[str] = (),  # mirrors the CLI's --set
    output: str | os.PathLike | None = None,
    resume: bool = False,
    force: bool = False,
    jobs: int | None = None,
    executor: str | Executor = "serial",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
    **overrides: Any,
) -> xr.Dataset:
    """Run a scenario file or mapping and return its results as an xarray Dataset.

    Parameters
    ----------
    source
        A scenario TOML file, or the scenario as a mapping.
    set
        Overrides as ``"path=value"`` strings, as the CLI's ``--set``.
    output
        If given, the results are also written there as netCDF4, atomically (a reader sees the
        old file or the complete new one). Finished tasks are kept in ``<output>.partial/``
        meanwhile, so an interrupted run can resume; that checkpoint is removed once the
        results are written, and also when the run stops before any task finished.
    resume
        Run only the tasks an interrupted run with the same ``output`` did not finish. Without
        it an existing checkpoint is refused (it may hold hours of work); with it, so is a
        checkpoint of another scenario, of other overrides or of other code.
    force
        Replace ``output`` even if it is not an ldpsim results file. An input of the run (the
        scenario file, a data file it names) is never replaced.
    jobs, executor, workers, scheduler
        Where the tasks run (see :func:`execute`). The numbers never depend on it.
    progress
        Called as ``progress(done, total)`` as tasks finish.
    **overrides
        Top-level fields (``users=1000``); nested fields use ``__`` for dots
        (``cohorts__all__reports__0__eps=2``).

    Returns
    -------
    xarray.Dataset
        The results, with their provenance as attributes.
    """
    runner = make_executor(executor, jobs=jobs, workers=workers, scheduler=scheduler)  # bad options: before any work
    if resume and output is None:
        raise LdpsimError("needs an output to resume", field="resume", hint="give the output of the interrupted run")
    merged: dict[str, Any] = dict(parse_override(text) for text in set)
    merged.update({k.replace("__", "."): v for k, v in overrides.items()})
    if is_open_scenario(read_document(source if isinstance(source, Mapping) else Path(source))[1]):
        if resume:
            raise LdpsimError("heavy-hitter runs keep no checkpoint", field="resume", hint="run without --resume")
        return run_open_scenario(
            source, overrides=merged, output=output, force=force, progress=progress, executor=runner
        )
    scenario = load_scenario(source if isinstance(source, Mapping) else Path(source), merged)
    if output is None:
        return execute(scenario, executor=runner, progress=progress)
    target = check_output(output)
    inputs = [*(scenario.builder.inputs if scenario.builder else ()), scenario.source]
    check_overwrite(target, [path for path in inputs if path is not None], force=force)
    remove_stale(target)  # a results file's write cut short by a kill (it may be large): its room is free again
    checkpoint = Checkpoint(target, scenario, resume=resume)
    try:
        ds = execute(scenario, executor=runner, checkpoint=checkpoint, progress=progress)
    except BaseException:
        with contextlib.suppress(Exception):  # the error being raised is the one to report
            checkpoint.flush()  # the tasks finished since the last write, if the assembly failed
        if not len(checkpoint):
            checkpoint.remove()  # nothing to resume: leave no trace
        raise  # finished tasks stay in the checkpoint; a run without resume refuses to discard them
    need = file_bytes(ds)
    try:
        free = require_space(target, need)  # a file that cannot fit is not begun
        try:
            save_results(ds, target)
        except LdpsimError as exc:
            # the device had about as much room as the file needs: say so (else a quota, a file size limit)
            if free is not None and free < FULL_DEVICE_BYTES + 2 * need and for_want_of_room(exc):
                raise no_space(target, need, free) from None
            raise
    except LdpsimError as exc:  # a full disk at the very end: keep the work, say where it is
        try:
            checkpoint.flush()
            again = "nothing is recomputed"
        except LdpsimError:  # no room for them either: the runs saved earlier are kept
            again = "the runs not kept are run again"
        kept = finished_tasks(target)  # runs, not checkpoint files (a file holds a batch of runs)
        if not kept:  # nothing to resume: leave no trace, say what failed
            checkpoint.remove()
            raise
        raise type(exc)(
            f"{exc.problem}; its {kept} finished run{'' if kept == 1 else 's'} {'is' if kept == 1 else 'are'} kept"
            f" in '{checkpoint.path}'",
            field=exc.field,
            hint=f"make room, then run again with --resume ({again})",
        ) from None
    checkpoint.remove()
    return ds
