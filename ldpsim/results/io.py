"""Results files: netCDF4, written atomically, read back fully."""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import xarray as xr

from ..base.atomic import atomic_path
from ..base.errors import LdpsimError
from ..base.memory import format_bytes, require_memory
from .scores import from_error_layout, score_names

ENGINE: Final = "netcdf4"


def check_output(path: str | os.PathLike) -> Path:
    """Fail before a run, not after it, if ``path`` cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise LdpsimError(f"'{path}' is a directory", field="output", hint="give a file name such as results.nc")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise LdpsimError(
            f"directory '{parent}' does not exist", field="output", hint="create it or choose another path"
        )
    if not os.access(parent, os.W_OK):
        raise LdpsimError(f"directory '{parent}' is not writable", field="output", hint="choose a writable location")
    if path.exists() and not os.access(path, os.W_OK):
        raise LdpsimError(f"'{path}' exists and is not writable", field="output", hint="choose another file name")
    return path


#: the first bytes of a netCDF4 (HDF5) file
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_results_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a results file written by ldpsim (a netCDF4 file with its variables and provenance)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(_HDF5_SIGNATURE)) != _HDF5_SIGNATURE:
                return False
        require_readable([path])  # opening loads the coordinates: a crafted header could declare 10^10 of them
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds = from_error_layout(ds)
            return _written_by_ldpsim(ds) and bool(score_names(ds))
    except (OSError, ValueError, RuntimeError, LdpsimError):
        return False


def _written_by_ldpsim(ds: xr.Dataset) -> bool:
    """ldpsim's provenance and the core variables with their dimensions (a frequency run's, or a heavy-hitter
    run's): not just variables of those names."""
    if "ldpsim_version" not in ds.attrs:
        return False
    if "item" in ds and "top_item" in ds:  # a heavy-hitter run's (ldpsim.results.found)
        return {"estimator", "rep", "rank"} <= set(ds["item"].dims) and "rep" in ds["top_item"].dims
    if "estimate" not in ds or "truth" not in ds:
        return False
    return {"estimator", "rep"} <= set(ds["estimate"].dims) and "rep" in ds["truth"].dims


def check_overwrite(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (), *, force: bool = False) -> None:
    """Refuse to write over an input of the run, or over a file that is not an ldpsim results file.

    Results replace results silently (rerunning a scenario is the common case); replacing
    anything else, a scenario given as ``-o`` by a slip of the hand, needs ``force``. An input of
    the run is never replaced: the run would destroy what it reads.

    Raises
    ------
    LdpsimError
        Naming the file and what it is.
    """
    path = Path(path)
    if not path.exists():
        return
    for source in inputs:
        try:
            same = path.samefile(source)
        except OSError:
            continue
        if same:
            raise LdpsimError(
                f"'{path}' is an input of this run", field="output", hint="choose another file name for the output"
            )
    if not force and not is_results_file(path):
        raise LdpsimError(
            f"'{path}' exists and is not an ldpsim results file",
            field="output",
            hint="choose another file name, or add --force to replace it",
        )


def save_results(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` as netCDF4 atomically: a reader sees the old file or the complete new one.

    Raises
    ------
    LdpsimError
        If the file cannot be written (a full disk, a file size limit); nothing is left behind.
    """
    path = check_output(path)
    try:
        with atomic_path(path) as tmp:
            ds.to_netcdf(tmp, engine=ENGINE)
    except (OSError, RuntimeError) as exc:  # the netCDF library reports a failed write as RuntimeError
        raise write_error(path, exc) from None
    return path


#: errors that mean the disk (or a limit on file sizes) has no room
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def write_error(path: str | os.PathLike, exc: BaseException, *, field: str = "output") -> LdpsimError:
    """The one-line error of a write to ``path`` that failed with ``exc``."""
    code = getattr(exc, "errno", None)
    reason = os.strerror(code) if isinstance(code, int) else str(exc) or type(exc).__name__
    if code in _NO_ROOM or not isinstance(code, int):
        hint = "free some disk space (or raise the file size limit), or write elsewhere"
    else:
        hint = "choose another location"
    return LdpsimError(f"could not write '{path}' ({reason})", field=field, hint=hint)


#: bytes one element of a variable-length string takes once read (a Python str and its pointer): the header
#: gives no lengths, and ldpsim's files hold only short labels
STRING_ELEMENT_BYTES = 64


def declared_sizes(path: str | os.PathLike) -> list[tuple[str, tuple[int, ...], str, int]]:
    """``(name, shape, dtype, bytes)`` of each variable of a netCDF file, from its header alone.

    A header may declare a variable of 10^10 values that a file of a few kilobytes never wrote (its
    chunks are absent: the fill value stands for them), so the file's size says nothing about what
    reading it takes. Nothing but the header is read here.

    Raises
    ------
    OSError
        If ``path`` is not a readable netCDF file.
    """
    import netCDF4

    sizes = []
    with netCDF4.Dataset(path, "r") as nc:
        for name, var in nc.variables.items():
            shape = tuple(int(n) for n in var.shape)
            itemsize = getattr(var.dtype, "itemsize", 0) or STRING_ELEMENT_BYTES  # str: variable-length strings
            dtype = getattr(var.dtype, "name", None) or getattr(var.dtype, "__name__", "string")
            sizes.append((str(name), shape, str(dtype), math.prod(shape) * int(itemsize)))
    return sizes


def require_readable(paths: Sequence[str | os.PathLike], *, copies: int = 1) -> None:
    """Refuse, before reading any data, results files whose variables would not fit in memory.

    Parameters
    ----------
    paths
        The files to be loaded at once (a merge loads all of its inputs).
    copies
        How many copies of their data the caller holds at once (a merge: the inputs and their concatenation).

    Raises
    ------
    LdpsimError
        If a file is not a readable netCDF file.
    MemoryLimitError
        Naming the largest variable and its size, if the variables' total would not fit.
    """
    total, largest = 0, None
    for path in paths:
        if not Path(path).is_file():  # nor a FIFO or a folder: nothing is opened that could block
            raise LdpsimError(f"results file '{path}' not found", hint="check the path")
        try:
            sizes = declared_sizes(path)
        except (OSError, ValueError, RuntimeError) as exc:
            raise LdpsimError(
                f"'{path}' is not a readable netCDF file ({exc})", hint="give a file written by `ldpsim run`"
            ) from None
        for name, shape, dtype, nbytes in sizes:
            total += nbytes
            if largest is None or nbytes > largest[4]:
                largest = (path, name, shape, dtype, nbytes)
    if largest is None:
        return
    path, name, shape, dtype, nbytes = largest
    values = f"{' x '.join(f'{n:,}' for n in shape) or '1'} {dtype} values, {format_bytes(nbytes)}"
    what = (
        f"reading '{path}' (its variable {name!r} holds {values})"
        if len(paths) == 1
        else f"reading {len(paths)} files (the largest variable, {name!r} of '{path}', holds {values})"
    )
    require_memory(
        copies * total,
        what,
        hint="its header declares more data than fits: a damaged or crafted file, or one to read on a larger machine",
    )


def open_results(path: str | os.PathLike) -> xr.Dataset:
    """Load a results file fully into memory (the file is closed on return).

    Files written before each metric's score had its own variable are read in today's layout.
    The sizes its header declares are checked against the memory available first (``require_readable``).
    """
    path = Path(path)
    require_readable([path])
    try:
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds = ds.load()
    except (OSError, ValueError) as exc:
        raise LdpsimError(
            f"'{path}' is not a readable netCDF file ({exc})", hint="give a file written by `ldpsim run`"
        ) from None
    ds = from_error_layout(ds)
    if not _written_by_ldpsim(ds) or not score_names(ds):
        raise LdpsimError(f"'{path}' is not an ldpsim results file", hint="give a file written by `ldpsim run`")
    return ds
