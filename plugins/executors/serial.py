"""The ``serial`` executor: one task after the other in this process."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ldpsim import Executor, hookimpl


class Serial(Executor):
    """One task after the other in this process; the easiest to debug."""

    name = "serial"

    def run(self, function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        for task in tasks:
            yield function(task)


@hookimpl
def register_executors(register):
    register(Serial)
