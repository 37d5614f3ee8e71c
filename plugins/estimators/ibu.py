"""The (generalized) iterative Bayesian update."""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from ldpsim import (
    DEFAULT_DELTA,
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    EMResult,
    Estimate,
    IntervalEstimator,
    Likelihood,
    Observations,
    Param,
    ParameterError,
    Uncertainty,
    binomial_smoothing,
    check_start,
    gibu,
    hookimpl,
    mle_uncertainty,
    newton_mle,
)


class IBU(IntervalEstimator):
    """Generalized IBU (001 Algorithm 1): the MLE for any mix of mechanisms and repeated reports."""

    name = "ibu"
    maximizes_likelihood = True  # a pooled per-plan estimate gets its certificate from estimate()
    stop = Param(
        "str",
        "delta",
        choices=("delta", "kkt"),
        doc="stopping rule: delta, the paper's |L(t) - L(t-1)| < delta; kkt, the exact MLE certified by "
        "a relative KKT violation below tol",
    )
    delta = Param(
        "float", DEFAULT_DELTA, gt=0, doc="stop when |L(t) - L(t-1)| < delta (nats of the whole log-likelihood)"
    )
    tol = Param(
        "float",
        DEFAULT_TOL,
        gt=0,
        doc="with stop = kkt: stop when max_x dL/dtheta_x / n - 1 < tol, so L(MLE) - L(estimate) <= n log(1 + tol)",
    )
    accelerate = Param(
        "str",
        "none",
        choices=("none", "squarem"),
        doc="none: plain EM updates; squarem: extrapolated (monotone) updates",
    )
    max_iter = Param("int", DEFAULT_MAX_ITER, ge=0, doc="stop after this many updates (converged = false)")
    start = Param("distribution", None, doc="full-support starting distribution (default uniform)")
    likely = Param("bool", True, doc="estimate on the mechanism's likely subset of values (004 Sec. 8), zero elsewhere")
    smoothing = Param(
        "str",
        "none",
        choices=("none", "ems"),
        doc="none: GIBU; ems: EM with a smoothing step (Li et al., SIGMOD 2020), the binomial kernel (1, 2, 1) / 4 "
        "applied after every update, for smooth distributions on integers (not the MLE; stop = delta, no acceleration)",
    )
    per_plan = Param(
        "bool",
        False,
        doc="one GIBU per report plan, mixed by their users (cohorts drawn from different distributions); "
        "false: one distribution for everyone, 001's model",
    )

    def _validate(self) -> None:
        if self.smoothing != "none" and (self.stop != "delta" or self.accelerate != "none"):
            raise ParameterError(
                f"{self.smoothing} cannot be combined with stop = {self.stop} and accelerate = {self.accelerate}:"
                " EMS does not reach the MLE",
                field="smoothing",
                hint='use the ibu estimator with stop = "delta" and accelerate = "none"',
            )
        if self.start is not None:
            check_start(self.start, self.start.size)  # a zero would exclude that value forever

    def check_setup(self, domain, plans) -> None:
        if self.smoothing != "none" and domain.name != "integers":
            raise ParameterError(
                f"{self.smoothing} smooths between neighbouring values: it needs an integers domain, not {domain.name}",
                field="smoothing",
                hint='use smoothing = "none" on this domain',
            )
        if self.start is not None:
            check_start(self.start, domain.size)  # one entry per value of this point's domain

    @property
    def stopping_rule(self) -> str:
        return self.stop

    def reads_passes(self) -> bool:
        """GIBU reads its likelihood through passes alone: not per plan (that needs the groups), not round by
        round, without intervals (the Fisher information and the bootstrap read the reports)."""
        return not self.per_plan and self.rounds == "all" and not self.intervals

    def _analytic_uncertainty(self, observations: Observations, estimate: Estimate) -> Uncertainty | None:
        """The observed information at the estimate, on its face of the simplex (the pooled model's only)."""
        if (self.per_plan and len(observations.groups) > 1) or self.smoothing != "none":
            return None  # a smoothed estimate is no MLE: its Fisher information says nothing
        return mle_uncertainty(observations, estimate.distribution)

    def _point_estimate(self, observations: Observations) -> Estimate:
        if not self.per_plan or len(observations.groups) < 2:
            return self._gibu(observations)
        # 001's model has every user drawn from one distribution; when cohorts differ (their own
        # datasets, local priors) that model is wrong and its MLE is biased however many users
        # report. Each plan's users are one cohort's sample: estimate each, weight by size.
        parts = [(g.n, self._gibu(Observations(observations.domain, [g]))) for g in observations.groups]
        # an array: there are at least two groups, so sum's start (0) is added to one
        theta = cast(np.ndarray, sum(n * part.distribution for n, part in parts) / observations.n)
        return Estimate(
            theta,
            iterations=max(part.iterations for _, part in parts),
            loglik=math.nan,  # the pooled model's L(theta) is filled in by Estimator.estimate
            converged=all(part.converged for _, part in parts),
            rule=self.stop,  # the pooled model's certificate is filled in by Estimator.estimate
        )

    def _gibu(self, observations: Observations) -> Estimate:
        # smoothing spreads mass to neighbours: it needs the whole ordered domain
        support = observations.likely_subset() if self.likely and self.smoothing == "none" else None
        likelihood = Likelihood.of(observations, support)
        start = self.start
        if start is not None and support is not None:
            start = start[support] / start[support].sum()
        result = self._solve(likelihood, start)
        return Estimate(
            likelihood.expand(result.theta),
            result.iterations,
            result.loglik,
            result.converged,
            rule=result.rule,
            kkt=result.kkt,
            gap=result.gap,
        )

    def _solve(self, likelihood: Likelihood, start: np.ndarray | None) -> EMResult:
        return gibu(
            likelihood,
            start,
            delta=self.delta,
            max_iter=self.max_iter,
            stop=self.stop,
            tol=self.tol,
            accelerate=self.accelerate,
            smooth=binomial_smoothing if self.smoothing == "ems" else None,
        )


class MLE(IBU):
    """The exact MLE, certified by a KKT violation that proves L within n log(1 + tol) of the maximum.

    By default a second-order (interior-point Newton) solver, which needs tens of passes where EM
    needs thousands; EM accelerated by SQUAREM with ``solver = "em"``, and as its fallback.
    """

    name = "mle"
    stop = Param("str", "kkt", choices=("delta", "kkt"), doc="stopping rule (see ibu); kkt: the certified MLE")
    accelerate = Param(
        "str", "squarem", choices=("none", "squarem"), doc="none: plain EM; squarem: extrapolated updates"
    )
    max_iter = Param("int", 1_000_000, ge=0, doc="stop after this many updates (converged = false)")
    solver = Param(
        "str",
        "newton",
        choices=("newton", "em"),
        doc="newton: interior-point Newton steps with the dense Hessian where it is affordable, SQUAREM "
        "otherwise (with stop = kkt); em: GIBU with the accelerate scheme",
    )

    def _solve(self, likelihood: Likelihood, start: np.ndarray | None) -> EMResult:
        if self.solver == "newton" and self.stop == "kkt":
            return newton_mle(likelihood, start, tol=self.tol, max_iter=self.max_iter)
        return super()._solve(likelihood, start)


@hookimpl
def register_estimators(register):
    register(IBU)
    register(MLE)
