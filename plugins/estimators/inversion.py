"""Matrix inversion estimators INV-N and INV-P (001 Sec. IX): post-processed unbiased estimates."""

from __future__ import annotations

import numpy as np

from ldpsim import InversionEstimator, hookimpl, project_simplex


class InvN(InversionEstimator):
    """INV-N: an unbiased estimate (q A^-1, or the mechanism's own), negatives set to 0, then normalized."""

    name = "inv-n"

    def _postprocess(self, unbiased: np.ndarray) -> np.ndarray:
        v = np.clip(unbiased, 0.0, None)
        if v.sum() <= 0:
            return np.full(v.size, 1.0 / v.size)
        return v / v.sum()


class InvP(InversionEstimator):
    """INV-P: an unbiased estimate (q A^-1, or the mechanism's own), projected onto the simplex."""

    name = "inv-p"

    def _postprocess(self, unbiased: np.ndarray) -> np.ndarray:
        return project_simplex(unbiased)


@hookimpl
def register_estimators(register):
    register(InvN)
    register(InvP)
