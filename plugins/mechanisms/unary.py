"""Unary encoding frequency oracles: basic one-time RAPPOR, optimized unary encoding (OUE) and THE.

THE, thresholded histogram encoding (Wang et al. 2017), adds Laplace(2/eps) noise to each bit of
the one-hot vector and reports the set of coordinates above a threshold theta: bit j is 1 with
probability ``p = P(1 + Lap > theta) = 1 - e^(-eps (1 - theta) / 2) / 2`` if j = x, else
``q = P(Lap > theta) = e^(-eps theta / 2) / 2``, independently: a unary encoding.

A value x of a domain of k values is encoded as the one-hot bit vector e_x of
length k; each bit is reported as 1 with probability p if it is 1 and q if it
is 0, independently. The report is the noisy bit vector beta.

Likelihood of a whole report (what makes GIBU the true MLE; 004 Lemma in Sec. 4.4
for RAPPOR)::

    log P(beta | x) = sum_j [beta_j log q + (1 - beta_j) log(1 - q)]
                      + beta_x log(p/q) + (1 - beta_x) log((1-p)/(1-q))

so, with ``shift = sum_j [...] + log(p/q)`` and ``r = ((1-p)/(1-q)) / (p/q)``,
``P(beta | x) = exp(shift) * (r + (1 - r) beta_x)``. RAPPOR and OUE have
r = e^-eps exactly (their LDP level is tight); THE's level,
``log(p (1 - q) / ((1 - p) q))``, is below the eps of the noise it thresholds
(post-processing), so it declares eps without claiming it is tight.

Report encoding: the k bits are packed into ``ceil(k / 62)`` int64 words; bit j
of the vector is bit ``j mod 62`` (value ``2**(j mod 62)``) of word ``j // 62``.
62 rather than 63 bits keep every word below 2^62, so the row-packing in
``Observations`` (which forms ``max - min + 1`` per column) cannot overflow.
For k <= 62 a report is the single integer ``sum_j beta_j 2^j``, which is also
the column of the (k, 2^k) matrix offered for k <= 16.
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
    constant_plus_bits,
    count_estimate_variance,
    hookimpl,
    set_bit_counts,
)

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: largest k for which the (k, 2^k) matrix is formed
MAX_MATRIX_BITS = 16
#: the samplers of the unary encodings, all of the same law (see ``UnaryEncoding.sampler``)
SAMPLERS = ("uniforms", "bytes", "words")


class UnaryEncoding(BitVectorMechanism):
    """Unary encoding with bit probabilities p (true bit 1) and q (true bit 0); subclasses set them."""

    # e^-eps must stay a normal float: the likelihood operator's smaller factor is exactly e^-eps
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    sampler = Param(
        "str",
        "words",
        choices=SAMPLERS,
        doc="words (default): 64 bits at a time from random words, 2 random bits per bit on average, 10-20x faster "
        "than uniforms; bytes: one random byte per bit (a uniform for the 1/256 that tie), 3-5x faster; "
        "uniforms: one uniform per bit (the reports of ldpsim before the words default for a given seed); same law",
    )
    #: the dense likelihood unpacks every report's k bits: the sparse one is never slower
    structured_min_size = 0

    # --------------------------------------------------------- bit probabilities
    def _logs(self) -> tuple[float, float, float, float]:
        """(log p, log(1-p), log q, log(1-q)), computed without cancellation."""
        raise NotImplementedError

    @property
    def p(self) -> float:
        return math.exp(self._logs()[0])

    @property
    def q(self) -> float:
        return math.exp(self._logs()[2])

    @property
    def _p_minus_q(self) -> float:
        """p - q in closed form (subtracting two floats cancels for small eps)."""
        raise NotImplementedError

    @property
    def _log_ratios(self) -> tuple[float, float]:
        """(log(p/q), log((1-p)/(1-q))): the per-value factor when beta_x is 1, resp. 0."""
        lp, l1p, lq, l1q = self._logs()
        return lp - lq, l1p - l1q

    @property
    def privacy(self) -> Privacy:
        # P(beta|x)/P(beta|x') is largest for beta_x = 1, beta_x' = 0: (p/q) ((1-q)/(1-p)) = e^eps for both.
        return Privacy("ldp", self.eps)

    # ------------------------------------------------------------- contract
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.sampler == "words":
            # bit-sliced: 64 Bernoulli(q) bits per random word, about 2 random bits per bit
            return self.sample_unary_bitsliced(values, self.p, self.q, rng)
        if self.sampler == "bytes":
            # one random byte per bit (a uniform only for the 1/256 of bytes that tie with q's first byte)
            return self.sample_unary_words(values, self.p, self.q, rng)
        # "uniforms" gives back every seeded report of earlier versions (same law, another stream)
        k = self.domain.size
        p, q = self.p, self.q
        out = np.empty((values.shape[0], self.report_width), dtype=np.int64)
        step = self.chunk_rows()
        for start in range(0, values.shape[0], step):
            x = values[start : start + step]
            u = rng.random((x.shape[0], k))  # k uniforms per user: bit j is 1 iff u_j < P(bit j = 1)
            bits = u < q
            rows = np.arange(x.shape[0])
            bits[rows, x] = u[rows, x] < p
            out[start : start + x.shape[0]] = self.pack_bits(bits)
        return out

    def _shift(self, ones: np.ndarray) -> np.ndarray:
        """log P(beta | x) for an x with beta_x = 1, from the number of set bits S(beta)."""
        lp, _, lq, l1q = self._logs()
        k = self.domain.size
        return ones * lq + (k - ones) * l1q + (lp - lq)

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        reports = self.checked_bits(reports)
        log_one, log_zero = self._log_ratios
        _, _, lq, l1q = self._logs()
        k = self.domain.size
        out = np.empty((reports.shape[0], k))
        for rows, bits in self.bit_chunks(reports):
            ones = bits.sum(axis=1)
            base = ones * lq + (k - ones) * l1q
            out[rows] = base[:, None] + np.where(bits, log_one, log_zero)
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        # the packed reports are the operator's data: built in one pass over their bytes, no unpacking
        reports = self.checked_bits(reports)
        log_one, log_zero = self._log_ratios
        shift = self._shift(set_bit_counts(reports))
        return shift, constant_plus_bits(reports, self.domain.size, math.exp(log_zero - log_one), WORD_BITS)

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # Kairouz, Bonawitz & Ramage (ICML 2016) / Wang et al. (2017): E[C_x / n] = q + (p - q) theta_x.
        return (self.bit_frequencies(reports, counts) - self.q) / self._p_minus_q

    def _sample_bit_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Bit j is set by each of the ``counts[j]`` users holding j w.p. p, by each of the others w.p. q,
        independently: ``Binomial(counts[j], p) + Binomial(n - counts[j], q)``, O(k) whatever n."""
        return rng.binomial(counts, self.p) + rng.binomial(int(counts.sum()) - counts, self.q)

    def _bit_counts(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """How many users set each of the k bits (sums of whole counts: exact)."""
        return np.rint(self.bit_frequencies(reports, counts) * float(np.sum(counts)))

    def _bit_count_estimate(self, tally: np.ndarray, n: int) -> np.ndarray:
        """:meth:`_unbiased_estimate` from the bits' counts: the same numbers for reports with that tally."""
        if tally.shape != (self.domain.size,):
            raise EstimationError(f"{self!r} has {self.domain.size} bits to count, got {tally.shape}")
        return (tally / n - self.q) / self._p_minus_q

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        """Wang et al. 2017: bit x is set w.p. p for a user holding x, q for the others."""
        return count_estimate_variance(theta, self.p, self.q, self._p_minus_q)

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        # 004 Def. 2: p > q, so P(beta|x) is larger when beta_x = 1. A value whose bit is 0 in every
        # report has P(beta^i|x') = c_i (1-p)/(1-q) <= P(beta^i|x) for every x, strictly on any report
        # with beta_x = 1: it is dominated by any value whose bit is set somewhere.
        reports = self.checked_bits(reports)
        if reports.shape[0] == 0:
            return None
        mask = self.unpack_bits(np.bitwise_or.reduce(reports, axis=0)[None, :])[0]
        return mask if mask.any() else None

    def _matrix(self) -> np.ndarray | None:
        k = self.domain.size
        if k > MAX_MATRIX_BITS:
            return None
        log_m = self._log_likelihood(np.arange(1 << k, dtype=np.int64)[:, None])
        if log_m.min() < -700:  # entries would underflow and fake an infinite LDP level
            return None
        return np.exp(log_m).T

    def output_labels(self) -> list[str] | None:
        """Bit strings beta_0 beta_1 ... beta_{k-1} for the columns of the matrix."""
        if self.matrix is None:
            return None
        k = self.domain.size
        return ["".join("1" if z >> j & 1 else "0" for j in range(k)) for z in range(1 << k)]


class Rappor(UnaryEncoding):
    """Basic one-time RAPPOR (Erlingsson et al. 2014; 001 Sec. IX-E): one-hot bits, each kept w.p. 1/(1+e^(-eps/2))."""

    name = "rappor"

    def _logs(self) -> tuple[float, float, float, float]:
        half = self.eps / 2
        keep, flip = -np.logaddexp(0.0, -half), -np.logaddexp(0.0, half)
        return float(keep), float(flip), float(flip), float(keep)  # q = 1 - p

    @property
    def _p_minus_q(self) -> float:
        return math.tanh(self.eps / 4)  # (e^(eps/2) - 1) / (e^(eps/2) + 1)


class OptimizedUnaryEncoding(UnaryEncoding):
    """OUE, optimized unary encoding (Wang, Blocki, Li & Jha 2017): a 1 kept w.p. 1/2, a 0 flipped w.p. 1/(e^eps+1)."""

    name = "oue"

    def _logs(self) -> tuple[float, float, float, float]:
        half = -math.log(2.0)
        return half, half, float(-np.logaddexp(0.0, self.eps)), float(-np.logaddexp(0.0, -self.eps))

    @property
    def _p_minus_q(self) -> float:
        return math.tanh(self.eps / 2) / 2  # 1/2 - 1/(e^eps + 1)


#: the smallest eps THE finds its default threshold for: the variance it minimizes divides by (p - q)^2, about
#: eps^2 / 16, which underflows to 0 below eps ~ 1e-153 (1e-100 leaves room; such an eps reports nothing anyway)
MIN_THRESHOLD_EPS = 1e-100


def the_threshold(eps: float) -> float:
    """Wang et al. 2017's optimal threshold: theta in (1/2, 1) minimizing THE's q (1 - q) / (p - q)^2."""
    from scipy.optimize import minimize_scalar

    def variance(theta: float) -> float:
        q = 0.5 * math.exp(-eps * theta / 2)
        gap = -0.5 * (math.expm1(-eps * (1 - theta) / 2) + math.expm1(-eps * theta / 2))
        return q * (1 - q) / gap**2

    return float(minimize_scalar(variance, bounds=(0.5, 1.0), method="bounded", options={"xatol": 1e-10}).x)


class ThresholdedHistogramEncoding(UnaryEncoding):
    """THE, thresholded histogram encoding (Wang et al. 2017): the coordinates of one-hot + Laplace(2/eps) above theta."""

    name = "the"
    tight_privacy = False
    threshold = Param("float", None, gt=0, lt=1, doc="theta, the threshold (default: the variance-optimal one)")

    def _validate(self) -> None:
        super()._validate()
        if self.threshold is None and self.eps < MIN_THRESHOLD_EPS:
            raise ParameterError(
                f"eps = {self.eps:g} is below the {MIN_THRESHOLD_EPS:g} for which THE's optimal threshold is defined",
                field="eps",
                hint=f"give eps >= {MIN_THRESHOLD_EPS:g}, or a threshold",
            )
        self.theta = self.threshold if self.threshold is not None else the_threshold(self.eps)

    def _logs(self) -> tuple[float, float, float, float]:
        above_one = -self.eps * (1 - self.theta) / 2  # log(2 (1 - p))
        above_zero = -self.eps * self.theta / 2  # log(2 q)
        half = math.log(0.5)
        return (
            math.log1p(-0.5 * math.exp(above_one)),
            half + above_one,
            half + above_zero,
            math.log1p(-0.5 * math.exp(above_zero)),
        )

    @property
    def _p_minus_q(self) -> float:
        return -0.5 * (math.expm1(-self.eps * (1 - self.theta) / 2) + math.expm1(-self.eps * self.theta / 2))


@hookimpl
def register_mechanisms(register):
    register(Rappor)
    register(OptimizedUnaryEncoding)
    register(ThresholdedHistogramEncoding)
