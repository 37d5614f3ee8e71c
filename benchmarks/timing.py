"""What the benchmark scripts share: the best of several timed calls, a process's peak memory."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(the shortest wall time of ``repeat`` calls of ``fn``, the last call's result)."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def peak_bytes(*_: object) -> int:
    """This process's resident high-water mark (VmHWM, Linux); any arguments are ignored (a mapped function)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0
