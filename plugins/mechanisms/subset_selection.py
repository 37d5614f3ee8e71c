"""Subset selection (Ye & Barg 2018; Wang, Huang, Wang, Nie, Xu, Yang & Qiao 2016).

A user holding x reports a subset S of the k values of size omega, drawn with
``P(S | x)`` proportional to e^eps if x is in S and to 1 otherwise. Counting the
subsets that contain x (C(k-1, omega-1) of them) and those that do not
(C(k-1, omega)), the normalizer is the same for every x::

    Z = C(k-1, omega-1) e^eps + C(k-1, omega),   P(S | x) = e^(eps [x in S]) / Z

so the likelihood of a report takes one of two values per x, and the ratio of two
values' likelihoods is 1 or e^(+-eps): eps-LDP, tight. As a structured likelihood,
``P(S | x) = exp(shift) (r + (1 - r) [x in S])`` with ``shift = eps - log Z`` and
``r = e^-eps``. The default omega = ceil(k / (e^eps + 1)) is the size both papers
derive as (near-)optimal for the estimation error.

Sampling: x is in S with probability ``p = omega e^eps / (omega e^eps + k - omega)``
(the mass of the subsets containing it); the omega - 1 (if it is) or omega (if not)
other members are a uniform subset of the other k - 1 values. It is drawn without k draws
per user: independent bits at a dyadic rate near q, 64 per random word (given its size, such
a set is uniform among the sets of that size), then resized to omega - 1 or omega by
uniformly random removals or additions, each of which keeps it uniform given its size (about
sqrt(k) of them per user; vectorized over users, no per-user loop).

Report encoding: S as its indicator bit vector, packed like the unary encodings'
reports: bit j is bit ``j mod 62`` of int64 word ``j // 62`` (``ceil(k / 62)`` words;
below 2^62 each, so ``Observations``' row packing cannot overflow). For k <= 62 a
report is the single integer ``sum_{j in S} 2^j``, which is also the column of the
(k, 2^k) matrix offered for k <= 12; its columns of bit vectors with other than omega
bits set are zero (those reports are impossible: their likelihood is 0 for every x).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    WORD_BITS,
    BitVectorMechanism,
    EstimationError,
    Param,
    ParameterError,
    Privacy,
    bernoulli_words,
    constant_plus_bits,
    count_estimate_variance,
    hookimpl,
    set_bit_counts,
)

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: largest k for which the (k, 2^k) matrix is formed
MAX_MATRIX_BITS = 12
#: binary digits of the rate of the independent bits the sampler draws before resizing the subset: few
#: digits, few random words per word (q ~ 0.27 at k = 1024, eps = 1 becomes 1/4: two words)
RATE_DIGITS = 4
#: the word with only bit j set, for j < 64
_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))
#: users per chunk of the sampler: their reports (k / 8 bytes each) stay in cache while they are resized
SAMPLE_CHUNK = 1 << 14


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits per row of (n, w) uint64 words (numpy >= 2's ``bitwise_count``, else a byte table)."""
    count = getattr(np, "bitwise_count", None)
    if count is None:
        return set_bit_counts(words.view(np.int64))
    return count(words).sum(axis=1, dtype=np.int64)


def _log_binom(n: int, m: int) -> float:
    """log C(n, m) for 0 <= m <= n."""
    from scipy.special import gammaln

    return float(gammaln(n + 1) - gammaln(m + 1) - gammaln(n - m + 1))


class SubsetSelection(BitVectorMechanism):
    """Subset selection (Ye & Barg 2018; Wang et al. 2016): a subset of omega values, e^eps times likelier if it holds x."""

    name = "subset_selection"
    #: the dense likelihood unpacks every report's k bits: the sparse one is never slower
    structured_min_size = 0
    # e^-eps must stay a normal float: the likelihood operator's smaller factor is exactly e^-eps
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    omega = Param("int", None, ge=1, doc="size of the reported subset, 1..k-1 (default ceil(k / (e^eps + 1)))")

    def _validate(self) -> None:
        k = self.domain.size
        if k < 2:
            raise ParameterError(
                f"subset selection needs at least 2 values, the domain has {k}",
                field="domain",
                hint="use a domain of 2 or more values",
            )
        if self.omega is None:
            self.size = max(1, math.ceil(k / (math.exp(min(self.eps, 700.0)) + 1.0)))
        elif self.omega > k - 1:
            raise ParameterError(
                f"must be at most k - 1 = {k - 1} (a subset of all k values says nothing), got {self.omega}",
                field="omega",
                hint=f"choose omega in 1..{k - 1}, or leave it out for ceil(k / (e^eps + 1))",
            )
        else:
            self.size = self.omega
        # An instance attribute shadows the class default: the width depends on the domain.
        super()._validate()  # report_width from the domain

    # ----------------------------------------------------------- probabilities
    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def log_normalizer(self) -> float:
        """log Z = log(C(k-1, omega-1) e^eps + C(k-1, omega)) = log C(k-1, omega-1) + eps + log(1 + (k-w)/w e^-eps)."""
        k, w = self.domain.size, self.size
        return _log_binom(k - 1, w - 1) + self.eps + math.log1p((k - w) / w * math.exp(-self.eps))

    @property
    def p(self) -> float:
        """P(x in S | x) = omega e^eps / (omega e^eps + k - omega)."""
        k, w = self.domain.size, self.size
        return w / (w + (k - w) * math.exp(-self.eps))

    @property
    def q(self) -> float:
        """P(x in S | y) for y != x: (omega - p) / (k - 1)."""
        return (self.size - self.p) / (self.domain.size - 1)

    @property
    def p_minus_q(self) -> float:
        """p - q = omega (k - omega)(1 - e^-eps) / ((k - 1)(omega + (k - omega) e^-eps)), without cancellation."""
        k, w = self.domain.size, self.size
        return w * (k - w) * -math.expm1(-self.eps) / ((k - 1) * (w + (k - w) * math.exp(-self.eps)))

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        """n Var[f_hat(x)] of the unbiased estimate for n users with distribution ``theta``.

        The count of reports holding x is a sum of independent Bernoullis, p for the
        n theta_x users holding x and q for the others, so
        ``n Var[f_hat(x)] = (theta_x p (1-p) + (1 - theta_x) q (1-q)) / (p - q)^2``
        (Wang et al. 2016's ``q (1-q) / (p-q)^2`` at theta_x = 0).

        Parameters
        ----------
        theta
            The users' empirical distribution over the k values.

        Returns
        -------
        numpy.ndarray
            The k per-user variances.
        """
        return count_estimate_variance(theta, self.p, self.q, self.p_minus_q)

    # ------------------------------------------------------------- contract
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k, w, n = self.domain.size, self.report_width, values.shape[0]
        out = np.empty((n, w), dtype=np.int64)
        mask = np.full(w, (1 << WORD_BITS) - 1, dtype=np.uint64)  # the words' vector bits
        mask[-1] = (1 << (k - WORD_BITS * (w - 1))) - 1
        for start in range(0, n, SAMPLE_CHUNK):  # chunks whose words stay in cache while they are resized
            stop = min(n, start + SAMPLE_CHUNK)
            self._sample_into(out[start:stop].view(np.uint64), values[start:stop], mask, rng)
        return out

    def _sample_into(self, words: np.ndarray, values: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> None:
        """Reports of ``values`` drawn into ``words``, (m, w) uint64.

        1. Every bit 1 w.p. ``_rate``, independently, 64 per random word. Given its size, the set of
           the others is then a uniform subset of that size, whatever the rate.
        2. x in S w.p. p, so S needs omega - 1 or omega of the k - 1 others.
        3. The set resized by removing uniformly random members or adding uniformly random non-members
           one at a time (a value drawn uniformly until it is of the right kind, x never): each step
           keeps the set uniform given its size, so it ends uniform of the right size.
        About sqrt(k q (1 - q)) steps per user, a few draws each: O(sqrt(k)) per user beyond the k / 64
        random words, vectorized over users (one change per user and round).
        """
        k, w, m = self.domain.size, self.report_width, values.shape[0]
        flat = words.reshape(-1)
        bernoulli_words(self._rate, flat.size, rng, out=flat)
        words &= mask
        own = np.arange(m) * w + values // WORD_BITS  # flat index of the word of x, and its bit
        own_bit = _BIT[values % WORD_BITS]
        flat[own] &= ~own_bit
        inside = np.less(rng.random(m), self.p)
        need = _popcount(words) - (self.size - inside)  # > 0: members to remove, < 0: to add
        # Users who add get their words inverted, x's bit included, so that for everyone a drawn
        # value is of the right kind iff its bit is set (x never is), and the change clears it.
        adding = np.flatnonzero(need < 0)
        rows = words[adding]
        np.invert(rows, out=rows)
        rows &= mask
        words[adding] = rows
        flat[own[adding]] &= ~own_bit[adding]
        active = np.flatnonzero(need)
        base, left = active * w, np.abs(need[active])
        word_of, bit_of = np.arange(k) // WORD_BITS, _BIT[np.arange(k) % WORD_BITS]
        while active.size:
            v = rng.integers(0, k, size=active.size)
            at = base + word_of[v]
            bit = bit_of[v]
            current = flat[at]
            hit = (current & bit) != 0
            bit *= hit
            flat[at] = current ^ bit  # one position per user and round: no two writes collide
            left -= hit
            going = left != 0
            if not going.all():
                active, base, left = active[going], base[going], left[going]
        rows = words[adding]
        np.invert(rows, out=rows)
        rows &= mask
        words[adding] = rows
        flat[own] = (flat[own] & ~own_bit) | (inside.astype(np.uint64) * own_bit)

    @property
    def _rate(self) -> float:
        """The rate of the independent bits before resizing: q to RATE_DIGITS binary digits, so that a bit
        costs at most that many random bits and the resizing moves few members (any rate is exact)."""
        scale = 1 << RATE_DIGITS
        return min(max(round(self.q * scale), 1), scale - 1) / scale

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        reports = self.checked_bits(reports)
        log_in = self.eps - self.log_normalizer
        out = np.empty((reports.shape[0], self.domain.size))
        for rows, bits in self.bit_chunks(reports):
            valid = bits.sum(axis=1) == self.size  # other bit vectors are never reported
            out[rows] = np.where(valid[:, None], np.where(bits, log_in, log_in - self.eps), -np.inf)
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        reports = self.checked_bits(reports)
        valid = set_bit_counts(reports) == self.size
        # an impossible report gets shift -inf: the estimation engine names it
        shift = np.where(valid, self.eps - self.log_normalizer, -np.inf)
        return shift, constant_plus_bits(reports, self.domain.size, math.exp(-self.eps), WORD_BITS)

    def _counts_in(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """sum_d counts_d [x in S_d] for every x; EstimationError on a subset of the wrong size."""
        hits = np.zeros(self.domain.size)
        for rows, bits in self.bit_chunks(reports):
            sizes = bits.sum(axis=1)
            if np.any(sizes != self.size):
                bad = int(np.flatnonzero(sizes != self.size)[0])
                raise EstimationError(
                    f"report {tuple(int(v) for v in reports[rows][bad])} of {self!r} holds {int(sizes[bad])} values,"
                    f" not omega = {self.size}",
                    hint="check that the reports were produced by this mechanism",
                )
            # einsum, not @: a BLAS call on long vectors spins threads and crawls on a busy machine
            hits += np.einsum("d,dx->x", counts[rows], bits)
        return hits

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # Wang et al. (2016): E[C_x / n] = q + (p - q) theta_x, so (C_x / n - q) / (p - q) is unbiased.
        reports = self.checked_bits(reports)
        counts = np.asarray(counts, dtype=float)
        return (self._counts_in(reports, counts) / counts.sum() - self.q) / self.p_minus_q

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        # 004 Def. 2: a value in no reported subset has likelihood 1/Z on every report, which any value
        # of some reported subset matches everywhere and beats (e^eps / Z) on that report.
        reports = self.checked_bits(reports)
        if reports.shape[0] == 0:
            return None
        mask = self.unpack_bits(np.bitwise_or.reduce(reports, axis=0)[None, :])[0]
        return mask if mask.any() else None

    def _output_count(self) -> int | None:
        k = self.domain.size
        return 1 << k if k <= MAX_MATRIX_BITS else None

    def _matrix(self) -> np.ndarray | None:
        k = self.domain.size
        if k > MAX_MATRIX_BITS:
            return None
        return np.exp(self._log_likelihood(np.arange(1 << k, dtype=np.int64)[:, None])).T

    def output_labels(self) -> list[str] | None:
        """Bit strings s_0 s_1 ... s_{k-1} (s_j = 1 if j is in S) for the columns of the matrix."""
        if self.matrix is None:
            return None
        k = self.domain.size
        return ["".join("1" if z >> j & 1 else "0" for j in range(k)) for z in range(1 << k)]


@hookimpl
def register_mechanisms(register):
    register(SubsetSelection)
