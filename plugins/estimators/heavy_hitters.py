"""Heavy hitters found level by level: the exact MLE over candidates plus "everything else", then pruning.

At each level of a heavy-hitter protocol (:mod:`ldpsim_plugins.mechanisms.heavy_hitters`) the server
knows a set of candidate prefixes. The level's channel restricted to them, plus one lumped value that
stands for every other prefix (:class:`~ldpsim_plugins.mechanisms.heavy_hitters.OLHLevel`,
:class:`~ldpsim_plugins.mechanisms.heavy_hitters.HadamardLevel`), is an ordinary mechanism on a
categorical domain of ``c + 1`` values, so ldpsim's engine gives its exact MLE
(:func:`ldpsim.gibu` with SQUAREM, then :func:`ldpsim.newton_mle` where EM crawls; certified to a relative
KKT tolerance either way) and Fisher standard errors
(:func:`ldpsim.mle_uncertainty`). Pruning keeps either the top ``k`` candidates (the papers' rule) or
every candidate whose upper confidence bound reaches ``threshold`` (``rule = "ucb"``), at most ``cap``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpsim import (
    FoundItems,
    Likelihood,
    Mechanism,
    Observations,
    ParameterError,
    gibu,
    mle_uncertainty,
    newton_mle,
)

from ..mechanisms.heavy_hitters import PEM, TreeHist

#: SQUAREM passes before the exact MLE switches to Newton's method: EM certifies most levels within a few
#: dozen passes, but crawls on flat likelihoods (Hadamard response on many reports), where Newton takes ~20 steps
EM_PASSES = 100
#: SQUAREM passes newton_mle may fall back to where a Newton step fails (its default, 10^6, once took 100 s
#: on a 33-value level of TreeHist)
NEWTON_FALLBACK_PASSES = 5000
#: the rules that prune a level's candidates
RULES = ("topk", "ucb")


@dataclass
class LevelEstimate:
    """One level's estimate: its candidates' frequencies, upper bounds, and the lumped "other" mass."""

    length: int
    candidates: np.ndarray
    frequency: np.ndarray
    upper: np.ndarray
    other: float
    kept: np.ndarray


def level_mle(
    channel: Mechanism,
    reports: np.ndarray,
    counts: np.ndarray,
    *,
    level: float = 0.95,
    tol: float = 1e-6,
    bounds: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The exact MLE over a level channel's ``c + 1`` values, and each value's upper confidence bound.

    Parameters
    ----------
    channel : Mechanism
        A level channel (candidates then "other").
    reports, counts : numpy.ndarray
        The level's distinct reports and their counts.
    level : float
        Two-sided confidence level of the bounds (a value's bound is one-sided at ``(1 + level) / 2``).
    tol : float
        Relative KKT tolerance of the MLE.
    bounds : bool
        Compute the upper bounds (the Fisher information of ``c + 1`` values over every distinct report: the
        dearest step of a level); False gives NaN bounds, for the top-k rule, which does not read them.

    Returns
    -------
    tuple
        ``(theta, upper)``: the MLE (sums to 1) and upper bounds. Inside the simplex a bound is Wald's,
        ``theta + z se``; for a value the MLE puts at zero, the largest ``t`` with
        ``slope t - curvature t^2 / 2 >= -z^2 / 2`` (the log-likelihood's quadratic along the path that moves
        mass to it), since the Wald interval there has no width.
    """
    if reports.shape[0] == 0:
        size = channel.domain.size
        return np.full(size, 1.0 / size), np.ones(size)
    obs = Observations.from_counts(channel.domain, channel, reports, counts)
    likelihood = Likelihood(obs)
    fit = gibu(likelihood, stop="kkt", tol=tol, accelerate="squarem", max_iter=EM_PASSES)
    if fit.converged:
        theta = fit.theta
    else:  # Newton from EM's iterate, moved inside the simplex (a zero would exclude its value)
        start = 0.99 * fit.theta + 0.01 / fit.theta.size
        theta = newton_mle(likelihood, start, tol=tol, warm_passes=0, max_iter=NEWTON_FALLBACK_PASSES).theta
    if not bounds:
        return theta, np.full(theta.size, np.nan)
    unc = mle_uncertainty(obs, theta)
    z = _normal_quantile((1 + level) / 2)
    upper = theta + z * np.where(np.isfinite(unc.se), unc.se, 0.0)
    edge = unc.boundary
    if edge.any():
        slope, curv = np.minimum(unc.slope[edge], 0.0), np.maximum(unc.curvature[edge], 1e-300)
        upper[edge] = (slope + np.sqrt(slope**2 + curv * z**2)) / curv
    upper[~np.isfinite(unc.se) & ~edge] = 1.0
    return theta, np.minimum(upper, 1.0)


def _normal_quantile(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def prune(frequency: np.ndarray, upper: np.ndarray, *, rule: str, k: int, threshold: float, cap: int) -> np.ndarray:
    """Indices of the candidates a level keeps, most frequent first.

    Parameters
    ----------
    frequency, upper : numpy.ndarray
        The candidates' estimates and upper bounds (without "other").
    rule : str
        ``"topk"``: the ``k`` largest estimates (PEM's and TreeHist's top-k); ``"ucb"``: every candidate whose
        upper bound reaches ``threshold``, at most ``cap`` of them (largest estimates first).
    k, threshold, cap : int, float, int
        The rules' parameters.

    Returns
    -------
    numpy.ndarray
        Indices into the candidates.
    """
    order = np.argsort(-frequency, kind="stable")
    if rule == "topk":
        return order[:k]
    return order[upper[order] >= threshold][:cap]


def check_rule(rule: str, threshold: float) -> None:
    """A one-line ParameterError unless ``rule`` is a pruning rule and, for ``ucb``, ``threshold`` a frequency."""
    if rule not in RULES:
        raise ParameterError(f"is '{rule}'", field="rule", hint=f"use one of {', '.join(RULES)}")
    if rule == "ucb" and not 0 < threshold < 1:
        raise ParameterError(f"is {threshold}", field="threshold", hint="use a frequency between 0 and 1")


def _run_levels(
    protocol: PEM | TreeHist,
    level_data: list[tuple[np.ndarray, np.ndarray]],
    *,
    rule: str,
    threshold: float,
    cap: int,
    level: float,
) -> tuple[list[LevelEstimate], np.ndarray]:
    candidates = protocol.first_candidates()
    levels: list[LevelEstimate] = []
    for i, (reports, counts) in enumerate(level_data):
        channel = protocol.level(i, candidates)
        theta, upper = level_mle(channel, reports, counts, level=level, bounds=rule == "ucb")
        kept = prune(theta[:-1], upper[:-1], rule=rule, k=protocol.k, threshold=threshold, cap=cap)
        levels.append(LevelEstimate(protocol.lengths()[i], candidates, theta[:-1], upper[:-1], float(theta[-1]), kept))
        if kept.size == 0:  # nothing reaches the threshold: no prefix to extend, nothing found
            return levels, np.zeros(0, dtype=np.uint64)
        if i + 1 < len(level_data):
            candidates = protocol.extend(candidates[np.sort(kept)])
    return levels, candidates[levels[-1].kept]


def pem_heavy_hitters(
    protocol: PEM,
    groups: list[tuple[np.ndarray, np.ndarray]],
    *,
    rule: str = "topk",
    threshold: float = 0.01,
    cap: int | None = None,
    level: float = 0.95,
) -> FoundItems:
    """PEM's heavy hitters: per group, the MLE over its candidates + "other", pruned, then extended.

    Parameters
    ----------
    protocol : PEM
        The protocol the reports came from.
    groups : list of tuple
        ``PEM.sample``'s per-group ``(reports, counts)``.
    rule, threshold : str, float
        The pruning rule (:func:`prune`); ``threshold`` is a frequency.
    cap : int or None
        Most candidates ``"ucb"`` keeps per level (default ``protocol.k``: a level's candidates are then never
        more than ``k 2^step``).
    level : float
        Confidence level of the upper bounds.

    Returns
    -------
    FoundItems
        The last group's kept prefixes (whole values), their frequencies, bounds, and every level.
    """
    check_rule(rule, threshold)
    levels, items = _run_levels(protocol, groups, rule=rule, threshold=threshold, cap=cap or protocol.k, level=level)
    last = levels[-1]
    if items.size == 0:
        return FoundItems(items, np.zeros(0), np.zeros(0), levels)
    return FoundItems(items, last.frequency[last.kept], last.upper[last.kept], levels)


def treehist_heavy_hitters(
    protocol: TreeHist,
    reports: tuple[list[np.ndarray], np.ndarray],
    *,
    rule: str = "topk",
    threshold: float = 0.01,
    cap: int | None = None,
    level: float = 0.95,
) -> FoundItems:
    """TreeHist's heavy hitters: the tree grown level by level, then the found leaves' frequencies estimated
    from the whole-value reports (the MLE over them + "other").

    Parameters
    ----------
    protocol : TreeHist
        The protocol the reports came from.
    reports : tuple
        ``TreeHist.sample``'s ``(levels, words)``.
    rule, threshold, cap, level
        As for :func:`pem_heavy_hitters`.

    Returns
    -------
    FoundItems
        The found items, by frequency.
    """
    check_rule(rule, threshold)
    per_level = [_distinct(r) for r in reports[0]]
    levels, leaves = _run_levels(
        protocol, per_level, rule=rule, threshold=threshold, cap=cap or protocol.k, level=level
    )
    if leaves.size == 0:
        return FoundItems(leaves, np.zeros(0), np.zeros(0), levels)
    theta, upper = level_mle(protocol.words(leaves), *_distinct(reports[1]), level=level, bounds=rule == "ucb")
    order = np.argsort(-theta[:-1], kind="stable")
    return FoundItems(leaves[order], theta[:-1][order], upper[:-1][order], levels)


def _distinct(reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, counts = np.unique(reports, axis=0, return_counts=True)
    return uniq, counts
