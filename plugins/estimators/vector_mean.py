"""The unbiased mean vector of numeric tuples (``duchi-md``, ``pm-sampling``, ``hm-sampling``), as an estimator.

Each of these mechanisms gives, per report, an unbiased estimate of its user's whole vector in the
attributes' own units (``attribute_estimates``); their average is the unbiased mean vector (the papers'
aggregator; for PM/HM the cells' midpoints stand for the continuous reports, ``E[y | cell]``: the same
expectation, a variance no larger). Report plans are combined as ``numeric-mean`` combines them (each
plan's users weighted by their share; a user's several reports averaged). The vector is recorded as the
result variable ``vector_mean(estimator, <sweeps>, rep, attribute)``, with its standard error
``vector_mean_se`` from the spread of the reports.

An estimator returns a distribution: this one gives the product over the attributes of the least-spread
distribution with each attribute's mean (mass on the two values around it, the mean clipped to the
attribute's range). Only ``vector-mean-mse`` (which reads ``vector_mean``) scores what it estimates
(``gives = "vector-mean"``): a scenario pairing it with another metric is refused.
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

from ldpsim import TASK, Estimate, EstimationError, Estimator, Observations, Product, Variable, hookimpl

from .numeric_mean import two_point


class VectorMean(Estimator):
    """The unbiased mean vector of numeric tuples (duchi-md, pm-sampling, hm-sampling); vector-mean-mse only."""

    name = "vector-mean"
    gives = "vector-mean"  # its distribution is a product of two-point stand-ins: only vector-mean-mse scores it
    outputs = (
        Variable(
            "vector_mean",
            ("estimator", TASK, "attribute"),
            "unbiased estimate of each attribute's mean value",
            optional=True,
        ),
        Variable(
            "vector_mean_se",
            ("estimator", TASK, "attribute"),
            "standard error of each attribute's unbiased mean",
            optional=True,
        ),
    )

    def check_setup(self, domain, plans) -> None:
        for plan in plans:
            _vector(plan)

    def _estimate(self, observations: Observations) -> Estimate:
        domain = observations.domain
        if not isinstance(domain, Product):
            raise EstimationError("vector-mean needs a product domain", hint="use duchi-md, pm-sampling or hm-sampling")
        d = len(domain.parts)
        total, variance = np.zeros(d), np.zeros(d)
        n = observations.n
        for group in observations.groups:
            plan = _vector(group.plan)
            counts = np.asarray(group.counts, dtype=float)
            means, spreads = [], []
            start = 0
            for mech in plan:
                per_report = mech.attribute_estimates(group.reports[:, start : start + mech.report_width])
                start += mech.report_width
                mean = counts @ per_report / counts.sum()
                means.append(mean)
                spreads.append(counts @ (per_report - mean) ** 2 / max(counts.sum() - 1, 1))
            share = group.n / n
            total += share * np.mean(means, axis=0)
            # a user's reports are independent given the value: a conservative bound, the plans' average variance
            variance += share**2 * np.mean(spreads, axis=0) / group.n
        return Estimate(
            _product_of_two_points(domain, total),
            extras={"vector_mean": total, "vector_mean_se": np.sqrt(variance)},
        )


def _vector(plan):
    odd = [mech.name for mech in plan if not callable(getattr(mech, "attribute_estimates", None))]
    if odd:
        raise EstimationError(
            f"vector-mean needs vector mean mechanisms (duchi-md, pm-sampling, hm-sampling); the plan uses {', '.join(odd)}",
            hint="use ibu or marginals for tuple protocols of frequency oracles",
        )
    return tuple(plan)


def _product_of_two_points(domain: Product, means: np.ndarray) -> np.ndarray:
    """The product over the attributes of their two-point distributions, over the cells (row-major)."""
    marginals = [
        two_point(np.asarray(part.coords()["value"], dtype=float), float(m)) for part, m in zip(domain.parts, means)
    ]
    joint = reduce(np.multiply.outer, marginals).ravel()
    return joint if math.isclose(joint.sum(), 1.0) else joint / joint.sum()


@hookimpl
def register_estimators(register):
    register(VectorMean)
