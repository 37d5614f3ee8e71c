"""One column of a CSV file as the users' values."""

from __future__ import annotations

import csv
from functools import cached_property

import numpy as np

from ldpsim import DataError, Dataset, Param, hookimpl


class CsvColumn(Dataset):
    """One column of a CSV file (with a header row) as the users' values, one user per row."""

    name = "csv"
    domain_kinds = ("integers", "categorical")
    path = Param("path", doc="CSV file; a relative path is relative to the scenario file")
    column = Param("str", doc="header of the column to read")
    replace = Param("bool", False, doc="draw users with replacement (allows more users than rows)")

    def _validate(self) -> None:
        _ = self._values  # read and check the file now, not in the middle of a run

    @cached_property
    def _values(self) -> np.ndarray:
        path = self.path
        if not path.is_file():
            raise DataError(f"file '{path}' not found", field="path", hint="fix the path (relative to the scenario file)")
        try:
            with path.open(newline="", encoding="utf-8") as fh:
                reader = csv.reader(fh)
                header = next(reader, None)
                if header is None:
                    raise DataError(f"'{path}' is empty", field="path", hint="give a CSV file with a header row")
                header = [h.strip() for h in header]
                if self.column not in header:
                    raise DataError(
                        f"'{path}' has no column '{self.column}' (columns: {', '.join(header)})",
                        field="column",
                        hint="use one of the header names",
                    )
                col = header.index(self.column)
                raw = []
                for line, row in enumerate(reader, start=2):
                    if not row:
                        continue
                    if col >= len(row) or not row[col].strip():
                        raise DataError(
                            f"'{path}' line {line} has no value in column '{self.column}'",
                            field="path",
                            hint="fill or remove that row",
                        )
                    raw.append(row[col].strip())
        except (UnicodeDecodeError, csv.Error) as exc:
            raise DataError(f"'{path}' is not a readable CSV file ({exc})", field="path", hint="give a UTF-8 CSV file") from None
        if not raw:
            raise DataError(f"'{path}' has no data rows", field="path", hint="give a CSV file with data")
        if self.domain.name == "integers":
            try:
                parsed = np.array([int(v) for v in raw], dtype=np.int64)
            except ValueError:
                bad = next(i for i, v in enumerate(raw) if not _is_int(v))
                raise DataError(
                    f"'{path}' line {bad + 2}: '{raw[bad]}' in column '{self.column}' is not an integer",
                    field="path",
                    hint="fix the file or use a categorical domain",
                ) from None
        else:
            parsed = np.array(raw, dtype=object)
        return self.domain.index(parsed, source=f"'{path}' column '{self.column}'")

    @property
    def size(self) -> int:
        return int(self._values.shape[0])

    def distribution(self) -> np.ndarray:
        """The file's empirical distribution."""
        return np.bincount(self._values, minlength=self.domain.size) / self.size

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        values = self._values
        if n == values.shape[0] and not self.replace:
            return values.copy()
        if n > values.shape[0] and not self.replace:
            raise DataError(
                f"asks for {n} users but '{self.path}' has {values.shape[0]} rows",
                field="users",
                hint=f"use at most {values.shape[0]} users or set replace = true",
            )
        return values[rng.choice(values.shape[0], size=n, replace=self.replace)]


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


@hookimpl
def register_datasets(register):
    register(CsvColumn)
