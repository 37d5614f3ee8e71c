"""The linear Laplace mechanism, remapped to the nearest value of the domain."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ldpsim import Integers, Mechanism, Param, Privacy, convolution_likelihood, hookimpl

if TYPE_CHECKING:  # scipy.sparse is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


def laplace_mass(lo: np.ndarray | float, hi: np.ndarray | float) -> np.ndarray:
    """P(lo < T < hi) for T with density e^-|t| / 2; bounds may be infinite.

    Never a difference of two CDF values (which cancels in the tails): an interval on one side of 0 is
    S(lo) - S(hi) = e^-lo (1 - e^-(hi-lo)) / 2 with 1 - e^-w = -expm1(-w), and an interval around 0 is a
    sum of the two positive halves (1 - e^lo) / 2 + (1 - e^-hi) / 2.
    """
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    with np.errstate(over="ignore", invalid="ignore"):
        width = -np.expm1(-(hi - lo))
        right = 0.5 * np.exp(-lo) * width
        left = 0.5 * np.exp(hi) * width
        around = -0.5 * (np.expm1(lo) + np.expm1(-hi))
    return np.where(lo >= 0, right, np.where(hi <= 0, left, around))


def log_laplace_mass(lo: np.ndarray | float, hi: np.ndarray | float) -> np.ndarray:
    """log P(lo < T < hi) of :func:`laplace_mass`, finite where the mass itself underflows to 0."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_width = np.log(-np.expm1(-(hi - lo)))
        right = np.log(0.5) - lo + log_width
        left = np.log(0.5) + hi + log_width
        around = np.log(-0.5 * (np.expm1(lo) + np.expm1(-hi)))
    return np.where(lo >= 0, right, np.where(hi <= 0, left, around))


class Laplace(Mechanism):
    """Laplace: noise (eps/2) e^(-eps|t|) added to the value, reported as the nearest value (004 Sec. 7.3, 001 IX-C)."""

    name = "laplace"
    domain_kinds = ("integers",)
    #: remapping post-processes the continuous mechanism's eps-geo guarantee; the matrix may be more private
    tight_privacy = False
    eps = Param("float", gt=0, doc="eps per unit of distance: eps-geo-indistinguishable (d-privacy)")

    @property
    def privacy(self) -> Privacy:
        return Privacy("geo", self.eps)

    @property
    def _b(self) -> float:
        """eps * step in units of the noise scale; capped at 10^4, beyond which every cell but the
        nearest has mass e^-5000 = 0 in double precision, so that (m +- 1/2) b never overflows."""
        return min(self.eps * Integers.of(self.domain).step, 1e4)

    def _matrix(self) -> np.ndarray:
        # In units of 1/eps, value v_j's cell [v_j - step/2, v_j + step/2] is the noise interval
        # [(m - 1/2) b, (m + 1/2) b] with m = j - i and b = eps * step: an inner column depends on m only
        # (Toeplitz); the two end cells are unbounded.
        k = self.domain.size
        b = self._b
        m = np.arange(k, dtype=float)
        from scipy.linalg import toeplitz

        p = toeplitz(laplace_mass((m - 0.5) * b, (m + 0.5) * b))
        p[:, 0] = laplace_mass(-np.inf, (0.5 - m) * b)  # noise <= (1/2 - i) step lands on the first value
        p[:, -1] = p[::-1, 0]  # and symmetrically on the last
        return p

    def _log_matrix(self) -> np.ndarray:
        # The matrix's cells in log space, where e^-(eps d) underflows for eps d beyond ~745 (b capped so that
        # (m + 1/2) b stays a double for 10^8 values).
        k = self.domain.size
        b = min(self.eps * Integers.of(self.domain).step, 1e299)
        m = np.arange(k, dtype=float)
        offsets = np.abs(m[:, None] - m[None, :])
        out = log_laplace_mass((offsets - 0.5) * b, (offsets + 0.5) * b)
        out[:, 0] = log_laplace_mass(-np.inf, (0.5 - m) * b)
        out[:, -1] = out[::-1, 0]
        return out

    def _output_count(self) -> int:
        return self.domain.size

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        """(shift, H) as an FFT convolution with the cells' noise masses; the end cells collect the tails."""
        k = self.domain.size
        z = reports[:, 0]
        self.require_outputs(z, k)
        b = self._b
        m = np.abs(np.arange(-k, k + 1.0))
        kernel = laplace_mass((m - 0.5) * b, (m + 0.5) * b)
        kernel[[0, -1]] = laplace_mass((k - 0.5) * b, np.inf)  # offsets k and beyond land past either end
        return convolution_likelihood(kernel, (k,), z)

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray:
        # 004 Prop. 8.2 applies: every column strictly decreases in |i - j|. Inner columns: 1 - u at m = 0,
        # then u (1 - u^2) e^-b(|m| - 1) / 2 (u = e^-b/2), and 1 - u > u (1 - u^2) / 2 as (1 - u)^2 (u + 2) > 0;
        # end columns: 1 - u/2 at i = 0, then u e^-b(i - 1) / 2. So values beyond the extreme reports are unlikely.
        mask = np.zeros(self.domain.size, dtype=bool)
        mask[reports[:, 0].min() : reports[:, 0].max() + 1] = True
        return mask

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # Independent of the matrix, so the contract kit's chi-square test checks one against the other.
        shift = rng.laplace(0.0, 1.0 / self.eps, size=values.shape[0]) / Integers.of(self.domain).step  # in steps
        nearest = np.rint(np.clip(values + shift, -1.0, self.domain.size))
        return np.clip(nearest, 0, self.domain.size - 1).astype(np.int64)[:, None]


@hookimpl
def register_mechanisms(register):
    register(Laplace)
