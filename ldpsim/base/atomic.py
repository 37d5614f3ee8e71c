"""Writing files atomically: a reader sees the old file or the complete new one, never half of one.

The new file is written under a hidden temporary name in the same folder, flushed to the disk
(``fsync``), renamed over the target, and the rename itself flushed (``fsync`` of the folder),
so a power cut leaves the old file or the new one, not an empty or truncated one. The
temporary name holds the writer's process id: a later write to the same target removes the
temporary files of writers that no longer run (a write killed by SIGKILL cannot clean up).

A write that fails for want of room says so, whatever the library writing the file reported
(netCDF reports a device without a byte left as "Permission denied"): see :data:`FULL_DEVICE_BYTES`.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import LdpsimError
from .memory import format_bytes

#: errors that mean the device (or a quota, or the limit on a file's size) has no room
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
#: a write that fails while fewer bytes than this are free on its device failed for want of room, whatever the
#: error says: netCDF reports a device without a byte left as "Permission denied" (EACCES), one with a few
#: kilobytes left as "NetCDF: HDF error". A write runs out of room with the device down to its last blocks (a
#: block is 4 KB, a write buffer at most a few hundred), and a write failing for another reason on a device
#: this full is rare enough that "make room" is the right advice for it too
FULL_DEVICE_BYTES = 1 << 20


class NoSpaceError(LdpsimError):
    """A file that does not fit on its device (or in the quota) as it is."""


#: the temporary files this process is writing now (another process may have had its process id)
_writing: set[str] = set()


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
    _writing.add(os.path.abspath(tmp))
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(tmp)
        os.replace(tmp, path)
        _fsync(path.parent, directory=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: how the netCDF library reports a failed write
        code = getattr(exc, "errno", None)
        free = free_bytes(path.parent)  # with the temporary file still there: the device as the write left it
        if code not in NO_ROOM and free is not None and free < FULL_DEVICE_BYTES:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from exc
        raise
    finally:
        Path(tmp).unlink(missing_ok=True)  # no-op after the replace
        _writing.discard(os.path.abspath(tmp))


def free_bytes(folder: str | os.PathLike) -> int | None:
    """Bytes free to this user on the device holding ``folder`` (None if the platform cannot say)."""
    try:
        found = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs on Windows
        return None
    return found.f_bavail * found.f_frsize


def device_of(path: str | os.PathLike) -> Path:
    """The mount point of the device holding ``path`` (its folder if that cannot be found)."""
    folder = Path(os.path.abspath(path)).parent
    here = folder
    while not os.path.ismount(here):
        if here.parent == here:
            return folder
        here = here.parent
    return here


def no_space(path: str | os.PathLike, need: int, free: int) -> NoSpaceError:
    """The one-line error of a file of at least ``need`` bytes that does not fit in the ``free`` bytes of its
    device (``need`` at most ``free``: the file took more than that)."""
    room = (
        f"need at least {format_bytes(need)}, {format_bytes(free)} free"
        if need > free
        else f"it needs more than the {format_bytes(free)} free"
    )
    return NoSpaceError(
        f"no space left on {device_of(path)} for '{path}' ({room})",
        field="output",
        hint="free some disk space, or write elsewhere",
    )


def require_space(path: str | os.PathLike, need: int) -> int | None:
    """Refuse, before writing it, a file of at least ``need`` bytes at ``path`` that its device has no room for.

    Returns
    -------
    int or None
        The bytes free on the device (None if the platform cannot say).

    Raises
    ------
    NoSpaceError
        Naming the device, the size and the room left.
    """
    free = free_bytes(Path(os.path.abspath(path)).parent)
    if free is not None and free < need:
        raise no_space(path, need, free)
    return free


def for_want_of_room(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised while handling, is an OSError saying there was no room."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in NO_ROOM:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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
        if pid is not None and _running(pid, candidate):
            continue  # a write in progress (this process's own, or another's)
        try:
            candidate.unlink()
        except OSError:
            continue
        removed.append(candidate)
    return removed


def _running(pid: int, temporary: Path) -> bool:
    """Whether process ``pid`` is writing ``temporary`` (as far as can be told: a process of that id runs)."""
    if pid == os.getpid():  # this process's write, or a killed writer's that had this id (a container's process)
        return os.path.abspath(temporary) in _writing
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
