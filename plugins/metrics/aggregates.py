"""Errors of the aggregates of 002 Sec. III-A, per user, from an estimated histogram.

A linear aggregate S = sum_i f(X_i) of n users is n * sum_x f(x) theta_x, so its error per user
is |sum_x f(x) (estimate_x - truth_x)|. The MMSE of S is the histogram's posterior mean pushed
through f (002 eq. 10), so these metrics score the MMSE of each application directly. A run
records one error; the MSE of 002 is the mean of its square over repetitions (or set
``squared = true`` and average), times n^2 for the unnormalised sum.
"""

from __future__ import annotations

import numpy as np

from ldpsim import Domain, Metric, Param, ParameterError, hookimpl


class _Aggregate(Metric):
    squared = Param("bool", False, doc="return the squared error: its mean over repetitions is the MSE of S / n")

    def _weights(self, domain: Domain) -> np.ndarray:
        raise NotImplementedError

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        error = float(self._weights(domain) @ (estimate - truth))
        return error * error if self.squared else abs(error)


class Mean(_Aggregate):
    """Error of the average value (002 summation, S = (1/N) sum X_i): |sum_x x (estimate_x - truth_x)|, integers."""

    name = "mean"
    domain_kinds = ("integers",)
    scores = ("distribution", "mean")  # a mean's estimate too (numeric-mean): the error reads only the mean
    units = "distance"  # the values' unit (the domain's ``unit``, e.g. years)

    def value_units(self) -> str:
        return "distance²" if self.squared else "distance"

    def _weights(self, domain: Domain) -> np.ndarray:
        return np.asarray(domain.coords()["value"], dtype=float)


class Linear(_Aggregate):
    """Error of a linear aggregate (002 survey, summation, weighted summation): |sum_x w_x (estimate_x - truth_x)|.

    ``weights`` gives f(x) per domain value: the indicator of one value for a survey (the
    count of users holding it), the values for a summation, a*x + b for a weighted
    summation (b cancels: estimate and truth both sum to 1, so the error is |a| times the
    summation's). 002's per-user weights a_i, b_i are not representable: users within a
    cohort are exchangeable and a histogram cannot tell them apart.
    """

    name = "linear"
    weights = Param("vector", doc="f(x) for each domain value, in domain order (one weight per value)")

    def _check_domain(self, domain: Domain) -> None:
        if self.weights.size != domain.size:
            raise ParameterError(
                f"has {self.weights.size} entries, the domain has {domain.size} values",
                field="weights",
                hint="give metric 'linear' one weight per domain value, in domain order",
            )

    def _weights(self, domain: Domain) -> np.ndarray:
        return np.asarray(self.weights, dtype=float)


@hookimpl
def register_metrics(register):
    register(Mean)
    register(Linear)
