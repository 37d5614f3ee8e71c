"""002's utility measure, the average MSE E/N of one run, from an estimated histogram.

002 (Sec. V) plots sqrt(E/N), E the mean squared error of the aggregate S over N users: a
linear aggregate S = sum_i f(X_i) (survey, summation, weighted summation) or the histogram
S_k = #{i : X_i = k} with E = E||S - S_hat||^2 (Sec. III, eq. after "second order norm").
With S = N sum_x f(x) theta_x, one run's (S - S_hat)^2 / N is N (f . (estimate - truth))^2,
and N ||estimate - truth||^2 for the histogram. Its mean over repetitions estimates E/N;
the paper's number is the square root of that mean (a square root per run would average to
a smaller, biased value). N is a parameter because a metric sees distributions, not counts:
give the scenario's ``users``.
"""

from __future__ import annotations

import numpy as np

from ldpsim import Domain, Metric, Param, ParameterError, hookimpl


class AverageMSE(Metric):
    """002's E/N of one run: N (f . (estimate - truth))^2, or N ||estimate - truth||^2 for a histogram."""

    name = "avg-mse"
    users = Param("int", ge=1, doc="N, the scenario's number of users (a metric only sees distributions)")
    aggregate = Param(
        "str",
        "sum",
        choices=("sum", "histogram"),
        doc="sum: S = sum_i f(X_i) with f = weights (default the values); histogram: the counts of every value",
    )
    weights = Param("vector", None, doc="f(x) per domain value for aggregate = sum (default: the values, integers)")

    def _check_domain(self, domain: Domain) -> None:
        if self.aggregate != "sum":
            return
        if self.weights is None and domain.name != "integers":
            raise ParameterError(
                f"needs numeric values, the domain is {domain.name}",
                field="weights",
                hint='give weights (one f(x) per domain value) or aggregate = "histogram"',
            )
        if self.weights is not None and self.weights.size != domain.size:
            raise ParameterError(
                f"has {self.weights.size} entries, the domain has {domain.size} values",
                field="weights",
                hint="give one weight per domain value, in domain order",
            )

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        diff = estimate - truth
        if self.aggregate == "histogram":
            return self.users * float(diff @ diff)
        f = np.asarray(domain.coords()["value"], float) if self.weights is None else np.asarray(self.weights, float)
        error = float(f @ diff)
        return self.users * error * error


@hookimpl
def register_metrics(register):
    register(AverageMSE)
