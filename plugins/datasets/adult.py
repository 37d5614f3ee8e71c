"""UCI Adult ages: the shipped counts, the raw UCI files, or a CSV with an ``age`` column."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ldpsim import DataError, Integers, Param, ParameterError, hookimpl

from .counted import Counted, read_shipped
from .reading import Table, numbers

SHIPPED = "adult_ages_counts.csv"
RAW_FILES = ("adult.data", "adult.test")


class AdultAges(Counted):
    """Ages of the 48,842 persons of UCI Adult (adult.data + adult.test; Becker & Kohavi 1996, CC BY 4.0)

    Without ``path`` the ages come from counts shipped with ldpsim (ages 17..90,
    mean 38.6436). ``path`` may name a raw UCI file (``adult.data`` or
    ``adult.test``, optionally gzipped: no header, comma-separated, age first;
    lines starting with ``|`` are skipped), a folder holding both (read
    together: the 48,842 persons), or a CSV file with an ``age`` column.
    """

    name = "adult-ages"
    domain_kinds = ("integers",)
    path = Param(
        "path",
        None,
        doc="raw UCI adult.data or adult.test, a folder holding both, or a CSV with an 'age' column; default: the shipped counts",
    )

    def _validate(self) -> None:
        _ = self.counts  # read and check the data now, not in the middle of a run

    @property
    def description(self) -> str:
        source = f"'{self.path}'" if self.path is not None else "shipped counts of adult.data + adult.test"
        return f"ages of {self.size:,} persons of UCI Adult ({source}; Becker & Kohavi 1996, CC BY 4.0)"

    def _count(self) -> np.ndarray:
        ages = self._ages()
        low, high = int(ages.min()), int(ages.max())
        domain = Integers.of(self.domain)
        values = domain.values
        if low < values[0] or high > values[-1] or domain.step != 1:
            raise ParameterError(
                f"the {domain.low}..{domain.high} (step {domain.step}) domain does not hold the ages {low}..{high}",
                field="domain",
                hint=f'use [domain] kind = "integers", low = {low}, high = {high}',
            )
        return np.bincount(domain.index(ages, source="the ages"), minlength=domain.size)

    def _ages(self) -> np.ndarray:
        """Every person's age (or, for the shipped counts, the ages repeated by their counts)."""
        if self.path is None:
            ages, counts = read_shipped(SHIPPED, ["age", "count"])
            return np.repeat(ages, counts)
        if self.path.is_dir():
            found = [self._raw_file(self.path / name) for name in RAW_FILES]
            return np.concatenate(
                [_read_ages(Table(p, header=False, comment="|", what="UCI adult file"), 0) for p in found]
            )
        first = Table(self.path, header=False, comment="|").header_names()  # the first line, split
        if "age" in first:
            table = Table(self.path)
            return _read_ages(table, table.positions(["age"], fields=["path"])[0])
        if not first[0].strip().lstrip("+-").isdigit():
            raise DataError(
                f"'{self.path}' has no column 'age' (columns: {', '.join(first)}) and is not a raw UCI adult file (its first field is not an age)",
                field="path",
                hint="give a CSV with an 'age' header, or adult.data / adult.test as distributed by UCI",
            )
        return _read_ages(Table(self.path, header=False, comment="|", what="UCI adult file"), 0)

    def _raw_file(self, path: Path) -> Path:
        gz = path.with_name(path.name + ".gz")
        if path.is_file() or not gz.is_file():
            return path  # a missing file is reported when it is read
        return gz


def _read_ages(table: Table, position: int) -> np.ndarray:
    parts = [numbers(text, table, start, "age", integer=True) for start, (text,) in table.chunks([position])]
    ages = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    if ages.size == 0:
        raise table.error("has no data rows", "give a file with one person per row")
    return ages


@hookimpl
def register_datasets(register):
    register(AdultAges)
