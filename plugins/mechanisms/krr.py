"""k-ary randomized response (k-RR)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import Mechanism, Param, Privacy, constant_plus_column, count_estimate_variance, hookimpl

if TYPE_CHECKING:  # scipy.sparse is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


class KRR(Mechanism):
    """k-ary randomized response: the true value w.p. e^eps/(k-1+e^eps), else another uniformly (001 eq. 20)."""

    name = "krr"
    eps = Param("float", gt=0, doc="privacy level: the mechanism is eps-LDP")

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def _log_keep(self) -> float:
        """log P(report = true value) = -log(1 + (k-1) e^-eps), exact for any eps."""
        return -math.log1p((self.domain.size - 1) * math.exp(-self.eps))

    @property
    def _log_other(self) -> float:
        """log P(report = a given other value); -eps + log keep where the probability underflows to 0."""
        other = self._other
        return math.log(other) if other > 0 else -self.eps + self._log_keep

    @property
    def _keep(self) -> float:
        """P(report = true value) = e^eps / (k-1+e^eps), without overflow for large eps."""
        return 1.0 / (1.0 + (self.domain.size - 1) * math.exp(-self.eps))

    @property
    def _other(self) -> float:
        """P(report = a given other value) = 1 / (k-1+e^eps); not 1 - keep, which cancels."""
        return math.exp(-self.eps) * self._keep

    def _matrix(self) -> np.ndarray:
        k = self.domain.size
        m = np.full((k, k), self._other)
        np.fill_diagonal(m, self._keep)
        return m

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = self.domain.size
        keep = rng.random(values.shape[0]) < self._keep
        other = (values + 1 + rng.integers(0, k - 1, size=values.shape[0])) % k
        return np.where(keep, values, other)[:, None]

    def _sample_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Report counts in O(k): the true value kept w.p. keep - other, else a uniform draw over all k values.

        That two-stage draw is k-RR exactly (the true value: keep - other + other; any other value:
        other), and its uniform stage does not depend on the true value, so the users of every value
        who reach it fall into one Multinomial(R, uniform over k): k binomials and one multinomial
        instead of one multinomial per value over a dense k x k matrix.
        """
        k = self.domain.size
        # keep - other = (1 - e^-eps) keep, without cancellation; the remaining mass is k * other
        stay = rng.binomial(counts, -math.expm1(-self.eps) * self._keep)
        spread = rng.multinomial(int(counts.sum() - stay.sum()), np.full(k, 1.0 / k))
        return stay + spread

    def _output_count(self) -> int:
        return self.domain.size

    def _diagonal_plus_constant(self) -> tuple[float, float]:
        """The matrix is ``(keep - other) I + other 11^T``; keep - other = (1 - e^-eps) keep, without cancellation."""
        return -math.expm1(-self.eps) * self._keep, self._other

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        """(shift, H): P(z|x) = keep at x = z, other elsewhere, so H = 1 at the report and e^-eps elsewhere."""
        z = reports[:, 0]
        self.require_outputs(z, self.domain.size)
        return np.full(z.shape[0], math.log(self._keep)), constant_plus_column(z, self.domain.size, math.exp(-self.eps))

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        """Wang et al. 2017's GRR variance: the inverted matrix is (C_x / n - q) / (p - q), and a report
        names x w.p. p = keep for a user holding it, q = other for the others."""
        gap = -math.expm1(-self.eps) * self._keep  # p - q without cancellation
        return count_estimate_variance(theta, self._keep, self._other, gap)

    def _named_value_likelihood(self) -> tuple[float, float]:
        return math.log(self._keep), self._log_other

    def _log_matrix(self) -> np.ndarray:
        k = self.domain.size
        out = np.full((k, k), self._log_other)
        np.fill_diagonal(out, self._log_keep)
        return out

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray:
        # 004 Prop. 8.4: the reported values. An unreported x' is beaten by any reported x
        # on every report: P(z|x') = q <= P(z|x), with equality except at z = x.
        mask = np.zeros(self.domain.size, dtype=bool)
        mask[reports[:, 0]] = True
        return mask

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        # Without forming the k x k matrix: large categorical domains stay cheap.
        k = self.domain.size
        z = reports[:, 0]
        self.require_outputs(z, k)
        out = np.full((z.shape[0], k), self._log_other)
        out[np.arange(z.shape[0]), z] = math.log(self._keep)
        return out


@hookimpl
def register_mechanisms(register):
    register(KRR)
