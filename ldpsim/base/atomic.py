"""Writing files atomically: a reader sees the old file or the complete new one, never half of one.

The new file is written under a hidden temporary name in the same folder, flushed to the disk
(``fsync``), renamed over the target, and the rename itself flushed (``fsync`` of the folder),
so a power cut leaves the old file or the new one, not an empty or truncated one. The
temporary name holds the writer's process id: a later write to the same target removes the
temporary files of writers that no longer run (a write killed by SIGKILL cannot clean up).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = ".tmp", clean: bool = True) -> Iterator[Path]:
    """A temporary path next to ``path``; on success it replaces ``path``, on any error it is removed.

    The temporary file gets the mode a newly created file would get (mkstemp makes it private),
    and lives in the same directory so that the final rename is atomic. File and rename are
    flushed to the disk before the context exits. With ``clean``, temporary files that killed
    writes to ``path`` left are removed first (this lists the folder: a writer of many files in
    one folder passes False and calls :func:`remove_stale_in` once).
    """
    path = Path(path)
    if clean:
        remove_stale(path, suffix)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=suffix, dir=path.parent)
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
    found: list[tuple[Path, int | None]] = []
    for candidate in _listing(path.parent):
        if candidate.name.startswith(prefix) and candidate.name.endswith(suffix):
            owner = candidate.name[len(prefix) :].split(".", 1)[0]
            found.append((candidate, int(owner) if owner.isdigit() else None))  # no pid: an older writer's
    return _unlink_dead(found)


#: a temporary name of :func:`atomic_path`: .<target>.<pid>.<random><suffix>
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.[a-z0-9_]+(?P<suffix>\.[^.]+)$")


def remove_stale_in(folder: str | os.PathLike) -> list[Path]:
    """Remove every temporary file in ``folder`` whose writer no longer runs (see :func:`remove_stale`)."""
    found: list[tuple[Path, int | None]] = []
    for candidate in _listing(Path(folder)):
        match = _TEMPORARY.match(candidate.name)
        if match is not None:
            found.append((candidate, int(match["pid"])))
    return _unlink_dead(found)


def _listing(folder: Path) -> list[Path]:
    """The folder's entries (none if it cannot be read: cleaning up is best effort)."""
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _unlink_dead(found: list[tuple[Path, int | None]]) -> list[Path]:
    """Remove the temporary files whose writer (pid, None if unknown) no longer runs; return those removed."""
    removed = []
    for candidate, pid in found:
        if pid is not None and _running(pid):
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
