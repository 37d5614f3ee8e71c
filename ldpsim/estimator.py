"""The estimator contract: observations in, a distribution over the domain out."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from .engine import Likelihood
from .observations import Observations
from .params import Configurable


@dataclass(frozen=True)
class Estimate:
    """An estimated distribution with diagnostics.

    ``loglik`` is L(distribution) for the observations, whatever the estimator,
    so estimators can be compared on the likelihood they reach.
    """

    distribution: np.ndarray
    iterations: int = 0
    loglik: float = math.nan
    converged: bool = True
    seconds: float = 0.0


class Estimator(Configurable):
    """Base class of estimators. Subclasses implement :meth:`_estimate`."""

    kind: ClassVar[str] = "estimator"

    def _estimate(self, observations: Observations) -> Estimate | np.ndarray:
        raise NotImplementedError

    def estimate(self, observations: Observations) -> Estimate:
        """Estimate the distribution of the users' true values; timed and checked."""
        if not isinstance(observations, Observations):
            raise TypeError("estimate() needs an Observations instance")
        start = time.perf_counter()
        result = self._estimate(observations)
        seconds = time.perf_counter() - start
        if not isinstance(result, Estimate):
            result = Estimate(np.asarray(result, dtype=float))
        dist = np.asarray(result.distribution, dtype=float)
        size = observations.domain.size
        if dist.shape != (size,) or not np.all(np.isfinite(dist)) or dist.min() < -1e-9 or abs(dist.sum() - 1) > 1e-6:
            raise ValueError(f"{self!r} returned something that is not a distribution over {size} values")
        dist = np.clip(dist, 0.0, None)
        dist /= dist.sum()
        dist.setflags(write=False)
        loglik = result.loglik
        if math.isnan(loglik):
            loglik = Likelihood.of(observations).loglik(dist)
        return replace(result, distribution=dist, loglik=loglik, seconds=seconds)
