"""The literature's per-attribute estimates for tuple protocols, as baselines on the same reports.

Each attribute's marginal is the protocol's unbiased aggregator (SPL, SMP, RS+FD: the
papers' formulas, :meth:`ldpsim.TupleMechanism.marginal_estimates`), post-processed onto
the simplex as the peers do. The peers estimate no joint; the joint this estimator returns
is the product of the marginals (the independence assumption implicit in using them
alone), so its marginals are exactly the post-processed per-attribute estimates and the
joint error shows what treating attributes separately costs when they are dependent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ldpsim import Estimator, Observations, Param, ParameterError, TupleMechanism, hookimpl, project_simplex

POST = ("normalize", "project", "none")


def _post(v: np.ndarray, how: str) -> np.ndarray:
    if how == "project":
        return project_simplex(v)
    clipped = np.clip(v, 0.0, None)
    if how == "none" or clipped.sum() <= 0:
        return clipped / clipped.sum() if clipped.sum() > 0 else np.full(v.size, 1.0 / v.size)
    return clipped / clipped.sum()


class Marginals(Estimator):
    """Per-attribute unbiased marginals of a tuple protocol (the peers' aggregators); joint = their product"""

    name = "marginals"
    post = Param(
        "str",
        "normalize",
        choices=POST,
        doc="post-processing of each marginal: normalize (clip negatives, rescale: multi-freq-ldpy's), "
        "project (onto the simplex, as inv-p), none (clip negatives only, then rescale the joint)",
    )

    def check_setup(self, domain: object, plans: Sequence[tuple[object, ...]]) -> None:
        for plan in plans:
            if len(plan) != 1 or not isinstance(plan[0], TupleMechanism):
                raise ParameterError(
                    f"needs one tuple-protocol report per user, got plan {list(plan)}",
                    hint="use spl, smp, rsfd or rsrfd in every cohort, or estimate the joint with ibu/mle",
                )

    def _estimate(self, observations: Observations) -> np.ndarray:
        total: list[np.ndarray] | None = None
        for group in observations.groups:
            mech = group.plan[0]
            assert isinstance(mech, TupleMechanism)
            got = mech.marginal_estimates(group.reports, group.counts)
            if got is None:
                raise ParameterError(
                    f"{mech.name} gives no per-attribute estimate", field="estimators", hint="use ibu or mle"
                )
            weight = group.n / observations.n  # each plan's users are a sample of the population
            total = [weight * g for g in got] if total is None else [t + weight * g for t, g in zip(total, got)]
        assert total is not None
        joint = np.ones(1)
        for v in total:
            joint = np.multiply.outer(joint, _post(v, self.post)).ravel()
        return joint


@hookimpl
def register_estimators(register):
    register(Marginals)
