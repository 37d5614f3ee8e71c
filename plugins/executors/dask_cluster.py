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

A cluster left without workers (all of them killed, or their machines gone) would keep the run's tasks
waiting for ever: a run stops with one line once its cluster has had no worker for
:data:`NO_WORKERS_SECONDS`, and likewise when a task's workers keep dying under it. A client that
fails to connect is closed at once (left to the garbage collector, it printed a traceback seconds
after the run had said what failed).
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from ldpsim import Executor, Held, LdpsimError, Param, ParameterError, hookimpl

#: a run stops once its cluster has had no worker for this long: its tasks would wait for ever, and a minute
#: covers what replaces workers by itself (a nanny restarts a killed worker in seconds, an adaptive cluster
#: asks for new ones at once) without leaving a run hung for long
NO_WORKERS_SECONDS = 60.0
#: seconds between two looks at the cluster's workers (each one a message to the scheduler)
WORKERS_POLL_SECONDS = 1.0
#: how long a connection to a running scheduler may take
CONNECT_TIMEOUT = "10s"


class _WorkersWatch(threading.Thread):
    """Cancels the run's tasks once the cluster has had no worker for ``seconds``; ``lost`` then says so."""

    def __init__(self, client: Any, futures: list[Any], seconds: float) -> None:
        super().__init__(name="ldpsim-dask-workers", daemon=True)
        self.client, self.futures, self.seconds = client, futures, seconds
        self.done = threading.Event()
        self.lost = False

    def run(self) -> None:
        since = None
        while not self.done.wait(WORKERS_POLL_SECONDS):
            try:
                workers = len(self.client.nthreads())
            except Exception:  # the scheduler itself unreachable: the client's own errors tell the run
                continue
            now = time.monotonic()
            since = None if workers else since if since is not None else now
            if since is not None and now - since >= self.seconds:
                self.lost = True
                with suppress(Exception):
                    self.client.cancel(self.futures)  # the run's wait for them ends
                return

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=2 * WORKERS_POLL_SECONDS)  # a look in progress may wait on the scheduler: not for long


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

    @contextmanager
    def _client(self, tasks: int) -> Iterator[tuple[Any, str]]:
        """A client of the cluster (a new local one, of at most ``tasks`` workers, or the running one) and its
        address, closed (the local cluster too) when the block ends."""
        try:
            from distributed import Client, LocalCluster
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
                        n_workers=min(self.workers or self.cpus(), tasks),
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address=None,
                        silence_logs=logging.CRITICAL,  # task errors come back through results; the rest is noise
                    )
                client = Client(cluster, set_as_default=False)
            else:
                client = _connect(Client, self.scheduler)
            with client:
                yield client, self.scheduler or (cluster.scheduler_address if cluster is not None else "")
        finally:
            if cluster is not None:
                cluster.close()

    def run(self, function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        with self._client(len(tasks)) as (client, address):
            from distributed import KilledWorker, as_completed  # there: _client says it when dask is missing

            futures = client.map(function, tasks, pure=False)
            watch = _WorkersWatch(client, futures, NO_WORKERS_SECONDS)
            watch.start()
            try:
                for future in as_completed(futures, loop=client.loop):
                    if watch.lost:
                        break
                    yield future.result()
            except KilledWorker:
                raise _killed(address) from None
            except Exception:
                if not watch.lost:  # a task's own error
                    raise
            finally:
                watch.stop()
                client.cancel(futures)
            if watch.lost:
                raise _no_workers(address)

    @contextmanager
    def hold(self, function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Held[Any]]:
        """The results stay on the workers that computed them (futures); :meth:`Held.map` runs there."""
        with self._client(len(tasks)) as (client, address):
            from distributed import KilledWorker, as_completed  # there: _client says it when dask is missing

            futures = client.map(function, tasks, pure=False)
            watch = _WorkersWatch(client, futures, NO_WORKERS_SECONDS)
            watch.start()
            try:
                for future in as_completed(futures, loop=client.loop):  # (the client is nobody's default)
                    if watch.lost:
                        raise _no_workers(address)
                    if future.status == "error":
                        future.result()  # the task's own error, raised here
                yield _OnWorkers(client, futures, watch, address)
            except KilledWorker:
                raise _killed(address) from None
            finally:
                watch.stop()
                client.cancel(futures)


class _OnWorkers(Held[Any]):
    """Results held on the Dask workers that computed them: each map runs where its result lives."""

    def __init__(self, client: Any, futures: list[Any], watch: _WorkersWatch, address: str):
        self.client, self.futures, self.watch, self.address = client, futures, watch, address
        self.where: list[list[str]] | None = None  # the worker holding each result, found on the first map

    def map(self, function: Callable[[Any, Any], Any], argument: Any) -> list[Any]:
        # each call asked of the worker holding its result: left to the scheduler, an idle worker could steal it
        # and copy the result over (a shard's reports; the likelihood built from them is rebuilt there). Loosely:
        # should that worker die, the result is computed again elsewhere and the call follows it
        if self.where is None:
            holders = self.client.who_has(self.futures)
            self.where = [sorted(holders[future.key])[:1] for future in self.futures]
        calls = [
            self.client.submit(function, future, argument, pure=False, workers=where, allow_other_workers=True)
            for future, where in zip(self.futures, self.where)
        ]
        self.watch.futures = [*self.futures, *calls]  # a cluster left without workers cancels these too
        try:
            return self.client.gather(calls)
        except Exception:
            if self.watch.lost:
                raise _no_workers(self.address) from None
            raise


def _no_workers(address: str) -> LdpsimError:
    return LdpsimError(
        f"the Dask cluster at {address} has had no workers left for {NO_WORKERS_SECONDS:g} s",
        hint="the runs finished so far are kept: start workers and run again with --resume",
    )


def _killed(address: str) -> LdpsimError:
    return LdpsimError(
        f"the workers of the Dask cluster at {address} kept dying running a task (killed, or out of memory?)",
        hint="the runs finished so far are kept: give the workers more memory, then run again with --resume",
    )


def _connect(client_class: Any, address: str) -> Any:
    """A client of the scheduler at ``address``; one that fails to connect is closed here, not left half made.

    Left to the garbage collector, a client that failed to start closed itself when the run had ended, its
    event loop gone, and printed a traceback 20 s after the run's own error.
    """
    client = client_class.__new__(client_class)  # held before it starts, so that a failed start can be closed
    try:
        client.__init__(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:  # ValueError: a malformed address
        with suppress(Exception):
            client.close(timeout=2)
        raise LdpsimError(
            f"cannot reach the dask scheduler at {address} ({exc})",
            field="scheduler",
            hint="check the address, or leave out the scheduler to start a local cluster",
        ) from None
    except BaseException:
        with suppress(Exception):
            client.close(timeout=2)
        raise
    return client


@hookimpl
def register_executors(register):
    register(Dask)
