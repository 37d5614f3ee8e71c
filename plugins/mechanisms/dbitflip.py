"""dBitFlipPM (Ding, Kulkarni & Yekhanin, NeurIPS 2017): d sampled bucket bits, memoized.

The k values fall into ``b`` buckets (value x into bucket ``floor(x b / k)``). Each user samples
``d`` distinct buckets uniformly once, and reports for each sampled bucket j the bit
``[bucket(x) = j]`` flipped w.p. ``1 / (e^(eps/2) + 1)``. The response is memoized: every round
repeats it (the paper's permanent memoization for a value that does not change), so more rounds
reveal nothing more: eps_1 = eps_tau = eps_inf = eps, the paper's level (two sampled buckets may
each move the odds by e^(eps/2)).

A report per round is the d sampled buckets in increasing order, then their d bits. Its likelihood
is ``C(b, d)^-1 prod_i P(bit_i | [bucket(x) = j_i])``: a constant per report times
``e^(+-eps/2)`` at x's bucket if it was sampled.
"""

from __future__ import annotations

import math
from typing import Any, cast

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
    hookimpl,
)

#: floats per temporary block of sampling (32 MB)
CHUNK_FLOATS = 1 << 22


class DBitFlipPM(MemoizedMechanism):
    """dBitFlipPM: each user reports d sampled bucket bits, randomized once and repeated every round.

    One report is the user's whole sequence of ``rounds`` identical round reports
    (``2 d`` columns each: sampled buckets, then bits).
    """

    name = "dbitflip"
    eps = Param("float", gt=0, le=700, doc="the level of the response (and of every number of rounds)")
    # an int once built (_validate fills in the default)
    buckets = cast("Param[int]", Param("int", None, ge=2, doc="b, buckets of the values (default: one per value)"))
    d = Param("int", 1, ge=1, doc="sampled buckets per user (at most b)")
    rounds = Param("int", 1, ge=1, le=MAX_ROUNDS, doc=f"tau: reports per user, one per round (at most {MAX_ROUNDS:,})")

    def _validate(self) -> None:
        Mechanism._validate(self)
        k = self.domain.size
        if self.buckets is None:
            self.buckets = k
        if self.buckets > k:
            raise ParameterError(
                f"{self.buckets} buckets for {k} values", field="buckets", hint=f"give buckets <= {k} (the values)"
            )
        if self.d > self.buckets:
            raise ParameterError(
                f"d = {self.d} sampled buckets out of {self.buckets}", field="d", hint=f"give d <= {self.buckets}"
            )
        self.bucket_of = np.arange(k) * self.buckets // k
        keep = 1.0 / (1.0 + math.exp(-self.eps / 2))  # P(bit reported as it is)
        self.keep = keep
        bit = MatrixChannel(
            Integers(low=0, high=1), np.array([[keep, 1 - keep], [1 - keep, keep]]), f"{self.name} bit flip"
        )
        same = MatrixChannel(Integers(low=0, high=1), np.eye(2), f"{self.name} memoized round")
        self.permanent_stage, self.instantaneous_stages = bit, (same,) * self.rounds
        self.report_width = self.rounds * 2 * self.d

    def _key(self) -> tuple:
        return (*super()._key(), self.eps, self.buckets, self.d, self.rounds)

    @property
    def round_width(self) -> int:
        """Report columns per round: d buckets, then d bits."""
        return 2 * self.d

    # ------------------------------------------------------------- privacy
    def permanent_level(self) -> float:
        """eps: the memoized response's level."""
        return float(self.eps)

    def one_report_level(self) -> float:
        """eps: one round is the memoized response."""
        return float(self.eps)

    def eps_tau_closed(self) -> float | None:
        """eps: the rounds repeat the memoized response."""
        return float(self.eps)

    def round_outputs(self) -> list[int] | None:
        return None  # the closed forms: every level is eps

    def round_channel(self, t: int) -> Mechanism:
        """Round ``t`` alone: the memoized response, i.e. this mechanism with one round."""
        self._check_round(t, 0, self.rounds - 1)
        return type(self)(self.domain, **{**self.get_params(), "rounds": 1})

    # ------------------------------------------------------------ contract
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, b, d = values.shape[0], self.buckets, self.d
        once = np.empty((n, 2 * d), dtype=np.int64)
        step = max(1, CHUNK_FLOATS // b)
        for start in range(0, n, step):
            rows = slice(start, min(start + step, n))
            keys = rng.random((values[rows].shape[0], b))
            chosen = np.sort(np.argpartition(keys, d - 1, axis=1)[:, :d], axis=1)  # d distinct, uniform
            hit = chosen == self.bucket_of[values[rows]][:, None]
            kept = rng.random(chosen.shape) < self.keep
            once[rows, :d] = chosen
            once[rows, d:] = hit == kept  # the bit, flipped unless kept
        return np.tile(once, self.rounds)

    def _split(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sampled buckets, bits), each (D, d), checking the reports."""
        d = self.d
        rounds = reports.reshape(reports.shape[0], self.rounds, 2 * d)
        once = rounds[:, 0]
        chosen, bits = once[:, :d], once[:, d:]
        bad = (
            np.any(rounds != once[:, None], axis=(1, 2))
            | np.any((chosen < 0) | (chosen >= self.buckets), axis=1)
            | np.any(np.diff(chosen, axis=1) <= 0, axis=1)
            | np.any((bits != 0) & (bits != 1), axis=1)
        )
        if bad.any():
            raise EstimationError(
                f"report {int(np.flatnonzero(bad)[0])} is not a memoized response of {self!r}"
                " (increasing buckets in 0..b-1, bits 0/1, the same every round)",
                hint="check that the reports were produced by this mechanism",
            )
        return chosen, bits

    def _gains(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log P(report | x in no sampled bucket), (D, b) the log gain if x is in bucket j)."""
        chosen, bits = self._split(reports)
        half = self.eps / 2
        miss = -np.logaddexp(0.0, np.where(bits == 1, half, -half))  # log P(bit | not x's bucket)
        base = miss.sum(axis=1) - math.log(math.comb(self.buckets, self.d))
        gains = np.zeros((reports.shape[0], self.buckets))
        np.put_along_axis(gains, chosen, np.where(bits == 1, half, -half), axis=1)
        return base, gains

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        base, gains = self._gains(reports)
        return base[:, None] + gains[:, self.bucket_of]

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        # (D, k) rescaled by each report's best value: e^(gain - max gain), at most d values above the rest
        base, gains = self._gains(reports)
        top = gains.max(axis=1)
        return base + top, np.exp(gains[:, self.bucket_of] - top[:, None])

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        """With one bucket per value (b = k): bucket j is sampled w.p. d/b and its bit is 1 w.p.
        ``1 - keep + (2 keep - 1) theta_j``, so ``(S_j b / (d n) - (1 - keep)) / (2 keep - 1)`` is unbiased
        (S_j: reports with bucket j sampled and its bit 1). None with coarser buckets: the values are
        not identifiable from them."""
        if self.buckets != self.domain.size:
            return None
        chosen, bits = self._split(reports)
        counts = np.asarray(counts, dtype=float)
        ones = np.bincount(chosen.ravel(), weights=(bits * counts[:, None]).ravel(), minlength=self.buckets)
        share = ones * self.buckets / (self.d * counts.sum())
        return (share - (1 - self.keep)) / (2 * self.keep - 1)


@hookimpl
def register_mechanisms(register):
    register(DBitFlipPM)
