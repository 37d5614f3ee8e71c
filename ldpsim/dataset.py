"""The dataset contract: the true values of n users over a domain."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .domains import OnDomain


class Dataset(OnDomain):
    """Base class of datasets. Subclasses implement :meth:`_sample`.

    A dataset backed by a fixed set of records (a file) sets :attr:`size`;
    a scenario that does not give ``users`` then uses all of them.
    """

    kind: ClassVar[str] = "dataset"

    @property
    def size(self) -> int | None:
        """Number of records, or None for a generative dataset."""
        return None

    def distribution(self) -> np.ndarray | None:
        """The population's distribution over the domain, if known (a prior for
        prior-aware mechanisms and estimators: ``prior = "dataset"`` in a scenario)."""
        return None

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """True values of ``n`` users, as domain indices."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator, e.g. numpy.random.default_rng(seed)")
        if int(n) != n or n < 1:
            raise ValueError("n must be a positive integer")
        values = np.asarray(self._sample(int(n), rng))
        if values.shape != (n,) or (values.size and (values.dtype.kind not in "iu" or values.min() < 0 or values.max() >= self.domain.size)):
            raise ValueError(f"{self!r}._sample must return {n} domain indices")
        return values.astype(np.int64, copy=False)
