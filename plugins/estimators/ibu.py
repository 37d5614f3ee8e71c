"""The (generalized) iterative Bayesian update."""

from __future__ import annotations

from ldpsim import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    Estimate,
    Estimator,
    Likelihood,
    Observations,
    Param,
    check_start,
    gibu,
    hookimpl,
)


class IBU(Estimator):
    """Generalized IBU (001 Algorithm 1): the MLE for any mix of mechanisms and repeated reports."""

    name = "ibu"
    tol = Param("float", DEFAULT_TOL, gt=0, doc="stop when |L(t) - L(t-1)| < tol * n (n = number of users)")
    max_iter = Param("int", DEFAULT_MAX_ITER, ge=0, doc="stop after this many updates (converged = false)")
    start = Param("distribution", None, doc="full-support starting distribution (default uniform)")
    likely = Param("bool", True, doc="estimate on the mechanism's likely subset of values (004 Sec. 8), zero elsewhere")

    def _validate(self) -> None:
        if self.start is not None:
            check_start(self.start, self.start.size)  # a zero would exclude that value forever

    def _estimate(self, observations: Observations) -> Estimate:
        support = observations.likely_subset() if self.likely else None
        likelihood = Likelihood.of(observations, support)
        start = self.start
        if start is not None and support is not None:
            start = start[support] / start[support].sum()
        result = gibu(likelihood, start, delta=self.tol * likelihood.n, max_iter=self.max_iter)
        return Estimate(likelihood.expand(result.theta), result.iterations, result.loglik, result.converged)


@hookimpl
def register_estimators(register):
    register(IBU)
