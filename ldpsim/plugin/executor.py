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
from typing import ClassVar, TypeVar

from ..model.params import Configurable

T = TypeVar("T")
R = TypeVar("R")


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

    @staticmethod
    def cpus() -> int:
        """The CPUs this process may use (a sensible default for ``workers``)."""
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
