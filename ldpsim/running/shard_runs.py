"""Sharded runs on an executor: each shard of each run is one task, the runs merged and estimated here, or
estimated where their shards are.

With ``passes = "merged"`` (the default) shards go out as tasks like any other (:meth:`ldpsim.Executor.run`),
their results come back in any order, and each run is merged in shard order once all of its shards are back
(:func:`.shards.merge_shards`), then estimated and scored in this process: the numbers of
:func:`.tasks.run_task` on the same task, whatever the executor or its workers.

With ``passes = "shards"`` a run's shards are held where they were drawn (:meth:`ldpsim.Executor.hold`: on
the Dask workers, or here for the other executors), and its estimators read them as
:class:`ldpsim.HeldObservations`: each likelihood pass one map over the shards and a sum here, so no process
holds the run's reports. Runs go one after the other, each one's shards side by side.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..base.threads import holds_one_blas_thread, one_blas_thread, one_blas_thread_for_good
from ..estimation.held import HeldObservations
from ..estimation.observations import Observations
from ..plugin.executor import Executor
from .build import Builder, Setup
from .shards import Drawn, Shares, draw_shard, merge_shards, split_run
from .tasks import Task, TaskRow, finish_row, task_builder


@dataclass(frozen=True)
class ShardTask:
    """One shard of one run, as an executor's task: the run, the shard's index and its value counts."""

    task: Task
    index: int
    shares: Shares


def run_shard(shard: ShardTask) -> tuple[tuple[int, ...], int, Drawn]:
    """A shard's grouped reports, with the run's key and the shard's index (a worker builds the setup once per run)."""
    setup = task_builder(shard.task).setup(shard.task.point)
    return shard.task.key, shard.index, draw_shard(setup, shard.task.seed, shard.task.key, shard.shares)


def sharded_rows(executor: Executor, tasks: Sequence[Task], builder: Builder) -> Iterator[TaskRow]:
    """The rows of sharded ``tasks``: every run's shards on ``executor`` in one go, each run finished here.

    Parameters
    ----------
    executor
        Runs :func:`run_shard` on every shard of every run.
    tasks
        Runs whose setups are sharded.
    builder
        This process's builder (the runs' setups, and the splits drawn here).

    Yields
    ------
    TaskRow
        Each run's row, as soon as all of its shards are back.
    """
    started = time.perf_counter()
    runs: dict[tuple[int, ...], tuple[Task, Setup, np.ndarray, list[Drawn | None]]] = {}
    shards: list[ShardTask] = []
    for task in tasks:
        setup = builder.setup(task.point)
        truth, shares = split_run(setup, task.seed, task.key)
        if setup.passes == "shards":
            yield held_row(executor, task, setup, truth, shares)
            continue
        runs[task.key] = (task, setup, truth, [None] * len(shares))
        shards += [ShardTask(task, s, share) for s, share in enumerate(shares)]
    if not shards:
        return
    for key, index, groups in executor.run(run_shard, shards):
        task, setup, truth, parts = runs[key]
        parts[index] = groups
        if all(part is not None for part in parts):
            del runs[key]
            observations = merge_shards(setup, [part for part in parts if part is not None])  # all there
            seconds = time.perf_counter() - started
            yield _finished(task, setup, truth, observations, seconds)


def _finished(task: Task, setup: Setup, truth: np.ndarray, observations: Observations, seconds: float) -> TaskRow:
    """:func:`.tasks.finish_row` with one BLAS thread, as a task's estimation runs on a worker (.tasks.run_task)."""
    if holds_one_blas_thread():
        return finish_row(task, setup, truth, observations, seconds)
    with one_blas_thread():
        return finish_row(task, setup, truth, observations, seconds)


def hold_shard(shard: ShardTask) -> Observations:
    """A shard's observations, to be kept where they were drawn (their likelihood is built there, on the first pass)."""
    if multiprocessing.parent_process() is not None:  # a worker: one BLAS thread for good, as a task's
        one_blas_thread_for_good()
    setup = task_builder(shard.task).setup(shard.task.point)
    return merge_shards(setup, [draw_shard(setup, shard.task.seed, shard.task.key, shard.shares)])


def held_row(executor: Executor, task: Task, setup: Setup, truth: np.ndarray, shares: Sequence[Shares]) -> TaskRow:
    """A run estimated from its shards where they were drawn (``passes = "shards"``): its row.

    The shards are held by ``executor`` (:meth:`ldpsim.Executor.hold`) for as long as the
    run is estimated; every likelihood pass maps :func:`ldpsim.estimation.held.part_pass` over them and sums
    the parts in shard order, so the numbers do not depend on the executor. They equal the merged run's to the
    estimators' certificates, not bit for bit (another order of summation; ``mle`` runs SQUAREM, not Newton).
    """
    started = time.perf_counter()
    with executor.hold(hold_shard, [ShardTask(task, s, share) for s, share in enumerate(shares)]) as held:
        observations = HeldObservations(setup.domain, held)
        return _finished(task, setup, truth, observations, time.perf_counter() - started)
