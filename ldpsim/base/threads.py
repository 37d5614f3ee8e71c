"""One BLAS thread for the whole of a run, entered once.

A threaded BLAS reduction may sum in another order with another thread count, so a run's numbers
(its tasks, and the mechanisms' matrices its setups build) are computed with one BLAS thread
wherever they are computed: in this process, in a forked or spawned worker, on another machine.
Tasks running side by side would otherwise also oversubscribe the cores. Parallelism comes from
running tasks side by side.

threadpoolctl limits the libraries loaded when the limit is entered, and scipy carries a BLAS of its
own that it loads on first use, often inside a task: entering the limit loads it first
(:func:`_limit`), or a task would run scipy's products threaded in whatever process happened to
import scipy late (a spawned worker, a run whose setups needed no scipy).

The Python API holds it too: :meth:`ldpsim.Estimator.estimate` enters it (nested inside a run, at no
cost), so an estimate made outside a run sums as it would inside one and does not spin a threaded BLAS
against other processes (a k-RR inversion took 60-75 s wall under load with several BLAS threads,
issue 31). Entering it reuses one inspection of the loaded libraries, made again only when modules were
imported since (:func:`_limit`): tens of microseconds, not the milliseconds of a fresh inspection.

Holding the limit for the whole run, not only its tasks, is also faster: after a threaded call,
OpenBLAS's idle threads spin for a while, and on a small machine they slowed the parsing, setup
and assembly around the tasks by up to half (002-fig6a on 2 cores: the main process's setup 36 -> 18 ms,
its assembly 22 -> 6 ms).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadpoolctl import ThreadpoolController

#: True while this process holds the limit (see :func:`one_blas_thread`)
_held = False
#: a worker process's limit, held for the process's life (see :func:`one_blas_thread_for_good`)
_for_good: Any = None
#: (how many modules were imported when it looked, the controller of the BLAS libraries it found)
_controller: tuple[int, ThreadpoolController] | None = None


def _limit() -> Any:
    """A new one-thread limit over the BLAS libraries ldpsim computes with, loaded first so that it covers them.

    The libraries are inspected again only when modules were imported since the last inspection
    (a new module may have loaded a BLAS); otherwise the last inspection's controller is reused.
    """
    global _controller
    import numpy  # noqa: F401  (numpy's BLAS)
    import scipy.linalg  # noqa: F401  (scipy's own BLAS)

    if _controller is None or _controller[0] != len(sys.modules):
        _controller = (len(sys.modules), ThreadpoolController())
    return _controller[1].limit(limits=1, user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread inside; nested uses cost nothing. Also a decorator.

    Entering the limit costs milliseconds (threadpoolctl inspects every loaded library), more
    than a small task's estimation: a sweep of thousands of small runs enters it once, not per run.
    The previous limits are restored on exit.
    """
    global _held
    if _held or _for_good is not None:
        yield
        return
    with _limit():
        _held = True
        try:
            yield
        finally:
            _held = False


def holds_one_blas_thread() -> bool:
    """Whether this process holds the limit (inside :func:`one_blas_thread`, or for good)."""
    return _held or _for_good is not None


def one_blas_thread_for_good() -> None:
    """Hold the limit until this process ends: a pool's worker process, whose every task wants it."""
    global _for_good
    if _for_good is None:
        _for_good = _limit()
