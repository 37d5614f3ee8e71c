"""Apple's CMS and HCMS as channels over a candidate dictionary plus one lumped "other" value.

Apple's count-mean sketches (Differential Privacy Team, "Learning with privacy at scale", 2017) hash a value
with one of ``d`` hash functions into ``m`` buckets. The full-domain mechanisms
(:mod:`ldpsim_plugins.mechanisms.count_mean_sketch`) list every value; over an open domain the server only
ever asks about a *dictionary* of candidates. :class:`CMSLevel` and :class:`HCMSLevel` are the sketches'
channels restricted to the candidates, with every other value lumped into one value "other":

* **CMS** (eps): a user holding x draws ``j`` uniformly among the ``d`` hashes and reports ``(j, v)``, ``v``
  the one-hot vector of ``h_j(x)`` in ``m`` bits with each bit flipped w.p. ``f = 1 / (e^(eps/2) + 1)``::

      P(j, v | x) = f^|v| (1 - f)^(m - |v|) e^(eps/2) / d * (1 if v[h_j(x)] else e^-eps)

* **HCMS** (eps): the user draws ``j`` and a coefficient ``l`` uniformly in ``0 .. m-1`` (m a power of 2)
  and reports ``(j, l, y)``, ``y = parity(l & h_j(x))`` flipped w.p. ``1 / (e^eps + 1)``::

      P(j, l, y | x) = (p if y = parity(l & h_j(x)) else 1 - p) / (d m),   p = e^eps / (e^eps + 1)

Both rows have the form ``P = exp(shift_d) (r + (1 - r) hit_d(x))`` with ``r = e^-eps``: ``hit`` is
``v[h_j(x)]`` (CMS) or the coefficient's match (HCMS). **Other**: the server does not know a non-candidate's
hashes; for a hash family that behaves as a random function (the assumption, as for the sketches' own
analysis), a non-candidate's bucket under ``h_j`` is uniform on ``0 .. m-1`` and independent of the
candidates', so its row is the mean over the buckets: ``hit = |v| / m`` (CMS), and ``1/2`` for ``l != 0``,
``[y = 0]`` for ``l = 0`` (HCMS: half of the buckets ``b`` have ``parity(l & b) = 1`` unless ``l = 0``).
docs/theory/heavy-hitters.md derives them; tests/test_sketch_channels.py checks them against the enumeration
of a family under which the non-candidates fill every bucket equally.

Likelihood without a dense (reports x candidates x bits) array: per used hash ``j`` only the candidates'
buckets ``h_j(c)`` matter. CMS: each set bit of a report holds the candidates its hash sends to that bucket,
a sparse hit matrix of ``|v| c / m`` entries per report (found by sorting the (used hashes x candidates)
bucket cells once). HCMS: a dense float32 match matrix where the reports times the candidates are few,
else per pass the candidates' mass summed per bucket of each used hash (``T_j``), Walsh-Hadamard
transformed and read at each report's coefficient (``H^T w`` the same way back). The (used hashes x
candidates) bucket table is refused beyond what memory allows; a large dictionary is decoded on a working
set (:func:`ldpsim_plugins.estimators.sketch_dictionary.dictionary_mle`), whose screening and optimality
check read any values' hits blockwise (:meth:`CMSLevel.hit_scores`; compiled above 2^24 pairs).

Hashes (:class:`SketchHashes`): ``h_j(x) = ((a_j mix(x) mod 2^64) >> 32) m >> 32`` with ``mix`` SplitMix64's
finaliser and ``a_j`` odd 64-bit multipliers drawn from ``seed`` (multiply-shift; Apple uses SHA-256 of
``j || x``, whose cost per (hash, candidate) pair is far higher). Any object with ``hashes``, ``buckets``
and ``bucket(j, x)`` serves as a family.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from ldpsim import WORD_BITS, Categorical, Mechanism, ParameterError, Privacy, require_memory, with_exact_rows

from .heavy_hitters import OTHER, mix64

#: the most hashes a sketch channel's family may hold (Apple's CMS uses 65,536)
MAX_HASHES = 1 << 20
#: the most buckets (Apple's HCMS uses 32,768; a CMS report holds one bit per bucket)
MAX_BUCKETS = 1 << 24
#: candidates per block when a pass over (hashes x candidates) is computed without holding the table
BLOCK_ELEMENTS = 1 << 23
#: HCMS: the dense (reports x candidates) float32 match matrix is used where its entries are fewer than this
#: many times the transform path's butterflies (measured: a float32 product reads an entry ~4x faster than
#: a butterfly pass in numpy), and it fits in this many bytes
DENSE_FACTOR = 4.0
#: (used hashes x values) pairs from which :meth:`hit_scores` runs compiled (numba; a loop without temporaries)
KERNEL_MIN_PAIRS = 1 << 24
DENSE_BYTES = 2.0 * 2**30


class HashFamily(Protocol):
    """What a sketch channel needs of a hash family."""

    hashes: int
    buckets: int

    def bucket(self, j: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``h_j(x)`` in ``0 .. buckets - 1`` (int64), broadcasting ``j`` against ``x``."""
        ...


class SketchHashes:
    """A seeded family of ``hashes`` multiply-shift hashes of uint64 values into ``buckets`` buckets.

    Parameters
    ----------
    hashes : int
        d, the hash functions of the family.
    buckets : int
        m, the buckets of each.
    seed : int
        The family's seed (the collector's choice, public).
    """

    def __init__(self, hashes: int, buckets: int, seed: int = 0):
        if not 1 <= hashes <= MAX_HASHES:
            raise ParameterError(f"is {hashes:,}", field="hashes", hint=f"use 1..{MAX_HASHES:,} hash functions")
        if not 2 <= buckets <= MAX_BUCKETS:
            raise ParameterError(f"is {buckets:,}", field="buckets", hint=f"use 2..{MAX_BUCKETS:,} buckets")
        self.hashes, self.buckets, self.seed = int(hashes), int(buckets), int(seed)
        rng = np.random.default_rng(np.random.SeedSequence([0x5EED, self.seed]))
        self.multipliers = rng.integers(0, 2**64, size=hashes, dtype=np.uint64) | np.uint64(1)
        self.key = np.uint64(rng.integers(0, 2**63))

    def bucket(self, j: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``h_j(x)`` (int64), broadcasting the hash indices ``j`` against the uint64 values ``x``."""
        mixed = mix64(np.asarray(x, dtype=np.uint64) ^ self.key)
        with np.errstate(over="ignore"):
            top = (self.multipliers[np.asarray(j, dtype=np.int64)] * mixed) >> np.uint64(32)
            return ((top * np.uint64(self.buckets)) >> np.uint64(32)).astype(np.int64)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """(n, m) bool -> (n, ceil(m / 62)) int64, bit b at bit ``b % 62`` of word ``b // 62`` (the layout of
    ldpsim's bit-vector mechanisms and of the registered ``cms``)."""
    n, m = bits.shape
    words = -(-m // WORD_BITS)
    wide = np.zeros((n, words * WORD_BITS), dtype=bool)
    wide[:, :m] = bits
    weights = np.left_shift(np.int64(1), np.arange(WORD_BITS, dtype=np.int64))
    return wide.reshape(n, words, WORD_BITS).astype(np.int64) @ weights


def set_bits(words: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The set bits of packed reports: ``(report index, bucket)`` int64 pairs, in report order (unpacked in
    blocks of reports: a few MB of bits at a time)."""
    words = np.ascontiguousarray(words, dtype="<i8")
    n, w = words.shape
    rows, cols = [], []
    step = max(1, (1 << 24) // max(m, 1))
    for start in range(0, n, step):
        block = words[start : start + step]
        raw = block.view(np.uint8).reshape(block.shape[0], w, 8)
        bits = np.unpackbits(raw, axis=-1, bitorder="little")[:, :, :WORD_BITS].reshape(block.shape[0], -1)[:, :m]
        r, c = np.nonzero(bits)
        rows.append(r.astype(np.int64) + start)
        cols.append(c.astype(np.int64))
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(rows), np.concatenate(cols)


def cms_reports(keys: np.ndarray, family: HashFamily, eps: float, rng: np.random.Generator) -> np.ndarray:
    """CMS reports ``(j, packed m bits)`` of users holding ``keys`` (uint64), never drawing n x m floats.

    Each bit is flipped independently w.p. ``f = 1 / (e^(eps/2) + 1)``: the flipped positions of the n x m
    cells are a Bernoulli process, drawn as geometric gaps; then the one-hot bit ``h_j(key)`` is toggled.

    Parameters
    ----------
    keys : numpy.ndarray
        The users' values (uint64).
    family : HashFamily
        The sketch's hashes.
    eps : float
        The report's privacy level.
    rng : numpy.random.Generator
        The randomness.

    Returns
    -------
    numpy.ndarray
        ``(n, 1 + ceil(m / 62))`` int64: the hash index, then the packed bits.
    """
    n, m = int(keys.shape[0]), family.buckets
    words = -(-m // WORD_BITS)
    require_memory(8.0 * n * (1 + words), f"the {n:,} CMS reports of {1 + words} words", "sample fewer users")
    out = np.zeros((n, 1 + words), dtype=np.int64)
    out[:, 0] = rng.integers(0, family.hashes, size=n)
    flip = 1.0 / (1.0 + math.exp(eps / 2))
    flat = np.zeros(n * words, dtype=np.int64)  # the packed bits, row-major, written in place
    total = n * m
    start, chunk = -1, 1 << 22
    while True:  # flipped cells: positions of a Bernoulli(flip) process over the n x m cells, in order
        pos = start + np.cumsum(rng.geometric(flip, size=chunk))
        inside = pos[pos < total]
        if inside.size:
            user, bit = np.divmod(inside, m)
            cell = user * words + bit // WORD_BITS
            value = np.left_shift(np.int64(1), bit % WORD_BITS)
            first = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
            flat[cell[first]] |= np.bitwise_or.reduceat(value, first)
        if inside.size < pos.size:
            break
        start = int(pos[-1])
    hit = family.bucket(out[:, 0], keys)
    flat[np.arange(n) * words + hit // WORD_BITS] ^= np.left_shift(np.int64(1), hit % WORD_BITS)
    out[:, 1:] = flat.reshape(n, words)
    return out


def hcms_reports(keys: np.ndarray, family: HashFamily, eps: float, rng: np.random.Generator) -> np.ndarray:
    """HCMS reports ``(j, l, y)`` (int64 columns) of users holding ``keys``: ``y = parity(l & h_j(key))``
    flipped w.p. ``1 / (e^eps + 1)``.

    Parameters
    ----------
    keys : numpy.ndarray
        The users' values (uint64).
    family : HashFamily
        The sketch's hashes (``buckets`` a power of 2).
    eps : float
        The report's privacy level.
    rng : numpy.random.Generator
        The randomness.

    Returns
    -------
    numpy.ndarray
        ``(n, 3)`` int64.
    """
    n = int(keys.shape[0])
    j = rng.integers(0, family.hashes, size=n)
    coef = rng.integers(0, family.buckets, size=n)
    bit = np.bitwise_count(family.bucket(j, keys) & coef) & 1
    flip = rng.random(n) < 1.0 / (math.exp(eps) + 1.0)
    return np.stack([j, coef, (bit ^ flip).astype(np.int64)], axis=1)


def hadamard_transform(a: np.ndarray) -> np.ndarray:
    """``a @ H_m`` along the last axis (m a power of 2, H Sylvester's), on a copy, butterflies in place."""
    out = np.array(a, dtype=float)
    lead, m = out.shape[:-1], out.shape[-1]
    h = 1
    while h < m:
        view = out.reshape(*lead, m // (2 * h), 2, h)
        x, y = view[..., 0, :], view[..., 1, :]
        keep = x.copy()
        x += y
        np.subtract(keep, y, out=y)
        h *= 2
    return out


def _labels(candidates: np.ndarray) -> list[str]:
    return [f"0x{int(c):x}" for c in candidates] + [OTHER]


class _SketchLevel(Mechanism):
    """Shared machinery: rows ``exp(shift) (r + (1 - r) hit)``, per-hash bucket sums, blockwise scores."""

    structured_min_size = 0

    def __init__(self, candidates: np.ndarray, eps: float, family: HashFamily, complete: bool = False):
        self.complete = bool(complete)
        if not eps > 0:
            raise ParameterError(f"is {eps}", field="eps", hint="use a positive privacy level")
        self.candidates = np.asarray(candidates, dtype=np.uint64)
        self.eps = float(eps)
        self.family = family
        self.r = math.exp(-self.eps)
        super().__init__(Categorical(values=_labels(self.candidates)))

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    # ---------------------------------------------------------------- per-report pieces (subclasses)
    def _prepare(self, reports: np.ndarray) -> dict[str, Any]:
        raise NotImplementedError

    def _log_shift(self, prepared: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def _other_hit(self, prepared: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def _bucket_to_reports(self, prepared: dict[str, Any], sums: np.ndarray) -> np.ndarray:
        """Per report, ``sum_x theta_x hit_d(x)`` from the (used hashes, m) bucket sums of theta."""
        raise NotImplementedError

    def _reports_to_buckets(self, prepared: dict[str, Any], w: np.ndarray) -> np.ndarray:
        """(used hashes, m): per bucket b of hash j, ``sum_d w_d hit_d(x)`` for any x with ``h_j(x) = b``."""
        raise NotImplementedError

    # ---------------------------------------------------------------- the likelihood
    def _hit_rows(self, reports: np.ndarray) -> np.ndarray:
        """(D, c + 1) ``hit_d(x)``: candidates exactly, then "other"'s mean over a uniform bucket."""
        require_memory(
            16.0 * reports.shape[0] * (self.candidates.size + 1),
            f"the {reports.shape[0]:,} x {self.candidates.size + 1:,} rows of {self.name}",
            "use the structured likelihood",
        )
        buckets = self.family.bucket(reports[:, :1], self.candidates[None, :])  # (D, c)
        hits = self._hits_at(reports, buckets).astype(float)
        return np.concatenate([hits, self._other_hit(self._prepare(reports))[:, None]], axis=1)

    def _hits_at(self, reports: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        """(D, c) bool: whether report d hits a value hashed to ``buckets[d, i]`` by its hash."""
        raise NotImplementedError

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        prep = self._prepare(reports)
        with np.errstate(divide="ignore"):  # "other" of a complete dictionary: log 0
            return self._log_shift(prep)[:, None] + np.log(self._rows(reports))

    def _rows(self, reports: np.ndarray) -> np.ndarray:
        """(D, c + 1) rows over the shift: ``r + (1 - r) hit`` for candidates; "other"'s, 0 if complete."""
        rows = self.r + (1 - self.r) * self._hit_rows(reports)
        if self.complete:
            rows[:, -1] = 0.0
        return rows

    def _other_row(self, prep: dict[str, Any]) -> np.ndarray:
        """Per report, "other"'s row over the shift (0 when the dictionary is the whole domain)."""
        hit = self._other_hit(prep)
        return np.zeros(hit.size) if self.complete else self.r + (1 - self.r) * hit

    def _cells(self, prep: dict[str, Any]) -> np.ndarray:
        """(used hashes, c) flat bucket cells ``u m + h_{used[u]}(c)`` of the candidates (int32 where they fit)."""
        used, m, c = prep["used"], self.family.buckets, self.candidates.size
        require_memory(
            16.0 * used.size * c,
            f"the {used.size:,} x {c:,} bucket table of {self.name}'s candidates",
            "use fewer candidates (dictionary_mle decodes a large dictionary on a working set)",
        )
        cells = np.empty((used.size, c), dtype=np.int32 if used.size * m < 2**31 else np.int64)
        step = max(1, BLOCK_ELEMENTS // max(c, 1))
        for start in range(0, used.size, step):
            part = used[start : start + step]
            offsets = np.arange(start, start + part.size, dtype=np.int64)[:, None] * m
            cells[start : start + part.size] = offsets + self.family.bucket(part[:, None], self.candidates[None, :])
        return cells

    def _bucket_sums(self, prep: dict[str, Any], cells: np.ndarray, theta: np.ndarray) -> np.ndarray:
        size, m = prep["used"].size * self.family.buckets, self.family.buckets
        weights = np.broadcast_to(theta, cells.shape).ravel()
        return np.bincount(cells.ravel(), weights=weights, minlength=size).reshape(-1, m)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        from scipy.sparse.linalg import LinearOperator

        prep = self._prepare(reports)
        d, c = reports.shape[0], self.candidates.size
        cells = self._cells(prep)  # (U, c)
        other = self._other_row(prep)
        r = self.r

        def matvec(v: np.ndarray) -> np.ndarray:
            v = np.asarray(v, dtype=float).ravel()
            hit = self._bucket_to_reports(prep, self._bucket_sums(prep, cells, v[:c]))
            return r * v[:c].sum() + (1 - r) * hit + other * v[c]

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.asarray(w, dtype=float).ravel()
            per_bucket = self._reports_to_buckets(prep, w).ravel()
            cand = per_bucket[cells].sum(axis=0) if c else np.zeros(0)
            return np.concatenate([r * w.sum() + (1 - r) * cand, [other @ w]])

        def rows_of(index: np.ndarray) -> np.ndarray:
            return self._rows(reports[np.asarray(index, dtype=np.intp)])

        op = LinearOperator((d, c + 1), matvec=matvec, rmatvec=rmatvec, dtype=float)
        return self._log_shift(prep), with_exact_rows(op, rows_of)

    # ---------------------------------------------------------------- any values, blockwise
    def hit_scores(self, values: np.ndarray, reports: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``sum_d weights[:, d] hit_d(x)`` for every x of ``values`` (uint64, candidates or not).

        Computed in blocks of values, never holding the (used hashes x values) bucket table: the working-set
        decoder's screening and optimality check over a whole dictionary.

        Parameters
        ----------
        values : numpy.ndarray
            uint64 values.
        reports : numpy.ndarray
            The channel's reports.
        weights : numpy.ndarray
            (w, D) weights, one row per weighting.

        Returns
        -------
        numpy.ndarray
            (w, len(values)).
        """
        prep = self._prepare(reports)
        weights = np.atleast_2d(np.asarray(weights, dtype=float))
        used = prep["used"]
        per_bucket = np.stack([self._reports_to_buckets(prep, w).ravel() for w in weights])  # (w, U m)
        out = np.zeros((weights.shape[0], values.size))
        if isinstance(self.family, SketchHashes) and used.size * values.size >= KERNEL_MIN_PAIRS:
            from .sketch_channel_kernels import gather_scores

            mixed = mix64(np.asarray(values, dtype=np.uint64) ^ self.family.key)
            gather_scores(self.family.multipliers[used], mixed, self.family.buckets, per_bucket, out)
            return out
        step = max(1, BLOCK_ELEMENTS // max(used.size, 1))
        offsets = np.arange(used.size, dtype=np.int64)[:, None] * self.family.buckets
        for start in range(0, values.size, step):
            block = np.asarray(values[start : start + step], dtype=np.uint64)
            cells = offsets + self.family.bucket(used[:, None], block[None, :])
            for i in range(weights.shape[0]):
                out[i, start : start + block.size] = per_bucket[i][cells].sum(axis=0)
        return out


class CMSLevel(_SketchLevel):
    """Apple's CMS restricted to candidate values plus one lumped "other" value.

    Parameters
    ----------
    candidates : numpy.ndarray
        The dictionary (uint64 values).
    eps : float
        The sketch's privacy level (bits flipped w.p. ``1 / (e^(eps/2) + 1)``).
    family : HashFamily
        The sketch's hashes (d, m).
    complete : bool
        The candidates are every value that exists (SFP's keys): "other" holds nothing and its row is 0.
    """

    name = "cms_level"

    def __init__(self, candidates: np.ndarray, eps: float, family: HashFamily, complete: bool = False):
        self.report_width = 1 + -(-family.buckets // WORD_BITS)
        super().__init__(candidates, eps, family, complete)

    def _prepare(self, reports: np.ndarray) -> dict[str, Any]:
        j = reports[:, 0]
        if reports.shape[0] and (j.min() < 0 or j.max() >= self.family.hashes):
            raise ParameterError("holds a hash index out of range", field="reports", hint="use this channel's reports")
        used, inverse = np.unique(j, return_inverse=True)
        require_memory(
            16.0 * float(np.bitwise_count(reports[:, 1:].view(np.uint64)).sum()),
            f"the set bits of {reports.shape[0]:,} CMS reports",
            "use fewer reports",
        )
        row, bucket = set_bits(reports[:, 1:], self.family.buckets)
        return {
            "used": used,
            "cell": inverse[row] * self.family.buckets + bucket,
            "row": row,
            "ones": np.bincount(row, minlength=reports.shape[0]).astype(float),
            "d": reports.shape[0],
        }

    def _hits_at(self, reports: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        row, bucket = set_bits(reports[:, 1:], self.family.buckets)
        bits = np.zeros((reports.shape[0], self.family.buckets), dtype=bool)
        bits[row, bucket] = True
        return np.take_along_axis(bits, buckets, axis=1)

    def _log_shift(self, prep: dict[str, Any]) -> np.ndarray:
        m, e = self.family.buckets, self.eps
        log_f, log_keep = -math.log1p(math.exp(e / 2)), -math.log1p(math.exp(-e / 2))
        ones = prep["ones"]
        return ones * log_f + (m - ones) * log_keep + e / 2 - math.log(self.family.hashes)

    def _other_hit(self, prep: dict[str, Any]) -> np.ndarray:
        return np.asarray(prep["ones"] / self.family.buckets)

    def _bucket_to_reports(self, prep: dict[str, Any], sums: np.ndarray) -> np.ndarray:
        return np.bincount(prep["row"], weights=sums.ravel()[prep["cell"]], minlength=prep["d"])

    def _reports_to_buckets(self, prep: dict[str, Any], w: np.ndarray) -> np.ndarray:
        size = prep["used"].size * self.family.buckets
        return np.bincount(prep["cell"], weights=w[prep["row"]], minlength=size).reshape(-1, self.family.buckets)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        """A sparse (reports x candidates) hit matrix: each set bit of a report holds the candidates its hash
        sends to that bucket, ``|v| c / m`` of them per report (5 at eps 8, m = 1,024, 256 candidates)."""
        from scipy.sparse import csr_matrix
        from scipy.sparse.linalg import LinearOperator

        prep = self._prepare(reports)
        d, c = reports.shape[0], self.candidates.size
        cells = self._cells(prep).ravel()
        order = np.argsort(cells, kind="stable")
        sorted_cells = cells[order]
        lo = np.searchsorted(sorted_cells, prep["cell"], side="left")
        run = np.searchsorted(sorted_cells, prep["cell"], side="right") - lo
        total = int(run.sum())
        require_memory(16.0 * total, f"the {total:,} hits of {self.name}'s reports", "use fewer candidates")
        starts = np.repeat(lo, run)
        offsets = np.arange(total) - np.repeat(np.cumsum(run) - run, run)
        cols = order[starts + offsets] % max(c, 1)  # cells are (used hash, candidate) row-major
        hit = csr_matrix((np.ones(total), (np.repeat(prep["row"], run), cols)), shape=(d, c))
        hit_t = hit.T.tocsr()
        other, r = self._other_row(prep), self.r

        def matvec(v: np.ndarray) -> np.ndarray:
            v = np.asarray(v, dtype=float).ravel()
            return r * v[:c].sum() + (1 - r) * (hit @ v[:c]) + other * v[c]

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.asarray(w, dtype=float).ravel()
            return np.concatenate([r * w.sum() + (1 - r) * (hit_t @ w), [other @ w]])

        def rows_of(index: np.ndarray) -> np.ndarray:
            return self._rows(reports[np.asarray(index, dtype=np.intp)])

        op = LinearOperator((d, c + 1), matvec=matvec, rmatvec=rmatvec, dtype=float)
        return self._log_shift(prep), with_exact_rows(op, rows_of)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return cms_reports(_keys(self, values, rng), self.family, self.eps, rng)


class HCMSLevel(_SketchLevel):
    """Apple's HCMS restricted to candidate values plus one lumped "other" value.

    Parameters
    ----------
    candidates : numpy.ndarray
        The dictionary (uint64 values).
    eps : float
        The sketch's privacy level.
    family : HashFamily
        The sketch's hashes (d, m; m a power of 2).
    complete : bool
        The candidates are every value that exists: "other" holds nothing and its row is 0.
    """

    name = "hcms_level"
    report_width = 3  # (j, l, y)

    def __init__(self, candidates: np.ndarray, eps: float, family: HashFamily, complete: bool = False):
        if family.buckets & (family.buckets - 1):
            raise ParameterError(
                f"is {family.buckets}", field="buckets", hint="HCMS needs a power of 2 (the Hadamard order)"
            )
        super().__init__(candidates, eps, family, complete)

    def _prepare(self, reports: np.ndarray) -> dict[str, Any]:
        j, coef, y = reports[:, 0], reports[:, 1], reports[:, 2]
        m = self.family.buckets
        if reports.shape[0] and (
            j.min() < 0
            or j.max() >= self.family.hashes
            or coef.min() < 0
            or coef.max() >= m
            or not np.isin(y, (0, 1)).all()
        ):
            raise ParameterError("holds a report out of range", field="reports", hint="use this channel's reports")
        used, inverse = np.unique(j, return_inverse=True)
        return {"used": used, "cell": inverse * m + coef, "sign": 1.0 - 2.0 * y, "zero": coef == 0, "y": y}

    def _hits_at(self, reports: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        return (np.bitwise_count(buckets & reports[:, 1:2]) & 1) == reports[:, 2:3]

    def _log_shift(self, prep: dict[str, Any]) -> np.ndarray:
        # log p - log(d m), p = e^eps / (e^eps + 1)
        value = -math.log1p(math.exp(-self.eps)) - math.log(self.family.hashes * self.family.buckets)
        return np.full(prep["cell"].size, value)

    def _other_hit(self, prep: dict[str, Any]) -> np.ndarray:
        return np.where(prep["zero"], (prep["y"] == 0).astype(float), 0.5)

    def _bucket_to_reports(self, prep: dict[str, Any], sums: np.ndarray) -> np.ndarray:
        # hit = (1 + (-1)^(y + parity(l & b))) / 2 summed over b with weights T_j[b]: (sum T + sign (T H)[l]) / 2
        spectrum = hadamard_transform(sums).ravel()
        total = sums.sum(axis=1)[prep["cell"] // self.family.buckets]
        return (total + prep["sign"] * spectrum[prep["cell"]]) / 2

    def _reports_to_buckets(self, prep: dict[str, Any], w: np.ndarray) -> np.ndarray:
        m, u = self.family.buckets, prep["used"].size
        signed = np.bincount(prep["cell"], weights=w * prep["sign"], minlength=u * m).reshape(u, m)
        per_hash = np.bincount(prep["cell"] // m, weights=w, minlength=u)
        return (per_hash[:, None] + hadamard_transform(signed)) / 2  # H symmetric: H^T = H

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        """The transform path (two Walsh-Hadamard transforms of (used hashes, m) per pass, whatever the
        reports) or, where the reports times the candidates cost less, a dense float32 match matrix."""
        from scipy.sparse.linalg import LinearOperator

        d, c, m = reports.shape[0], self.candidates.size, self.family.buckets
        used = np.unique(reports[:, 0]).size
        if d * c > DENSE_FACTOR * used * m * math.log2(m) or 4.0 * d * c > DENSE_BYTES:
            return super()._structured_likelihood(reports)
        prep = self._prepare(reports)
        match = self._hits_at(reports, self.family.bucket(reports[:, :1], self.candidates[None, :]))
        match = match.astype(np.float32)
        other, r = self._other_row(prep), self.r

        def matvec(v: np.ndarray) -> np.ndarray:
            v = np.asarray(v, dtype=float).ravel()
            return r * v[:c].sum() + (1 - r) * (match @ v[:c].astype(np.float32)).astype(float) + other * v[c]

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.asarray(w, dtype=float).ravel()
            cand = (w.astype(np.float32) @ match).astype(float)
            return np.concatenate([r * w.sum() + (1 - r) * cand, [other @ w]])

        def rows_of(index: np.ndarray) -> np.ndarray:
            return self._rows(reports[np.asarray(index, dtype=np.intp)])

        op = LinearOperator((d, c + 1), matvec=matvec, rmatvec=rmatvec, dtype=float)
        return self._log_shift(prep), with_exact_rows(op, rows_of)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return hcms_reports(_keys(self, values, rng), self.family, self.eps, rng)


def _keys(channel: _SketchLevel, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Candidate values for indices ``< c``; for "other", a value whose hashes are uniform: drawn as a random
    64-bit value (a non-candidate with overwhelming probability), which is what the lumped row averages over."""
    c = channel.candidates.size
    other = values == c
    keys = np.empty(values.size, dtype=np.uint64)
    keys[~other] = channel.candidates[values[~other]]
    keys[other] = rng.integers(0, 2**64, size=int(other.sum()), dtype=np.uint64)
    return keys
