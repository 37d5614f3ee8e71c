"""Range-query and quantile errors over an ordered domain (Cormode, Kulkarni & Srivastava, VLDB 2019).

* ``range-mse``: the mean squared error of range answers (the share of users whose value lies in
  ``[a, b]``) over ``queries`` ranges covering ``volume`` of the domain (the papers' 0.1 .. 0.9), their
  starts uniform; the ranges are drawn from a Generator seeded by the metric's ``seed``, the domain's
  size and the range length, so every estimate of a sweep is scored on the same ranges.
* ``range-answers``: the answers of given ranges (``ranges``, leaf indices) and their truth, stored per
  estimate as ``range_answer`` and ``range_truth`` over a ``query`` dimension; its score is the share
  of those ranges whose interval (``range_lower``, ``range_upper``, which ``range-mle`` gives for the
  same ranges) holds the true answer, NaN for an estimator that gives no range intervals.
* ``quantile-error``: the mean over ``quantiles`` (default 0.1 .. 0.9) of ``|v_hat - v|`` in the domain's
  value units, ``v`` the smallest value whose cumulative frequency reaches the quantile; the estimated
  quantiles themselves are a declared output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ldpsim import TASK, Domain, Metric, Param, ParameterError, Variable, hookimpl

#: the quantiles of quantile-error by default (the papers' deciles)
DECILES = tuple(round(0.1 * i, 1) for i in range(1, 10))
#: cumulative sums within this of a quantile count as reaching it (rounding in the estimate's sum)
CDF_TOL = 1e-12


def random_ranges(size: int, volume: float, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` leaf indices of ``queries`` ranges of ``max(1, round(volume size))`` leaves each.

    Parameters
    ----------
    size
        The number of leaves.
    volume
        The share of the domain a range covers, in (0, 1].
    queries
        How many ranges.
    seed
        Seeds the Generator (with ``size`` and the length): the same ranges for every estimate.

    Returns
    -------
    tuple of numpy.ndarray
        First and last leaf of each range (inclusive), starts uniform over the possible ones.
    """
    length = max(1, min(size, round(volume * size)))
    rng = np.random.default_rng(np.random.SeedSequence([seed, size, length]))
    low = rng.integers(0, size - length + 1, size=queries)
    return low, low + length - 1


def leaf_ranges(ranges: np.ndarray | None, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` leaf indices of a ``ranges`` parameter (rows ``[low, high]``), checked against ``size``.

    Parameters
    ----------
    ranges
        ``(S, 2)`` first and last leaf index of each range (inclusive), whole numbers.
    size
        The number of leaves.

    Returns
    -------
    tuple of numpy.ndarray
        The int64 first and last leaves.

    Raises
    ------
    ParameterError
        Naming ``ranges``, if a row is not two whole numbers with ``0 <= low <= high < size``.
    """
    got = np.asarray([] if ranges is None else ranges, dtype=float)
    if got.ndim != 2 or got.shape[0] == 0 or got.shape[1] != 2:
        raise ParameterError(
            f"must be a list of [low, high] rows, got shape {got.shape}",
            field="ranges",
            hint="e.g. [[0, 99], [100, 4095]]",
        )
    bad = np.flatnonzero(
        (got != np.round(got)).any(axis=1) | (got[:, 0] < 0) | (got[:, 0] > got[:, 1]) | (got[:, 1] >= size)
    )
    if bad.size:
        low, high = got[bad[0]]
        raise ParameterError(
            f"range [{low:g}, {high:g}] is not inside the domain's leaves 0..{size - 1}",
            field="ranges",
            hint=f"give whole leaf indices 0 <= low <= high <= {size - 1}",
        )
    return got[:, 0].astype(np.int64), got[:, 1].astype(np.int64)


def range_answers(theta: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The frequency of every range ``[low, high]`` (inclusive leaf indices): sums of its leaves."""
    cdf = np.concatenate([[0.0], np.cumsum(np.asarray(theta, dtype=float))])
    return np.asarray(cdf[np.asarray(high) + 1] - cdf[np.asarray(low)])


def quantile_values(theta: np.ndarray, values: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """The smallest value whose cumulative frequency reaches each quantile (``values`` in domain order)."""
    cdf = np.cumsum(np.asarray(theta, dtype=float))
    at = np.searchsorted(cdf, np.asarray(quantiles) - CDF_TOL, side="left")
    return np.asarray(values)[np.minimum(at, cdf.size - 1)]


def domain_values(domain: Domain) -> np.ndarray:
    """The domain's values as floats, in domain order (the integers themselves)."""
    return np.asarray(domain.coords()["value"], dtype=np.float64)


class RangeMSE(Metric):
    """Mean squared error of range answers over random ranges covering a given share of the domain"""

    name = "range-mse"
    domain_kinds = ("integers",)
    volume = Param("float", 0.1, gt=0, le=1, doc="share of the domain each range covers (the papers' 0.1 .. 0.9)")
    queries = Param("int", 200, ge=1, doc="how many random ranges the MSE averages over")
    seed = Param("int", 0, ge=0, doc="seeds the ranges (with the domain's size and the range length)")

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        low, high = random_ranges(domain.size, self.volume, self.queries, self.seed)
        diff = range_answers(estimate - truth, low, high)
        return float(np.mean(diff * diff))


class RangeAnswers(Metric):
    """The answers of given ranges with their truth; scored by how often their intervals hold the truth"""

    name = "range-answers"
    long_name = "share of ranges whose interval holds the truth"
    domain_kinds = ("integers",)
    ranges = Param("matrix", doc="the ranges, rows [low, high] of leaf indices (inclusive; 0 is the domain's low)")
    reads = ("range_lower", "range_upper")
    outputs = (
        Variable(
            "range_answer",
            ("estimator", TASK, "query"),
            "the estimate's answer of each range: the share of users in it",
            source="metric",
            optional=True,
            description="the rows of the metric's ranges, in order; range_lower and range_upper (range-mle) bound it",
        ),
        Variable(
            "range_truth",
            ("estimator", TASK, "query"),
            "the true share of users in each range",
            source="metric",
            optional=True,
        ),
    )

    def _check_domain(self, domain: Domain) -> None:
        leaf_ranges(self.ranges, domain.size)

    def _compute_from(
        self, estimate: np.ndarray, truth: np.ndarray, domain: Domain, outputs: Mapping[str, np.ndarray]
    ) -> float:
        lower, upper = outputs["range_lower"], outputs["range_upper"]
        low, high = leaf_ranges(self.ranges, domain.size)
        if lower.shape != low.shape or upper.shape != low.shape or np.isnan(lower).any() or np.isnan(upper).any():
            return float("nan")  # no intervals, or the estimator's are of other ranges
        answer = range_answers(truth, low, high)
        return float(np.mean((lower <= answer) & (answer <= upper)))

    def _outputs(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> Mapping[str, Any]:
        low, high = leaf_ranges(self.ranges, domain.size)
        return {"range_answer": range_answers(estimate, low, high), "range_truth": range_answers(truth, low, high)}


class QuantileError(Metric):
    """Mean absolute error of the estimated quantiles, in the domain's value units"""

    name = "quantile-error"
    domain_kinds = ("integers",)
    quantiles = Param("vector", None, doc="the quantiles, each in (0, 1) (default 0.1, 0.2, .., 0.9)")
    outputs = (
        Variable(
            "quantiles_estimated",
            ("estimator", TASK, "quantile"),
            "the estimate's quantiles, in value units",
            source="metric",
            optional=True,
        ),
    )

    def _levels(self) -> np.ndarray:
        return np.asarray(DECILES if self.quantiles is None else self.quantiles, dtype=float)

    def _check_domain(self, domain: Domain) -> None:
        q = self._levels()
        if q.size == 0 or not np.all((q > 0) & (q < 1)):
            raise ParameterError(
                f"must be numbers in (0, 1), got {q.tolist()}", field="quantiles", hint="e.g. [0.1, 0.5, 0.9]"
            )

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        values = domain_values(domain)
        q = self._levels()
        return float(np.mean(np.abs(quantile_values(estimate, values, q) - quantile_values(truth, values, q))))

    def _outputs(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> Mapping[str, Any]:
        values = domain_values(domain)
        return {"quantiles_estimated": quantile_values(estimate, values, self._levels())}


@hookimpl
def register_metrics(register: Callable[[type], None]) -> None:
    register(RangeMSE)
    register(RangeAnswers)
    register(QuantileError)
