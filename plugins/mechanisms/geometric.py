"""The linear geometric mechanism: truncated to the range, or on the whole integer lattice."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import Integers, Mechanism, Param, Privacy, convolution_likelihood, hookimpl

if TYPE_CHECKING:  # scipy.sparse is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


def _log1mexp(a: float) -> float:
    """log(1 - e^-a) for a > 0 to full relative precision (Maechler 2012): expm1 for small a, log1p for large."""
    return math.log(-math.expm1(-a)) if a < math.log(2) else math.log1p(-math.exp(-a))


class Geometric(Mechanism):
    """Linear geometric: two-sided geometric noise, clamped to the range (001 eqs. 22-23) or untruncated (eq. 21)."""

    name = "geometric"
    domain_kinds = ("integers",)
    eps = Param("float", gt=0, doc="eps per unit of distance: eps-geo-indistinguishable (d-privacy)")
    truncate = Param(
        "bool",
        True,
        doc="clamp reports to the domain (001 eqs. 22-23); false: report any lattice point low + j*step as the "
        "integer j, possibly negative or beyond the domain (001 eq. 21, 004 eq. 6)",
    )

    @property
    def privacy(self) -> Privacy:
        return Privacy("geo", self.eps)

    @property
    def _a(self) -> float:
        """eps * step: P(z|x) shrinks by e^-a per lattice step between z and x (alpha = e^-a)."""
        return self.eps * Integers.of(self.domain).step

    def _matrix(self) -> np.ndarray | None:
        if not self.truncate:
            return None  # infinitely many outputs: _sample and _log_likelihood below
        # P(z|x) = c_z alpha^|z-x|, c_z = 1/(1+alpha) at both ends, (1-alpha)/(1+alpha) inside:
        # the untruncated mechanism with all mass beyond an end moved onto it. 1 - alpha = -expm1(-a)
        # keeps its relative precision for small eps.
        a, k = self._a, self.domain.size
        alpha = math.exp(-a)
        from scipy.linalg import toeplitz

        with np.errstate(over="ignore"):  # a * j beyond the double range: probability 0, as it should be
            m = toeplitz(np.exp(-a * np.arange(k)) * (-math.expm1(-a) / (1 + alpha)))
        m[:, [0, -1]] /= -math.expm1(-a)
        return m

    def _log_matrix(self) -> np.ndarray | None:
        # log c_z - a |z - x|: entries far from the diagonal underflow in the matrix but not here.
        if not self.truncate:
            return None
        a, k = self._a, self.domain.size
        log_end = -math.log1p(math.exp(-a))
        log_c = np.full(k, _log1mexp(a) + log_end)
        log_c[[0, -1]] = log_end
        offsets = np.abs(np.arange(k)[:, None] - np.arange(k)[None, :])
        with np.errstate(over="ignore"):
            return log_c[None, :] - a * offsets

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        if self.truncate:
            return super()._log_likelihood(reports)
        # log c - a |j - x| with log c = log(1 - alpha) - log(1 + alpha), exact in log space however far j is.
        a = self._a
        log_c = _log1mexp(a) - math.log1p(math.exp(-a))
        j = reports[:, 0].astype(float)
        return log_c - a * np.abs(j[:, None] - np.arange(self.domain.size, dtype=float)[None, :])

    def _output_count(self) -> int | None:
        return self.domain.size if self.truncate else None

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        """(shift, H) as an FFT convolution with c alpha^|o|, O(k log k) per product."""
        a, k = self._a, self.domain.size
        log_c = _log1mexp(a) - math.log1p(math.exp(-a))
        j = reports[:, 0]
        if self.truncate:
            self.require_outputs(j, k)
            # offsets -k..k, the two ends standing for all offsets beyond: sum_{o >= k} c alpha^o = alpha^k / (1 + alpha)
            kernel = np.exp(log_c - a * np.abs(np.arange(-k, k + 1.0)))
            kernel[[0, -1]] = math.exp(-a * k - math.log1p(math.exp(-a)))
            return convolution_likelihood(kernel, (k,), j)
        # A report j beyond the range is the report at the nearest end, less a |j - end|: P(j|x) = c alpha^|j-x|.
        nearest = np.clip(j, 0, k - 1)
        shift, op = convolution_likelihood(
            np.exp(log_c - a * np.abs(np.arange(1.0 - k, k))), (k,), nearest, clamp=False
        )
        return shift - a * np.abs(j - nearest), op

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray:
        # 004 Prop. 8.2: P(z|x) strictly decreases with |z - x|, so a value beyond the extreme reports is
        # beaten on every report by the domain value nearest to them (x_min: the largest value <= every
        # report, or the first value if none; x_max symmetric). Clamping the extreme reports to the index
        # range gives exactly [x_min, x_max]; truncated reports already lie in it.
        k = self.domain.size
        lo = min(max(int(reports[:, 0].min()), 0), k - 1)
        hi = min(max(int(reports[:, 0].max()), 0), k - 1)
        mask = np.zeros(k, dtype=bool)
        mask[lo : hi + 1] = True
        return mask

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # The difference of two iid Geometric(1 - alpha) variables is two-sided geometric: P(k) = c alpha^|k|.
        p = -math.expm1(-self._a)
        n = values.shape[0]
        z = values + (rng.geometric(p, size=n) - rng.geometric(p, size=n))
        if self.truncate:
            z = np.clip(z, 0, self.domain.size - 1)
        return z[:, None]


@hookimpl
def register_mechanisms(register):
    register(Geometric)
