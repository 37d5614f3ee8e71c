"""The statistics of an audit (:mod:`ldpsim.theory.audit`): one-sided binomial bounds, the eps bound
they give for an event, and what a number of draws can show at best.

With N draws from each of two inputs and an event S, Clopper-Pearson bounds on ``P(S | x)`` (lower)
and ``P(S | x')`` (upper) give a lower bound on ``log P(S | x) / P(S | x')``, hence on eps.
:func:`reachable` and :func:`draws_needed` compute, from expected counts, the best bound a mechanism
exactly at its claim could show, so an audit too small to be informative is refused before it runs.
"""

from __future__ import annotations

import math

import numpy as np

from ..model.domains import Domain
from ..model.privacy import Privacy

#: distances tried when computing what draws can show for a geo claim
MAX_SCALES = 64


def clopper_pearson(hits: np.ndarray, n: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds on a binomial probability from ``hits`` of ``n``, each at level ``alpha``.

    ``P(p < lower) <= alpha`` and ``P(p > upper) <= alpha``. Real-valued ``hits``
    interpolate (used to compute what expected counts would show).
    """
    return _cp_lower(hits, n, alpha), _cp_upper(hits, n, alpha)


def _cp_lower(hits: np.ndarray, n: float, alpha: float) -> np.ndarray:
    from scipy.special import betaincinv  # here, not at import: `import ldpsim` stays fast

    hits = np.asarray(hits, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(hits > 0, betaincinv(hits, n - hits + 1, alpha), 0.0)


def _cp_upper(hits: np.ndarray, n: float, alpha: float) -> np.ndarray:
    from scipy.special import betaincinv  # here, not at import: `import ldpsim` stays fast

    hits = np.asarray(hits, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(hits < n, betaincinv(hits + 1, n - hits, 1 - alpha), 1.0)


def ratio_bound(hits_x: np.ndarray, hits_y: np.ndarray, n: float, alpha: float) -> np.ndarray:
    """Lower bound on log(P(S|x) / P(S|x')) from an event's hits among ``n`` draws of each (confidence 1 - 2 alpha)."""
    with np.errstate(divide="ignore"):
        return np.log(_cp_lower(hits_x, n, alpha)) - np.log(_cp_upper(hits_y, n, alpha))


def wilson_ratio_bound(hits_x: np.ndarray, hits_y: np.ndarray, n: float, alpha: float) -> np.ndarray:
    """:func:`ratio_bound` with Wilson score bounds: a fast approximation, to rank candidate events."""
    from scipy.special import ndtri  # here, not at import: `import ldpsim` stays fast

    z = float(ndtri(1 - alpha))

    def wilson(hits: np.ndarray, sign: float) -> np.ndarray:
        p = hits / n
        centre = p + z * z / (2 * n)
        spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return (centre + sign * spread) / (1 + z * z / n)

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(np.log(wilson(hits_x, -1.0)) - np.log(wilson(hits_y, 1.0)), nan=-np.inf)


def reachable_bound(level: float, draws: int, alpha: float) -> float:
    """The largest bound ``draws`` draws per value can show, from expected counts, for a pair at log-ratio ``level``.

    The events of a pair at level L have ``P(S|x) <= e^L P(S|x')`` and, for the
    complement, ``P(S|x') <= 1/(1 + e^L)``; the best is searched over those with
    equality in the first (expected counts, Clopper-Pearson at ``alpha`` each side).
    """
    from scipy.special import expit  # here, not at import: `import ldpsim` stays fast

    if level <= 0:
        return 0.0
    top = draws * float(expit(-level))  # expected hits of x' at the largest P(S|x')
    if top <= 0:  # e^-level underflows: the best event is one x' never gives and x always does
        return max(0.0, float(ratio_bound(np.array([float(draws)]), np.array([0.0]), draws, alpha)[0]))
    hits_y = np.geomspace(min(1e-3, top), top, 400)
    hits_x = np.minimum(hits_y * math.exp(min(level, 700.0)), draws)
    return max(0.0, float(ratio_bound(hits_x, hits_y, draws, alpha).max()))


def reachable(privacy: Privacy, domain: Domain, draws: int, alpha: float) -> float:
    """:func:`reachable_bound` for a claim: per unit distance, best over the domain's distances, for a geo claim."""
    if privacy.notion != "geo":
        return reachable_bound(privacy.eps, draws, alpha)
    distances = domain.distances
    scales = np.unique(distances[distances > 0])
    if scales.size > MAX_SCALES:  # the bound per unit distance varies smoothly with the distance
        scales = scales[np.unique(np.linspace(0, scales.size - 1, MAX_SCALES).round().astype(int))]
    # as Python floats: eps d overflows to inf (a level no draws reach) without numpy's warning
    return max(reachable_bound(privacy.eps * d, draws, alpha) / d for d in scales.tolist())


def draws_needed(privacy: Privacy, domain: Domain, alpha: float, reach: float) -> int | None:
    """Fewest draws per value (2 significant digits, rounded up) for which :func:`reachable` gets to ``reach``;
    None beyond 10^15."""
    lo, hi = 1, 2
    while reachable(privacy, domain, hi, alpha) < reach:
        lo, hi = hi, hi * 2
        if hi > 10**15:
            return None
    while hi - lo > max(1, hi // 1000):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reachable(privacy, domain, mid, alpha) >= reach else (mid, hi)
    scale = 10 ** max(0, len(str(hi)) - 2)
    return -(-hi // scale) * scale
