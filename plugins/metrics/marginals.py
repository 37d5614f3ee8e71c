"""Errors on a product domain's marginals: what the tuple-protocol literature reports."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ldpsim import Domain, Metric, Param, ParameterError, Product, hookimpl


class _OverMarginals(Metric):
    """The mean over sets of attributes of a score of (estimated - true) marginal: subclasses say which sets
    (:meth:`_subsets`) and which score (:meth:`_score`)."""

    domain_kinds = ("product",)

    def _subsets(self, d: int) -> list[tuple[int, ...]]:
        return [(j,) for j in range(d)]

    def _score(self, difference: np.ndarray) -> float:
        raise NotImplementedError

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        assert isinstance(domain, Product)
        both = np.stack([estimate, truth])
        return float(
            np.mean([self._score(np.subtract(*domain.marginal(both, s))) for s in self._subsets(len(domain.parts))])
        )


class MarginalTV(_OverMarginals):
    """Mean over the attributes of the total variation between estimated and true marginals"""

    name = "marginal-tv"
    long_name = "mean marginal total variation"

    def _score(self, difference: np.ndarray) -> float:
        return float(0.5 * np.abs(difference).sum())


class MarginalMSE(_OverMarginals):
    """Mean over the attributes of the mean squared error of the marginal frequencies (the peers' MSE_avg)"""

    name = "marginal-mse"
    long_name = "mean marginal squared error"

    def _score(self, difference: np.ndarray) -> float:
        return float(np.mean(difference**2))


class KWayTV(MarginalTV):
    """Mean over every set of k attributes of the total variation between estimated and true k-way marginals"""

    name = "kway-tv"
    long_name = "mean k-way marginal total variation"
    k = Param("int", 2, ge=1, doc="attributes per marginal (k = d: the joint's TV)")

    def _check_domain(self, domain: Domain) -> None:
        assert isinstance(domain, Product)
        if self.k > len(domain.parts):
            raise ParameterError(
                f"k = {self.k} exceeds the domain's {len(domain.parts)} attributes",
                field="k",
                hint=f"choose k between 1 and {len(domain.parts)}",
            )

    def _subsets(self, d: int) -> list[tuple[int, ...]]:
        return list(combinations(range(d), self.k))


@hookimpl
def register_metrics(register):
    register(MarginalTV)
    register(MarginalMSE)
    register(KWayTV)
