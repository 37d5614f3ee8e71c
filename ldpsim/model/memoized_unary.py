"""Memoized unary encoding (L-SUE/basic RAPPOR, L-OUE, L-OSUE, L-SOUE): unary encoding in both stages.

A memoized protocol (:mod:`ldpsim.model.memoized`) whose permanent stage sets each one-hot bit of the
value with probability p1 (the value's own bit) or q1 (the others), and whose round t flips each
permanent bit independently (reported as 1 w.p. p2_t if it is 1, q2_t if it is 0). Bits are independent
given x, so the likelihood factorizes over bits through each bit's per-round pattern of ones, and a
report of ``rounds`` packed bit vectors costs O(rounds k) whatever the number of sequences.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from ..base.errors import ParameterError
from .bitvectors import WORD_BITS, BitVectorMechanism
from .domains import Domain, Integers
from .mechanism import Mechanism
from .memoized import CHUNK_FLOATS, MatrixChannel, MemoizedMechanism, check_rounds
from .privacy import Privacy


def unary_log_probabilities(p: float, q: float) -> tuple[float, float, float, float]:
    """(log p, log(1-p), log q, log(1-q)) of a bit kept w.p. p when true and set w.p. q when false."""
    return math.log(p), math.log1p(-p), math.log(q), math.log1p(-q)


class UnaryChannel(BitVectorMechanism):
    """One-hot bits, each set w.p. p if it is the value's bit and q otherwise (one round of a memoized unary protocol).

    Parameters
    ----------
    domain
        The users' domain: one bit per value.
    p, q
        P(bit = 1) for the value's own bit and for the others.
    label
        How the channel prints.
    """

    name = "unary-channel"

    def __init__(self, domain: Domain, p: float, q: float, label: str = "unary channel"):
        self.p, self.q, self._label_text = float(p), float(q), label
        super().__init__(domain)

    def _key(self) -> tuple:
        return (*super()._key(), self.p, self.q)

    def __repr__(self) -> str:
        return self._label_text

    @property
    def privacy(self) -> Privacy:
        """The unary encoding's LDP level: a value's bit and one other bit flip."""
        lp, l1p, lq, l1q = unary_log_probabilities(self.p, self.q)
        return Privacy("ldp", abs(lp - lq) + abs(l1q - l1p))

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty((values.shape[0], self.report_width), dtype=np.int64)
        step = self.chunk_rows()
        for start in range(0, values.shape[0], step):
            x = values[start : start + step]
            u = rng.random((x.shape[0], self.domain.size))
            bits = u < self.q
            rows = np.arange(x.shape[0])
            bits[rows, x] = u[rows, x] < self.p
            out[start : start + x.shape[0]] = self.pack_bits(bits)
        return out

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        reports = self.checked_bits(reports)
        lp, l1p, lq, l1q = unary_log_probabilities(self.p, self.q)
        k = self.domain.size
        out = np.empty((reports.shape[0], k))
        for rows, bits in self.bit_chunks(reports):
            ones = bits.sum(axis=1)
            out[rows] = (ones * lq + (k - ones) * l1q)[:, None] + np.where(bits, lp - lq, l1p - l1q)
        return out

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # E[share of set bit x] = q + (p - q) theta_x, as for OUE: what per-round inversion inverts
        return (self.bit_frequencies(reports, counts) - self.q) / (self.p - self.q)

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        # bit x is set w.p. p for a user holding x, q for the others, independently across users: the pure
        # oracles' n Var (Wang et al. 2017), which per-round intervals and the planner use
        theta = np.asarray(theta, dtype=float)
        p, q = self.p, self.q
        return (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / (p - q) ** 2

    def _matrix(self) -> np.ndarray | None:
        k = self.domain.size
        if k > 12:
            return None
        return np.exp(self.log_likelihood(np.arange(1 << k, dtype=np.int64)[:, None])).T


class MemoizedUnary(MemoizedMechanism):
    """Unary encoding memoized: permanent bits (p1, q1) per one-hot bit, then each round flips them (p2_t, q2_t).

    A subclass implements :meth:`_bit_probabilities`. Bits are independent given x, so with
    ``g_b[j] = P(bit j's rounds | permanent bit b)``, ``P(Y | x) = prod_j G0[j] * G1[x] / G0[x]``
    where ``G1[j] = p1 g_1[j] + (1 - p1) g_0[j]`` and ``G0[j] = q1 g_1[j] + (1 - q1) g_0[j]``.
    """

    def _bit_probabilities(self) -> tuple[tuple[float, float], Sequence[tuple[float, float]]]:
        """((p1, q1), [(p2_t, q2_t) per round]): P(permanent bit = 1) for the value's bit and the others,
        then P(reported bit = 1) for permanent bit 1 and 0."""
        raise NotImplementedError(f"{type(self).__name__} must implement _bit_probabilities")

    def _validate(self) -> None:
        Mechanism._validate(self)
        self._check_declared_rounds()
        (p1, q1), per_round = self._bit_probabilities()
        self.p1, self.q1 = float(p1), float(q1)
        self.flips = tuple((float(p), float(q)) for p, q in per_round)
        check_rounds(len(self.flips))
        if not self.flips:
            raise ParameterError("needs at least one round", field="rounds", hint="give rounds >= 1")
        for name, value in (
            ("p1", p1),
            ("q1", q1),
            *((f"round {t + 1}", v) for t, f in enumerate(self.flips) for v in f),
        ):
            if not 0.0 < value < 1.0:
                permanent = name in ("p1", "q1")  # a certain permanent bit: eps_inf too large for doubles
                raise ParameterError(
                    f"the bit probability {name} = {value:.6g} is not strictly between 0 and 1",
                    field="eps_inf" if permanent else "eps_1",
                    hint="choose a smaller eps_inf" if permanent else "choose eps_1 further below eps_inf",
                )
        k = self.domain.size
        self.permanent_stage = UnaryChannel(self.domain, p1, q1, f"{self.name} permanent stage")
        self.instantaneous_stages = tuple(
            MatrixChannel(
                Integers(low=0, high=1), np.array([[1 - q, q], [1 - p, p]]), f"{self.name} round {t + 1} bit flip"
            )
            for t, (p, q) in enumerate(self.flips)
        )
        self._words = -(-k // WORD_BITS)
        self.report_width = len(self.flips) * self._words

    @property
    def round_width(self) -> int:
        """Report columns per round: the words of one packed bit vector."""
        return self._words

    def _round_bits(self, p: float, q: float) -> tuple[float, float]:
        """P(reported bit = 1) for the value's bit and the others, after both stages."""
        return self.p1 * p + (1 - self.p1) * q, self.q1 * p + (1 - self.q1) * q

    def round_channel(self, t: int) -> Mechanism:
        """Round ``t`` alone: a unary encoding whose bit probabilities compose both stages."""
        self._check_round(t, 0, self.rounds - 1)
        p, q = self._round_bits(*self.flips[t])
        return UnaryChannel(self.domain, p, q, f"{self.name} round {t + 1} channel")

    def _prefix(self, t: int) -> Mechanism:
        return type(self)(self.domain, **{**self.get_params(), "rounds": t})

    def permanent_level(self) -> float:
        """The permanent unary encoding's LDP level."""
        return self.permanent_stage.privacy.eps

    def round_outputs(self) -> list[int] | None:
        """Outputs per round, 2^k bit vectors (None where that exceeds a word)."""
        k = self.domain.size
        return [1 << k] * self.rounds if k < WORD_BITS else None

    def eps_tau_closed(self) -> float | None:
        """Bits are independent and only x's and x''s differ: e^eps_tau is the largest G1/G0 ratio of a bit
        times the largest G0/G1 ratio, each monotone in the bit's likelihood ratio g_1/g_0, so taken at the
        pattern maximizing (resp. minimizing) it round by round."""
        up = sum(max(math.log(p / q), math.log((1 - p) / (1 - q))) for p, q in self.flips)
        down = sum(min(math.log(p / q), math.log((1 - p) / (1 - q))) for p, q in self.flips)

        def log_ratio(log_l: float) -> float:  # log G1/G0 at g_1/g_0 = e^log_l
            return float(
                np.logaddexp(math.log(self.p1) + log_l, math.log1p(-self.p1))
                - np.logaddexp(math.log(self.q1) + log_l, math.log1p(-self.q1))
            )

        ends = (log_ratio(up), log_ratio(down))
        return max(ends) - min(ends)

    # ------------------------------------------------------------ contract
    def _channel(self) -> UnaryChannel:
        return UnaryChannel(self.domain, 0.5, 0.5)  # packing and checks of one round's words

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, k, tau = values.shape[0], self.domain.size, self.rounds
        packer = self._channel()
        p2 = np.array([p for p, _ in self.flips])[:, None, None]
        q2 = np.array([q for _, q in self.flips])[:, None, None]
        out = np.empty((n, tau, self._words), dtype=np.int64)
        step = max(1, CHUNK_FLOATS // (k * (tau + 1)))
        for start in range(0, n, step):
            x = values[start : start + step]
            m, rows = x.shape[0], np.arange(x.shape[0])
            u = rng.random((m, k))
            permanent = u < self.q1
            permanent[rows, x] = u[rows, x] < self.p1
            flips = rng.random((tau, m, k))
            bits = flips < np.where(permanent[None], p2, q2)
            out[start : start + m] = packer.pack_bits(bits.reshape(tau * m, k)).reshape(tau, m, -1).transpose(1, 0, 2)
        return out.reshape(n, self.report_width)

    def _bit_terms(self, reports: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """Per chunk of reports: (rows, log G0, log G1 - log G0), each (rows, k)."""
        packer = self._channel()
        k, tau, d = self.domain.size, self.rounds, reports.shape[0]
        one = np.array([math.log(p / q) for p, q in self.flips])  # log g_1/g_0 of a set bit, per round
        zero = np.array([math.log((1 - p) / (1 - q)) for p, q in self.flips])
        log_g0_zero = sum(math.log1p(-q) for _, q in self.flips)
        log_g0_one = np.array([math.log(q) - math.log1p(-q) for _, q in self.flips])
        lp1, l1p1, lq1, l1q1 = unary_log_probabilities(self.p1, self.q1)
        step = max(1, CHUNK_FLOATS // (k * (tau + 1)))
        for start in range(0, d, step):
            rows = slice(start, min(start + step, d))
            block = reports[rows].reshape(-1, tau, self._words).transpose(1, 0, 2).reshape(-1, self._words)
            bits = packer.unpack_bits(packer.checked_bits(block)).reshape(tau, -1, k).astype(float)
            log_l = np.einsum("tmk,t->mk", bits, one - zero) + zero.sum()  # log g_1/g_0 per bit
            log_g0 = np.einsum("tmk,t->mk", bits, log_g0_one) + log_g0_zero
            big0 = np.logaddexp(lq1 + log_l, l1q1)  # log G0/g_0
            big1 = np.logaddexp(lp1 + log_l, l1p1)
            yield rows, log_g0 + big0, big1 - big0

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        # Bit j's likelihood ratio G1/G0 grows with g_1/g_0 when p1 > q1, and g_1/g_0 with each set bit
        # when p2 > q2: a bit that is 0 in every round has the smallest ratio, so a value whose bit no
        # report ever sets is beaten on every report by any value whose bit some report sets.
        if self.p1 <= self.q1 or any(p <= q for p, q in self.flips) or reports.size == 0:
            return None
        words = np.bitwise_or.reduce(reports.reshape(-1, self._words), axis=0)
        mask = self._channel().unpack_bits(words[None, :])[0]
        return mask if mask.any() else None

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        out = np.empty((reports.shape[0], self.domain.size))
        for rows, log_g0, gain in self._bit_terms(reports):
            out[rows] = log_g0.sum(axis=1, keepdims=True) + gain
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # H[d, x] = exp(gain[d, x] - max_x gain[d, x]): (D, k), no larger than the reports' bits.
        shift = np.empty(reports.shape[0])
        h = np.empty((reports.shape[0], self.domain.size))
        for rows, log_g0, gain in self._bit_terms(reports):
            top = gain.max(axis=1)
            shift[rows] = log_g0.sum(axis=1) + top
            h[rows] = np.exp(gain - top[:, None])
        return shift, h
