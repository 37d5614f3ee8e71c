"""Results files: netCDF4, written atomically, read back fully."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Final

import xarray as xr

from ..base.atomic import atomic_path
from ..base.errors import LdpsimError

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


def open_results(path: str | os.PathLike) -> xr.Dataset:
    """Load a results file fully into memory (the file is closed on return)."""
    path = Path(path)
    if not path.is_file():
        raise LdpsimError(f"results file '{path}' not found", hint="check the path")
    try:
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds = ds.load()
    except (OSError, ValueError) as exc:
        raise LdpsimError(
            f"'{path}' is not a readable netCDF file ({exc})", hint="give a file written by `ldpsim run`"
        ) from None
    if "error" not in ds or "estimate" not in ds:
        raise LdpsimError(f"'{path}' is not an ldpsim results file", hint="give a file written by `ldpsim run`")
    return ds
