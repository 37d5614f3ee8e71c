"""The executor contract: where a run's tasks execute.

A run is a list of independent tasks (one per sweep point and repetition); a
task's result depends only on the task, never on where or when it ran. An
executor therefore only has to run a function on every task and hand the
results back as they finish. ldpsim's own executors (``serial``,
``processes``, ``dask``) are plugins registered through the
``register_executors`` hook exactly as a third party's would be (a Ray
executor, say), and the core picks one by name from the registry.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Generic, TypeVar

from ..model.params import Configurable

T = TypeVar("T")
R = TypeVar("R")


class Held(Generic[T]):
    """Results kept where they were computed, one per task (:meth:`Executor.hold`), in task order.

    :meth:`map` runs a function on each of them where it is kept and brings back only what the function
    returns: the map of a map-reduce whose data never moves (a run's shards' reports, kept on the workers
    that drew them, each likelihood pass a few kilobytes each way).
    """

    def map(self, function: Callable[[T, Any], R], argument: Any) -> list[R]:
        """``[function(kept, argument) for kept in results]``, each computed where it is kept, in task order.

        ``function`` and ``argument`` must be picklable; an exception raised by ``function`` propagates.
        """
        raise NotImplementedError


class KeptHere(Held[T]):
    """Results kept in this process (:meth:`Executor.hold`'s default)."""

    def __init__(self, values: Sequence[T]):
        self.values = list(values)

    def map(self, function: Callable[[T, Any], R], argument: Any) -> list[R]:
        return [function(value, argument) for value in self.values]


class _Indexed:
    """``function`` of an (index, task) pair, with the index: results that come back in any order, placed."""

    def __init__(self, function: Callable[[Any], Any]):
        self.function = function

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any]:
        return pair[0], self.function(pair[1])


class Executor(Configurable):
    """Base class of executors: run a function on every task, yield each result as it finishes.

    Subclasses declare

    * ``name``: the registry name (``executor = "..."`` in Python, ``--executor`` on the command line);
    * their options as :class:`ldpsim.Param` attributes. The core passes only the options the user
      gave, under these names: ``workers`` (``--workers``, how many tasks run side by side) and
      ``scheduler`` (``--scheduler``, the address of a running cluster); any others are open to
      Python callers, who may also pass an instance. An option the executor does not declare is
      refused before anything runs, naming the executors that take it. Construction validates each
      option; :meth:`_validate` adds checks across options, raising
      :class:`ldpsim.ParameterError` with ``field`` set to the option, so the user sees one line;
    * :meth:`run`.

    Errors the user can fix while running (an unreachable cluster, a missing extra) are
    :class:`ldpsim.LdpsimError` with ``field`` set to the option at fault, if any.
    """

    kind: ClassVar[str] = "executor"

    def run(self, function: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        """Yield ``function(task)`` once for every task, in any order, each as soon as it finishes.

        Parameters
        ----------
        function
            A picklable callable; it needs nothing from this process, so it may run in another one
            or on another machine. Called in this process, it reuses the run's plugin instances.
        tasks
            Picklable tasks; never empty. The core sends batches of runs (a few per worker, at most
            64 runs each), so an executor's dispatch costs little beside the work.

        Yields
        ------
        object
            Each task's result (picklable), as soon as it is available, so a checkpoint keeps it.

        Notes
        -----
        An exception raised by ``function`` must propagate from the generator (the run stops there;
        the results already yielded are kept). When the generator is closed early (an error, Ctrl-C),
        tasks not yet started must be cancelled and resources released: wrap the loop in
        ``try``/``finally``.
        """
        raise NotImplementedError

    @contextmanager
    def hold(self, function: Callable[[T], R], tasks: Sequence[T]) -> Iterator[Held[R]]:
        """``function(task)`` for every task, each result kept where it was computed while the block runs.

        Parameters
        ----------
        function, tasks
            As for :meth:`run`.

        Yields
        ------
        Held
            The results, in task order, to :meth:`Held.map` over; released when the block ends.

        Notes
        -----
        The default computes the results with :meth:`run` and keeps them in this process (so ``serial`` and
        ``processes`` hold every result here). An executor whose workers keep state (``dask``: futures
        left on the workers) overrides it, so that results too large for one process stay spread out.
        """
        values: list[Any] = [None] * len(tasks)
        for index, value in self.run(_Indexed(function), list(enumerate(tasks))):
            values[index] = value
        yield KeptHere(values)

    @staticmethod
    def cpus() -> int:
        """The CPUs this process may use (a sensible default for ``workers``)."""
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
