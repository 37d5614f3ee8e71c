"""The literature's range-query pipelines, as baselines on the reports of ``hh`` and ``haar-hrr``.

``range-ci`` runs the published pipeline of the protocol that sent the reports:

* ``hh`` (Cormode, Kulkarni & Srivastava, VLDB 2019; Wang et al.'s HIO, SIGMOD 2019): each level's
  unbiased node frequencies from its own reports (the level oracle's estimate: ``(C / n_l - q) / (p - q)``
  for k-RR, OUE's and OLH's own), made consistent across levels by Hay et al.'s constrained inference
  (VLDB 2010; :func:`constrained_inference`), then the leaves made non-negative by Norm-Sub.
* ``haar-hrr`` (HaarHRR, Cormode et al. 2019): each level's Haar coefficients unbiased from the Hadamard
  reports (``v_hat = W sigma_counts / (n_l (2 p - 1))``, W the Walsh-Hadamard transform), the leaves
  rebuilt from the root's mass 1 down (consistent by construction), then Norm-Sub.

Both give the leaf histogram ldpsim scores (an estimate is a distribution: the non-negativity step is
not optional here; without it, the papers' unbiased range answers have no clipping bias). The joint
MLE (``ibu`` / ``mle`` on the same reports) needs neither step (docs/theory/ranges.md).

``range-mle`` is the joint MLE (``mle``) that also bounds the answers of given ranges: Wald intervals
from the Fisher information on the MLE's face (:func:`ldpsim.linear_intervals`, matrix-free: any number of
leaves), stored as ``range_lower`` and ``range_upper`` beside the ``range-answers`` metric's answers and
truth. :func:`range_interval` gives one range's answer and interval from any MLE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from ldpsim import (
    TASK,
    Domain,
    Estimate,
    Estimator,
    Mechanism,
    Observations,
    Param,
    ParameterError,
    Variable,
    hookimpl,
    linear_intervals,
    make_domain,
    unbiased_estimate,
)

from ..metrics.ranges import leaf_ranges
from .ibu import MLE

#: the non-negativity steps of the baselines
POST = ("tree", "leaves")


def constrained_inference(levels: Sequence[np.ndarray], branching: int) -> list[np.ndarray]:
    """Hay et al.'s consistent tree from noisy node frequencies of equal variance, the root fixed at 1.

    Weighted averaging bottom-up, ``z_v = a_i y_v + (1 - a_i) sum_children z_u`` with
    ``a_i = (b^i - b^(i-1)) / (b^i - 1)`` at height i (leaves i = 1, ``z = y``), then mean consistency
    top-down, ``x_v = z_v + (x_parent - sum_siblings z) / b``, from the root's known total 1. The
    result is the least-squares tree (every parent the sum of its children) nearest the estimates.

    Parameters
    ----------
    levels
        ``levels[l - 1]`` the ``b^l`` estimated frequencies of level l's nodes, l = 1..h (left to right).
    branching
        b >= 2.

    Returns
    -------
    list of numpy.ndarray
        The consistent frequencies of the same levels.
    """
    b = int(branching)
    if b < 2:
        raise ParameterError(f"must be >= 2, got {branching}", field="branching", hint="use a tree with b >= 2")
    h = len(levels)
    y = [np.asarray(v, dtype=float) for v in levels]
    for lv, v in enumerate(y, start=1):
        if v.shape != (b**lv,):
            raise ValueError(f"level {lv} needs {b**lv} node estimates, got shape {v.shape}")
    z = [v.copy() for v in y]
    for lv in range(h - 1, 0, -1):  # height i = h - lv + 1 >= 2
        i = h - lv + 1
        a = (b**i - b ** (i - 1)) / (b**i - 1)
        z[lv - 1] = a * y[lv - 1] + (1 - a) * z[lv].reshape(-1, b).sum(axis=1)
    out: list[np.ndarray] = []
    parent = np.ones(1)
    for lv in range(1, h + 1):
        sums = z[lv - 1].reshape(-1, b).sum(axis=1)
        parent = z[lv - 1] + np.repeat((parent - sums) / b, b)
        out.append(parent)
    return out


def norm_sub(v: np.ndarray, total: np.ndarray | float = 1.0) -> np.ndarray:
    """Norm-Sub (Wang et al. 2020): ``max(v - delta, 0)`` with delta such that the result sums to ``total``.

    Row by row on a 2-D ``v`` (``total`` one number per row, at least 0): the non-negative vector nearest
    ``v`` in L2 with that sum.
    """
    v = np.asarray(v, dtype=float)
    rows = np.atleast_2d(v)
    goal = np.broadcast_to(np.asarray(total, dtype=float), rows.shape[:1])
    s = -np.sort(-rows, axis=1)
    tops = (np.cumsum(s, axis=1) - goal[:, None]) / np.arange(1, s.shape[1] + 1)
    last = s.shape[1] - 1 - np.argmax((s - tops > 0)[:, ::-1], axis=1)  # the largest prefix staying above delta
    out = np.maximum(rows - tops[np.arange(rows.shape[0]), last][:, None], 0.0)
    out[goal <= 0] = 0.0
    return out.reshape(v.shape)


def tree_norm_sub(levels: Sequence[np.ndarray], branching: int) -> np.ndarray:
    """Non-negative leaves from a consistent tree, top-down: each node's children Norm-Sub'ed to sum to the
    node's (already non-negative) mass, so every node keeps the mass its parent's step gave it."""
    parent = np.ones(1)
    for v in levels:
        parent = norm_sub(np.asarray(v, dtype=float).reshape(-1, branching), parent).ravel()
    return parent


def range_interval(
    observations: Observations, theta: np.ndarray, low: int, high: int, level: float = 0.95
) -> tuple[float, float, float]:
    """``(answer, lower, upper)`` of the range of leaf indices ``low..high`` from an MLE ``theta``.

    The answer is the sum of the range's leaves: a linear statistic, whose Wald interval comes from the
    Fisher information on the MLE's face (:func:`ldpsim.linear_intervals`, without forming it: any domain
    size). NaN bounds where the data cannot tell the face's values apart.

    Parameters
    ----------
    observations
        The reports the MLE was computed from.
    theta
        The MLE (its certificate should be checked by the caller: the interval assumes a maximum).
    low, high
        The range's first and last leaf index, ``0 <= low <= high < |X|``.
    level
        Confidence level in (0, 1).

    Returns
    -------
    tuple of float
        The answer and its interval.
    """
    size = observations.domain.size
    check_range(low, high, size)
    weights = np.zeros(size)
    weights[low : high + 1] = 1.0
    value, lower, upper = linear_intervals(observations, np.asarray(theta, dtype=float), weights, level)
    return float(value), float(lower), float(upper)


def range_weights(low: np.ndarray, high: np.ndarray, size: int) -> np.ndarray:
    """``(S, size)``: row s is 1 on the leaves ``low[s]..high[s]``, 0 elsewhere (a range as a linear statistic)."""
    leaves = np.arange(size)
    return ((leaves >= np.asarray(low)[:, None]) & (leaves <= np.asarray(high)[:, None])).astype(float)


def check_range(low: int, high: int, size: int) -> None:
    """A one-line ParameterError unless ``0 <= low <= high < size``."""
    if not 0 <= low <= high < size:
        raise ParameterError(
            f"range [{low}, {high}] is not inside the domain's leaves 0..{size - 1}",
            field="range",
            hint=f"give 0 <= low <= high <= {size - 1}",
        )


class RangePipeline(Estimator):
    """The published pipeline of each range protocol: HH/HIO's consistency or Haar's rebuild, then Norm-Sub"""

    name = "range-ci"
    post = Param(
        "str",
        "tree",
        choices=POST,
        doc="non-negativity: tree (Norm-Sub of each node's children to the node's mass, top-down: coarse ranges "
        "keep their consistent answers), leaves (Norm-Sub of the leaves alone, to sum 1)",
    )

    def check_setup(self, domain: Domain, plans: Sequence[tuple[Mechanism, ...]]) -> None:
        for plan in plans:
            if len(plan) != 1 or plan[0].name not in PIPELINES:
                raise ParameterError(
                    f"needs one hh or haar-hrr report per user, got plan {list(plan)}",
                    field="estimators",
                    hint="use hh or haar-hrr in every cohort, or estimate with ibu/mle",
                )

    def _estimate(self, observations: Observations) -> np.ndarray:
        total: list[np.ndarray] = []
        branching = 2
        for group in observations.groups:
            mech = group.plan[0]
            branching = int(cast(Any, mech).b)  # an hh or haar-hrr (check_setup): plugins know each other by name
            got = PIPELINES[mech.name](mech, group.reports, np.asarray(group.counts, dtype=float))
            share = group.n / observations.n
            total = [share * g for g in got] if not total else [t + share * g for t, g in zip(total, got)]
        if self.post == "leaves":
            return norm_sub(total[-1])
        return tree_norm_sub(total, branching)


#: what range-mle adds to the results: the bounds of its ranges' answers (the answers and truth are range-answers')
RANGE_OUTPUTS = (
    Variable(
        "range_lower",
        ("estimator", TASK, "query"),
        "lower confidence bound of each range's answer",
        optional=True,
        description="Wald bound from the Fisher information on the MLE's face; NaN unless the MLE is certified"
        " (KKT below tol) and the information tells its values apart",
    ),
    Variable(
        "range_upper",
        ("estimator", TASK, "query"),
        "upper confidence bound of each range's answer",
        optional=True,
        description="Wald bound from the Fisher information on the MLE's face; NaN unless the MLE is certified",
    ),
)


class RangeMLE(MLE):
    """The joint MLE over every level's reports, with confidence intervals of given ranges' answers"""

    name = "range-mle"
    outputs = (*MLE.outputs, *RANGE_OUTPUTS)
    ranges = Param(
        "matrix",
        None,
        doc="ranges whose answers get intervals, rows [low, high] of leaf indices (inclusive); the same rows as "
        "the range-answers metric's, which stores the answers and the truth",
    )

    def check_setup(self, domain: Domain, plans: Sequence[tuple[Mechanism, ...]]) -> None:
        super().check_setup(domain, plans)
        if self.ranges is not None:
            leaf_ranges(self.ranges, domain.size)

    def _estimate(self, observations: Observations) -> Estimate:
        result = super()._estimate(observations)
        if self.ranges is None:
            return result
        size = observations.domain.size
        low, high = leaf_ranges(self.ranges, size)
        lower = upper = np.full(low.size, np.nan)
        if result.converged and result.kkt < self.tol:  # intervals only around a certified maximum
            theta = np.clip(np.asarray(result.distribution, dtype=float), 0.0, None)
            _, lower, upper = linear_intervals(
                observations, theta / theta.sum(), range_weights(low, high, size), self.confidence
            )
        return replace(result, extras={**result.extras, "range_lower": lower, "range_upper": upper})


def hierarchical_levels(mech: Mechanism, reports: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """HH/HIO: each level's unbiased node frequencies (its oracle's estimate from its own reports), made
    consistent by :func:`constrained_inference`; levels 1..h (they may be negative)."""
    tree: Any = mech  # an hh mechanism (its class is another plugin's: known by its attributes)
    b, h = int(tree.b), int(tree.depth)
    levels = []
    for lv in range(1, h + 1):
        rows = np.flatnonzero(reports[:, 0] == lv)
        if not counts[rows].sum():  # nobody at this level: the uniform split, a guess that CI outweighs
            levels.append(np.full(b**lv, 1.0 / b**lv))
            continue
        oracle: Mechanism = tree.level_oracle(lv)
        sub = reports[np.ix_(rows, np.arange(1, 1 + oracle.report_width))]
        nodes = make_domain({"kind": "integers", "low": 0, "high": b**lv - 1})
        levels.append(np.asarray(unbiased_estimate(Observations.from_counts(nodes, oracle, sub, counts[rows]))))
    return constrained_inference(levels, b)


def haar_levels(mech: Mechanism, reports: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """HaarHRR: each level's unbiased Haar coefficients ``W sigma_counts / (n_l (2 p - 1))``, the node masses
    rebuilt from the root's 1 down (consistent by construction); levels 1..h (they may be negative)."""
    tree: Any = mech  # a haar-hrr mechanism
    h = int(tree.depth)
    gain = float(np.tanh(tree.eps / 2.0))  # 2 p - 1
    mass = np.ones(1)
    levels = []
    for lv in range(1, h + 1):
        rows = np.flatnonzero(reports[:, 0] == lv)
        m = 1 << (lv - 1)
        users = counts[rows].sum()
        v = np.zeros(m)
        if users:
            sigma = 2.0 * reports[rows, 2] - 1.0
            w = np.bincount(reports[rows, 1], weights=sigma * counts[rows], minlength=m)
            v = tree.walsh(w) / (users * gain)
        mass = np.column_stack([(mass + v) / 2, (mass - v) / 2]).ravel()
        levels.append(mass)
    return levels


#: each protocol's published per-level estimate, by mechanism name
PIPELINES: dict[str, Callable[[Mechanism, np.ndarray, np.ndarray], list[np.ndarray]]] = {
    "hh": hierarchical_levels,
    "haar-hrr": haar_levels,
}


@hookimpl
def register_estimators(register: Callable[[type], None]) -> None:
    register(RangePipeline)
    register(RangeMLE)
