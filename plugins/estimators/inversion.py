"""Matrix inversion estimators INV-N and INV-P (001 Sec. IX): post-processed unbiased estimates."""

from __future__ import annotations

import numpy as np

from ldpsim import Estimator, Observations, hookimpl, project_simplex, unbiased_estimate


class InvN(Estimator):
    """INV-N: an unbiased estimate (q A^-1, or the mechanism's own), negatives set to 0, then normalized."""

    name = "inv-n"
    inverts_matrices = True

    def _estimate(self, observations: Observations) -> np.ndarray:
        v = np.clip(unbiased_estimate(observations), 0.0, None)
        if v.sum() <= 0:
            return np.full(v.size, 1.0 / v.size)
        return v / v.sum()


class InvP(Estimator):
    """INV-P: an unbiased estimate (q A^-1, or the mechanism's own), projected onto the simplex."""

    name = "inv-p"
    inverts_matrices = True

    def _estimate(self, observations: Observations) -> np.ndarray:
        return project_simplex(unbiased_estimate(observations))


@hookimpl
def register_estimators(register):
    register(InvN)
    register(InvP)
