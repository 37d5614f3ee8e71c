"""CMS / HCMS reports decoded over a candidate dictionary: the exact MLE over candidates + "other".

Apple's server ranks a dictionary by the sketch's debiased counts. Here the dictionary's channel
(:class:`~ldpsim_plugins.mechanisms.sketch_channels.CMSLevel`, :class:`~ldpsim_plugins.mechanisms.sketch_channels.HCMSLevel`)
gives the exact MLE over the candidates plus one lumped value (:func:`ldpsim_plugins.estimators.heavy_hitters.level_mle`).

A pass of that likelihood costs (used hashes) x (candidates): at Apple's CMS size (65,536 hashes) and a
dictionary of 2^16 words that is 4.3 x 10^9 bucket look-ups per EM pass. :func:`dictionary_mle` therefore
solves on a *working set* and certifies the result for the whole dictionary:

1. screen: every candidate's hit count ``sum_d n_d hit_d(x)`` (Apple's sketch count before debiasing), one
   blockwise pass; the ``work`` largest form the working set W;
2. the exact MLE over W + "other" (the non-dictionary values, with the uniform-bucket row; nothing when the
   dictionary is ``complete``), the candidates outside W held at zero;
3. the optimality check: at that MLE the log-likelihood's slope towards candidate x outside W is
   ``sum_d n_d L_dx / L_d(theta) - n`` (L the rows over the shift); if no slope exceeds ``kkt_tol n`` the
   MLE over W, with zeros elsewhere, is the MLE over the whole dictionary to that tolerance (KKT: a zero
   coordinate is optimal iff its slope is <= 0); else the largest violators join W (at most doubling it)
   and step 2 repeats.

Each check is one blockwise pass over (used hashes) x (dictionary), the solve only over W.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpsim import FoundItems, ParameterError

from ..mechanisms.sketch_channels import CMSLevel, HashFamily, HCMSLevel
from .heavy_hitters import LevelEstimate, level_mle, prune

#: the working set's size: a pass over it costs (used hashes) x 256 bucket look-ups (CMS) or, for HCMS, a dense
#: (reports x 256) float32 product or two transforms; it grows where candidates outside violate optimality
WORK = 256
#: the largest working set the loop grows to: beyond, the MLE is returned uncertified (a (used hashes x 4,096)
#: bucket table is 1 GB at Apple's CMS size)
MAX_WORK = 4096
#: rounds of the working-set loop before the result is returned uncertified
MAX_ROUNDS = 8
#: an excluded candidate violates optimality when its slope exceeds this share of the users
KKT_TOL = 1e-4
#: relative KKT tolerance of the MLE over the working set: HCMS's flat likelihoods take EM hundreds of passes
#: (and Newton a few hundred steps) from 1e-4 to 1e-6, for changes far below the estimates' standard errors
TOL = 1e-4
#: the oracles a dictionary is decoded from
ORACLES: dict[str, type[CMSLevel] | type[HCMSLevel]] = {"cms": CMSLevel, "hcms": HCMSLevel}


@dataclass
class DictionaryFit:
    """The MLE over a dictionary + "other": frequencies (zeros outside the working set), upper bounds, the
    lumped mass, the working set, and whether the optimality check passed for every candidate."""

    frequency: np.ndarray
    upper: np.ndarray
    other: float
    working: np.ndarray
    certified: bool
    rounds: int


def oracle_channel(oracle: str) -> type[CMSLevel] | type[HCMSLevel]:
    """The channel class of ``"cms"`` or ``"hcms"`` (ParameterError naming ``oracle`` otherwise)."""
    if oracle not in ORACLES:
        raise ParameterError(f"is '{oracle}'", field="oracle", hint=f"use one of {', '.join(ORACLES)}")
    return ORACLES[oracle]


def dictionary_mle(
    oracle: str,
    candidates: np.ndarray,
    eps: float,
    family: HashFamily,
    reports: np.ndarray,
    counts: np.ndarray,
    *,
    work: int = WORK,
    level: float = 0.95,
    bounds: bool = True,
    kkt_tol: float = KKT_TOL,
    tol: float = TOL,
    complete: bool = False,
) -> DictionaryFit:
    """The exact MLE over ``candidates`` + "other" from CMS/HCMS reports, on a certified working set.

    Parameters
    ----------
    oracle : str
        ``"cms"`` or ``"hcms"``.
    candidates : numpy.ndarray
        The dictionary (distinct uint64 values).
    eps : float
        The sketch's privacy level.
    family : HashFamily
        The sketch's hashes.
    reports, counts : numpy.ndarray
        Distinct reports and their counts.
    work : int
        Size of the working set (the whole dictionary when it is smaller).
    level : float
        Confidence level of the upper bounds.
    bounds : bool
        Compute upper bounds (for the ``"ucb"`` rule).
    kkt_tol : float
        An excluded candidate whose log-likelihood slope exceeds ``kkt_tol`` times the users joins the set.
    tol : float
        Relative KKT tolerance of the MLE over the working set.
    complete : bool
        The dictionary is every value that exists ("other" holds nothing; SFP's keys).

    Returns
    -------
    DictionaryFit
        The estimate over the whole dictionary.
    """
    cls = oracle_channel(oracle)
    candidates = np.asarray(candidates, dtype=np.uint64)
    if work < 1:
        raise ParameterError(f"is {work}", field="work", hint="use a working set of at least one candidate")
    c = candidates.size
    counts = np.asarray(counts, dtype=float)
    n = float(counts.sum())
    if c <= work:
        theta, upper = level_mle(
            cls(candidates, eps, family, complete), reports, counts, level=level, tol=tol, bounds=bounds
        )
        return DictionaryFit(theta[:-1], upper[:-1], float(theta[-1]), np.arange(c), True, 1)
    probe = cls(candidates[:1], eps, family)
    scores = probe.hit_scores(candidates, reports, counts[None, :])[0]
    working = np.sort(np.argsort(-scores, kind="stable")[:work])
    r, z = probe.r, _normal_quantile((1 + level) / 2)
    for rounds in range(1, MAX_ROUNDS + 1):
        channel = cls(candidates[working], eps, family, complete)
        theta, upper = level_mle(channel, reports, counts, level=level, tol=tol, bounds=bounds)
        parts = channel.structured_likelihood(reports)
        assert parts is not None  # the sketch channels always have one
        den = parts[1] @ theta  # L_d(theta), the rows over the shift
        outside = np.setdiff1d(np.arange(c), working, assume_unique=True)
        u = counts / den
        weights = [u]
        if bounds:  # curvature: sum n_d (L_dx - den)^2 / den^2, L_dx = r + (1 - r) hit, hit^2 = hit
            a, b = r - den, 1 - r
            weights.append(counts * (2 * a * b + b * b) / den**2)
        hits = probe.hit_scores(candidates[outside], reports, np.stack(weights))
        slope = r * u.sum() + (1 - r) * hits[0] - n
        frequency, up = np.zeros(c), np.zeros(c)
        frequency[working], up[working] = theta[:-1], upper[:-1]
        if bounds:
            curvature = np.maximum(float(np.sum(counts * (r - den) ** 2 / den**2)) + hits[1], 1e-300)
            s = np.minimum(slope, 0.0)
            up[outside] = np.minimum((s + np.sqrt(s**2 + curvature * z**2)) / curvature, 1.0)
        else:
            up[:] = np.nan
        violators = outside[slope > kkt_tol * n]
        if violators.size == 0:
            return DictionaryFit(frequency, up, float(theta[-1]), working, True, rounds)
        if working.size >= max(MAX_WORK, work):
            break
        room = min(working.size, max(MAX_WORK, work) - working.size)  # at most doubling
        worst = violators[np.argsort(-slope[slope > kkt_tol * n], kind="stable")[:room]]
        working = np.sort(np.concatenate([working, worst]))
    return DictionaryFit(frequency, up, float(theta[-1]), working, False, rounds)


def _normal_quantile(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def dictionary_heavy_hitters(
    oracle: str,
    candidates: np.ndarray,
    eps: float,
    family: HashFamily,
    reports: np.ndarray,
    counts: np.ndarray | None = None,
    *,
    k: int = 64,
    rule: str = "topk",
    threshold: float = 0.01,
    cap: int | None = None,
    level: float = 0.95,
    work: int = WORK,
) -> FoundItems:
    """The frequent words of a dictionary from CMS/HCMS reports: the exact MLE over candidates + "other", pruned.

    Parameters
    ----------
    oracle : str
        ``"cms"`` or ``"hcms"``.
    candidates : numpy.ndarray
        The dictionary (distinct uint64 values).
    eps : float
        The sketch's privacy level.
    family : HashFamily
        The sketch's hashes.
    reports : numpy.ndarray
        The users' reports (``cms_reports`` / ``hcms_reports``), one per user or distinct ones with ``counts``.
    counts : numpy.ndarray or None
        Counts of distinct reports (None: one per row).
    k : int
        The top-k rule's size.
    rule, threshold, cap, level
        As for :func:`ldpsim_plugins.estimators.heavy_hitters.pem_heavy_hitters` (``cap`` defaults to ``k``).
    work : int
        The working-set size of :func:`dictionary_mle`.

    Returns
    -------
    FoundItems
        The kept candidates by estimated frequency, their bounds, and the one level.
    """
    from .heavy_hitters import check_rule

    check_rule(rule, threshold)
    candidates = np.asarray(candidates, dtype=np.uint64)
    if np.unique(candidates).size != candidates.size:
        raise ParameterError("holds repeated values", field="candidates", hint="give each candidate once")
    if counts is None:
        reports, counts = distinct_reports(reports)
    fit = dictionary_mle(oracle, candidates, eps, family, reports, counts, work=work, level=level, bounds=rule == "ucb")
    kept = prune(fit.frequency, fit.upper, rule=rule, k=k, threshold=threshold, cap=cap or k)
    bits = int(math.ceil(math.log2(max(int(candidates.max()) + 1, 2)))) if candidates.size else 0
    estimate = LevelEstimate(bits, candidates, fit.frequency, fit.upper, fit.other, kept)
    return FoundItems(candidates[kept], fit.frequency[kept], fit.upper[kept], [estimate])


def distinct_reports(reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct report rows and their counts."""
    uniq, counts = np.unique(np.asarray(reports, dtype=np.int64), axis=0, return_counts=True)
    return uniq, counts
