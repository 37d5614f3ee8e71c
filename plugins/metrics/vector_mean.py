"""The error of an estimated mean vector (numeric tuples): the mean over attributes of the squared error.

It reads the ``vector_mean`` output of the ``vector-mean`` estimator (NaN for estimators without one, and a
scenario pairing it with one is refused): a distribution over the cells says nothing about the papers'
unbiased means, which may leave the range.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ldpsim import Domain, Metric, Product, hookimpl


class VectorMeanMSE(Metric):
    """Mean over the attributes of the squared error of the estimated mean (vector_mean), in squared value units"""

    name = "vector-mean-mse"
    domain_kinds = ("product",)
    reads = ("vector_mean",)
    scores = ("vector-mean",)  # only an estimator that gives vector_mean: of any other, the score is NaN

    def _check_domain(self, domain: Domain) -> None:
        assert isinstance(domain, Product)
        domain.require_attribute_kinds(
            ("integers",), field="metrics", hint="vector-mean-mse scores means of numeric (integers) attributes"
        )

    def _compute_from(
        self, estimate: np.ndarray, truth: np.ndarray, domain: Domain, outputs: Mapping[str, np.ndarray]
    ) -> float:
        assert isinstance(domain, Product)
        means = np.asarray(outputs["vector_mean"], dtype=float).reshape(-1)
        true = np.array(
            [
                domain.marginal(truth, j) @ np.asarray(p.coords()["value"], dtype=float)
                for j, p in enumerate(domain.parts)
            ]
        )
        if means.shape != true.shape:
            return float("nan")
        return float(np.mean((means - true) ** 2))


@hookimpl
def register_metrics(register):
    register(VectorMeanMSE)
