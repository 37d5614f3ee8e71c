"""An example ldpsim plugin: one mechanism, one estimator, one dataset and one metric.

Each class implements the hooks of its base class (methods whose names start with ``_``) and
declares its parameters with :class:`ldpsim.Param`, validated at construction. The functions
marked ``@hookimpl`` at the end register the classes; the package's entry point (group
``ldpsim``) names this module.
"""

from __future__ import annotations

import numpy as np

from ldpsim import Dataset, InversionEstimator, Mechanism, Metric, Param, Privacy, hookimpl


class UniformNoise(Mechanism):
    """Report the true value with probability 1 - q, else a value drawn uniformly from the domain."""

    name = "uniform-noise"  # the name scenarios use: { mechanism = "uniform-noise", q = 0.5 }
    q = Param("float", 0.5, gt=0, le=1, doc="probability of replacing the value by a uniform one")

    @property
    def privacy(self) -> Privacy:
        k = self.domain.size
        return Privacy("ldp", float(np.log1p((1 - self.q) * k / self.q)))  # (1 - q + q/k) / (q/k)

    def _matrix(self) -> np.ndarray:  # (|X|, |Z|), rows summing to 1; sampling and likelihoods follow
        k = self.domain.size
        return np.full((k, k), self.q / k) + (1 - self.q) * np.eye(k)


class Floor(InversionEstimator):
    """Matrix inversion, then frequencies below a floor set to zero and the rest renormalized."""

    name = "floor"
    floor = Param("float", 0.0, ge=0, lt=1, doc="frequencies below it become 0")

    def _postprocess(self, unbiased: np.ndarray) -> np.ndarray:
        kept = np.where(unbiased >= max(self.floor, 0.0), unbiased, 0.0)
        total = kept.sum()
        return kept / total if total > 0 else np.full(unbiased.size, 1 / unbiased.size)


class Triangle(Dataset):
    """Values from a triangular distribution over the domain, peaking at the value of index ``mode``."""

    name = "triangle"
    domain_kinds = ("integers",)
    mode = Param("int", 0, ge=0, doc="index of the most frequent value")

    def distribution(self) -> np.ndarray:
        k = self.domain.size
        weights = k - np.abs(np.arange(k) - min(self.mode, k - 1))
        return weights / weights.sum()

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(self.domain.size, size=n, p=self.distribution())

    def _sample_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:  # counts without a value per user
        return rng.multinomial(n, self.distribution())


class MaxError(Metric):
    """Largest absolute error of one value's frequency."""

    name = "max-error"
    long_name = "largest frequency error"
    units = ""  # a frequency: dimensionless ("distance" would mean the domain's unit)

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: object) -> float:
        return float(np.abs(estimate - truth).max())


@hookimpl
def register_mechanisms(register):
    register(UniformNoise)


@hookimpl
def register_estimators(register):
    register(Floor)


@hookimpl
def register_datasets(register):
    register(Triangle)


@hookimpl
def register_metrics(register):
    register(MaxError)
