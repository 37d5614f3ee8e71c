"""RAPPOR as deployed (Erlingsson, Pihur & Korolova, CCS 2014): Bloom filters, cohorts, two randomized responses.

A user belongs to one of ``cohorts`` cohorts (drawn uniformly, once), and cohort c hashes a value
x with its own ``h`` hash functions into a Bloom filter ``B`` of ``m`` bits (a value sets up to h
bits: hashes may collide). The permanent randomized response memoizes ``B'``: each bit is set to 1
w.p. f/2, to 0 w.p. f/2, kept w.p. 1 - f. Every round reports the cohort and ``S``, each bit set
w.p. ``q`` if ``B'_j = 1`` and ``p`` if ``B'_j = 0``.

Given the permanent bits the bits are independent, so the whole sequence's likelihood factorizes
over the Bloom bits: with ``n_j`` the rounds reporting bit j,
``g_b(n_j) = P(bit j's rounds | B'_j = b)`` and ``G_1 = (1 - f/2) g_1 + f/2 g_0`` (Bloom bit set),
``G_0 = f/2 g_1 + (1 - f/2) g_0``; ``P(report | x) = P(cohort) prod_j G_0[j] prod_{j in B(c, x)} G_1[j] / G_0[j]``.
A value's likelihood differs from the all-zero filter's only on its own bits.

Privacy as the paper states it (Sec. 3, for h disjoint bits per value): ``eps_inf = 2h ln((1 - f/2)/(f/2))``,
one report ``eps_1 = h ln(q*(1 - p*) / (p*(1 - q*)))`` with ``q* = f/2 (p + q) + (1 - f) q`` and
``p* = f/2 (p + q) + (1 - f) p``; eps_tau the same bound for tau rounds (the ratio of G_1/G_0 at the
most and least telling count, h bits each way), which is eps_1 at tau = 1 and tends to eps_inf.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ldpsim import (
    MAX_ROUNDS,
    EstimationError,
    Integers,
    MatrixChannel,
    Mechanism,
    MemoizedMechanism,
    Param,
    ParameterError,
    UnaryChannel,
    hookimpl,
    require_memory,
)

#: floats per temporary block of sampling and likelihoods (32 MB)
CHUNK_FLOATS = 1 << 22


class RapporDeployed(MemoizedMechanism):
    """RAPPOR with Bloom filters, hash cohorts, permanent (f) and instantaneous (p, q) randomized responses.

    One report is the user's whole sequence: per round the cohort, then the ``m`` reported bits
    packed into words. The hash functions are a fixed table drawn from ``hash_seed``, the same
    for the users and the estimators.
    """

    name = "rappor-deployed"
    bits = Param("int", 128, ge=1, doc="m, the bits of the Bloom filter")
    hashes = Param("int", 2, ge=1, doc="h, hash functions per cohort (a value sets up to h bits)")
    cohorts = Param("int", 8, ge=1, doc="cohorts of hash functions; a user belongs to one, reported with every round")
    f = Param("float", 0.5, doc="permanent randomized response: a bit set to 1 w.p. f/2, 0 w.p. f/2, kept w.p. 1 - f")
    p = Param("float", 0.5, doc="P(reported bit = 1) when the permanent bit is 0")
    q = Param("float", 0.75, doc="P(reported bit = 1) when the permanent bit is 1")
    rounds = Param("int", 1, ge=1, le=MAX_ROUNDS, doc=f"tau: reports per user, one per round (at most {MAX_ROUNDS:,})")
    hash_seed = Param("int", 0, ge=0, doc="seed of the hash functions' table")

    # ---------------------------------------------------------------- setup
    def _validate(self) -> None:
        Mechanism._validate(self)
        m, h = self.bits, self.hashes
        if h > m:
            raise ParameterError(
                f"{h} hash functions into a Bloom filter of {m} bits", field="hashes", hint="give hashes <= bits"
            )
        if not (0.0 < self.f / 2 and self.f < 1.0):  # f/2 is a probability of its own: a positive double
            raise ParameterError(
                f"f = {self.f:g} is not strictly between 0 and 1 (with f/2 a positive double)",
                field="f",
                hint="give 0 < f < 1",
            )
        for field, value in (("p", self.p), ("q", self.q)):
            if not 0.0 <= value <= 1.0:
                raise ParameterError(
                    f"{field} = {value:g} is not a probability", field=field, hint="give 0 <= p, q <= 1"
                )
        if self.p == self.q:
            raise ParameterError(
                f"p = q = {self.p:g}: the reports say nothing about the value", field="q", hint="give p != q"
            )
        k, c = self.domain.size, self.cohorts
        require_memory(  # the table: (cohorts, k, h) int64 hash positions, then (cohorts, k, m) Bloom bits
            c * k * (8.0 * h + m),
            f"the Bloom filters of {self.name} ({c:,} cohorts x {k:,} values x {m:,} bits)",
            hint="use fewer bits, cohorts or values",
        )
        require_memory(  # sampling draws every round of a user at once: at least one user per block
            10.0 * self.rounds * m,
            f"sampling one user's {self.rounds:,} rounds of {m:,} bits in {self.name}",
            hint="use fewer bits or rounds",
        )
        rng = np.random.default_rng(np.random.SeedSequence(self.hash_seed))
        positions = rng.integers(0, m, size=(self.cohorts, self.domain.size, h))
        bloom = np.zeros((self.cohorts, self.domain.size, m), dtype=bool)
        np.put_along_axis(bloom, positions, True, axis=2)
        self.bloom = bloom  # (cohorts, k, m): bit j of cohort c's filter of value x
        self._packer = UnaryChannel(Integers(low=0, high=max(m - 1, 1)), 0.5, 0.5)
        self._words = self._packer.report_width
        half = self.f / 2
        self.permanent_stage = MatrixChannel(
            Integers(low=0, high=1), np.array([[1 - half, half], [half, 1 - half]]), f"{self.name} permanent bit"
        )
        self.instantaneous_stages = (
            MatrixChannel(
                Integers(low=0, high=1),
                np.array([[1 - self.p, self.p], [1 - self.q, self.q]]),
                f"{self.name} round bit",
            ),
        ) * self.rounds
        self.report_width = self.rounds * (1 + self._words)

    def _key(self) -> tuple:
        return (
            *super()._key(),
            self.bits,
            self.hashes,
            self.cohorts,
            self.f,
            self.p,
            self.q,
            self.rounds,
            self.hash_seed,
        )

    @property
    def round_width(self) -> int:
        """Report columns per round: the cohort, then the words of the packed bits."""
        return 1 + self._words

    def one_report_bits(self) -> tuple[float, float]:
        """(q*, p*): P(reported bit = 1) in one round when the Bloom bit is set, and when it is not."""
        shared = self.f / 2 * (self.p + self.q)
        return shared + (1 - self.f) * self.q, shared + (1 - self.f) * self.p

    # ------------------------------------------------------------- privacy
    def _count_log_ratio(self, log_l: float) -> float:
        """log G_1/G_0 of a bit whose rounds have likelihood ratio g_1/g_0 = e^log_l."""
        half = self.f / 2
        if math.isinf(log_l):  # a count only one permanent bit allows (p or q is 0 or 1): the ratio's limit
            return math.copysign(math.log1p(-half) - math.log(half), log_l)
        return float(
            np.logaddexp(math.log1p(-half) + log_l, math.log(half))
            - np.logaddexp(math.log(half) + log_l, math.log1p(-half))
        )

    def permanent_level(self) -> float:
        """eps_inf = 2h ln((1 - f/2) / (f/2)), the paper's bound for the permanent response."""
        half = self.f / 2
        return 2 * self.hashes * abs(math.log1p(-half) - math.log(half))

    def one_report_level(self) -> float:
        """eps_1 = h ln(q*(1 - p*) / (p*(1 - q*))), the paper's level of one report."""
        return self._level(1)

    def eps_tau_closed(self) -> float | None:
        """The level of ``rounds`` reports, h bits telling for x and h for x' at the extreme counts."""
        return self._level(self.rounds)

    def _level(self, tau: int) -> float:
        with np.errstate(divide="ignore"):
            one, zero = _log(self.q) - _log(self.p), np.log1p(-self.q) - np.log1p(-self.p)
        up, down = tau * max(one, zero), tau * min(one, zero)
        return self.hashes * (self._count_log_ratio(up) - self._count_log_ratio(down))

    def round_outputs(self) -> list[int] | None:
        return None  # cohorts times 2^m bit vectors per round: the closed forms

    # --------------------------------------------------------------- rounds
    def round_channel(self, t: int) -> Mechanism:
        """Round ``t`` alone: every round has the same law, that of this mechanism with one round."""
        self._check_round(t, 0, self.rounds - 1)
        return type(self)(self.domain, **{**self.get_params(), "rounds": 1})

    # ------------------------------------------------------------ contract
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n: int = values.shape[0]
        m, tau = self.bits, self.rounds
        cohort = rng.integers(0, self.cohorts, size=n)
        out = np.empty((n, tau, self.round_width), dtype=np.int64)
        out[:, :, 0] = cohort[:, None]
        step = max(1, CHUNK_FLOATS // (m * (tau + 1)))
        for start in range(0, n, step):
            rows = slice(start, min(start + step, n))
            filters = self.bloom[cohort[rows], values[rows]]  # (r, m)
            u = rng.random(filters.shape)
            permanent = np.where(u < self.f, u < self.f / 2, filters)
            reported = rng.random((tau, *filters.shape)) < np.where(permanent, self.q, self.p)[None]
            words = self._packer.pack_bits(self._padded(reported.reshape(-1, m)))
            out[rows, :, 1:] = words.reshape(tau, -1, self._words).transpose(1, 0, 2)
        return out.reshape(n, self.report_width)

    def _padded(self, bits: np.ndarray) -> np.ndarray:
        """(r, m) bits to the packer's width (m = 1 packs two bits)."""
        size = self._packer.domain.size
        if bits.shape[1] == size:
            return bits
        return np.pad(bits, ((0, 0), (0, size - bits.shape[1])))

    def _split(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cohort per report, count of rounds setting each bit (D, m)), checking the reports."""
        d, tau = reports.shape[0], self.rounds
        blocks = reports.reshape(d, tau, self.round_width)
        cohort = blocks[:, 0, 0]
        if np.any(blocks[:, :, 0] != cohort[:, None]) or np.any((cohort < 0) | (cohort >= self.cohorts)):
            raise EstimationError(
                f"a report of {self!r} names no cohort 0..{self.cohorts - 1} or changes it between rounds",
                hint="check that the reports were produced by this mechanism",
            )
        words = blocks[:, :, 1:].reshape(d * tau, self._words)
        bits = self._packer.unpack_bits(self._packer.checked_bits(words))
        if np.any(bits[:, self.bits :]):
            raise EstimationError(
                f"a report of {self!r} sets a bit beyond its {self.bits}", hint="check the reports' origin"
            )
        ones = bits[:, : self.bits].reshape(d, tau, self.bits).sum(axis=1)
        return cohort, ones

    def _count_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(log G_0[n], log G_1[n] - log G_0[n]) for n = 0..tau rounds reporting the bit."""
        tau, half = self.rounds, self.f / 2
        n = np.arange(tau + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_g1 = _times(n, np.log(self.q)) + _times(tau - n, np.log1p(-self.q))
            log_g0 = _times(n, np.log(self.p)) + _times(tau - n, np.log1p(-self.p))
            big0 = np.logaddexp(math.log(half) + log_g1, math.log1p(-half) + log_g0)
            big1 = np.logaddexp(math.log1p(-half) + log_g1, math.log(half) + log_g0)
            # a count neither permanent bit allows (p, q in {0, 1}): the report is impossible for every value
            return big0, np.where(np.isneginf(big0) & np.isneginf(big1), 0.0, big1 - big0)

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        base_table, gain_table = self._count_tables()
        require_memory(  # one cohort's filters as floats, for its product with the reports' gains
            8.0 * self.domain.size * self.bits,
            f"one cohort's {self.domain.size:,} x {self.bits:,} Bloom filters of {self.name} as floats",
            hint="use fewer bits or fewer values",
        )
        out = np.empty((reports.shape[0], self.domain.size))
        step = max(1, CHUNK_FLOATS // (self.bits * (self.rounds + 1) + self.domain.size))
        for start in range(0, reports.shape[0], step):
            rows = slice(start, min(start + step, reports.shape[0]))
            cohort, ones = self._split(reports[rows])
            base = base_table[ones].sum(axis=1) - math.log(self.cohorts)
            gain = gain_table[ones]
            block = np.empty((ones.shape[0], self.domain.size))
            for c in np.unique(cohort):  # one product per cohort: its hash functions
                mine = cohort == c
                block[mine] = gain[mine] @ self.bloom[c].T.astype(float)
            out[rows] = base[:, None] + block
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        # (D, k) rescaled by each report's best value: the per-bit factorization is already the structure
        log_p = self._log_likelihood(reports)
        shift = log_p.max(axis=1)
        return shift, np.exp(log_p - shift[:, None])

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        """Least squares on the debiased bit shares per cohort (the paper's regression, without the lasso).

        With cohorts drawn uniformly, ``y[c, j] = (share of the round reports in cohort c setting bit j -
        w_c p*) / (q* - p*)`` has expectation ``(1/C) sum_x theta_x B[c, x, j]``; its pseudo-inverse is
        unbiased when the stacked filters have full column rank (None otherwise).
        """
        require_memory(  # the stacked filters as floats, and their SVD for the rank
            2 * 8.0 * self.cohorts * self.bits * self.domain.size,
            f"the {self.cohorts * self.bits:,} x {self.domain.size:,} stacked Bloom filters of {self.name}",
            hint="estimate with ibu or mle (they use the per-bit likelihood), or use fewer bits or cohorts",
        )
        stacked = self.bloom.transpose(0, 2, 1).reshape(-1, self.domain.size).astype(float) / self.cohorts
        if np.linalg.matrix_rank(stacked) < self.domain.size:
            return None
        counts = np.asarray(counts, dtype=float)
        cohort, ones = self._split(reports)
        total = counts.sum()
        weights = np.bincount(cohort, weights=counts, minlength=self.cohorts) / total
        shares = np.zeros((self.cohorts, self.bits))
        np.add.at(shares, cohort, counts[:, None] * ones / (self.rounds * total))
        q_star, p_star = self.one_report_bits()
        y = (shares - weights[:, None] * p_star) / (q_star - p_star)
        return np.linalg.lstsq(stacked, y.ravel(), rcond=None)[0]


def _log(x: float) -> float:
    """math.log, with log 0 = -inf (p or q may be 0)."""
    return math.log(x) if x > 0 else -math.inf


def _times(count: np.ndarray, log: float) -> np.ndarray:
    """count * log, 0 where count is 0 (log may be -inf: a probability 0 that no round needed)."""
    return np.where(count == 0, 0.0, count * log)


@hookimpl
def register_mechanisms(register):
    register(RapporDeployed)
