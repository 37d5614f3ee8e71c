"""The ``processes`` executor: a pool of worker processes on this machine.

Workers never outlive the run: Ctrl-C reaches only the main process (workers ignore SIGINT,
so they print no tracebacks of their own), which then ends them at once rather than waiting
for their tasks; and a worker whose main process died (SIGKILL, the out-of-memory killer)
exits, told by the kernel on Linux (``PR_SET_PDEATHSIG``) and, everywhere, by a thread that
watches its parent.

The objects that exist when the pool starts are frozen out of garbage collection until it ends
(:func:`gc.freeze`, as Python's documentation advises before ``fork``): forked workers share this
process's memory page by page, and a full collection, in a worker or here, writes to every object's
header and so copies every page of the heap; that was 0.1-0.25 s a collection, a worker's
whole share of a sweep of 7,200 sub-millisecond runs paying it about once.

A worker that dies (killed, or by the out-of-memory killer) breaks the pool: the run stops with one
line, its other workers ended, and the tasks finished so far kept in the checkpoint.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ldpsim import Executor, LdpsimError, Param, hookimpl

#: seconds between two looks of a worker at its parent
WATCH_INTERVAL = 0.5
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class Processes(Executor):
    """A pool of worker processes on this machine, each building the plugins once per run."""

    name = "processes"
    workers = Param("int", None, ge=1, doc="worker processes (default: the CPUs this process may use)")

    def run(self, function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        workers = min(self.workers or self.cpus(), len(tasks))
        if workers == 1:  # one worker or one task: a pool would only add its start-up time
            yield from (function(task) for task in tasks)
            return
        gc.freeze()  # before the workers are forked (see the module's docstring)
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(os.getpid(),))
        try:
            futures = [pool.submit(function, task) for task in tasks]
            given: set[Future] = set()
            for future in as_completed(futures):
                if not _broken(future):
                    given.add(future)
                    yield future.result()
                    continue
                # a worker died, and the pool runs nothing more: first the other tasks that finished, to be kept
                finished = [f for f in futures if f not in given and f.done() and not f.cancelled()]
                yield from (f.result() for f in finished if f.exception() is None)
                raise LdpsimError(
                    "a worker process died (killed, or out of memory?)",
                    hint="the runs finished so far are kept: --resume continues",
                )
        except BaseException:  # an error, Ctrl-C, or the caller stopped reading: the running tasks are abandoned
            _end_workers(pool)
            # the pool's manager thread sees its workers die and ends: wait for it here, as exiting Python
            # would race with it (and could print a traceback from its atexit hook)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:  # do not wait for the queued tasks
            pool.shutdown(wait=False, cancel_futures=True)
            gc.unfreeze()  # this process's garbage is collected as usual again


def _broken(future: Future) -> bool:
    """Whether a done future failed because the pool broke (a worker died), not because of its task."""
    return not future.cancelled() and isinstance(future.exception(), BrokenProcessPool)


def _start_worker(parent: int) -> None:
    """Set up a worker: Ctrl-C is the main process's business, and the worker dies with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the watch thread below still ends the worker
    started_under = os.getppid()
    if started_under != parent and not _alive(parent):
        os._exit(1)  # the main process died while this worker started
    threading.Thread(target=_watch, args=(parent, started_under), name="ldpsim-parent-watch", daemon=True).start()


def _watch(parent: int, started_under: int) -> None:
    """Exit when the main process is gone (the worker was re-parented, or the main process no longer exists)."""
    while os.getppid() == started_under and _alive(parent):
        time.sleep(WATCH_INTERVAL)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's workers now (their tasks' results are not wanted any more)."""
    kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
    if kill is not None:
        kill()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            process.kill()
        except (OSError, ValueError, AttributeError):
            pass  # already gone


@hookimpl
def register_executors(register):
    register(Processes)
