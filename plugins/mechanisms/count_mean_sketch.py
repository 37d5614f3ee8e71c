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
        # int64-exact: a x + b < 2^31 k <= 2^62 for k <= P
        out = (a[:, None] * np.arange(k, dtype=np.int64)[None, :] + b[:, None]) % PRIME % self.buckets
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

        By blocks of hashes: each hash's values sorted by bucket, and the pairs d apart in that order that
        share a bucket counted, for d = 1, 2, ... until no bucket holds d + 1 values. O(k hashes log k)
        work and O(k^2) memory, where the dense one-hot B took k hashes m floats (275 GB for Apple's
        65,536 x 1,024 sketch at k = 1,024). Whole numbers: the same as the dense product's, bit for bit.
        """
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
        out = pairs.reshape(k, k)
        out += out.T  # each unordered pair was counted once
        out[np.diag_indices(k)] = self.hashes  # every hash collides a value with itself
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
        """``C^-1 s / n`` from the tallies of :meth:`_tallies` (module docstring); None if C is singular."""
        if self._collision_factor is None:
            return None
        # Apple's sketch row j: sum of c (v - 1/2) + 1/2 over the reports of hash j
        sketch = self.c_eps * (ones - per_hash[:, None] / 2) + per_hash[:, None] / 2
        return self._solve(sketch[np.arange(self.hashes)[:, None], self.table].sum(axis=0) / n)

    def _bit_counts(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Users of hash j setting bucket b (hashes x m, row-major), then users of each hash (hashes)."""
        ones, per_hash = self._tallies(reports, np.asarray(counts, dtype=float))
        return np.rint(np.concatenate([ones.ravel(), per_hash]))

    def _bit_count_estimate(self, tally: np.ndarray, n: int) -> np.ndarray | None:
        """:meth:`_unbiased_estimate` from :meth:`_bit_counts`' tally: the same numbers for the same tally."""
        cells = self.hashes * self.buckets
        if tally.shape != (cells + self.hashes,):
            raise EstimationError(f"{self!r} counts {cells + self.hashes} numbers per tally, got {tally.shape}")
        ones = tally[:cells].reshape(self.hashes, self.buckets).astype(float)
        return self._sketch_estimate(ones, tally[cells:].astype(float), float(n))

    def _sample_bit_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The tally of :meth:`_bit_counts` without a report, O(k hashes + hashes m) whatever the users.

        A user's hash is uniform whatever its value: the users of each value split multinomially over
        the hashes; ``H[j, b]``, the users of hash j whose value it sends to b, add up from those splits.
        Given j, every bit is flipped independently w.p. f: bucket b of hash j is set by
        ``Binomial(H[j, b], 1 - f) + Binomial(N_j - H[j, b], f)`` users.
        """
        m, hashes = self.buckets, self.hashes
        require_memory(
            8.0 * (4 * hashes * m + 3 * (1 << 24)),
            f"the {hashes} x {m} per-bucket counts of {self.name}",
            hint="use fewer hashes or buckets",
        )
        held = np.zeros(hashes * m)  # H, float sums of whole numbers: exact below 2^53
        per_hash = np.zeros(hashes, dtype=np.int64)
        uniform = np.full(hashes, 1.0 / hashes)
        offsets = np.arange(hashes, dtype=np.int64)[:, None] * m
        values = np.flatnonzero(counts)
        step = max(1, (1 << 24) // hashes)  # values per block: 128 MB of splits, few passes over H
        for start in range(0, values.size, step):
            x = values[start : start + step]
            split = rng.multinomial(counts[x], uniform)  # (values, hashes)
            per_hash += split.sum(axis=0)
            held += np.bincount((offsets + self.table[:, x]).ravel(), weights=split.T.ravel(), minlength=held.size)
        hits = np.rint(held).astype(np.int64)
        ones = rng.binomial(hits, 1.0 - self.flip) + rng.binomial(np.repeat(per_hash, m) - hits, self.flip)
        return np.concatenate([ones, per_hash])

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
