"""Reading columns of large text data files: chunked, vectorized, with errors naming the line.

pandas' C parser reads the file in chunks (plain or gzip, detected from the
first bytes), so memory follows the chunk, not the file, and no Python code
runs per row. Blank lines (and comment lines) are skipped; the line number of
a bad row is recovered by rescanning the file only when there is an error.
A progress bar appears on a terminal when reading takes more than a second.
"""

from __future__ import annotations

import csv
import gzip
import io
import multiprocessing
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

import numpy as np
from rich.console import Console
from rich.errors import LiveError
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from ldpsim import DataError

if TYPE_CHECKING:  # pandas is imported where files are read: `ldpsim list` stays fast
    import pandas as pd

CHUNK_ROWS = 500_000
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Table:
    """How to read a text table: separator, header, comment character."""

    path: Path
    sep: str = ","
    header: bool = True
    comment: str | None = None
    field: str = "path"  # the parameter to name in errors
    what: str = "CSV file"  # what the file should be, for errors

    def error(self, problem: str, hint: str, *, field: str | None = None) -> DataError:
        return DataError(f"'{self.path}' {problem}", field=field or self.field, hint=hint)

    def header_names(self) -> list[str]:
        """The stripped names of the header row (the first line that is not blank)."""
        with self._text() as fh:
            for line in fh:
                if not self._skipped(line):
                    return [h.strip() for h in next(csv.reader([line], delimiter=self.sep))]
        raise self.error("is empty", "give a file with a header row")

    def positions(self, names: Sequence[str], *, fields: Sequence[str]) -> list[int]:
        """Column positions of ``names`` in the header; DataError naming the parameter (``fields``) otherwise."""
        header = self.header_names()
        for name, field in zip(names, fields, strict=True):
            if name not in header:
                raise self.error(
                    f"has no column '{name}' (columns: {', '.join(header)})", "use one of the header names", field=field
                )
        return [header.index(n) for n in names]

    def chunks(self, columns: Sequence[int], *, text: bool = False) -> Iterator[tuple[int, list[np.ndarray]]]:
        """``(first row, [values per column])`` per chunk; rows count data rows from 0.

        A column comes as numbers when every value of the chunk parses as one
        (pandas converts ten times faster than from strings), else as stripped
        strings; ``text=True`` always gives strings.
        """
        import pandas as pd

        # Every column is parsed, not only those asked for: with columns selected (usecols) pandas silently
        # drops the surplus fields of a row longer than the header, and such a row must be an error.
        with self._binary() as (raw, stream), progress(self.path, raw) as advance:
            try:
                reader = pd.read_csv(
                    stream,
                    sep=self.sep,
                    header=0 if self.header else None,
                    dtype=str if text else None,
                    na_filter=False,
                    skip_blank_lines=True,
                    comment=self.comment,
                    encoding="utf-8",
                    chunksize=CHUNK_ROWS,
                )
                start = 0
                for frame in reader:
                    if not frame.index.equals(pd.RangeIndex(start, start + len(frame))):  # surplus fields made an index
                        raise self.error(
                            "has more fields in its rows than names in its header",
                            "name every column in the header, or remove the surplus fields",
                        )
                    by_pos = dict(enumerate(frame.columns))
                    yield start, [_values(frame[by_pos[c]]) for c in columns]
                    start += len(frame)
                    advance()
            except (UnicodeDecodeError, pd.errors.ParserError, EOFError, OSError) as exc:
                detail = " ".join(str(exc).split())
                raise self.error(
                    f"is not a readable {self.what} ({detail})", f"give a UTF-8 {self.what} (optionally gzipped)"
                ) from None
            except pd.errors.EmptyDataError:
                raise self.error("is empty", "give a file with data rows") from None

    def line_of(self, row: int) -> int:
        """The 1-based line number of data row ``row`` (only called on errors: it rescans the file)."""
        seen = -1 if self.header else 0
        with self._text() as fh:
            for number, line in enumerate(fh, start=1):
                if self._skipped(line):
                    continue
                if seen == row:
                    return number
                seen += 1
        return -1

    def _skipped(self, line: str) -> bool:
        # pandas skips lines of whitespace that holds no separator, and lines that start with the comment
        text = line.lstrip()
        if self.comment and text.startswith(self.comment):
            return True
        return not line.strip() and self.sep not in line.rstrip("\r\n")

    @contextmanager
    def _binary(self) -> Iterator[tuple[BinaryIO, BinaryIO | gzip.GzipFile]]:
        """The open file and the stream of its bytes (the file itself, or a gzip decompressor on it)."""
        if not self.path.is_file():
            raise DataError(
                f"file '{self.path}' not found", field=self.field, hint="fix the path (relative to the scenario file)"
            )
        with self.path.open("rb") as raw:
            gzipped = raw.read(2) == _GZIP_MAGIC
            raw.seek(0)
            if gzipped:
                with gzip.GzipFile(fileobj=raw) as stream:
                    yield raw, stream
            else:
                yield raw, raw

    @contextmanager
    def _text(self) -> Iterator[io.TextIOWrapper]:
        with self._binary() as (_, stream):
            text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
            try:
                yield text
            except (UnicodeDecodeError, EOFError, OSError, csv.Error) as exc:
                raise self.error(
                    f"is not a readable {self.what} ({exc})", f"give a UTF-8 {self.what} (optionally gzipped)"
                ) from None
            finally:
                text.detach()


def _values(column: pd.Series) -> np.ndarray:
    if column.dtype.kind in "iuf":
        return column.to_numpy()
    # object columns may hold Python ints too large for int64: as text, numbers() names them
    return column.astype(str).str.strip().to_numpy(dtype=str)


def numbers(values: np.ndarray, table: Table, start: int, column: str, *, integer: bool = False) -> np.ndarray:
    """One column of a chunk as float64 (or int64); DataError naming the first bad line."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64 if integer else float, copy=False)
    if values.dtype.kind == "f":  # every value parsed as a number; integers must be whole
        shown, parsed = values, values
        bad = ~np.isfinite(values) | (integer & (values != np.round(values)))
    else:
        import pandas as pd

        series = pd.Series(values, copy=False)
        shown = values
        if integer:  # at most 18 digits: every such integer fits int64
            bad = ~series.str.fullmatch(r"[+-]?\d{1,18}").to_numpy(dtype=bool)
            parsed = None
        else:
            parsed = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
            bad = ~np.isfinite(parsed)
    if bad.any():
        i = int(np.argmax(bad))
        line = table.line_of(start + i)
        value = shown[i] if isinstance(shown[i], str) else f"{shown[i]:g}"
        if not value:
            raise table.error(f"line {line} has no value in column '{column}'", "fill or remove that row")
        if integer and value.lstrip("+-").isdigit():
            raise table.error(
                f"line {line}: '{value}' in column '{column}' has more than 18 digits",
                "integers must fit 64 bits; fix or remove that row",
            )
        what = "an integer" if integer else "a number"
        raise table.error(f"line {line}: '{value}' in column '{column}' is not {what}", "fix or remove that row")
    if parsed is None:
        return series.astype(np.int64).to_numpy()  # every value matched the integer pattern
    return parsed.astype(np.int64 if integer else float, copy=False)


@contextmanager
def progress(path: Path, raw: BinaryIO, *, after: float = 1.0, console: Console | None = None) -> Iterator:
    """Yield ``advance()``: after ``after`` seconds, a transient bar of the bytes read on a terminal.

    Off in worker processes (they reread files the main process already
    showed) and when the console (stderr by default) is not a terminal (tests, logs).
    """
    console = console or Console(stderr=True)
    total = path.stat().st_size
    started = time.monotonic()
    bar: Progress | Literal[False] | None = None  # None: not shown yet; False: another bar is showing
    enabled = console.is_terminal and multiprocessing.parent_process() is None

    def advance() -> None:
        nonlocal bar
        if not enabled or (bar is None and time.monotonic() - started < after):
            return
        if bar is None:
            bar = Progress(TextColumn(f"reading {path.name}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                           console=console, transient=True)  # fmt: skip
            try:
                bar.start()
            except LiveError:  # another bar is showing: stay quiet
                bar = False
                return
            bar.add_task("read", total=total)
        if bar:
            bar.update(bar.task_ids[0], completed=raw.tell())

    try:
        yield advance
    finally:
        if bar:
            bar.stop()
