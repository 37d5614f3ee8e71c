"""The exact maximum-likelihood estimate for k-ary randomized response."""

from __future__ import annotations

import numpy as np

from ldpsim import EstimationError, Estimator, Observations, hookimpl, rr_parameters


def water_fill(counts: np.ndarray, p: float, q: float) -> np.ndarray:
    """argmax over the simplex of sum_z c_z log(q + (p - q) theta_z), in closed form.

    KKT: theta_z = max(c_z / lam - t, 0) with t = q / (p - q) and lam fixed by
    sum theta = 1. On the support S (the largest counts), lam = sum_S c / (1 + |S| t);
    S is the largest top-m set whose m-th count still exceeds lam_m t.
    """
    t = q / (p - q)
    order = np.argsort(-counts, kind="stable")
    sorted_counts = counts[order].astype(float)
    m = np.arange(1, counts.size + 1)
    lam = np.cumsum(sorted_counts) / (1 + m * t)
    support = np.flatnonzero(sorted_counts > lam * t)
    size = support[-1] + 1
    theta = np.maximum(counts / lam[size - 1] - t, 0.0)
    return theta / theta.sum()


class KrrMLE(Estimator):
    """Exact MLE for one k-RR report per user, in closed form from the KKT conditions (water-filling)."""

    name = "krr-mle"
    maximizes_likelihood = True  # its certificate (from estimate()) shows the closed form is the MLE

    def check_setup(self, domain, plans) -> None:
        _rr_parameters(set(plans))

    def _estimate(self, observations: Observations) -> np.ndarray:
        params = _rr_parameters({group.plan for group in observations.groups})
        group = observations.groups[0]
        counts = np.bincount(group.reports[:, 0], weights=group.counts, minlength=observations.domain.size)
        return water_fill(counts, *params)


def _rr_parameters(plans: set) -> tuple[float, float]:
    """(p, q) of the one k-RR mechanism every user reports through once; refused otherwise."""
    # The derivation needs every user to send one report through one randomized-response matrix
    # (Pinzon et al., AAAI 2026, derive the same estimator; we derive it from the KKT conditions).
    mech = next(iter(plans))[0] if len(plans) == 1 and len(next(iter(plans))) == 1 else None
    params = rr_parameters(mech.matrix) if mech is not None else None
    if params is None:
        raise EstimationError(
            "krr-mle needs every user to send one report through the same k-RR mechanism",
            hint="use ibu for other mechanisms, mixed populations or repeated reports",
        )
    return params


@hookimpl
def register_estimators(register):
    register(KrrMLE)
