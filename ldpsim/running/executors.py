"""Where tasks run: in this process, on a local process pool, or on a Dask cluster.

Every executor yields the results of the tasks it is given as they finish.
A task's result depends only on the task (see :mod:`ldpsim.runner`), so the
executor and the number of workers never change the numbers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from ..base.errors import LdpsimError

if TYPE_CHECKING:
    from .runner import Task, TaskResult

EXECUTORS = ("serial", "processes", "dask")
RunTask = Callable[..., "TaskResult"]


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def serial(todo: Sequence[Task], run_task: RunTask, builder: Any = None) -> Iterator[TaskResult]:
    """One task after the other in this process, with the scenario's plugin instances."""
    for task in todo:
        yield run_task(task, builder)


def processes(todo: Sequence[Task], run_task: RunTask, workers: int) -> Iterator[TaskResult]:
    """A local pool of ``workers`` processes; each builds its own plugin instances once per run."""
    pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)))
    futures = [pool.submit(run_task, task) for task in todo]
    try:
        for future in as_completed(futures):
            yield future.result()
    finally:  # on an error or Ctrl-C, do not wait for the queued tasks
        pool.shutdown(wait=False, cancel_futures=True)


def dask(todo: Sequence[Task], run_task: RunTask, workers: int, scheduler: str | None = None) -> Iterator[TaskResult]:
    """A Dask distributed cluster: the one at ``scheduler``, or a new local one of ``workers`` processes.

    Workers of a remote cluster need ldpsim (and the plugins and data files the scenario uses) installed.
    """
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError:
        raise LdpsimError("the dask executor needs dask.distributed: pip install 'ldpsim[dask]'") from None
    cluster = None
    try:
        if scheduler is None:
            cluster = LocalCluster(
                n_workers=min(workers, len(todo)),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:  # ValueError: a malformed address
                raise LdpsimError(
                    f"cannot reach the dask scheduler at {scheduler} ({exc})",
                    field="--scheduler",
                    hint="check the address, or drop --scheduler to start a local cluster",
                ) from None
        with client:
            futures = client.map(run_task, todo, pure=False)
            try:
                for future in dask_completed(futures):
                    yield future.result()
            finally:
                client.cancel(futures)
    finally:
        if cluster is not None:
            cluster.close()


def run_all(
    todo: Sequence[Task],
    run_task: RunTask,
    *,
    executor: str = "serial",
    workers: int | None = None,
    scheduler: str | None = None,
    builder: Any = None,
) -> Iterator[TaskResult]:
    """The results of ``todo`` from the chosen executor, as they finish."""
    check(executor, workers, scheduler)
    if not todo:
        return iter(())
    workers = workers or default_workers()
    if executor == "dask":
        return dask(todo, run_task, workers, scheduler)
    if executor == "processes" and workers > 1 and len(todo) > 1:
        return processes(todo, run_task, workers)
    return serial(todo, run_task, builder)  # one worker or one task: a pool would only add start-up time


def check(executor: str, workers: int | None, scheduler: str | None) -> None:
    """One-line errors for an unknown executor or options that do not go together."""
    if executor not in EXECUTORS:
        raise LdpsimError(
            f"unknown executor '{executor}'", field="--executor", hint=f"choose one of {', '.join(EXECUTORS)}"
        )
    if workers is not None and workers < 1:
        raise LdpsimError(
            f"must be at least 1, got {workers}", field="--workers", hint="give the number of worker processes"
        )
    if scheduler is not None and executor != "dask":
        raise LdpsimError(
            f"only applies to the dask executor, not {executor}",
            field="--scheduler",
            hint="add --executor dask or drop --scheduler",
        )
    if scheduler is not None and workers is not None:
        raise LdpsimError(
            "a running cluster has the workers it was started with",
            field="--workers",
            hint="drop --workers, or drop --scheduler to start a local cluster of that many workers",
        )
