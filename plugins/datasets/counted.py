"""Datasets whose population is a count per domain value (real data, aggregated once when read)."""

from __future__ import annotations

from functools import cached_property
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from ldpsim import DataError, Dataset, Param

from .reading import Table, numbers


class Counted(Dataset):
    """A finite population given as the number of records per domain value; subclasses implement :meth:`_count`."""

    replace = Param("bool", False, doc="draw users with replacement (allows more users than records)")
    unlimited_by = "replace"

    def _count(self) -> np.ndarray:
        """Records per domain value (int64, length domain.size)."""
        raise NotImplementedError

    @cached_property
    def counts(self) -> np.ndarray:
        counts = np.asarray(self._count(), dtype=np.int64)
        counts.setflags(write=False)
        return counts

    @property
    def size(self) -> int:
        return int(self.counts.sum())

    @property
    def max_users(self) -> int | None:
        """No limit with replacement; else the number of records."""
        return None if self.replace else self.size

    def distribution(self) -> np.ndarray:
        """The population's empirical distribution."""
        return self.counts / self.size

    def _sample_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # counts per value directly: the cost follows the domain, not the number of users
        if self.replace:
            return rng.multinomial(n, self.distribution())
        if n > self.size:
            raise DataError(
                f"asks for {n} users but the population has {self.size} records",
                field="users",
                hint=f"use at most {self.size} users or set replace = true",
            )
        return rng.multivariate_hypergeometric(self.counts, n)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.permutation(np.repeat(np.arange(self.domain.size), self._sample_counts(n, rng)))


def read_shipped(name: str, columns: list[str]) -> list[np.ndarray]:
    """Integer columns of a counts file shipped in this package's data folder (``#`` lines are its provenance)."""
    with as_file(files(__package__) / "data" / name) as path:
        table = Table(Path(path), comment="#")
        positions = table.positions(columns, fields=["path"] * len(columns))
        parts: list[list[np.ndarray]] = [[] for _ in columns]
        for start, texts in table.chunks(positions):
            for part, text, column in zip(parts, texts, columns, strict=True):
                part.append(numbers(text, table, start, column, integer=True))
    return [np.concatenate(p) for p in parts]
