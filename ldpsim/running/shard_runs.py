"""Sharded runs on an executor: each shard of each run is one task, the runs merged and estimated here.

The executor contract is unchanged (:class:`ldpsim.Executor`): shards go out as tasks like any other,
their results come back in any order, and each run is merged in shard order once all of its shards
are back (:func:`.shards.merge_shards`), then estimated and scored in this process. The numbers are
those of :func:`.tasks.run_task` on the same task, whatever the executor or its workers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..base.threads import holds_one_blas_thread, one_blas_thread
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
            if holds_one_blas_thread():
                row = finish_row(task, setup, truth, observations, seconds)
            else:
                with one_blas_thread():  # as a task's estimation runs on a worker (see .tasks.run_task)
                    row = finish_row(task, setup, truth, observations, seconds)
            yield row
