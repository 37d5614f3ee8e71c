"""The metric contract: (estimate, truth, domain) to a number."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .domains import Domain
from .params import Configurable


class Metric(Configurable):
    """Base class of error metrics. Subclasses implement :meth:`_compute`."""

    kind: ClassVar[str] = "metric"

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        raise NotImplementedError

    def __call__(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        estimate = np.asarray(estimate, dtype=float)
        truth = np.asarray(truth, dtype=float)
        if estimate.shape != (domain.size,) or truth.shape != (domain.size,):
            raise ValueError(f"metric '{self.name}' needs two vectors of length {domain.size}")
        return float(self._compute(estimate, truth, domain))
