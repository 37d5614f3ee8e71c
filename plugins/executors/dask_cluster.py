"""The ``dask`` executor: tasks on a Dask distributed cluster, local or running elsewhere.

Workers of a remote cluster need ldpsim, the plugins the scenario uses and its
data files, installed at the same paths. A new local cluster forks its workers where the
platform can (``start_method``): they start with ldpsim imported and the run's plugins built,
in a tenth of a second instead of the spawned interpreters' second or so, which was most of
the wall time of a sweep of small runs (002-fig6a: 1.6 -> 0.8 s). dask.distributed is imported only when
a run uses this executor (``pip install 'ldpsim[dask]'``). Its clients are not
made dask's default: a run leaves dask's configuration as it found it (a client
left as the default, say by a failed connection, would send xarray's later file
writes to that cluster's locks).
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ldpsim import Executor, LdpsimError, Param, ParameterError, hookimpl


@contextmanager
def _quiet_start() -> Iterator[None]:
    """Start a local cluster whose workers never take Ctrl-C, without a warning that asks nothing of the user.

    Python 3.12 and later warn that forking a process with threads (the cluster's event loop) may deadlock the
    child; dask's fork start method is made for that, and the warning would ask nothing of the user: dropped too.

    Ctrl-C reaches the terminal's whole process group, and workers that took it would each print a
    KeyboardInterrupt traceback while the run, which stops them, says what happened in one line. SIGINT is
    ignored while the cluster starts its worker processes, which keep it ignored (an ignored signal stays
    ignored across exec, and Python then installs no handler); a Ctrl-C pressed during those seconds is lost.
    (Blocking it instead would keep it pending for this process, but dask forks from threads whose mask it
    does not inherit.) The scheduler's HTTP server (for metrics, even without the dashboard) moves off a
    busy port 8787 with a warning; it is dropped.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
        warnings.filterwarnings(
            "ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning
        )
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


class Dask(Executor):
    """A Dask distributed cluster, a new local one or a running one; needs ldpsim[dask]."""

    name = "dask"
    workers = Param("int", None, ge=1, doc="worker processes of a new local cluster (default: the CPUs)")
    scheduler = Param(
        "str", None, doc="address of a running scheduler, e.g. tcp://10.0.0.5:8786 (default: a new local cluster)"
    )
    start_method = Param(
        "str",
        None,
        choices=("fork", "forkserver", "spawn"),
        doc="how a new local cluster starts its worker processes (default: fork where the platform has it, else "
        "dask's setting): forked workers start at once with ldpsim imported and the run's plugins built",
    )

    def _validate(self) -> None:
        for given in ("workers", "start_method"):
            if self.scheduler is not None and getattr(self, given) is not None:
                raise ParameterError(
                    "a running cluster has the workers it was started with",
                    field=given,
                    hint=f"leave out {given}, or the scheduler to start a local cluster",
                )

    def _start_method(self) -> str | None:
        """The start method of a new local cluster's workers: the one given, else fork where there is one."""
        if self.start_method is not None:
            return self.start_method
        return "fork" if "fork" in multiprocessing.get_all_start_methods() else None

    def run(self, function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise LdpsimError("the dask executor needs dask.distributed: pip install 'ldpsim[dask]'") from None
        cluster = None
        try:
            if self.scheduler is None:
                import dask

                method = self._start_method()
                config = {"distributed.worker.multiprocessing-method": method} if method else {}
                with _quiet_start(), dask.config.set(config):
                    cluster = LocalCluster(
                        n_workers=min(self.workers or self.cpus(), len(tasks)),
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address=None,
                        silence_logs=logging.CRITICAL,  # task errors come back through results; the rest is noise
                    )
                client = Client(cluster, set_as_default=False)
            else:
                try:
                    client = Client(self.scheduler, timeout="10s", set_as_default=False)
                except (OSError, TimeoutError, ValueError) as exc:  # ValueError: a malformed address
                    raise LdpsimError(
                        f"cannot reach the dask scheduler at {self.scheduler} ({exc})",
                        field="scheduler",
                        hint="check the address, or leave out the scheduler to start a local cluster",
                    ) from None
            with client:
                futures = client.map(function, tasks, pure=False)
                try:
                    for future in as_completed(futures, loop=client.loop):
                        yield future.result()
                finally:
                    client.cancel(futures)
        finally:
            if cluster is not None:
                cluster.close()


@hookimpl
def register_executors(register):
    register(Dask)
