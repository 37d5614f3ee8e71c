"""Apple's count-mean sketches CMS and HCMS (Apple's Differential Privacy Team, "Learning with privacy at scale", 2017).

HCMS. The collector fixes a family of ``hashes`` functions h_j(x) = ((a_j x + b_j) mod P) mod m of the
Carter-Wegman family (P = 2^31 - 1), drawn once from ``family_seed``, into m = ``buckets``
buckets (a power of 2). A user holding x draws j uniformly among the hashes and l uniformly in
0..m-1, and reports (j, l, y): y the parity bit of the Hadamard coefficient
H[l, h_j(x)] = (-1)^popcount(l & h_j(x)), flipped w.p. 1 - p = 1 / (e^eps + 1). A report is the
single output index z = 2 (j m + l) + y (y = 0 codes the coefficient +1), so outputs are finite
(``2 hashes m`` of them) and users are simulated by counts from the matrix::

    P(z | x) = (p if y = parity(l & h_j(x)) else 1 - p) / (hashes m),   p = e^eps / (e^eps + 1)

Likelihood ratios are 1 or e^(+-eps): eps-LDP, tight.

The estimate. Apple's server adds c_eps (+-1) H[l, .] (c_eps = (e^eps + 1) / (e^eps - 1)) to row j
of its sketch, so that each report adds ``s_x = c_eps (+-1) H[l, h_j(x)]`` to the count of x; for a
user holding x' its mean is ``C[x, x']``, the share of the family's hashes on which x and x' collide.
The paper debiases with ``m / (m - 1) (s / n - 1 / m)``, exact only if C[x, x'] = 1/m for every
x != x' (fresh hashes); for a fixed family it is biased by O(1/sqrt(hashes)). Here, as in FLH, the
family's own collision system is solved, ``theta_hat = C^-1 s / n``. (With ideal collisions the paper's
estimate is unbiased too, but it subtracts the supports' expected total where C^-1 uses the observed
one, and varied more wherever tested.) C = B B^T / hashes (B the one-hot hashes) is positive definite unless the
family cannot tell the values apart (``hashes (m - 1) + 1 < k``, or two values colliding on every
hash): then no unbiased estimate exists, and GIBU still gives the MLE. Since ``E[s s^T] = c_eps^2 C``
whatever the user's value, ``n Var[theta_hat_x] = c_eps^2 (C^-1)_xx - theta_x``.

CMS. Same family; a user holding x draws j and reports (j, v), v the one-hot vector of h_j(x) in m
bits with each bit flipped w.p. f = 1 / (e^(eps/2) + 1): an unbounded number of outputs (2^m per
hash), so a report is the row (j, the m bits packed 62 to an int64 word) and the likelihood is
structured::

    P(j, v | x) = f^|v| (1 - f)^(m - |v|) e^(eps/2) / hashes * (1 if v[h_j(x)] else e^-eps)

(ratios 1 or e^(+-eps): eps-LDP, tight). The server adds ``s_x = c (v[h_j(x)] - 1/2) + 1/2``
(c = (e^(eps/2) + 1) / (e^(eps/2) - 1)), whose mean is again C[x, x']: the same estimate
``C^-1 s / n``. Given j, the bits are independent, so ``E[s s^T] = (c^2 - 1) / 4 C`` plus the
collisions with the user's own bucket, whence (as for FLH)
``n Var = (c^2 - 1) / 4 (C^-1)_xx + diag(C^-1 B diag(w) B^T C^-1) / hashes - theta``, B the one-hot
hashes and w[j, b] the share of users that h_j sends to bucket b.
"""

from __future__ import annotations

import math
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    WORD_BITS,
    EstimationError,
    Mechanism,
    Param,
    ParameterError,
    Privacy,
    constant_plus_bits,
    hookimpl,
    rank_one_plus_sparse,
    require_memory,
    set_bit_counts,
    with_exact_rows,
)

if TYPE_CHECKING:  # scipy is imported where it is used: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: the Mersenne prime of the hash family (OLH's)
PRIME = (1 << 31) - 1
#: the most buckets CMS takes: each report is m bits (2 MB at 2^24) and sampling one user draws m floats
#: (134 MB), so m = 10^9 took 8 GB per report; Apple's deployment uses m = 1024
MAX_CMS_BUCKETS = 1 << 24
#: the most hash functions a sketch's family holds: the family's table is hashes x k integers and HCMS's matrix
#: 2 hashes m columns per value, so 10^9 hashes took minutes before any memory check; Apple's uses 65,536
MAX_SKETCH_HASHES = 1 << 20
#: from this many hash-table entries (hashes x k) up, the tally's bookkeeping and the collision matrix run
#: compiled (:mod:`ldpsim_plugins.mechanisms.sketch_kernels`); below, numba's import costs more than it saves
KERNEL_MIN_ENTRIES = 1 << 20
#: the compiled collision count chains values by bucket (8 bytes a bucket): wider hashes use numpy's sort
KERNEL_MAX_BUCKETS = 1 << 22
#: a value's users are split over the hashes by one multinomial beyond this many users per hash, by
#: drawing each user's hash up to it. Measured at 65,536 hashes (ms per value, user by user vs multinomial):
#: 3.5 vs 9.2 at 16 users per hash, 5.4 vs 7.4 at 32, 9.1 vs 6.7 at 64
MULTINOMIAL_MIN_USERS_PER_HASH = 32
#: users whose hashes are drawn at once when the split is drawn user by user (8-16 MB of hashes)
USER_BLOCK = 1 << 22


def sketch_loops(entries: int) -> ModuleType | None:
    """The compiled loops of the sketches (:mod:`ldpsim_plugins.mechanisms.sketch_kernels`) for a family of
    ``entries`` hash-table entries, or None where numpy's loops are the ones to run.

    Parameters
    ----------
    entries
        hashes x values: the size of the table the loops read.

    Returns
    -------
    module or None
        None below :data:`KERNEL_MIN_ENTRIES` and where numba cannot be imported; else the kernels,
        imported (numba with them) on first use. Both give the same whole numbers.
    """
    if entries < KERNEL_MIN_ENTRIES:
        return None
    try:
        from . import sketch_kernels as kernels
    except ImportError:  # numba missing or unusable on this platform
        return None
    return kernels


def parity(v: np.ndarray) -> np.ndarray:
    """popcount(v) mod 2 of non-negative int64s, elementwise (np.bitwise_count needs numpy 2)."""
    for shift in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> shift)
    return v & 1


def hadamard_transform(a: np.ndarray) -> np.ndarray:
    """``a @ H_m`` along the last axis (m a power of 2, H Sylvester's): one butterfly pass per bit of m."""
    size = a.shape[-1]
    lead = a.shape[:-1]
    out = np.asarray(a, dtype=float)
    h = 1
    while h < size:
        blocks = out.reshape(*lead, size // (2 * h), 2, h)
        out = np.stack([blocks[..., 0, :] + blocks[..., 1, :], blocks[..., 0, :] - blocks[..., 1, :]], axis=-2)
        h *= 2
    return out.reshape(a.shape)


class SketchFamily(Mechanism):
    """The fixed family of hashes both sketches share, its collision system and the estimate solving it."""

    # 1 - p = 1 / (e^eps + 1) must stay a normal float
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    hashes = Param("int", 16, ge=1, doc="k, hash functions in the collector's fixed family")
    family_seed = Param("int", 0, ge=0, doc="seed the family of hash functions is drawn from")
    #: m, buckets of each hash: a parameter of each sketch, documented there
    buckets: int

    def _validate(self) -> None:
        if self.hashes > MAX_SKETCH_HASHES:
            raise ParameterError(
                f"{self.hashes:,} hash functions, more than the {MAX_SKETCH_HASHES:,} a sketch's family may hold",
                field="hashes",
                hint=f"give hashes <= {MAX_SKETCH_HASHES:,}",
            )
        if self.domain.size > PRIME:
            raise ParameterError(
                f"the sketch hashes value indices modulo {PRIME}; the domain has {self.domain.size} values",
                field="domain",
                hint=f"use a domain of at most {PRIME} values",
            )

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @cached_property
    def table(self) -> np.ndarray:
        """(hashes, k) read-only h_j(x) for every hash of the family and every value."""
        k = self.domain.size
        require_memory(
            8.0 * self.hashes * k, f"the {self.hashes} x {k} hash table of {self.name}", hint="use fewer hashes"
        )
        rng = np.random.default_rng(np.random.SeedSequence(self.family_seed))
        a = rng.integers(1, PRIME, size=self.hashes, dtype=np.int64)
        b = rng.integers(0, PRIME, size=self.hashes, dtype=np.int64)
        x = np.arange(k, dtype=np.int64)
        out = np.empty((self.hashes, k), dtype=np.int64)
        rows, cols = max(1, (1 << 16) // k), min(k, 1 << 16)  # blocks of 512 KB: 10x faster than one pass
        for lo in range(0, self.hashes, rows):
            for left in range(0, k, cols):
                v = a[lo : lo + rows, None] * x[left : left + cols]  # int64-exact: a x + b < 2^31 k <= 2^62 for k <= P
                v += b[lo : lo + rows, None]
                v %= PRIME
                if self.buckets & (self.buckets - 1) == 0:
                    v &= self.buckets - 1
                else:
                    v %= self.buckets
                out[lo : lo + rows, left : left + cols] = v
        out.setflags(write=False)
        return out

    @cached_property
    def _one_hot(self) -> np.ndarray:
        """(k, hashes * m) float32 0/1: value x lands in bucket (j, h_j(x)); exact sums below 2^24."""
        k, m = self.domain.size, self.buckets
        require_memory(
            4.0 * k * self.hashes * m, f"the {k} x {self.hashes * m} one-hot hashes of {self.name}", hint="fewer hashes"
        )
        hot = np.zeros((k, self.hashes, m), dtype=np.float32)
        hot[np.arange(k)[:, None], np.arange(self.hashes)[None, :], self.table.T] = 1.0
        return hot.reshape(k, -1)

    @cached_property
    def _collision_factor(self):  # scipy's Cholesky factor, or None
        """Cholesky factor of C, C[x, x'] the share of hashes colliding x and x'; None if C is singular."""
        from scipy.linalg import LinAlgError, cho_factor

        k = self.domain.size
        require_memory(3 * 8.0 * k * k, f"the {k} x {k} collision matrix of {self.name}", hint="use fewer values")
        collisions = self._collision_counts() / self.hashes
        try:
            factor = cho_factor(collisions, lower=True, check_finite=False)
        except LinAlgError:
            return None
        diag = np.abs(np.diag(factor[0]))
        return factor if diag.min() > 1e-7 * diag.max() else None

    def _collision_counts(self) -> np.ndarray:
        """(k, k) float: how many of the family's hashes collide x and x', ``B B^T`` for the one-hot hashes B.

        Compiled (:func:`sketch_loops`, up to :data:`KERNEL_MAX_BUCKETS` buckets): each hash's values
        chained by bucket and the pairs sharing one counted, O(k + pairs) per hash. numpy: by blocks of
        hashes, each hash's values sorted by bucket, and the pairs d apart in that order that share a
        bucket counted, for d = 1, 2, ... until no bucket holds d + 1 values, O(k hashes log k). O(k^2)
        memory either way, where the dense one-hot B took k hashes m floats (275 GB for Apple's 65,536 x
        1,024 sketch at k = 1,024). Whole numbers: the same as the dense product's, bit for bit.
        """
        k = self.domain.size
        kernels = sketch_loops(self.hashes * k) if self.buckets <= KERNEL_MAX_BUCKETS else None
        if kernels is not None:
            out = np.zeros((k, k))
            kernels.collision_pairs(self.table, np.full(self.buckets, -1, dtype=np.int64), out)
        else:
            out = self._sorted_collision_pairs().reshape(k, k)
        out += out.T  # each unordered pair was counted once
        out[np.diag_indices(k)] = self.hashes  # every hash collides a value with itself
        return out

    def _sorted_collision_pairs(self) -> np.ndarray:
        """(k^2,) the pairs x > y sharing a bucket, counted over the hashes at [x k + y] (numpy's loops)."""
        k = self.domain.size
        pairs = np.zeros(k * k)
        step = max(1, (1 << 22) // k)  # hashes per block: 4 M entries
        for start in range(0, self.hashes, step):
            block = self.table[start : start + step]  # (b, k)
            order = np.argsort(block, axis=1, kind="stable")
            buckets = np.take_along_axis(block, order, axis=1)
            d = 1
            while d < k:
                same = buckets[:, d:] == buckets[:, :-d]
                if not same.any():
                    break
                keys = order[:, d:][same] * k + order[:, :-d][same]
                pairs += np.bincount(keys, minlength=k * k)
                d += 1
        return pairs

    def _support_sums(self, ones: np.ndarray) -> np.ndarray:
        """``sum_j ones[j, h_j(x)]`` for every value x, by blocks of hashes (whole numbers: exact in any order)."""
        k = self.domain.size
        out = np.zeros(k)
        step = max(1, (1 << 22) // k)  # hashes per block: 4 M entries
        for lo in range(0, self.hashes, step):
            out += np.take_along_axis(ones[lo : lo + step], self.table[lo : lo + step], axis=1).sum(axis=0)
        return out

    def _solve(self, share: np.ndarray) -> np.ndarray | None:
        """C^-1 share, or None when no unbiased estimate exists."""
        factor = self._collision_factor
        if factor is None:
            return None
        from scipy.linalg import cho_solve

        return cho_solve(factor, share, check_finite=False)


class HadamardCountMeanSketch(SketchFamily):
    """HCMS, Apple's Hadamard count-mean sketch: one randomized Hadamard coefficient of a hashed value."""

    name = "hcms"
    buckets = Param("int", 128, ge=2, doc="m, buckets of each hash (the sketch's width): a power of 2")

    def _validate(self) -> None:
        super()._validate()
        if self.buckets & (self.buckets - 1) or self.buckets > 1 << 30:
            smaller = 1 << min(self.buckets.bit_length() - 1, 30)
            raise ParameterError(
                f"must be a power of 2 (the Hadamard order) of at most 2^30, got {self.buckets}",
                field="buckets",
                hint=f"choose buckets = {smaller} or {2 * smaller}" if smaller < 1 << 30 else "choose 2^30 or fewer",
            )

    @property
    def p(self) -> float:
        """P(the true coefficient is reported) = e^eps / (e^eps + 1)."""
        return 1.0 / (1.0 + math.exp(-self.eps))

    @property
    def c_eps(self) -> float:
        """Apple's debiasing factor (e^eps + 1) / (e^eps - 1) = 1 / (2p - 1), without cancellation."""
        return 1.0 / math.tanh(self.eps / 2)

    # ------------------------------------------------------------- contract
    def _output_count(self) -> int:
        return 2 * self.hashes * self.buckets

    def _matrix(self) -> np.ndarray:
        k, m = self.domain.size, self.buckets
        require_memory(  # at the peak: the int64 bits, two of parity's temporaries, then the bits, out and a where
            40.0 * k * self.hashes * m, f"the {k} x {self.hashes * m} coefficients of {self.name}", hint="fewer hashes"
        )
        # bit[x, j, l] = parity(l & h_j(x)): the reported bit y when nothing is flipped
        bit = parity(self.table.T[:, :, None] & np.arange(m, dtype=np.int64)[None, None, :])
        scale = 1.0 / (self.hashes * m)
        hit, miss = self.p * scale, scale / (1.0 + math.exp(self.eps))
        out = np.empty((k, self.hashes, m, 2))
        out[..., 0] = np.where(bit == 0, hit, miss)
        out[..., 1] = np.where(bit == 1, hit, miss)
        return out.reshape(k, -1)

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        z = reports[:, 0]
        self.require_outputs(z, 2 * self.hashes * self.buckets)
        if self._collision_factor is None:
            return None
        counts = np.asarray(counts, dtype=float)
        tally = np.bincount(z, weights=counts, minlength=2 * self.hashes * self.buckets).reshape(self.hashes, -1, 2)
        signed = tally[..., 0] - tally[..., 1]  # (hashes, m): sum of the reported +-1 at (j, l)
        sketch = hadamard_transform(signed)  # Apple's sketch before debiasing, row j over buckets
        return self._solve(sketch[np.arange(self.hashes)[:, None], self.table].sum(axis=0) * self.c_eps / counts.sum())

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        """``n Var = c_eps^2 (C^-1)_xx - theta_x``: E[s s^T] = c_eps^2 C for every user, E[s] = C e_x'."""
        inverse = self._solve(np.eye(self.domain.size))
        if inverse is None:
            return None
        return self.c_eps**2 * np.diag(inverse) - np.asarray(theta, dtype=float)

    # No _likely_subset: a value's likely reports are almost never strictly inside another's.


class CountMeanSketch(SketchFamily):
    """CMS, Apple's count-mean sketch: the one-hot m-bit vector of a hashed value, each bit flipped w.p. 1/(e^(eps/2)+1)."""

    name = "cms"
    buckets = Param("int", 128, ge=2, doc="m, buckets of each hash (the sketch's width, bits per report)")
    #: the dense likelihood unpacks every report's m bits: the sparse one is never slower
    structured_min_size = 0
    #: users per chunk of (users x m) temporaries in sampling and unpacking
    chunk_elements = 1 << 21

    def _validate(self) -> None:
        super()._validate()
        if self.buckets > MAX_CMS_BUCKETS:
            raise ParameterError(
                f"{self.buckets:,} buckets, more than the {MAX_CMS_BUCKETS:,} bits a CMS report may hold",
                field="buckets",
                hint=f"give buckets <= {MAX_CMS_BUCKETS:,} (or hcms: one bit per report)",
            )
        self.words = -(-self.buckets // WORD_BITS)
        self.report_width = 1 + self.words

    @property
    def flip(self) -> float:
        """f = 1 / (e^(eps/2) + 1), the chance each bit is flipped."""
        return 1.0 / (1.0 + math.exp(self.eps / 2))

    @property
    def c_eps(self) -> float:
        """Apple's debiasing factor (e^(eps/2) + 1) / (e^(eps/2) - 1) = 1 / (1 - 2f)."""
        return 1.0 / math.tanh(self.eps / 4)

    # ------------------------------------------------------------- bit vectors
    def _pack(self, bits: np.ndarray) -> np.ndarray:
        """(n, m) bool -> (n, words) int64, bit b at bit b % 62 of word b // 62 (every word below 2^62)."""
        n = bits.shape[0]
        padded = np.zeros((n, self.words, 64), dtype=bool)
        wide = np.zeros((n, self.words * WORD_BITS), dtype=bool)
        wide[:, : self.buckets] = bits
        padded[:, :, :WORD_BITS] = wide.reshape(n, self.words, WORD_BITS)
        return np.packbits(padded, axis=-1, bitorder="little").view("<i8").reshape(n, self.words).astype(np.int64)

    def _unpack(self, words: np.ndarray) -> np.ndarray:
        """(n, words) int64 -> (n, m) bool."""
        n = words.shape[0]
        raw = np.ascontiguousarray(words, dtype="<i8").view(np.uint8).reshape(n, self.words, 8)
        bits = np.unpackbits(raw, axis=-1, bitorder="little")[:, :, :WORD_BITS]
        return bits.reshape(n, -1)[:, : self.buckets].astype(bool)

    def _checked_words(self, reports: np.ndarray) -> None:
        """EstimationError naming a report that is not an output (a hash index and m bits)."""
        j, words = reports[:, 0], reports[:, 1:]
        top = self.buckets - WORD_BITS * (self.words - 1)  # bits used in the last word
        bad = (j < 0) | (j >= self.hashes) | np.any((words < 0) | (words >= 1 << WORD_BITS), axis=1)
        bad |= (words[:, -1] >> top) != 0
        if bad.any():
            report = tuple(int(v) for v in reports[np.argmax(bad)])
            raise EstimationError(
                f"report {report} is not an output of {self!r} (a hash index and {self.buckets} bits)",
                hint="check that the reports were produced by this mechanism",
            )

    def _checked(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(j, (D, m) bits) of reports, or EstimationError naming one that is not an output."""
        self._checked_words(reports)
        j, words = reports[:, 0], reports[:, 1:]
        require_memory(
            float(words.shape[0]) * self.buckets, f"the bits of the reports of {self.name}", hint="use fewer buckets"
        )
        return j, self._unpack(words)

    def _support(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(|v| per report, (D, k) bool v[h_j(x)]): the bit of each report at each value's bucket."""
        j, bits = self._checked(reports)
        require_memory(
            float(j.size) * self.domain.size,
            f"the {j.size} x {self.domain.size} support of the reports of {self.name}",
            hint="use fewer values",
        )
        return bits.sum(axis=1), np.take_along_axis(bits, self.table[j], axis=1)

    # ------------------------------------------------------------- contract
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, m, f = values.shape[0], self.buckets, self.flip
        out = np.empty((n, self.report_width), dtype=np.int64)
        out[:, 0] = rng.integers(0, self.hashes, size=n, dtype=np.int64)
        step = max(1, self.chunk_elements // m)
        for start in range(0, n, step):
            rows = slice(start, min(start + step, n))
            bits = rng.random((rows.stop - start, m)) < f  # the flips
            hit = self.table[out[rows, 0], values[rows]]
            bits[np.arange(bits.shape[0]), hit] ^= True  # the one-hot bit, flipped or not
            out[rows, 1:] = self._pack(bits)
        return out

    def _shift(self, ones: np.ndarray) -> np.ndarray:
        """log P(j, v | x) for an x with v[h_j(x)] = 1, from |v|."""
        log_f, log_keep = -math.log1p(math.exp(self.eps / 2)), -math.log1p(math.exp(-self.eps / 2))
        return ones * log_f + (self.buckets - ones) * log_keep + self.eps / 2 - math.log(self.hashes)

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        ones, support = self._support(reports)
        return self._shift(ones)[:, None] - np.where(support, 0.0, self.eps)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        """The support ``v_d[h_j(x)]`` read from the packed reports, never a (reports x values) array.

        Reports are grouped by hash: ``S theta`` on group j is the packed bits (by per-byte tables,
        :func:`ldpsim.constant_plus_bits`) times the bucket sums of theta under ``h_j``, and
        ``S^T w`` the bits' weighted counts read back through ``h_j``. Nothing is unpacked: the
        work per pass is the reports' bytes, not their set bits as a float64 sparse product.
        """
        from scipy.sparse.linalg import LinearOperator

        self._checked_words(reports)
        j, words = reports[:, 0], np.ascontiguousarray(reports[:, 1:], dtype="<i8")
        k, m = self.domain.size, self.buckets
        order = np.argsort(j, kind="stable")
        starts = np.searchsorted(j[order], np.arange(self.hashes + 1))
        groups = [
            (h, order[starts[h] : starts[h + 1]], constant_plus_bits(words[order[starts[h] : starts[h + 1]]], m, 0.0))
            for h in range(self.hashes)
            if starts[h + 1] > starts[h]
        ]

        def matvec(theta: np.ndarray) -> np.ndarray:
            theta = np.ravel(theta).astype(float, copy=False)
            out = np.empty(j.size)
            for h, rows, bits in groups:
                out[rows] = bits @ np.bincount(self.table[h], weights=theta, minlength=m)
            return out

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.ravel(w).astype(float, copy=False)
            out = np.zeros(k)
            for h, rows, bits in groups:
                out += (bits.T @ w[rows])[self.table[h]]
            return out

        def rows(index: np.ndarray) -> np.ndarray:  # the few rows a sampled Newton Hessian reads
            return self._support(reports[np.asarray(index, dtype=np.intp)])[1].astype(float)

        support = with_exact_rows(LinearOperator((j.size, k), matvec=matvec, rmatvec=rmatvec, dtype=float), rows)
        return self._shift(set_bit_counts(words)), rank_one_plus_sparse(support, math.exp(-self.eps))

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        counts = np.asarray(counts, dtype=float)
        ones, per_hash = self._tallies(reports, counts)
        return self._sketch_estimate(ones, per_hash, counts.sum())

    def _tallies(self, reports: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(users of hash j setting bucket b, users of hash j): all the estimate reads of the reports."""
        ones = np.zeros((self.hashes, self.buckets))  # count-weighted reports of hash j setting bucket b
        per_hash = np.zeros(self.hashes)
        step = max(1, self.chunk_elements // self.buckets)  # bounded (reports x m) temporaries
        for start in range(0, reports.shape[0], step):
            j, bits = self._checked(reports[start : start + step])
            weights = counts[start : start + step]
            rows, cols = np.nonzero(bits)
            ones += np.bincount(j[rows] * self.buckets + cols, weights=weights[rows], minlength=ones.size).reshape(
                ones.shape
            )
            per_hash += np.bincount(j, weights=weights, minlength=self.hashes)
        return ones, per_hash

    def _sketch_estimate(self, ones: np.ndarray, per_hash: np.ndarray, n: float) -> np.ndarray | None:
        """``C^-1 s / n`` from the tallies of :meth:`_tallies` (module docstring); None if C is singular.

        Apple's sketch row j is ``c (ones[j] - N_j / 2) + N_j / 2`` (the sum of ``c (v - 1/2) + 1/2``
        over the reports of hash j), so ``s_x = c sum_j ones[j, h_j(x)] + (1 - c) / 2 sum_j N_j``: one
        exact sum of whole numbers per value, never the (hashes, m) sketch nor a (hashes, k) gather.
        """
        if self._collision_factor is None:
            return None
        share = self.c_eps * self._support_sums(ones) + (1.0 - self.c_eps) / 2 * float(np.sum(per_hash))
        return self._solve(share / n)

    def _bit_counts(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Users of hash j setting bucket b (hashes x m, row-major), then users of each hash (hashes)."""
        ones, per_hash = self._tallies(reports, np.asarray(counts, dtype=float))
        return np.rint(np.concatenate([ones.ravel(), per_hash]))

    def _bit_count_estimate(self, tally: np.ndarray, n: int) -> np.ndarray | None:
        """:meth:`_unbiased_estimate` from :meth:`_bit_counts`' tally: the same numbers for the same tally."""
        cells = self.hashes * self.buckets
        if tally.shape != (cells + self.hashes,):
            raise EstimationError(f"{self!r} counts {cells + self.hashes} numbers per tally, got {tally.shape}")
        ones = tally[:cells].reshape(self.hashes, self.buckets)
        return self._sketch_estimate(ones, tally[cells:].astype(float), float(n))

    def _sample_bit_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The tally of :meth:`_bit_counts` without a report: O(k hashes + hashes m) whatever the users.

        The law, given the users ``n_x`` of each value x. A user's hash is uniform and independent of
        its value and of the other users', so the users of x split over the hashes as
        ``Multinomial(n_x, 1/hashes)``, independently across values; ``H[j, b]``, the users of hash j
        whose value it sends to b, add up from those splits, and ``N_j = sum_b H[j, b]``. Given j, every
        bit is flipped independently w.p. f: bucket b of hash j is set by
        ``Binomial(H[j, b], 1 - f) + Binomial(N_j - H[j, b], f)`` users, independently across cells
        given H.

        Each value's split is drawn the cheaper of two exact ways: a multinomial over the hashes
        (``hashes - 1`` binomials, about 100 ns each) beyond :data:`MULTINOMIAL_MIN_USERS_PER_HASH`
        users per hash, else each user's hash drawn uniformly and counted (``n_x`` integers, about
        2-3 ns each with the counting) -- the multinomial's definition. The counting and spreading
        through the hash table are compiled (:func:`sketch_loops`) past :data:`KERNEL_MIN_ENTRIES`
        (numpy's loops below: the same whole numbers from the same draws). Every random number is drawn
        by ``rng``.
        """
        m, hashes = self.buckets, self.hashes
        cells = hashes * m
        require_memory(
            8.0 * (2 * cells + hashes * self.domain.size + 2 * (1 << 24)),
            f"the {hashes} x {m} per-bucket counts of {self.name}",
            hint="use fewer hashes or buckets",
        )
        counts = np.asarray(counts, dtype=np.int64)
        kernels = sketch_loops(hashes * self.domain.size)
        held = np.zeros(cells, dtype=np.int64)  # H, row-major
        values = np.flatnonzero(counts)
        many = counts[values] > MULTINOMIAL_MIN_USERS_PER_HASH * hashes
        self._add_drawn_users(values[~many], counts[values[~many]], rng, held, kernels)
        uniform = np.full(hashes, 1.0 / hashes)
        offsets = np.arange(hashes, dtype=np.int64) * m
        step = max(1, (1 << 24) // hashes)  # values per block: 128 MB of splits
        big = values[many]
        for start in range(0, big.size, step):
            x = big[start : start + step]
            split = rng.multinomial(counts[x], uniform)  # (values, hashes)
            if kernels is not None:
                kernels.add_splits(split, x, self.table, m, held)
            else:
                np.add.at(held, (offsets[None, :] + self.table[:, x].T).ravel(), split.ravel())
        per_hash = held.reshape(hashes, m).sum(axis=1)
        out = np.empty(cells + hashes, dtype=np.int64)
        out[cells:] = per_hash
        rows = max(1, (1 << 22) // m)  # hashes per block of binomials: 32 MB temporaries
        for lo in range(0, hashes, rows):
            hits = held[lo * m : (lo + rows) * m]
            rest = np.repeat(per_hash[lo : lo + rows], m) - hits
            out[lo * m : lo * m + hits.size] = rng.binomial(hits, 1.0 - self.flip) + rng.binomial(rest, self.flip)
        return out

    def _add_drawn_users(
        self,
        values: np.ndarray,
        users: np.ndarray,
        rng: np.random.Generator,
        held: np.ndarray,
        kernels: ModuleType | None,
    ) -> None:
        """``held[j m + h_j(x)] += 1`` for each of the ``users[i]`` users of ``values[i]``, j drawn uniformly.

        By blocks of about :data:`USER_BLOCK` users (a value with more is cut into pieces): one
        ``rng.integers`` per block, the users of each value in turn.
        """
        if values.size == 0:
            return
        m, hashes = self.buckets, self.hashes
        pieces = -(-users // USER_BLOCK)
        xs = np.repeat(values, pieces)
        ns = np.full(xs.size, USER_BLOCK, dtype=np.int64)
        ns[np.cumsum(pieces) - 1] = users - (pieces - 1) * USER_BLOCK
        block = (np.cumsum(ns) - 1) // USER_BLOCK  # a block's pieces end in one stretch of USER_BLOCK users
        bounds = [0, *(np.flatnonzero(np.diff(block)) + 1).tolist(), xs.size]
        width = 16 if hashes <= 1 << 16 else 32
        dtype = np.uint16 if width == 16 else np.uint32
        split = np.zeros(hashes, dtype=np.int64)  # the kernel's scratch
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            size = int(ns[lo:hi].sum())
            if hashes & (hashes - 1) == 0:  # uniform words' low bits are uniform: 1.2 ns a user, not 3
                drawn = rng.integers(0, 1 << width, size=size, dtype=dtype)
                drawn &= hashes - 1
            else:
                drawn = rng.integers(0, hashes, size=size, dtype=dtype)
            if kernels is not None:
                kernels.add_users(drawn, xs[lo:hi], ns[lo:hi], self.table, m, held, split)
            else:
                j = drawn.astype(np.int64)
                held += np.bincount(j * m + self.table[j, np.repeat(xs[lo:hi], ns[lo:hi])], minlength=held.size)

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        """``(c^2 - 1)/4 (C^-1)_xx + diag(C^-1 B diag(w) B^T C^-1) / hashes - theta`` (module docstring)."""
        if self._collision_factor is None:
            return None
        theta = np.asarray(theta, dtype=float)
        hot = self._one_hot.astype(float)
        require_memory(8.0 * 2 * hot.size, f"the variance terms of {self.name}", hint="use fewer hashes")
        spread = self._solve(hot)  # C^-1 B
        inverse = self._solve(np.eye(self.domain.size))
        assert spread is not None and inverse is not None
        own = np.einsum("xc,c,xc->x", spread, theta @ hot, spread) / self.hashes
        return (self.c_eps**2 - 1) / 4 * np.diag(inverse) + own - theta


@hookimpl
def register_mechanisms(register):
    register(HadamardCountMeanSketch)
    register(CountMeanSketch)
