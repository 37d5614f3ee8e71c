"""The central (eps, delta) guarantee of n users' local reports after a shuffler.

A shuffler hands the analyst the reports without their senders, so n users' eps0-LDP reports
are (eps, delta)-DP for the whole dataset with eps much below eps0 (neighbouring datasets differ
in one user's value, any value). Three bounds:

* ``clones-closed``: Feldman, McMillan & Talwar (FOCS 2021, "Hiding among the clones"),
  Theorem 3.1's closed form ``log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta) / n)
  + 8 e^eps0 / n))``, valid for ``eps0 <= log(n / (16 log(4/delta)))`` (eps0 outside it);
* ``clones``: their numerical bound: the shuffled reports are a post-processing of a pair of
  binomial mixtures (each other user is a "clone" of the victim's two candidate reports with
  probability ``e^-eps0``), whose hockey-stick divergence is computed and inverted in eps by
  bisection;
* ``variation-ratio``: Wang et al. (PVLDB 17(8), 2024, "Privacy amplification via shuffling:
  unified, simplified, and tightened"): the same kind of pair from a mechanism's own parameters
  ``(p, beta, q)`` (:func:`variation_ratio`) instead of its eps0; from eps0 alone the general
  ``p = q = e^eps0, beta = (e^eps0 - 1)/(e^eps0 + 1)``. With a mechanism's own ``beta`` below the
  general one, the paper's pair hides the victim's neutral reports among the others', which is not
  a valid reduction (a k-RR counterexample at n = 2 is in docs/theory/shuffling.md and the tests):
  ldpsim reveals them (a finer observation, so the pair still dominates) and takes the smaller of
  that bound and the general parameters' one. The paper's number is :func:`as_printed_eps`.

All numerical bounds share one exact evaluation (:func:`dominating_delta`): a victim whose report
is of type 0 with probability ``p alpha``, of type 1 with ``alpha`` and neutral otherwise (the
swap on the neighbouring dataset), among ``n - 1`` others each of type 0 or 1 with probability
``r``. The hockey-stick divergence is a sum over the number ``c`` of typed others of binomial
tails (the likelihood ratio is monotone in the type-0 count, so the optimal event is a tail);
``c`` is summed over a window around its mean holding all but ``TAIL_SHARE * delta`` of its
mass, and the mass outside is added to delta, so the answer stays an upper bound. The clones
bound is the case ``alpha = 1/(e^eps0 + 1)``, ``r = e^-eps0 / 2`` (no neutral reports), the
variation-ratio bound ``alpha = beta/(p - 1)``, ``r = alpha p / q``. The smallest eps whose delta
meets the target is found by Brent's method on ``log delta`` over ``log eps`` and checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom

from ..base.errors import ParameterError
from ..model.mechanism import Mechanism

BOUNDS = ("clones-closed", "clones", "variation-ratio")
#: Wang et al.'s pair as printed (the victim's neutral reports hidden among the others'): not a valid bound when
#: beta < (p - 1)/(p + 1) (see the module); only :func:`dominating_delta` computes it, for comparison
PAPER_PAIR = "variation-ratio-as-printed"
#: the window over the typed others' count leaves out at most this share of delta (added to delta)
TAIL_SHARE = 1e-3
#: bisection over eps stops when the bracket is this narrow, relative to its upper end
EPS_RTOL = 1e-6
#: the matrix rows compared at once when computing beta (bounds a (rows, |X|, |Z|) temporary)
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class VariationRatio:
    """A mechanism's variation-ratio parameters (Wang et al. 2024) and where they come from.

    ``p``: the largest ratio ``P(z|x) / P(z|x')``; ``beta``: the largest total variation distance
    between two rows; ``q``: the third-input ratio, the largest ``p/(p - 1) (P(z|x0) - P(z|x1))^+
    / P(z|x)`` over values ``x0, x1, x`` and outputs ``z`` (what lets every other user's report hide
    the victim's, at rate ``r = beta p / ((p - 1) q)``); ``source``: ``matrix`` (exact) or ``eps0``
    (the general values of an eps0-LDP mechanism); ``uniform``: whether every pair of distinct values
    has these beta and q (the bound is not monotone in beta, so only then do they bound every pair).
    """

    p: float
    beta: float
    q: float
    source: str
    #: every pair of distinct values has this same beta and q (k-RR, OUE), so the bound from them holds for each
    uniform: bool = False

    @property
    def eps0(self) -> float:
        """The local level ``log p``."""
        return math.log(self.p)

    def __str__(self) -> str:
        return f"p = e^{self.eps0:.4g}, beta = {self.beta:.4g}, q = e^{math.log(self.q):.4g} (from {self.source})"


@dataclass(frozen=True)
class ShuffleGuarantee:
    """The central guarantee of ``n`` shuffled reports by one bound.

    Attributes
    ----------
    eps, delta, n
        The shuffled reports are (eps, delta)-DP for datasets of ``n`` users differing in one user.
    bound
        One of ``BOUNDS``.
    eps0
        The local level the bound used.
    params
        The variation-ratio parameters it used (``variation-ratio``), else None.
    note
        Why the bound gives only eps0 (outside its regime), else empty.
    """

    eps: float
    delta: float
    n: int
    bound: str
    eps0: float
    params: VariationRatio | None = None
    note: str = ""

    def line(self) -> str:
        """One line: the bound, its central eps and what it used."""
        used = str(self.params) if self.params is not None else f"eps0 = {self.eps0:.4g}"
        note = f" [{self.note}]" if self.note else ""
        return f"{self.bound}: eps = {self.eps:.4g} at delta = {self.delta:.3g}, n = {self.n:,} ({used}){note}"


def check_shuffle(n: object, delta: object) -> tuple[int, float]:
    """``(n, delta)`` validated: an integer ``n >= 2`` and ``0 < delta < 1``; a ParameterError otherwise."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ParameterError(f"users must be an integer >= 2, got {n!r}", field="n", hint="e.g. 1000000")
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise ParameterError(f"delta must be in (0, 1), got {delta!r}", field="delta", hint="e.g. 1e-6")
    return int(n), float(delta)


def check_eps0(eps0: object) -> float:
    """A local level validated: a finite number > 0."""
    if isinstance(eps0, bool) or not isinstance(eps0, int | float) or not (math.isfinite(eps0) and eps0 > 0):
        raise ParameterError(f"eps0 must be a finite number > 0, got {eps0!r}", field="eps0", hint="e.g. 2")
    return float(eps0)


def general_variation_ratio(eps0: float) -> VariationRatio:
    """The parameters every eps0-LDP mechanism has: ``p = q = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)``."""
    eps0 = check_eps0(eps0)
    return VariationRatio(math.exp(eps0), math.tanh(eps0 / 2), math.exp(eps0), "eps0")


def variation_ratio(mechanism: Mechanism) -> VariationRatio:
    """A mechanism's exact ``(p, beta, q)`` from its matrix (any plugin: metric and LIP mechanisms too).

    Parameters
    ----------
    mechanism
        A mechanism. Without a finite matrix, an LDP mechanism gets the general parameters of
        its declared eps (``general_variation_ratio``).

    Returns
    -------
    VariationRatio
        ``p`` is infinite when some output is possible for one value and not another.

    Raises
    ------
    ParameterError
        A mechanism without a matrix whose guarantee is not eps-LDP.
    """
    m = mechanism.matrix
    log_m = mechanism.log_matrix
    if m is None or log_m is None:
        priv = mechanism.privacy
        if priv.notion == "ldp" and math.isfinite(priv.eps) and priv.eps > 0:
            return VariationRatio(*_general(priv.eps), source="declared eps0 (no matrix)")
        raise ParameterError(
            f"{mechanism.name} has no finite matrix and no eps-LDP level to bound its shuffled reports by",
            field="mechanism",
            hint="use a smaller domain, or give eps0 directly",
        )
    possible = np.isfinite(log_m).any(axis=0)
    lm, mm = log_m[:, possible], m[:, possible]
    log_p = float((lm.max(axis=0) - lm.min(axis=0)).max())
    beta, beta_low, spread, spread_low = _pairs(mm)
    if not math.isfinite(log_p):
        return VariationRatio(math.inf, beta, math.inf, "matrix")
    p = math.exp(log_p)
    if beta <= 0 or p <= 1:
        return VariationRatio(1.0, 0.0, 1.0, "matrix", uniform=True)
    q = min(p, max(1.0, p / (p - 1) * spread))
    same = beta_low >= beta * (1 - 1e-9) and spread_low >= spread * (1 - 1e-9)
    return VariationRatio(p, beta, q, "matrix", uniform=same)


def _general(eps0: float) -> tuple[float, float, float]:
    return math.exp(eps0), math.tanh(eps0 / 2), math.exp(eps0)


def _pairs(m: np.ndarray) -> tuple[float, float, float, float]:
    """Over pairs of distinct rows, in chunks: the largest and smallest total variation distance, and the
    largest and smallest ``max_z |P(z|x0) - P(z|x1)| / min_x P(z|x)`` (q's ratio before the factor p/(p-1))."""
    k = m.shape[0]
    floor = m.min(axis=0)
    step = max(1, _CHUNK_CELLS // max(1, m.size))
    tv_hi, tv_lo, q_hi, q_lo = 0.0, math.inf, 0.0, math.inf
    for start in range(0, k, step):
        block = m[start : start + step]
        diff = np.abs(block[:, None, :] - m[None, :, :])
        tv = 0.5 * diff.sum(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(diff > 0, diff / floor, 0.0).max(axis=2)
        rows = np.arange(start, start + block.shape[0])
        off = rows[:, None] != np.arange(k)[None, :]
        tv_hi, tv_lo = max(tv_hi, float(tv.max())), min(tv_lo, float(tv[off].min(initial=math.inf)))
        q_hi, q_lo = max(q_hi, float(q.max())), min(q_lo, float(q[off].min(initial=math.inf)))
    return min(tv_hi, 1.0), tv_lo, q_hi, q_lo


# ------------------------------------------------------------------ the dominating pair
@dataclass(frozen=True)
class _Pair:
    """Victim weights ``(p alpha, alpha, 1 - alpha - p alpha)``; each other user typed 0 or 1 w.p. ``r``."""

    p: float
    alpha: float
    r: float
    #: the victim's neutral reports are hidden among the others' (the paper's pair), not revealed (ours)
    hidden: bool = False


def _pair(bound: str, params: VariationRatio) -> _Pair:
    p = params.p
    if bound == "clones":
        return _Pair(p, 1 / (p + 1), 0.5 / p)
    alpha = params.beta / (p - 1)
    return _Pair(p, alpha, alpha * p / params.q, hidden=bound == PAPER_PAIR)


class _Window:
    """The typed others' count C ~ Bin(n - 1, 2r) over a window, its weights and the mass left out."""

    def __init__(self, n: int, r: float, delta: float):
        s, rate = n - 1, min(1.0, 2 * r)
        tail = TAIL_SHARE * delta / 2
        lo = max(0, int(binom.ppf(tail, s, rate)) - 1)
        hi = min(s, int(binom.isf(tail, s, rate)) + 1)
        self.c = np.arange(lo, hi + 1, dtype=np.int64)
        self.weights = binom.pmf(self.c, s, rate)
        self.outside = float(binom.cdf(lo - 1, s, rate) + binom.sf(hi, s, rate)) if s > 0 else 0.0
        self.s = s


def _delta_at(eps: float, pair: _Pair, window: _Window) -> float:
    """An upper bound on the hockey-stick divergence ``D_{e^eps}`` of the dominating pair."""
    p, alpha, r = pair.p, pair.alpha, pair.r
    if eps >= math.log(p):
        return 0.0
    e = math.exp(eps)
    gamma = max(0.0, 1 - alpha - p * alpha) if pair.hidden else 0.0
    neutral = 1 - 2 * r
    c = window.c.astype(float)

    def first_above(t: np.ndarray) -> np.ndarray:
        # smallest type-0 count a with P0 > e^eps P1 among outcomes with t typed reports: the likelihood
        # ratio grows with a, and the condition is linear in a (with s - t + 1 neutral others)
        free = (window.s - t + 1).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            extra = np.where(
                free > 0,
                gamma * (e - 1) * free * r / (alpha * neutral) if neutral > 0 else np.inf,
                0.0,
            )
        # x = (t (e p - 1) + extra) / ((p - 1)(1 + e)) = t - d, and floor(t - d) = t - ceil(d) for whole t:
        # d is formed without e p (which overflows) and without 1 + e == e (from e^36.7 on, a floor of x
        # computed directly put every outcome above the threshold and the delta at 0)
        with np.errstate(invalid="ignore"):
            d = (t * ((p - e) / (p - 1)) - extra / (p - 1)) / (1 + e)
        return np.minimum(t - np.ceil(d), 1e18) + 1

    with np.errstate(over="ignore", invalid="ignore"):  # e p beyond the double range: handled below
        a1 = first_above(c + 1)
        a2 = first_above(c)
        # Pr[Bin(c, 1/2) >= k] for the three ways of reaching an outcome
        s_minus = binom.sf(a1 - 2, c, 0.5)
        s_one = binom.sf(a1 - 1, c, 0.5)
        s_neutral = binom.sf(a2 - 1, c, 0.5) if gamma > 0 else np.zeros_like(c)
        f = alpha * (p - e) * s_minus + alpha * (1 - e * p) * s_one + gamma * (1 - e) * s_neutral
        inside = float(np.dot(window.weights, f))
    if not math.isfinite(inside):  # e p beyond the double range: nothing is known, and 1 bounds every delta
        return 1.0
    return max(0.0, inside) + window.outside * max(0.0, alpha * (p - e))


def dominating_delta(eps: float, n: int, params: VariationRatio, bound: str = "variation-ratio") -> float:
    """The delta a numerical bound gives at ``eps``: an upper bound on the shuffled reports' true delta.

    Parameters
    ----------
    eps
        The central level (>= 0).
    n, params
        Users and the local parameters (``clones`` uses only ``p = e^eps0``).
    bound
        ``clones``, ``variation-ratio`` (the victim's neutral reports revealed: valid for any
        ``(p, beta, q)``) or :data:`PAPER_PAIR` (Wang et al.'s pair as printed, for comparison).

    Returns
    -------
    float
        ``D_{e^eps}`` of the bound's dominating pair plus the binomial mass left out of the sum.
    """
    n, _ = check_shuffle(n, 0.5)
    if params.beta <= 0:
        return 0.0
    pair = _pair(bound, params)
    return _delta_at(eps, pair, _Window(n, pair.r, 1e-12))


def fmt_closed_form(eps0: float, n: int, delta: float) -> tuple[float, str]:
    """Feldman, McMillan & Talwar's closed form and, outside its regime, eps0 with the reason."""
    limit = math.log(n / (16 * math.log(4 / delta))) if n > 16 * math.log(4 / delta) else -math.inf
    if eps0 > limit:
        return eps0, f"closed form needs eps0 <= log(n / (16 log(4/delta))) = {limit:.3g}"
    e0 = math.exp(eps0)
    grow = math.tanh(eps0 / 2) * (8 * math.sqrt(e0 * math.log(4 / delta) / n) + 8 * e0 / n)
    return min(eps0, math.log1p(grow)), ""


def _numerical(params: VariationRatio, n: int, delta: float, bound: str, start: float) -> float:
    if params.beta <= 0:
        return 0.0
    if not math.isfinite(params.p):
        return math.inf
    pair = _pair(bound, params)
    window = _Window(n, pair.r, delta)

    def excess(log_eps: float) -> float:  # log delta(eps) - log delta: smooth in log eps, falling
        return math.log(max(_delta_at(math.exp(log_eps), pair, window), 1e-300)) - math.log(delta)

    hi = math.log(params.p)
    if 0 < start < hi and excess(math.log(start)) <= 0:  # a closed form brackets the answer from above
        hi = start
    elif excess(math.log(hi)) > 0:  # eps0 itself holds (shuffling is post-processing): nothing tighter is shown
        return hi
    lo = hi / 2
    while excess(math.log(lo)) <= 0:
        hi, lo = lo, lo / 2
        if lo < 1e-12:
            return hi
    root = brentq(excess, math.log(lo), math.log(hi), xtol=EPS_RTOL / 4, rtol=4 * np.finfo(float).eps)
    answer = min(hi, math.exp(root) * (1 + EPS_RTOL))
    step = EPS_RTOL
    while answer < hi and excess(math.log(answer)) > 0:  # rare: the root's own tolerance fell short
        step *= 4
        answer = min(hi, answer * (1 + step))
    return answer


def shuffle_guarantee(
    mechanism_or_eps0: Mechanism | float, n: int, delta: float = 1e-6, bound: str = "variation-ratio"
) -> ShuffleGuarantee:
    """The central (eps, delta) guarantee of ``n`` users' reports after a shuffler, by one bound.

    Parameters
    ----------
    mechanism_or_eps0
        A mechanism (its exact eps0 and ``(p, beta, q)`` come from its matrix) or a local level eps0.
    n
        The users (>= 2), one report each.
    delta
        The central delta, in (0, 1).
    bound
        ``clones-closed``, ``clones`` or ``variation-ratio`` (see the module).

    Returns
    -------
    ShuffleGuarantee
        The smallest eps the bound certifies (never above eps0: shuffling is post-processing).

    Raises
    ------
    ParameterError
        On ``n < 2``, delta outside (0, 1), eps0 <= 0, or an unknown bound.
    """
    n, delta = check_shuffle(n, delta)
    if bound not in BOUNDS:
        raise ParameterError(f"unknown bound '{bound}'", field="bound", hint=f"choose one of {', '.join(BOUNDS)}")
    return _guarantee(_parameters(mechanism_or_eps0), n, delta, bound)


def _parameters(mechanism_or_eps0: Mechanism | VariationRatio | float) -> VariationRatio:
    """A mechanism's ``(p, beta, q)`` from its matrix (given, if already computed), or the general ones of eps0."""
    if isinstance(mechanism_or_eps0, VariationRatio):
        return mechanism_or_eps0
    if isinstance(mechanism_or_eps0, Mechanism):
        return variation_ratio(mechanism_or_eps0)
    return general_variation_ratio(check_eps0(mechanism_or_eps0))


def _guarantee(params: VariationRatio, n: int, delta: float, bound: str) -> ShuffleGuarantee:
    """:func:`shuffle_guarantee` from the mechanism's parameters (checked arguments)."""
    eps0 = params.eps0 if math.isfinite(params.p) else math.inf
    if bound != "variation-ratio":
        params = VariationRatio(*_general(eps0), source=params.source) if math.isfinite(eps0) else params
    if not math.isfinite(eps0):
        return ShuffleGuarantee(math.inf, delta, n, bound, eps0, None, "the mechanism is not eps-LDP for any eps")
    closed, note = fmt_closed_form(eps0, n, delta)
    if bound == "clones-closed":
        return ShuffleGuarantee(closed, delta, n, bound, eps0, None, note)
    if bound == "variation-ratio" and params.beta < math.tanh(eps0 / 2) * (1 - 1e-12):
        # the mechanism's own pair reveals the victim's neutral reports, and holds only where every pair of
        # values has the same (beta, q) (the bound is not monotone in beta); the general pair of its eps0 is
        # valid for every mechanism and usually tighter: the smaller of the valid ones holds
        general = VariationRatio(*_general(eps0), source=f"eps0 = log p of the {params.source}")
        eps = _numerical(general, n, delta, bound, closed)
        if params.uniform:
            own = _numerical(params, n, delta, bound, closed)
            if own < eps:
                eps, general = own, params
        params = general
    else:
        eps = _numerical(params, n, delta, bound, closed)
    return ShuffleGuarantee(eps, delta, n, bound, eps0, params if bound == "variation-ratio" else None)


def as_printed_eps(mechanism: Mechanism | VariationRatio, n: int, delta: float = 1e-6) -> float:
    """Wang et al.'s variation-ratio eps from the mechanism's own ``(p, beta, q)``, as the paper computes it.

    Not a guarantee: when ``beta < (p - 1)/(p + 1)`` the paper's pair hides the victim's neutral reports among
    the others', which the shuffled reports need not allow (k-RR with k >= 3 at n = 2 breaks it; see
    docs/theory/shuffling.md). For comparison with the paper's tables only.

    Parameters
    ----------
    mechanism
        A mechanism with a matrix (else its general parameters, where the two agree), or its
        :func:`variation_ratio` if already computed.
    n, delta
        Users and the central delta.

    Returns
    -------
    float
        The eps the paper's formula gives.
    """
    n, delta = check_shuffle(n, delta)
    params = _parameters(mechanism)
    if not math.isfinite(params.p):
        return math.inf
    return _numerical(params, n, delta, PAPER_PAIR, math.log(params.p))


def shuffle_guarantees(
    mechanism_or_eps0: Mechanism | VariationRatio | float, n: int, delta: float = 1e-6
) -> list[ShuffleGuarantee]:
    """:func:`shuffle_guarantee` by every bound, in the order of :data:`BOUNDS`, from one :func:`variation_ratio`
    of the mechanism (its pairwise pass over the matrix: about 1 s at 512 values), or the one given."""
    n, delta = check_shuffle(n, delta)
    params = _parameters(mechanism_or_eps0)
    return [_guarantee(params, n, delta, bound) for bound in BOUNDS]


def largest_eps0(
    central_eps: float,
    n: int,
    delta: float,
    bound: str = "variation-ratio",
    mechanism_at: Callable[[float], Mechanism] | None = None,
    *,
    low: float = 1e-3,
    high: float = 30.0,
    rtol: float = 1e-4,
) -> float:
    """The largest eps0 whose shuffled reports are (central_eps, delta)-DP for ``n`` users by a bound.

    Parameters
    ----------
    central_eps
        The central target (> 0).
    n, delta, bound
        As in :func:`shuffle_guarantee`.
    mechanism_at
        The mechanism at a given eps0 (its own ``(p, beta, q)`` are then used), or None for a
        general eps0-LDP mechanism. An eps0 it refuses (ParameterError) counts as missing the target.
    low, high, rtol
        The eps0 searched (bisection, the bound being monotone in eps0) and the relative precision.

    Returns
    -------
    float
        eps0 (``high`` if even that meets the target).

    Raises
    ------
    ParameterError
        When even eps0 = ``low`` misses the target, or on a bad input.
    """
    target = check_eps0(central_eps)
    n, delta = check_shuffle(n, delta)

    def central(eps0: float) -> float:
        try:
            subject: Mechanism | float = mechanism_at(eps0) if mechanism_at is not None else eps0
        except ParameterError:  # beyond the mechanism's own range of eps (e.g. OLH's buckets): not allowed
            return math.inf
        return shuffle_guarantee(subject, n, delta, bound).eps

    if central(high) <= target:
        return high
    if central(low) > target:
        raise ParameterError(
            f"even eps0 = {low:g} gives central eps above {target:g} for {n:,} users by {bound}",
            field="central_eps",
            hint="raise the central eps or the users",
        )
    lo, hi = low, high
    while hi - lo > rtol * lo:
        mid = math.sqrt(lo * hi)
        if central(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo
