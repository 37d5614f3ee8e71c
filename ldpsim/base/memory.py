"""Refusing up front what would not fit in memory.

A dense likelihood or mechanism matrix grows with the square of the domain
(a 256 x 256 grid makes a 65,536 x 65,536 matrix: 34 GB). Allocating it would
swap the machine to a halt or be killed by the kernel minutes into a run; a
one-line refusal naming the size and the alternative is the better answer.
"""

from __future__ import annotations

import os
import time

from .errors import LdpsimError

#: allocations are refused above this share of the memory available when they are checked
MEMORY_SHARE = 0.8


class MemoryLimitError(LdpsimError):
    """An allocation that cannot fit in this machine's memory."""


#: seconds for which one reading of the available memory stands (small runs check it thousands of times)
MEMORY_READING_SECONDS = 0.5
_reading: tuple[float, int] | None = None
_clock = time.monotonic


def available_memory() -> int:
    """Bytes of memory available to a new allocation (MemAvailable on Linux, else physical memory).

    Read again at most every ``MEMORY_READING_SECONDS``: reading it took a tenth of a sweep of small runs.
    """
    global _reading
    now = _clock()
    if _reading is None or not 0 <= now - _reading[0] < MEMORY_READING_SECONDS:
        _reading = (now, _read_available_memory())
    return _reading[1]


def _read_available_memory() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KB' (decimal units, as memory is usually quoted)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def require_memory(nbytes: float, what: str, hint: str) -> None:
    """Raise :class:`MemoryLimitError` if ``nbytes`` exceed the share of memory we allow ourselves.

    ``what`` names the allocation ("the dense 65536 x 65536 matrix of planar-geometric"),
    ``hint`` the alternative (a structured operator, fewer values).
    """
    limit = MEMORY_SHARE * available_memory()
    if nbytes > limit:
        raise MemoryLimitError(
            f"{what} would need {format_bytes(nbytes)}, more than the {format_bytes(limit)} this machine can give",
            hint=hint,
        )
