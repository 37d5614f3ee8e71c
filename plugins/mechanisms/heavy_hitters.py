"""Heavy-hitter protocols over open domains: PEM and TreeHist, and their per-level channels.

A heavy-hitter protocol never asks about the whole (unlistable) domain: users report a *prefix* of
their value (its top bits) through a frequency oracle, and the server grows the prefixes that look
frequent, level by level.

**PEM** (prefix extending method; Wang, Li, Jha et al., TDSC 2019). Users are split uniformly at random
into ``G = (bits - start_bits) / step`` groups; group ``i`` (0-based) reports the prefix of
``start_bits + (i + 1) step`` bits through OLH at the full eps (g = round(e^eps) + 1 buckets,
``p = e^eps / (e^eps + g - 1)`` on the hashed bucket, ``q = 1 / (e^eps + g - 1)`` on each other one).
The server estimates all ``2^(start_bits + step)`` prefixes of group 0, keeps the top ``k`` and extends
each by ``step`` bits for group 1, and so on; ``start_bits`` defaults to ``ceil(log2 k)``, as in the
paper. The paper (and pure-ldp) round ``G`` up and truncate the last step; here ``step`` must divide
``bits - start_bits`` (so every level extends by the same number of bits).

**TreeHist** (Bassily, Nissim, Stemmer & Thakurta, NeurIPS 2017). Each user spends eps/2 on one prefix
of a level drawn uniformly from ``1 .. bits / step`` (bit by bit with ``step = 1``, the paper's tree) and
eps/2 on the whole value, both through Hadamard response: a report is ``(j, b)`` with ``j`` uniform in
``0 .. 2^L - 1`` and ``b`` the parity of ``popcount(v & j)``, flipped with probability ``1 / (e^eps' + 1)``.
The tree keeps, per level, the children of the kept nodes that pass the rule; the last level's
candidates are then estimated from the whole-value reports.

Hashes. OLH hashes a prefix with a seeded 64-bit mixer (SplitMix64's finaliser over ``prefix ^ mix(seed)``).
A user draws its seed from a pool of ``hash_pool`` seeds: privacy is that of OLH for any hash, and the
server then only evaluates ``hash_pool x candidates`` hashes per level instead of ``users x candidates``.

Level channels. :class:`OLHLevel` and :class:`HadamardLevel` are ldpsim mechanisms over the categorical
domain ``candidates + ["other"]``: the channel of one level restricted to the candidate prefixes, with
every other prefix lumped into one value (docs/theory/heavy-hitters.md derives its row).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ldpsim import (
    Categorical,
    Mechanism,
    OpenDomain,
    ParameterError,
    Privacy,
    require_memory,
    with_exact_rows,
)

_K = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: the label of the lumped value of a level channel: every prefix that is not a candidate
OTHER = "other"
#: the most candidate prefixes one level may hold: the (reports x candidates) likelihood of a level is
#: formed per level, and beyond this its bytes outgrow what the memory check allows anyway
MAX_CANDIDATES = 1 << 16


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 whose output bits all depend on all input bits."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _K
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def olh_bucket(prefixes: np.ndarray, seeds: np.ndarray, g: int) -> np.ndarray:
    """The OLH hash ``h_seed(prefix)`` in ``0 .. g-1`` (broadcasting ``prefixes`` against ``seeds``)."""
    return (
        mix64(np.asarray(prefixes, dtype=np.uint64) ^ mix64(np.asarray(seeds, dtype=np.uint64))) % np.uint64(g)
    ).astype(np.int64)


def parity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``popcount(a & b) mod 2`` as int8: the Hadamard entry ``H[a, b] = (-1)^parity``."""
    return (np.bitwise_count(np.asarray(a, dtype=np.uint64) & np.asarray(b, dtype=np.uint64)) & 1).astype(np.int8)


def olh_buckets(eps: float) -> int:
    """OLH's bucket count ``g = round(e^eps) + 1`` (Wang et al. 2017), at least 2."""
    return max(2, int(round(math.exp(eps))) + 1)


def prefix_labels(candidates: np.ndarray, length: int) -> list[str]:
    """Labels ``length:hex`` of candidate prefixes, then :data:`OTHER`."""
    width = max(1, (length + 3) // 4)
    return [f"{length}:{int(c):0{width}x}" for c in candidates] + [OTHER]


def check_candidates(count: int, reports: int, field: str = "candidates") -> None:
    """Refuse a level of more than :data:`MAX_CANDIDATES` candidates, or whose likelihood would not fit."""
    if count > MAX_CANDIDATES:
        raise ParameterError(
            f"a level would hold {count:,} candidate prefixes, more than {MAX_CANDIDATES:,}",
            field=field,
            hint="lower k or the prefix step (candidates per level are k * 2^step)",
        )
    require_memory(
        8.0 * reports * (count + 1), f"the {reports:,} x {count + 1:,} likelihood of a level", "lower k or step"
    )


class OLHLevel(Mechanism):
    """OLH on one level's prefixes, restricted to candidate prefixes plus one lumped "other" value."""

    name = "olh_level"
    report_width = 2  # (seed, bucket)
    structured_min_size = 0

    def __init__(self, candidates: np.ndarray, length: int, eps: float, hash_pool: int):
        self.candidates = np.asarray(candidates, dtype=np.uint64)
        self.length = length
        self.eps = float(eps)
        self.hash_pool = int(hash_pool)
        self.g = olh_buckets(eps)
        e = math.exp(eps)
        self.p = e / (e + self.g - 1)
        self.q = 1.0 / (e + self.g - 1)
        #: P(y | seed, other): 1/g, or 0 when the candidates are every prefix (no other prefix exists)
        self.other = 0.0 if self.candidates.size >= 2**length else 1.0 / self.g
        super().__init__(Categorical(values=prefix_labels(self.candidates, length)))

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    def hits(self, reports: np.ndarray) -> np.ndarray:
        """``(D, c)`` bool: candidate ``c`` hashes to report ``d``'s bucket under its seed."""
        return olh_bucket(self.candidates[None, :], reports[:, :1].astype(np.uint64), self.g) == reports[:, 1:2]

    def _rows(self, reports: np.ndarray) -> np.ndarray:
        """P(report | x) / P(seed) for every value, candidates then "other" (always 1/g: see the module)."""
        rows = np.where(self.hits(reports), self.p, self.q)
        return np.concatenate([rows, np.full((reports.shape[0], 1), self.other)], axis=1)

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        return np.log(self._rows(reports)) - math.log(self.hash_pool)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # "other" stands for a prefix outside the candidates, whose hash is uniform given the seed
        n = int(values.shape[0])
        seeds: np.ndarray = rng.integers(self.hash_pool, size=n)
        other = values == self.candidates.size
        true = np.where(other, rng.integers(self.g, size=n), 0)
        known = ~other
        true[known] = olh_bucket(self.candidates[values[known]], seeds[known].astype(np.uint64), self.g)
        return np.stack([seeds, olh_report(true, self.eps, self.g, rng)], axis=1)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        from scipy.sparse import csr_matrix
        from scipy.sparse.linalg import LinearOperator

        d, c = reports.shape[0], self.candidates.size
        # one hash per (distinct seed, candidate): reports sharing a seed share their hashes
        seeds = np.unique(reports[:, 0])
        buckets = olh_bucket(self.candidates[None, :], seeds[:, None].astype(np.uint64), self.g)  # (S, c)
        key = reports[:, 0] * self.g + reports[:, 1]
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        cand_key = seeds[:, None] * self.g + buckets  # (S, c)
        lo = np.searchsorted(sorted_key, cand_key, side="left")
        hi = np.searchsorted(sorted_key, cand_key, side="right")
        # every report whose key equals (seed, bucket of c) holds c: expand the runs [lo, hi)
        run = (hi - lo).ravel()
        cols = np.repeat(np.tile(np.arange(c), seeds.size), run)
        starts = np.repeat(lo.ravel(), run)
        offsets = np.arange(run.sum()) - np.repeat(np.cumsum(run) - run, run)
        rows = order[starts + offsets]
        hit = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(d, c))
        r, other = self.q / self.p, self.other / self.p
        hit_t = hit.T.tocsr()

        def matvec(v: np.ndarray) -> np.ndarray:
            v = np.asarray(v, dtype=float).ravel()
            return r * v[:c].sum() + (1 - r) * (hit @ v[:c]) + other * v[c]

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.asarray(w, dtype=float).ravel()
            total = w.sum()
            return np.concatenate([r * total + (1 - r) * (hit_t @ w), [other * total]])

        def rows_of(index: np.ndarray) -> np.ndarray:
            return self._rows(reports[index]) / self.p

        op = LinearOperator((d, c + 1), matvec=matvec, rmatvec=rmatvec, dtype=float)
        shift = np.full(d, math.log(self.p) - math.log(self.hash_pool))
        return shift, with_exact_rows(op, rows_of)


class HadamardLevel(Mechanism):
    """Hadamard response on one level's prefixes, restricted to candidates plus one lumped "other" value."""

    name = "hadamard_level"
    report_width = 2  # (index j, parity bit b)
    structured_min_size = 0

    def __init__(self, candidates: np.ndarray, length: int, eps: float):
        self.candidates = np.asarray(candidates, dtype=np.uint64)
        self.length = length
        self.eps = float(eps)
        self.p = math.exp(eps) / (math.exp(eps) + 1)
        self.q = 1 - self.p
        super().__init__(Categorical(values=prefix_labels(self.candidates, length)))

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    def _rows(self, reports: np.ndarray) -> np.ndarray:
        """P(b | j, x) for every value: candidates exactly, "other" the mean over the non-candidates."""
        j, b = reports[:, 0].astype(np.uint64), reports[:, 1]
        match = parity(self.candidates[None, :], j[:, None]) == b[:, None]  # (D, c)
        rows = np.where(match, self.p, self.q)
        return np.concatenate([rows, self.other_row(j, b, match.sum(axis=1))[:, None]], axis=1)

    def other_row(self, j: np.ndarray, b: np.ndarray, candidate_matches: np.ndarray) -> np.ndarray:
        """Mean of P(b | j, u) over the ``2^L - c`` non-candidate prefixes u, in closed form.

        For ``j != 0`` exactly half of all ``2^L`` prefixes have ``parity(u & j) = b``; for ``j = 0`` all have
        parity 0. Removing the candidates that match leaves the count among the others.
        """
        total = float(2**self.length)
        others = total - self.candidates.size
        if others <= 0:  # the candidates are every prefix: "other" holds none and cannot be reported
            return np.zeros(j.shape[0])
        matching_all = np.where(j == 0, np.where(b == 0, total, 0.0), total / 2)
        share = (matching_all - candidate_matches) / others
        return self.q + (self.p - self.q) * share

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        return np.log(self._rows(reports)) - self.length * math.log(2)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # "other": a non-candidate prefix drawn uniformly, which is what the lumped row averages over
        n = int(values.shape[0])
        other = values == self.candidates.size
        prefix = np.empty(n, dtype=np.uint64)
        prefix[~other] = self.candidates[values[~other]]
        prefix[other] = uniform_non_candidates(int(other.sum()), self.candidates, self.length, rng)
        return hadamard_report(prefix, self.length, self.eps, rng)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        from scipy.sparse.linalg import LinearOperator

        d, c = reports.shape[0], self.candidates.size
        check_candidates(c, d)
        j, b = reports[:, 0].astype(np.uint64), reports[:, 1]
        match = (parity(self.candidates[None, :], j[:, None]) == b[:, None]).astype(np.float32)
        other = self.other_row(j, b, match.sum(axis=1, dtype=float)) / self.p
        r = self.q / self.p

        def matvec(v: np.ndarray) -> np.ndarray:
            v = np.asarray(v, dtype=float).ravel()
            return r * v[:c].sum() + (1 - r) * (match @ v[:c].astype(np.float32)).astype(float) + other * v[c]

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.asarray(w, dtype=float).ravel()
            return np.concatenate([r * w.sum() + (1 - r) * (w.astype(np.float32) @ match).astype(float), [other @ w]])

        def rows_of(index: np.ndarray) -> np.ndarray:
            return self._rows(reports[index]) / self.p

        op = LinearOperator((d, c + 1), matvec=matvec, rmatvec=rmatvec, dtype=float)
        shift = np.full(d, math.log(self.p) - self.length * math.log(2))
        return shift, with_exact_rows(op, rows_of)


def uniform_non_candidates(n: int, candidates: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` prefixes of ``length`` bits drawn uniformly among those that are not candidates (by rejection)."""
    out = np.empty(n, dtype=np.uint64)
    todo = np.arange(n)
    cand = np.sort(candidates)
    while todo.size:
        draw = rng.integers(0, 2**length, size=todo.size, dtype=np.uint64, endpoint=False)
        pos = np.minimum(np.searchsorted(cand, draw), max(cand.size - 1, 0))
        ok = cand[pos] != draw if cand.size else np.ones(todo.size, dtype=bool)
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    return out


def olh_report(true_bucket: np.ndarray, eps: float, g: int, rng: np.random.Generator) -> np.ndarray:
    """g-ary randomized response on buckets: keep with ``p = e^eps / (e^eps + g - 1)``, else another, uniformly."""
    n = int(true_bucket.shape[0])
    keep = rng.random(n) < math.exp(eps) / (math.exp(eps) + g - 1)
    other = (true_bucket + 1 + rng.integers(g - 1, size=n)) % g
    return np.where(keep, true_bucket, other)


def hadamard_report(prefix: np.ndarray, length: int, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Hadamard response ``(j, b)``: ``j`` uniform over ``length``-bit indices, ``b`` the parity, flipped w.p.
    ``1 / (e^eps + 1)``; int64 columns (``j`` reinterpreted from uint64 when ``length == 64``)."""
    n = int(prefix.shape[0])
    j: np.ndarray = rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    if length < 64:
        j >>= np.uint64(64 - length)
    flip: np.ndarray = rng.random(n) < 1.0 / (math.exp(eps) + 1)
    b = parity(prefix, j) ^ flip.astype(np.int8)
    return np.stack([j.view(np.int64), b.astype(np.int64)], axis=1)


class PEM:
    """PEM's parametrisation (Wang et al. TDSC 2019): groups, prefix lengths and the user-side sampler.

    Parameters
    ----------
    domain : OpenDomain
        The users' domain.
    eps : float
        Each user's budget, spent whole on its group's OLH report.
    k : int
        How many prefixes the top-k rule keeps per level (and items found at the end).
    step : int
        Bits a level adds (the paper's eta).
    start_bits : int or None
        Bits before the first level; default ``ceil(log2 k)``.
    hash_pool : int
        How many OLH seeds users draw from.
    """

    name = "pem"

    def __init__(
        self,
        domain: OpenDomain,
        eps: float,
        k: int = 64,
        step: int = 2,
        start_bits: int | None = None,
        hash_pool: int = 4096,
    ):
        if not eps > 0:
            raise ParameterError(f"is {eps}", field="eps", hint="use a positive privacy level")
        if k < 1:
            raise ParameterError(f"is {k}", field="k", hint="keep at least one prefix")
        if hash_pool < 1:
            raise ParameterError(f"is {hash_pool}", field="hash_pool", hint="use at least one seed")
        start = max(0, math.ceil(math.log2(k))) if start_bits is None else start_bits
        if not 0 <= start < domain.bits:
            raise ParameterError(f"is {start}", field="start_bits", hint=f"use 0..{domain.bits - 1}")
        if step < 1 or (domain.bits - start) % step:
            raise ParameterError(
                f"{step} does not divide the {domain.bits - start} bits after start_bits={start}",
                field="step",
                hint="use a divisor of bits - start_bits (the papers round up; here every level adds step bits)",
            )
        first = 2 ** (start + step)
        check_candidates(max(first, k * 2**step), 0, field="step")
        self.domain, self.eps, self.k, self.step, self.start_bits, self.hash_pool = (
            domain,
            eps,
            k,
            step,
            start,
            hash_pool,
        )
        self.groups = (domain.bits - start) // step
        self.g = olh_buckets(eps)

    def lengths(self) -> list[int]:
        """The prefix length of each group's reports."""
        return [self.start_bits + (i + 1) * self.step for i in range(self.groups)]

    def sample(self, values: np.ndarray, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each group's distinct reports ``(seed, bucket)`` and their counts, from the users' values.

        Parameters
        ----------
        values : numpy.ndarray
            The users' uint64 values.
        rng : numpy.random.Generator
            The randomness.

        Returns
        -------
        list of tuple
            Per group, ``(reports, counts)``: ``(D, 2)`` int64 distinct reports and their int64 counts.
        """
        values = self.domain.check(values)
        n = int(values.shape[0])
        group = rng.integers(self.groups, size=n)
        lengths = self.start_bits + (group + 1) * self.step
        prefix = values >> (self.domain.bits - lengths).astype(np.uint64)
        seeds: np.ndarray = rng.integers(self.hash_pool, size=n)
        bucket = olh_report(olh_bucket(prefix, seeds.astype(np.uint64), self.g), self.eps, self.g, rng)
        key = (group * self.hash_pool + seeds) * self.g + bucket
        uniq, counts = np.unique(key, return_counts=True)
        g_of, rest = np.divmod(uniq, self.hash_pool * self.g)
        reports = np.stack(np.divmod(rest, self.g), axis=1)
        return [(reports[g_of == i], counts[g_of == i]) for i in range(self.groups)]

    def level(self, group: int, candidates: np.ndarray) -> OLHLevel:
        """Group ``group``'s channel over ``candidates`` (prefixes of its length) plus "other"."""
        return OLHLevel(candidates, self.lengths()[group], self.eps, self.hash_pool)

    def first_candidates(self) -> np.ndarray:
        """Every prefix of group 0's length."""
        return np.arange(2 ** self.lengths()[0], dtype=np.uint64)

    def extend(self, kept: np.ndarray) -> np.ndarray:
        """The children of the kept prefixes, ``step`` bits longer."""
        return (
            (np.asarray(kept, dtype=np.uint64)[:, None] << np.uint64(self.step))
            + np.arange(2**self.step, dtype=np.uint64)
        ).ravel()


class TreeHist:
    """TreeHist's parametrisation (Bassily et al. NeurIPS 2017): a prefix tree over Hadamard response.

    Parameters
    ----------
    domain : OpenDomain
        The users' domain.
    eps : float
        Each user's budget: half on a prefix of a uniformly drawn level, half on the whole value.
    k : int
        How many nodes the top-k rule keeps per level.
    step : int
        Bits per level (1: the paper's binary tree).
    """

    name = "treehist"

    def __init__(self, domain: OpenDomain, eps: float, k: int = 64, step: int = 1):
        if not eps > 0:
            raise ParameterError(f"is {eps}", field="eps", hint="use a positive privacy level")
        if k < 1:
            raise ParameterError(f"is {k}", field="k", hint="keep at least one node")
        if step < 1 or domain.bits % step:
            raise ParameterError(
                f"{step} does not divide bits={domain.bits}", field="step", hint="use a divisor of the domain's bits"
            )
        check_candidates(k * 2**step, 0, field="step")
        self.domain, self.eps, self.k, self.step = domain, eps, k, step
        self.groups = domain.bits // step

    def lengths(self) -> list[int]:
        """The prefix length of each level (the last is the whole value)."""
        return [(i + 1) * self.step for i in range(self.groups)]

    def sample(self, values: np.ndarray, rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
        """The prefix reports of each level and the whole-value reports.

        Parameters
        ----------
        values : numpy.ndarray
            The users' uint64 values.
        rng : numpy.random.Generator
            The randomness.

        Returns
        -------
        tuple
            ``(levels, words)``: per level the ``(D, 2)`` reports ``(j, b)`` of its users at eps/2, and every
            user's whole-value report at eps/2.
        """
        values = self.domain.check(values)
        n = int(values.shape[0])
        level: np.ndarray = rng.integers(self.groups, size=n)
        order = np.argsort(level, kind="stable")
        bounds = np.searchsorted(level[order], np.arange(self.groups + 1))
        levels = []
        for i, length in enumerate(self.lengths()):  # one pass per level (tens), never per user
            mine = values[order[bounds[i] : bounds[i + 1]]]
            levels.append(hadamard_report(self.domain.prefixes(mine, length), length, self.eps / 2, rng))
        words = hadamard_report(values, self.domain.bits, self.eps / 2, rng)
        return levels, words

    def level(self, index: int, candidates: np.ndarray) -> HadamardLevel:
        """Level ``index``'s channel over ``candidates`` plus "other"."""
        return HadamardLevel(candidates, self.lengths()[index], self.eps / 2)

    def words(self, candidates: np.ndarray) -> HadamardLevel:
        """The whole-value channel over ``candidates`` plus "other"."""
        return HadamardLevel(candidates, self.domain.bits, self.eps / 2)

    def first_candidates(self) -> np.ndarray:
        """Every prefix of the first level."""
        return np.arange(2**self.step, dtype=np.uint64)

    def extend(self, kept: np.ndarray) -> np.ndarray:
        """The children of the kept nodes."""
        return (
            (np.asarray(kept, dtype=np.uint64)[:, None] << np.uint64(self.step))
            + np.arange(2**self.step, dtype=np.uint64)
        ).ravel()
