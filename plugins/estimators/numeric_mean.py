"""The unbiased mean of the numeric mechanisms' literature, as an estimator.

Duchi et al.'s one-bit mechanism, the Piecewise and Hybrid mechanisms (Wang et al., ICDE 2019)
estimate the users' mean as the average report; Square Wave after undoing its affine bias. Each
mechanism's ``unbiased_mean`` does it on output cells (the cells' midpoints, ``E[y | cell]``: the
same expectation, a variance no larger). This estimator combines them over report plans (each
plan's users are an iid sample: weights by size; a user's several reports: their average) and
records the value as the result variable ``numeric_mean``, with its standard error ``numeric_mean_se`` (from
the spread of the reports, sqrt(s^2 / n) per plan).

An estimator returns a distribution: this one gives the least-spread distribution with that
mean, mass on the two domain values around it (the mean clipped to [low, high], which only moves
it toward the truth). The ``mean`` metric scores it as |estimate - true mean|; distances
between distributions (``tv``, ``emd``) say nothing about it, so a scenario pairing them with it
is refused (``gives = "mean"``).
"""

from __future__ import annotations

import math

import numpy as np

from ldpsim import TASK, Estimate, EstimationError, Estimator, NumericMechanism, Observations, Variable, hookimpl


class NumericMean(Estimator):
    """The literature's unbiased mean of numeric mechanisms (Duchi et al., Piecewise, Hybrid, Square Wave); mean metric only."""

    name = "numeric-mean"
    gives = "mean"  # its distribution is a two-point stand-in for the mean: only the mean metric scores it
    outputs = (
        # not "mean": that is the label of the mean metric, whose scores are a variable of that name
        Variable("numeric_mean", ("estimator", TASK), "unbiased estimate of the users' mean value", optional=True),
        Variable("numeric_mean_se", ("estimator", TASK), "standard error of the unbiased mean", optional=True),
    )

    def check_setup(self, domain, plans) -> None:
        for plan in plans:
            _numeric(plan)

    def _estimate(self, observations: Observations) -> Estimate:
        total = variance = 0.0
        n = observations.n
        for group in observations.groups:
            plan = _numeric(group.plan)
            means, spreads = [], []
            for col, mech in enumerate(plan):
                z, inverse = np.unique(group.reports[:, col], return_inverse=True)
                counts = np.bincount(inverse.ravel(), weights=group.counts, minlength=z.size)
                means.append(mech.unbiased_mean(z, counts))
                # the estimate per report, affine in the midpoint: its sample variance
                alpha, beta = mech.mean_response()
                per_report = (mech.midpoints[z] - alpha) / beta * mech.value_scale
                centred = per_report - float(counts @ per_report) / counts.sum()
                spreads.append(float(counts @ centred**2) / max(counts.sum() - 1, 1))
            share = group.n / n
            total += share * float(np.mean(means))
            # a user's reports are independent given the value: a conservative bound, the plans' average variance
            variance += share**2 * float(np.mean(spreads)) / group.n
        return Estimate(
            _two_point(observations, total),
            extras={"numeric_mean": total, "numeric_mean_se": math.sqrt(variance)},
        )


def _numeric(plan) -> tuple[NumericMechanism, ...]:
    if not all(isinstance(mech, NumericMechanism) for mech in plan):
        names = ", ".join(mech.name for mech in plan if not isinstance(mech, NumericMechanism))
        raise EstimationError(
            f"numeric-mean needs numeric mechanisms (duchi, piecewise, hybrid, square_wave); the plan uses {names}",
            hint="use ibu for other mechanisms, and the mean metric on its estimate",
        )
    return tuple(plan)


def _two_point(observations: Observations, mean: float) -> np.ndarray:
    """The distribution on the two domain values around ``mean`` (clipped to the domain) with that mean."""
    return two_point(np.asarray(observations.domain.coords()["value"], dtype=float), mean)


def two_point(values: np.ndarray, mean: float) -> np.ndarray:
    """The distribution on the two of ``values`` (increasing) around ``mean`` (clipped to their range) with that mean."""
    m = min(max(mean, values[0]), values[-1])
    upper = int(np.clip(np.searchsorted(values, m), 1, values.size - 1))
    weight = (m - values[upper - 1]) / (values[upper] - values[upper - 1])
    theta = np.zeros(values.size)
    theta[upper - 1], theta[upper] = 1 - weight, weight
    return theta


@hookimpl
def register_estimators(register):
    register(NumericMean)
