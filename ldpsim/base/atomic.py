"""Writing files atomically: a reader sees the old file or the complete new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path next to ``path``; on success it replaces ``path``, on any error it is removed.

    The temporary file gets the mode a newly created file would get (mkstemp makes it private),
    and lives in the same directory so that the final rename is atomic.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)  # no-op after the replace


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
