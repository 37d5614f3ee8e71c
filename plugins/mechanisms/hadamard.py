"""Hadamard response (Acharya, Sun & Zhang, AISTATS 2019), the symmetric one-block version.

With K = 2^ceil(log2(k + 1)) (or a larger power of two, ``order``) and the Sylvester
Hadamard matrix ``H[r, y] = (-1)^popcount(r & y)`` (``scipy.linalg.hadamard(K)``), value x
owns the output set ``C_x = {y : H[x + 1, y] = +1}`` of K/2 outputs (row 0, all ones, is
skipped). A user holding x reports one output y in 0..K-1 with::

    P(y | x) = 2 e^eps / (K (1 + e^eps))  if y in C_x,   2 / (K (1 + e^eps))  otherwise

so the ratio of two values' likelihoods is 1 or e^(+-eps): eps-LDP, tight. Two distinct
rows of H agree on exactly K/2 outputs, so a report of a user holding x' != x falls in
C_x with probability exactly 1/2, which gives the unbiased estimate
``theta_hat_x = (F_x - 1/2) / (p - 1/2)`` with ``p = e^eps / (1 + e^eps)`` and F_x the share
of reports in C_x.

Reports are the output index y (one integer: column y of the (k, K) matrix). The
structured likelihood ``P(y | x) = exp(shift) (r + (1 - r) [y in C_x])`` with r = e^-eps uses
``[y in C_x] = (1 + H[y, x + 1]) / 2``: its products are fast Walsh-Hadamard transforms,
O(K log K), never a (reports x values) array.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import Mechanism, Param, ParameterError, Privacy, count_estimate_variance, hookimpl

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


def fwht(a: np.ndarray) -> np.ndarray:
    """``H_K @ a`` for the Sylvester Hadamard matrix (K = a.shape[0], a power of 2), in O(K log K).

    ``a`` is (K,) or (K, c); one butterfly pass per bit of K (a loop over log2 K levels only).
    """
    a = np.asarray(a, dtype=float)
    size = a.shape[0]
    out = a.reshape(size, -1).copy()
    h = 1
    while h < size:
        blocks = out.reshape(size // (2 * h), 2, h, -1)
        out = np.stack([blocks[:, 0] + blocks[:, 1], blocks[:, 0] - blocks[:, 1]], axis=1).reshape(size, -1)
        h *= 2
    return out.reshape(a.shape)


def in_sets(y: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """[y in C_x] for Hadamard rows ``rows = x + 1``, broadcast: popcount(row & y) is even."""
    v = np.bitwise_and(rows, y)  # non-negative int64: fold its bits onto bit 0 (np.bitwise_count needs numpy 2)
    for shift in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> shift)
    return (v & 1) == 0


class HadamardResponse(Mechanism):
    """Hadamard response (Acharya, Sun & Zhang 2019): an output among K, e^eps times likelier in x's half of the rows' signs."""

    name = "hadamard"
    # e^-eps must stay a normal float: the likelihood operator's smaller factor is exactly e^-eps
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    order = Param("int", None, ge=2, doc="K, the Hadamard order: a power of 2 above k (default 2^ceil(log2(k + 1)))")

    def _validate(self) -> None:
        k = self.domain.size
        smallest = 1 << k.bit_length()  # 2^ceil(log2(k + 1))
        if self.order is None:
            self.outputs = smallest
        elif self.order & (self.order - 1) or self.order < k + 1:
            raise ParameterError(
                f"must be a power of 2 of at least k + 1 = {k + 1}, got {self.order}",
                field="order",
                hint=f"choose order = {smallest} (or a larger power of 2), or leave it out",
            )
        else:
            self.outputs = self.order

    # ----------------------------------------------------------- probabilities
    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def p(self) -> float:
        """P(y in C_x | x) = e^eps / (1 + e^eps)."""
        return 1.0 / (1.0 + math.exp(-self.eps))

    @property
    def _p_minus_half(self) -> float:
        """p - 1/2 = tanh(eps / 2) / 2, without cancellation for small eps."""
        return math.tanh(self.eps / 2) / 2

    @property
    def _log_in(self) -> float:
        """log P(y | x) for y in C_x: log(2 / K) + log p."""
        return math.log(2.0 / self.outputs) - math.log1p(math.exp(-self.eps))

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        """n Var[theta_hat(x)] of the unbiased estimate for n users with distribution ``theta``.

        ``(theta_x p (1 - p) + (1 - theta_x) / 4) / (p - 1/2)^2``: the count in C_x sums
        Bernoullis of mean p (users holding x) and 1/2 (the others).

        Parameters
        ----------
        theta
            The users' empirical distribution over the k values.

        Returns
        -------
        numpy.ndarray
            The k per-user variances.
        """
        return count_estimate_variance(theta, self.p, 0.5, self._p_minus_half)

    # ------------------------------------------------------------- contract
    def _output_count(self) -> int:
        return self.outputs

    def _matrix(self) -> np.ndarray:
        k, size = self.domain.size, self.outputs
        member = in_sets(np.arange(size)[None, :], np.arange(1, k + 1)[:, None])
        return np.exp(np.where(member, self._log_in, self._log_in - self.eps))

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # A uniform output, moved to the other half if it is on the wrong side: XOR with the lowest set bit
        # of row x + 1 flips popcount(row & y)'s parity and maps each half onto the other one to one.
        n: int = values.shape[0]
        rows = values + 1
        y = rng.integers(0, self.outputs, size=n, dtype=np.int64)
        inside = rng.random(n) < self.p
        wrong = in_sets(y, rows) != inside
        return np.where(wrong, y ^ (rows & -rows), y)[:, None]

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        y = reports[:, :1]
        self.require_outputs(y[:, 0], self.outputs)
        member = in_sets(y, np.arange(1, self.domain.size + 1)[None, :])
        return np.where(member, self._log_in, self._log_in - self.eps)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        y = reports[:, 0]
        self.require_outputs(y, self.outputs)
        k, size = self.domain.size, self.outputs
        r = math.exp(-self.eps)
        half_gap = -math.expm1(-self.eps) / 2  # (1 - r) / 2: [y in C_x] = (1 + H[y, x + 1]) / 2

        def matmat(m: np.ndarray) -> np.ndarray:
            m = np.asarray(m, dtype=float).reshape(k, -1)
            padded = np.zeros((size, m.shape[1]))
            padded[1 : k + 1] = m
            return (r + half_gap) * m.sum(axis=0, keepdims=True) + half_gap * fwht(padded)[y]

        def rmatmat(w: np.ndarray) -> np.ndarray:
            w = np.asarray(w, dtype=float).reshape(y.size, -1)
            spread = np.zeros((size, w.shape[1]))
            np.add.at(spread, y, w)
            return (r + half_gap) * w.sum(axis=0, keepdims=True) + half_gap * fwht(spread)[1 : k + 1]

        from scipy.sparse.linalg import LinearOperator

        op = LinearOperator(
            (y.size, k),
            matvec=lambda v: matmat(v).ravel(),
            rmatvec=lambda w: rmatmat(w).ravel(),
            matmat=matmat,
            rmatmat=rmatmat,
            dtype=float,
        )
        return np.full(y.size, self._log_in), op

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        y = reports[:, 0]
        self.require_outputs(y, self.outputs)
        counts = np.asarray(counts, dtype=float)
        n = counts.sum()
        # F_x = sum_d counts_d (1 + H[y_d, x + 1]) / 2 / n, by one transform of the report histogram
        spread = np.bincount(y, weights=counts, minlength=self.outputs)
        share = (1.0 + fwht(spread)[1 : self.domain.size + 1] / n) / 2
        return (share - 0.5) / self._p_minus_half


@hookimpl
def register_mechanisms(register):
    register(HadamardResponse)
