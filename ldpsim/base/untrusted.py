"""What others wrote: files that must be regular before they are read, texts that must stay inert.

A cache, a checkpoint or a results file can be a FIFO, a device or a link planted where a file was
expected, and its texts can hold terminal escape sequences. The plugin catalogue, the checkpoints and
the command line apply the same two rules, from here.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import IO

#: characters no text from outside may show as they are: C0 and C1 controls (ESC starts a terminal escape
#: sequence, a carriage return overwrites the line), DEL, and the bidirectional marks and overrides that
#: reorder what a terminal shows
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every :data:`UNPRINTABLE` character shown escaped (``\\x1b``), so a message echoing the
    user's input, a file's content or a plugin's text stays one inert line on the terminal."""
    return UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def open_regular(path: str | os.PathLike[str], *, follow_links: bool = True) -> IO[bytes] | None:
    """``path`` opened for reading if it is a regular file, else None (missing, a FIFO, a device, a folder;
    with ``follow_links=False`` a symbolic link too).

    Opened without blocking (a FIFO would wait for a writer for ever) and checked on the open descriptor,
    so the file checked is the file read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(Path(path), flags)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return os.fdopen(fd, "rb")
    except OSError:
        pass
    os.close(fd)
    return None
