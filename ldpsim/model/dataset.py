"""The dataset contract: the true values of n users over a domain."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..base.arguments import require_generator
from ..base.hooks import overrides
from ..base.memory import require_memory
from .domains import OnDomain


class Dataset(OnDomain):
    """Base class of datasets. Subclasses implement :meth:`_sample`.

    A dataset backed by a fixed set of records (a file) sets :attr:`size`;
    a scenario that does not give ``users`` then uses all of them, and one
    that asks for more than :attr:`max_users` is refused before it runs.

    Simulations only need how many users hold each value
    (:meth:`sample_counts`); a dataset that can draw those counts directly
    (a multinomial for a known distribution, a multivariate hypergeometric for
    records drawn without replacement) overrides :meth:`_sample_counts`, and
    its cost no longer grows with the number of users.
    """

    kind: ClassVar[str] = "dataset"
    #: The boolean parameter that lifts :attr:`max_users` when true (e.g. ``"replace"``:
    #: draw records with replacement), named in the error for too many users; None if none does.
    unlimited_by: ClassVar[str | None] = None

    @property
    def size(self) -> int | None:
        """Number of records, or None for a generative dataset."""
        return None

    @property
    def max_users(self) -> int | None:
        """The most users one draw can hold, or None for no limit.

        Default: :attr:`size`, each record being at most one user. A dataset
        that can draw records with replacement returns None when it does (and
        names the parameter that does it in :attr:`unlimited_by`).
        """
        return self.size

    @property
    def description(self) -> str:
        """Where the values come from, for the results' provenance (default: the configured plugin)."""
        return repr(self)

    def distribution(self) -> np.ndarray | None:
        """The population's distribution over the domain, if known (a prior for
        prior-aware mechanisms and estimators: ``prior = "dataset"`` in a scenario)."""
        return None

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """True values of ``n`` users, as domain indices."""
        require_generator(rng)
        if int(n) != n or n < 1:
            raise ValueError("n must be a positive integer")
        values = np.asarray(self._sample(int(n), rng))
        if values.shape != (n,) or (
            values.size and (values.dtype.kind not in "iu" or values.min() < 0 or values.max() >= self.domain.size)
        ):
            raise ValueError(f"{self!r}._sample must return {n} domain indices")
        return values.astype(np.int64, copy=False)

    def _sample_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Number of users per value; default: count :meth:`sample`'s values (same law, O(n) memory)."""
        self.require_values(n)
        return np.bincount(self.sample(n, rng), minlength=self.domain.size)

    @property
    def draws_values(self) -> bool:
        """Whether :meth:`sample_counts` draws a value per user (the default), its memory growing with the
        users; False for a dataset that draws its counts directly (it overrides ``_sample_counts``)."""
        return not overrides(type(self), Dataset, "_sample_counts")

    def values_bytes(self, n: int) -> int:
        """Bytes that drawing ``n`` values one by one takes (the values and their sorted copy).

        Parameters
        ----------
        n
            The number of users.

        Returns
        -------
        int
            What a simulation's memory check counts for a dataset that :attr:`draws_values`.
        """
        return 2 * 8 * n

    def require_values(self, n: int) -> None:
        """Refuse to draw ``n`` values one by one when they would not fit in memory.

        Parameters
        ----------
        n
            The number of users.

        Raises
        ------
        MemoryLimitError
            When :meth:`values_bytes` exceeds the memory available.
        """
        require_memory(
            self.values_bytes(n),
            f"drawing the values of {n} users one by one from {self!r}",
            hint="use fewer users, or a dataset that draws counts per value (the synthetic ones do)",
        )

    def sample_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """How many of ``n`` users hold each value of the domain: ``(|X|,)`` int64 summing to ``n``.

        Same law as ``bincount(sample(n, rng))``, without a value per user.
        """
        require_generator(rng)
        if int(n) != n or n < 1:
            raise ValueError("n must be a positive integer")
        counts = np.asarray(self._sample_counts(int(n), rng))
        if (
            counts.shape != (self.domain.size,)
            or counts.dtype.kind not in "iu"
            or counts.min() < 0
            or int(counts.sum()) != n
        ):
            raise ValueError(
                f"{self!r}._sample_counts must return {self.domain.size} non-negative counts summing to {n}"
            )
        return counts.astype(np.int64, copy=False)
