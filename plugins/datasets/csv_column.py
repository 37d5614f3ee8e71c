"""One column of a CSV file as the users' values."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ldpsim import DataError, Dataset, Param, hookimpl

from .reading import Table, numbers


class CsvColumn(Dataset):
    """One column of a CSV file (with a header row) as the users' values, one user per row."""

    name = "csv"
    domain_kinds = ("integers", "categorical")
    path = Param("path", doc="CSV file; a relative path is relative to the scenario file")
    column = Param("str", doc="header of the column to read")
    replace = Param("bool", False, doc="draw users with replacement (allows more users than rows)")
    unlimited_by = "replace"

    def _validate(self) -> None:
        _ = self._values  # read and check the file now, not in the middle of a run

    @cached_property
    def _values(self) -> np.ndarray:
        table = Table(self.path)
        (position,) = table.positions([self.column], fields=["column"])
        parts = []
        for start, (text,) in table.chunks([position], text=self.domain.name != "integers"):
            if self.domain.name == "integers":
                parts.append(numbers(text, table, start, self.column, integer=True))
            else:
                empty = text == ""
                if empty.any():
                    line = table.line_of(start + int(np.argmax(empty)))
                    raise table.error(f"line {line} has no value in column '{self.column}'", "fill or remove that row")
                parts.append(text.astype(object))
        if not parts or not sum(p.size for p in parts):
            raise table.error("has no data rows", "give a CSV file with data")
        return self.domain.index(np.concatenate(parts), source=f"'{self.path}' column '{self.column}'")

    @property
    def size(self) -> int:
        return int(self._values.shape[0])

    @property
    def max_users(self) -> int | None:
        """No limit with replacement; else the number of rows."""
        return None if self.replace else self.size

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


@hookimpl
def register_datasets(register):
    register(CsvColumn)
