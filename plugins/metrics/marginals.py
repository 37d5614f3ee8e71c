"""Errors on a product domain's marginals: what the tuple-protocol literature reports."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ldpsim import Domain, Metric, Param, ParameterError, Product, hookimpl


def _product(domain: Domain) -> Product:
    assert isinstance(domain, Product)
    return domain


class MarginalTV(Metric):
    """Mean over the attributes of the total variation between estimated and true marginals"""

    name = "marginal-tv"
    long_name = "mean marginal total variation"
    domain_kinds = ("product",)

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        dom = _product(domain)
        both = np.stack([estimate, truth])
        return float(np.mean([0.5 * np.abs(np.subtract(*dom.marginal(both, j))).sum() for j in range(len(dom.parts))]))


class MarginalMSE(Metric):
    """Mean over the attributes of the mean squared error of the marginal frequencies (the peers' MSE_avg)"""

    name = "marginal-mse"
    long_name = "mean marginal squared error"
    domain_kinds = ("product",)

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        dom = _product(domain)
        both = np.stack([estimate, truth])
        return float(np.mean([np.mean(np.subtract(*dom.marginal(both, j)) ** 2) for j in range(len(dom.parts))]))


class KWayTV(Metric):
    """Mean over every set of k attributes of the total variation between estimated and true k-way marginals"""

    name = "kway-tv"
    long_name = "mean k-way marginal total variation"
    domain_kinds = ("product",)
    k = Param("int", 2, ge=1, doc="attributes per marginal (k = d: the joint's TV)")

    def _check_domain(self, domain: Domain) -> None:
        d = len(_product(domain).parts)
        if self.k > d:
            raise ParameterError(
                f"k = {self.k} exceeds the domain's {d} attributes", field="k", hint=f"choose k between 1 and {d}"
            )

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        dom = _product(domain)
        both = np.stack([estimate, truth])
        subsets = list(combinations(range(len(dom.parts)), self.k))
        return float(np.mean([0.5 * np.abs(np.subtract(*dom.marginal(both, s))).sum() for s in subsets]))


@hookimpl
def register_metrics(register):
    register(MarginalTV)
    register(MarginalMSE)
    register(KWayTV)
