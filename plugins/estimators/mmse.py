"""The MMSE (posterior-mean) estimator of the histogram under known priors (002 eq. 30)."""

from __future__ import annotations

import numpy as np

from ldpsim import (
    Estimate,
    EstimationError,
    Estimator,
    Likelihood,
    Observations,
    Param,
    ParameterError,
    ReportGroup,
    hookimpl,
)


class MMSE(Estimator):
    """Posterior mean of the histogram under known priors (002 eq. 30): (1/n) sum_i P(X_i = x | reports of i)."""

    name = "mmse"
    prior = Param(
        ("distribution", "str"),
        "mechanisms",
        choices=("mechanisms", "local", "dataset"),
        doc='"mechanisms": each plan\'s users have the prior their LIP mechanism declares; "local": each '
        "cohort's own prior, its dataset's distribution (any mechanism; else the one its LIP mechanism "
        'declares); a distribution: one prior for everyone; "dataset" (scenarios): the dataset\'s distribution',
    )

    def _validate(self) -> None:
        if isinstance(self.prior, str) and self.prior == "dataset":
            raise ParameterError(
                'is "dataset", which only a scenario can resolve (to the dataset\'s distribution)',
                field="prior",
                hint='give the prior as a list of numbers, or "mechanisms"',
            )

    def _estimate(self, observations: Observations) -> Estimate:
        size = observations.domain.size
        if isinstance(self.prior, str):  # "mechanisms" or "local": a prior per group of users
            parts = [
                (Observations(observations.domain, [g]), _group_prior(g, self.prior, size)) for g in observations.groups
            ]
        else:
            if self.prior.size != size:
                raise ParameterError(
                    f"has {self.prior.size} entries, the domain has {size} values",
                    field="prior",
                    hint="give one prior probability per domain value",
                )
            parts = [(observations, np.asarray(self.prior))]
        total = np.zeros(size)
        for obs, prior in parts:
            likelihood = Likelihood.of(obs)
            if not np.isfinite(likelihood.loglik(prior)):
                raise EstimationError(
                    f"some report has probability 0 under the prior {np.round(prior, 4).tolist()}",
                    hint="the prior must give positive mass to every value that can produce the observed reports",
                )
            # Users are independent given their priors, so E[S_x | all reports] = sum_i P(X_i = x | reports of i).
            total += likelihood.posterior_sum(prior)
        return Estimate(total / observations.n, iterations=1)


def _group_prior(group: ReportGroup, source: str, size: int) -> np.ndarray:
    """The prior of a group's users: its cohort's known prior (``source = "local"``), else its plan's."""
    if source == "local" and group.prior is not None:
        prior = np.asarray(group.prior, dtype=float)
        if prior.size != size:
            raise EstimationError(f"a cohort's prior has {prior.size} values for a domain of {size}")
        return prior
    return _plan_prior(group.plan, size, source)


def _plan_prior(plan, size: int, source: str = "mechanisms") -> np.ndarray:
    """The prior the plan's mechanisms declare (Privacy.prior); one, shared by all that declare one."""
    priors = {m.privacy.prior for m in plan if m.privacy.prior is not None}
    names = ", ".join(repr(m) for m in plan)
    if not priors:
        raise EstimationError(
            f'mmse with prior = "{source}" needs each plan to declare a prior; plan [{names}] declares none'
            + (" and its cohort has no dataset of its own" if source == "local" else ""),
            hint='give mmse an explicit prior (a list, or "dataset" in a scenario), give the cohort its own dataset'
            ' with prior = "local", or use prior-aware mechanisms',
        )
    if len(priors) > 1:
        raise EstimationError(
            f"the mechanisms of plan [{names}] declare different priors",
            hint="give mmse an explicit prior, or make the plan's mechanisms share one prior",
        )
    prior = np.asarray(priors.pop(), dtype=float)
    if prior.size != size:
        raise EstimationError(f"plan [{names}] declares a prior of {prior.size} values for a domain of {size}")
    return prior


@hookimpl
def register_estimators(register):
    register(MMSE)
