"""Coverage: are the intervals honest? The share of values whose interval holds the true frequency."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ldpsim import Domain, Metric, hookimpl


class Coverage(Metric):
    """Coverage: the share of values whose confidence interval (lower, upper) holds the true frequency.

    Averaged over repetitions it estimates the intervals' real confidence, to hold against their
    nominal level. NaN for an estimator that gives no intervals (set its ``intervals = true``).
    """

    name = "coverage"
    long_name = "share of values whose interval holds the truth"
    reads = ("lower", "upper")

    def _compute_from(
        self, estimate: np.ndarray, truth: np.ndarray, domain: Domain, outputs: Mapping[str, np.ndarray]
    ) -> float:
        lower, upper = outputs["lower"], outputs["upper"]
        if np.isnan(lower).any() or np.isnan(upper).any():
            return float("nan")
        return float(np.mean((lower <= truth) & (truth <= upper)))


@hookimpl
def register_metrics(register):
    register(Coverage)
