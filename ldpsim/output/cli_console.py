"""What every ``ldpsim`` command shares: the consoles, user errors, warnings, progress and Ctrl-C.

Problems the user can fix are printed as one line, ``error: ...``, and exit
with code 2; nothing is written in that case.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..base.errors import LdpsimError
from ..base.untrusted import printable

#: the exit code of a problem the user can fix
USER_ERROR = 2
#: results and summaries go to stdout, so a program can read them whole
out = Console(highlight=False, emoji=False)
#: messages, warnings and the progress bar go to stderr
err = Console(stderr=True, highlight=False, emoji=False)


@contextmanager
def user_errors(prefix: str = "") -> Iterator[None]:
    """Turn LdpsimError into one line on stderr and exit code 2."""
    try:
        yield
    except LdpsimError as exc:
        err.print(printable(f"error: {prefix}{exc}"), markup=False, soft_wrap=True)
        raise typer.Exit(USER_ERROR) from None
    except KeyboardInterrupt:
        err.print("interrupted; nothing was written", markup=False)
        raise typer.Exit(130) from None


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` for the command line: one line on stderr, no file name nor source line."""
    # ldpsim's own warnings (PluginWarning, ScoreWarning) read "warning: ..."; others keep their class name
    label = "warning" if category.__module__.startswith("ldpsim.") else category.__name__
    err.print(printable(f"{label}: {message}"), markup=False, soft_wrap=True)


def print_version(value: bool) -> None:
    """``--version``: the installed distribution's version (setuptools-scm derives it from git)."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("ldpsim")
        except PackageNotFoundError:  # a source tree that is not installed
            text = "0+unknown"
        out.print(f"ldpsim {text}", markup=False)
        raise typer.Exit()


@contextmanager
def progress_bar(description: str, quiet: bool, delay: float = 0.0) -> Iterator[Callable[[int, int], None]]:
    """A progress callback drawing a bar on stderr from the first task on (not while the scenario is checked).

    With ``delay``, the bar appears only once that many seconds have passed, so a quick command prints nothing.
    """
    opened = time.perf_counter()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
        transient=True,
    )
    task: list[TaskID] = []

    def update(done: int, total: int) -> None:
        if not task:
            if time.perf_counter() - opened < delay:
                return
            bar.start()
            task.append(bar.add_task(description, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:  # a bar never started would still end with a newline on a non-terminal
            bar.stop()


@contextmanager
def interrupt_once() -> Iterator[None]:
    """Ctrl-C stops a run once: presses while it stops are ignored, so they cannot cut its clean-up short.

    A second press would otherwise raise inside the clean-up (killing the workers, removing an
    empty checkpoint) and end in a traceback with workers left running.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the process exits
        pressed.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        if not pressed:
            signal.signal(signal.SIGINT, previous)


def plural(n: int) -> str:
    """The plural ending for ``n`` things."""
    return "" if n == 1 else "s"
