"""Norm-Sub post-processing of an unbiased estimate (Wang et al., NDSS 2020)."""

from __future__ import annotations

import numpy as np

from ldpsim import InversionEstimator, hookimpl


def norm_sub(v: np.ndarray) -> np.ndarray:
    """Set negative entries to 0 and shift the positive ones by a common delta until they sum to 1.

    Wang et al.'s iterative procedure; its fixed point max(v + delta, 0) is the Euclidean
    projection onto the simplex, so it agrees with ``inv-p`` (computed by sorting instead).
    """
    v = np.asarray(v, dtype=float)
    active = np.ones(v.size, dtype=bool)
    while True:  # at most |X| rounds: each round removes at least one value
        delta = (1.0 - v[active].sum()) / active.sum()
        shifted = v + delta
        negative = active & (shifted < 0)
        if not negative.any():
            return np.where(active, shifted, 0.0)
        active &= ~negative


class NormSub(InversionEstimator):
    """Norm-Sub (Wang et al., NDSS 2020): an unbiased estimate, negatives zeroed, positives shifted to sum to 1."""

    name = "norm-sub"

    def _postprocess(self, unbiased: np.ndarray) -> np.ndarray:
        return norm_sub(unbiased)


@hookimpl
def register_estimators(register):
    register(NormSub)
