"""Local hashing with random hash functions (Wang, Blocki, Li & Jha, USENIX Security 2017): OLH and BLH.

OLH uses g = round(e^eps + 1) buckets (or any g >= 2); BLH is the same protocol with g = 2.

Each user draws a hash function h_{a,b}(x) = ((a x + b) mod P) mod g from the
Carter-Wegman family with P = 2^31 - 1 (prime), a uniform in 1..P-1 and b
uniform in 0..P-1, hashes the index x of their value, and reports (a, b, y)
where y is g-ary randomized response on h_{a,b}(x): y = h_{a,b}(x) with
probability p = e^eps / (e^eps + g - 1), else one of the other g - 1 buckets
uniformly. A report is the row (a, b, y) of three int64.

Likelihood of a whole report::

    P((a, b, y) | x) = P(a, b) * (p if h_{a,b}(x) = y else p e^-eps),   P(a, b) = 1 / ((P - 1) P)

so with shift = log P(a, b) + log p and the (D, |X|) 0/1 support matrix
E[d, x] = [h_{a_d,b_d}(x) = y_d], P(report_d | x) = exp(shift_d) (r + (1 - r) E[d, x])
with r = e^-eps. The ratio of two values' likelihoods is 1 or e^(+-eps): eps-LDP, tight.

int64 safety: a x + b <= (P - 1)(k - 1) + P - 1 < 2^31 k, below 2^63 for every
domain of k <= P values (which the hash needs anyway to tell values apart).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    EstimationError,
    Mechanism,
    Param,
    ParameterError,
    Privacy,
    constant_plus_halfwords,
    count_estimate_variance,
    hookimpl,
)

if TYPE_CHECKING:  # scipy.sparse is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: the Mersenne prime of the hash family
PRIME = (1 << 31) - 1
#: log P(a, b): a uniform in 1..P-1, b uniform in 0..P-1
LOG_HASH_PROB = -math.log(PRIME - 1) - math.log(PRIME)
#: elements per (chunk of reports x |X|) temporary: 4 MB of int64, which stays in cache between the
#: hash's steps (32 MB chunks ran at 7.9 ns per pair, 4 MB ones at 4.7, before the arithmetic below)
CHUNK_ELEMENTS = 1 << 19
#: reports per block of :func:`hash_hit_halfwords` (a multiple of 4: two bytes per report pack 8 to a word)
HIT_ROWS = 1024
#: bytes of its (values x reports) 0/1 array per step: a few hundred kB that stay in a core's L2 cache
HIT_BYTES = 1 << 19
#: bytes of packed supports per block of reports of the unbiased estimate (its memory, whatever the reports)
SUPPORT_BYTES = 1 << 24


def universal_hash(a: np.ndarray, b: np.ndarray, x: np.ndarray, g: int) -> np.ndarray:
    """((a x + b) mod P) mod g, broadcast; int64-exact for x < P.

    The sampler's hash of each user's value, and the definition :func:`hash_hit_halfwords` is checked
    against. No step divides by a runtime value: ``v mod P`` for the Mersenne prime is
    ``(v & P) + (v >> 31)`` less P at most once (v < P^2), and ``mod g`` is ``r - (r // g) g``, whose
    division by a scalar numpy performs by multiplication, or the low bits when g is a power of two.
    """
    v = np.multiply(a, x, dtype=np.int64)
    v += b
    r = v >> 31
    v &= PRIME
    r += v  # congruent to a x + b modulo P, and below 2 P - 1 since a x + b <= P (P - 1)
    np.subtract(r, PRIME, out=r, where=r >= PRIME)
    if g & (g - 1) == 0:  # a power of two (OLH's g = 4 at eps = 1, BLH's 2): the low bits
        r &= g - 1
        return r
    v = r // g
    v *= g
    r -= v
    return r


def _mod_prime(v: np.ndarray) -> np.ndarray:
    """``v mod P`` for int64 ``0 <= v < 2^61``, in place: ``(v & P) + (v >> 31) < 2 P``, then P off once
    (adding ``(r + 1) >> 31``, i.e. 1 where r >= P, and masking with P)."""
    r = v >> 31
    v &= PRIME
    r += v
    np.add(r, 1, out=v)
    v >>= 31
    r += v
    r &= PRIME
    return r


def hash_hit_halfwords(a: np.ndarray, b: np.ndarray, y: np.ndarray, size: int, g: int) -> np.ndarray:
    """Bit ``x % 16`` of ``out[x // 16, d]`` is ``[h_{a_d,b_d}(x) = y_d]``: ``(ceil(size / 16), D)`` uint16.

    The layout :func:`ldpsim.constant_plus_halfwords` reads, computed value by value across the
    reports so that every step runs over contiguous rows of reports in small integers. With
    ``x = 32 j + l``, ``a x + b = C_j + D_l (mod P)`` where ``C_j = (a 32 j + b) mod P`` and
    ``D_l = a l mod P`` take 32 + |X| / 32 int64 reductions per report instead of |X|. Then
    ``h(x) = (C_j + D_l - P [D_l >= P - C_j]) mod g``, so ``h(x) = y`` is
    ``(D_l mod g + c [D_l >= P - C_j]) mod g = (y - C_j) mod g`` with ``c = -P mod g`` (1 when g is a
    power of two): one uint32 comparison and a few uint8 steps (for g <= 128) per (report, value),
    not nine int64 ones, and the 0/1 results are packed 8 at a time by shifts on their uint64 words.
    The reports sit two bytes apart (the bytes of values ``16 q + t`` and ``16 q + 8 + t`` of each
    report side by side), so the packed bytes are the halfwords themselves: nothing is transposed.
    """
    n = a.shape[0]
    blocks = -(-size // 32)  # j
    out = np.empty((2 * blocks, n), dtype=np.uint16)
    low_type = np.uint8 if g <= 1 << 7 else np.uint16 if g <= 1 << 15 else np.uint32  # holds 2 g - 2
    c = -PRIME % g
    power_of_two = g & (g - 1) == 0
    rows = max(4, min(HIT_ROWS, (CHUNK_ELEMENTS // blocks) // 4 * 4))
    step = max(1, HIT_BYTES // (32 * rows))  # blocks of 32 values per step
    offsets = np.arange(32, dtype=np.int64)[:, None]
    starts = np.arange(blocks, dtype=np.int64)[:, None]
    for lo in range(0, n, rows):
        hi = min(lo + rows, n)
        m = -(-(hi - lo) // 4) * 4  # the last block is padded with copies of its last report
        pick = np.minimum(np.arange(lo, lo + m), hi - 1) if m > hi - lo else slice(lo, hi)
        ai, bi, yi = (np.asarray(v[pick], dtype=np.int64) for v in (a, b, y))
        d32 = _mod_prime(offsets * ai)  # (32, m): D_l, l = 16 h + 8 p + t
        d = np.empty((2, 8, m, 2), dtype=np.uint32)  # (h, t, report, p)
        d[...] = d32.reshape(2, 2, 8, m).transpose(0, 2, 3, 1)
        d = d.reshape(2, 8, 2 * m)
        cj = _mod_prime(starts * _mod_prime(ai * 32) + bi).astype(np.uint32)  # (blocks, m): C_j
        threshold = np.repeat(np.uint32(PRIME) - cj, 2, axis=1)  # carry where D_l >= P - C_j
        d_mod: np.ndarray
        target: np.ndarray
        if power_of_two:  # a mask, not a division (y - C_j wraps modulo 2^32, a multiple of g)
            d_mod, target = d & np.uint32(g - 1), (yi.astype(np.uint32) - cj) & np.uint32(g - 1)
        else:
            d_mod, target = d % g, (yi - cj.astype(np.int64)) % g
        d_mod = d_mod.astype(low_type)
        target = np.repeat(target.astype(low_type), 2, axis=1)
        for j0 in range(0, blocks, step):
            j1 = min(j0 + step, blocks)
            hit = np.greater_equal(d, threshold[j0:j1, None, None, :])  # (j, h, t, 2 m)
            low: np.ndarray = hit.view(np.uint8) if low_type is np.uint8 else hit.astype(low_type)
            if c != 1:
                low *= low_type(c)
            low += d_mod
            if power_of_two:
                low &= low_type(g - 1)
            else:  # below 2 g: x - g wraps above x where x < g
                np.minimum(low, low - low_type(g), out=low)
            np.equal(low, target[j0:j1, None, None, :], out=hit)
            bits = hit.view(np.uint64)  # 8 reports' 0/1 bytes per word: shifts stay within each byte
            packed = bits[:, :, 7].copy()
            for t in range(6, -1, -1):
                packed <<= np.uint64(1)
                packed |= bits[:, :, t]
            out[2 * j0 : 2 * j1, lo:hi] = packed.view(np.uint16).reshape(2 * (j1 - j0), m)[:, : hi - lo]
    for q in range(max(0, 2 * blocks - 2), 2 * blocks):  # the values from size on (hashed, not in X)
        out[q] &= np.uint16((1 << min(16, max(0, size - 16 * q))) - 1)
    return out[: -(-size // 16)]


class LocalHashing(Mechanism):
    """Base of the local hashing mechanisms with a fresh hash per user: set ``buckets`` in ``_validate``."""

    report_width = 3
    #: the dense likelihood hashes every value for every report, as the sparse one does, and stores it all
    structured_min_size = 0
    # e^-eps must stay a normal float: the likelihood operator's smaller factor is exactly e^-eps
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    #: g, the number of hash buckets (set by _validate)
    buckets: int = 2

    def _validate(self) -> None:
        if self.domain.size > PRIME:
            raise ParameterError(
                f"local hashing hashes value indices modulo {PRIME}; the domain has {self.domain.size} values",
                field="domain",
                hint=f"use a domain of at most {PRIME} values",
            )

    # ----------------------------------------------------------- probabilities
    @property
    def p(self) -> float:
        """P(y = h(x)) = e^eps / (e^eps + g - 1), without overflow for large eps."""
        return 1.0 / (1.0 + (self.buckets - 1) * math.exp(-self.eps))

    @property
    def _log_p(self) -> float:
        return -math.log1p((self.buckets - 1) * math.exp(-self.eps))

    @property
    def _p_minus_one_over_g(self) -> float:
        """p - 1/g = (g - 1)(e^eps - 1) / (g (e^eps + g - 1)), without cancellation."""
        g = self.buckets
        return (g - 1) * -math.expm1(-self.eps) / (g * (1.0 + (g - 1) * math.exp(-self.eps)))

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    # ------------------------------------------------------------- contract
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n: int = values.shape[0]
        g = self.buckets
        a = rng.integers(1, PRIME, size=n, dtype=np.int64)
        b = rng.integers(0, PRIME, size=n, dtype=np.int64)
        h = universal_hash(a, b, values, g)
        keep = rng.random(n) < self.p
        other = (h + 1 + rng.integers(0, g - 1, size=n)) % g  # uniform over the g - 1 other buckets
        return np.column_stack([a, b, np.where(keep, h, other)])

    def _checked(self, reports: np.ndarray) -> np.ndarray:
        a, b, y = reports.T
        bad = (a < 1) | (a >= PRIME) | (b < 0) | (b >= PRIME) | (y < 0) | (y >= self.buckets)
        if bad.any():
            report = tuple(int(v) for v in reports[np.argmax(bad)])
            raise EstimationError(
                f"report {report} is not an output of {self!r} (a in 1..{PRIME - 1}, b in 0..{PRIME - 1},"
                f" y in 0..{self.buckets - 1})",
                hint="check that the reports were produced by this mechanism",
            )
        return reports

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        # E[d, x] = [h_{a_d,b_d}(x) = y_d] as the structured likelihood computes it, unpacked by blocks of reports
        # (as the operator's rows are, to bools: its rows, floats r + (1 - r) bits, made this 4x slower)
        reports = self._checked(reports)
        hit = LOG_HASH_PROB + self._log_p
        k = self.domain.size
        out = np.empty((reports.shape[0], k))
        step = max(1, CHUNK_ELEMENTS // k)
        for lo in range(0, reports.shape[0], step):
            a, b, y = (reports[lo : lo + step, j] for j in range(3))
            halves = hash_hit_halfwords(a, b, y, k, self.buckets)  # (values / 16, reports)
            # little-endian halfwords: byte 2 q holds values 16 q..16 q + 7, byte 2 q + 1 the next 8
            raw = np.ascontiguousarray(halves.T).view(np.uint8)
            support = np.unpackbits(raw, axis=1, bitorder="little")[:, :k].view(bool)
            out[lo : lo + step] = np.where(support, hit, hit - self.eps)
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        # the supports packed 16 values per halfword, value-major (8 times smaller than a CSR matrix's set bits)
        reports = self._checked(reports)
        k = self.domain.size
        halves = hash_hit_halfwords(reports[:, 0], reports[:, 1], reports[:, 2], k, self.buckets)
        shift = np.full(reports.shape[0], LOG_HASH_PROB + self._log_p)
        return shift, constant_plus_halfwords(halves, k, math.exp(-self.eps))

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # Wang et al. (2017): a report supports x w.p. p if x is the true value, else 1/g (two values collide
        # w.p. 1/g - O(1/P), the final mod g being uniform up to O(g/P)), so E[C_x / n] = 1/g + (p - 1/g) theta_x
        # up to a bias of O(1/P) / (p - 1/g), about 1e-9 at eps = 1.
        reports = self._checked(reports)
        counts = np.asarray(counts, dtype=float)
        k = self.domain.size
        supported = np.zeros(k)
        # the supports as the likelihood packs them, by blocks of reports (a few MB each); H with r = 0 is their
        # 0/1 matrix, so H^T c counts the reports supporting each value: sums of whole counts, exact in any
        # order (the same numbers as summing over the hashed values, 3x faster at k = 1024, 10^6 reports)
        step = max(HIT_ROWS, SUPPORT_BYTES // (2 * -(-k // 16)) // HIT_ROWS * HIT_ROWS)
        for lo in range(0, reports.shape[0], step):
            a, b, y = (reports[lo : lo + step, j] for j in range(3))
            halves = hash_hit_halfwords(a, b, y, k, self.buckets)
            supported += constant_plus_halfwords(halves, k, 0.0).rmatvec(counts[lo : lo + step])
        return (supported / counts.sum() - 1.0 / self.buckets) / self._p_minus_one_over_g

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        """Wang et al. 2017: a report supports x w.p. p for a user holding x, 1/g for the others (up to
        O(1/P), the family's collision bias)."""
        return count_estimate_variance(theta, self.p, 1.0 / self.buckets, self._p_minus_one_over_g)

    # No _likely_subset: a value is unlikely (004 Def. 2) only if its support set is strictly inside
    # another value's, which hashed reports almost never produce; checking it costs O(|X|^2 D).


class OptimizedLocalHashing(LocalHashing):
    """OLH, optimized local hashing (Wang, Blocki, Li & Jha 2017): g-ary RR on a random hash, g = round(e^eps+1)."""

    name = "olh"
    g = Param(
        "int",
        None,
        ge=2,
        doc="hash buckets (default round(e^eps + 1), halves up; Wang et al.'s variance-optimal real g is e^eps + 1)",
    )

    def _validate(self) -> None:
        if self.g is None:
            if self.eps > math.log(PRIME - 2):
                raise ParameterError(
                    f"eps = {self.eps:g} asks for round(e^eps + 1) > {PRIME - 1} hash buckets",
                    field="eps",
                    hint=f"choose eps <= {math.floor(math.log(PRIME - 2) * 100) / 100:g} or give g",
                )
            self.buckets = int(math.floor(math.exp(self.eps) + 1.5))
        else:
            if self.g > PRIME - 1:
                raise ParameterError(f"must be < {PRIME}, got {self.g}", field="g", hint=f"choose g <= {PRIME - 1}")
            self.buckets = self.g
        super()._validate()


class BinaryLocalHashing(LocalHashing):
    """BLH, binary local hashing (Wang et al. 2017): randomized response on a random hash to 2 buckets."""

    name = "blh"


@hookimpl
def register_mechanisms(register):
    register(OptimizedLocalHashing)
    register(BinaryLocalHashing)
