"""Range-query and quantile errors over an ordered domain (Cormode, Kulkarni & Srivastava, VLDB 2019).

* ``range-mse``: the mean squared error of range answers (the share of users whose value lies in
  ``[a, b]``) over ``queries`` ranges covering ``volume`` of the domain (the papers' 0.1 .. 0.9), their
  starts uniform; the ranges are drawn from a Generator seeded by the metric's ``seed``, the domain's
  size and the range length, so every estimate of a sweep is scored on the same ranges.
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
    register(QuantileError)
