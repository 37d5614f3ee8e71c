"""Distances between the estimated and the true distribution."""

from __future__ import annotations

import numpy as np

from ldpsim import Domain, Integers, Metric, hookimpl


class TotalVariation(Metric):
    """Total variation distance: half the L1 distance."""

    name = "tv"

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        return 0.5 * np.abs(estimate - truth).sum()


class L1(Metric):
    """L1 distance: sum of absolute differences."""

    name = "l1"

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        return np.abs(estimate - truth).sum()


class L2(Metric):
    """L2 (Euclidean) distance."""

    name = "l2"

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        return np.sqrt(((estimate - truth) ** 2).sum())


class EarthMovers(Metric):
    """Earth mover's distance with the domain's distance (1-D: L1 between CDFs times the spacing)."""

    name = "emd"
    long_name = "Earth mover's distance"
    units = "distance"

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        if domain.name == "integers":
            return np.abs(np.cumsum(estimate - truth)).sum() * Integers.of(domain).step
        if domain.name == "categorical":
            return 0.5 * np.abs(estimate - truth).sum()  # every move costs 1: EMD = TV
        import ot  # POT: exact optimal transport; imported only when a grid needs it

        a = estimate / estimate.sum()
        b = truth / truth.sum()
        return ot.emd2(a, b, domain.distances, numItermax=10_000_000)


@hookimpl
def register_metrics(register):
    register(TotalVariation)
    register(L1)
    register(L2)
    register(EarthMovers)
