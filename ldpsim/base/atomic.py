"""Writing files atomically: a reader sees the old file or the complete new one, never half of one.

The new file is written under a hidden temporary name in the same folder, flushed to the disk
(``fsync``), renamed over the target, and the rename itself flushed (``fsync`` of the folder),
so a power cut leaves the old file or the new one, not an empty or truncated one. The
temporary name holds the writer's process id: a later write to the same target removes the
temporary files of writers that no longer run (a write killed by SIGKILL cannot clean up).
"""

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
    and lives in the same directory so that the final rename is atomic. File and rename are
    flushed to the disk before the context exits.
    """
    path = Path(path)
    prefix = f".{path.name}."
    remove_stale(path, suffix)
    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(tmp)
        os.replace(tmp, path)
        _fsync(path.parent, directory=True)
    finally:
        Path(tmp).unlink(missing_ok=True)  # no-op after the replace


def remove_stale(path: str | os.PathLike, suffix: str = ".tmp") -> list[Path]:
    """Remove the temporary files that writes to ``path`` by processes no longer running left behind.

    Returns
    -------
    list of Path
        The files removed.
    """
    path = Path(path)
    prefix = f".{path.name}."
    removed: list[Path] = []
    try:
        names = [p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(suffix)]
    except OSError:
        return removed
    for candidate in names:
        owner = candidate.name[len(prefix) :].split(".", 1)[0]
        if owner.isdigit() and _running(int(owner)):
            continue  # a write in progress (or this process's own)
        try:
            candidate.unlink()
        except OSError:
            continue
        removed.append(candidate)
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or a name we cannot judge: leave it
    return True


def _fsync(path: str | os.PathLike, *, directory: bool = False) -> None:
    """Flush ``path`` to the disk (a folder: its entries, so a rename in it survives a power cut)."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if directory:  # some platforms cannot open a folder; the file itself was flushed
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
