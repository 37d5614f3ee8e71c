"""The ``processes`` executor: a pool of worker processes on this machine."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from ldpsim import Executor, Param, hookimpl


class Processes(Executor):
    """A pool of worker processes on this machine, each building the plugins once per run."""

    name = "processes"
    workers = Param("int", None, ge=1, doc="worker processes (default: the CPUs this process may use)")

    def run(self, function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        workers = min(self.workers or self.cpus(), len(tasks))
        if workers == 1:  # one worker or one task: a pool would only add its start-up time
            yield from (function(task) for task in tasks)
            return
        pool = ProcessPoolExecutor(max_workers=workers)
        try:
            futures = [pool.submit(function, task) for task in tasks]
            for future in as_completed(futures):
                yield future.result()
        finally:  # on an error or Ctrl-C, do not wait for the queued tasks
            pool.shutdown(wait=False, cancel_futures=True)


@hookimpl
def register_executors(register):
    register(Processes)
