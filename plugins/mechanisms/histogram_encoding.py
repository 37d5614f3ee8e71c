"""Summation histogram encoding (SHE, Wang, Blocki, Li & Jha, USENIX Security 2017).

A user holding x reports the real vector y = e_x + Laplace(2/eps) noise on each of the k
coordinates (the one-hot vector has L1 sensitivity 2): eps-LDP. The collector's estimate is
the mean report, ``theta_hat = sum_i y_i / n`` (E[y] = e_x), with ``n Var[theta_hat_x] = 8 / eps^2``
(the Laplace variance 2 (2/eps)^2, whatever the population).

Reports are real: each coordinate is sent in fixed point, the integer ``floor(y_j 2^32)``, i.e.
the cell ``[a, a + 2^-32)`` holding y_j (values beyond +-2^30 are clipped; at eps >= 1e-4 that has
probability below e^-26000). The likelihood of the cells is exact. Coordinates are independent
and only coordinate x depends on x, so ``P(y | x) = C(y) * P(cell_x | 1) / P(cell_x | 0)``; 0 and 1
are cell ends, and for a cell inside [0, 1) the Laplace CDFs give the ratio
``exp(eps (m - 1/2))``, m its midpoint, while cells below 0 (above 1) give e^(-eps/2) (e^(eps/2)).
The per-report constant C(y) e^(eps/2) is left out (it does not depend on x: GIBU's estimate is
unchanged), so::

    log P(y | x) = eps (clip(m_x, 0, 1) - 1)       (relative to C(y) e^(eps/2); in [-eps, 0])

which is the density ratio g(y_x) = exp(-(eps/2)(|y_x - 1| - |y_x|)) up to the cells' width:
:attr:`report_density` is set, and the contract checks test the sampler through likelihood ratios.
A report's likelihood row is e^-eps at every x with y_x < 0 (about half of them): the structured
likelihood keeps only the others, as ``e^-eps + (1 - e^-eps) S`` with a sparse S.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    EstimationError,
    Mechanism,
    Param,
    ParameterError,
    Privacy,
    hookimpl,
    rank_one_plus_sparse,
    require_memory,
)

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: fixed-point bits of a reported coordinate: cells of width 2^-32
FRACTION_BITS = 32
#: reported coordinates are clipped to +-2^30 (so integers stay below 2^62, and spans of report
#: columns cannot overflow int64)
CLIP = float(1 << 30)
#: smallest eps: at it, a Laplace(2/eps) coordinate passes the clip with probability below e^-26000
MIN_EPS = 1e-4
#: elements per (chunk of users x k) temporary: 32 MB of float64
CHUNK_ELEMENTS = 1 << 22


class SummationHistogramEncoding(Mechanism):
    """SHE, summation histogram encoding (Wang et al. 2017): the one-hot vector plus Laplace(2/eps) on each coordinate."""

    name = "she"
    report_density = True
    # e^-eps must stay a normal float: the likelihood operator's smaller factor is exactly e^-eps
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")

    def _validate(self) -> None:
        if self.eps < MIN_EPS:
            raise ParameterError(
                f"must be at least {MIN_EPS:g}, got {self.eps:g} (Laplace noise beyond the reports' fixed-point range)",
                field="eps",
                hint=f"choose eps >= {MIN_EPS:g}",
            )
        # An instance attribute shadows the class default: one integer per value.
        self.report_width = self.domain.size

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def scale(self) -> float:
        """The Laplace scale 2 / eps."""
        return 2.0 / self.eps

    # ------------------------------------------------------------- contract
    def _chunk(self) -> int:
        return max(1, CHUNK_ELEMENTS // self.domain.size)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, k = values.shape[0], self.domain.size
        out = np.empty((n, k), dtype=np.int64)
        step = self._chunk()
        for start in range(0, n, step):
            x = values[start : start + step]
            y = rng.laplace(0.0, self.scale, size=(x.shape[0], k))
            y[np.arange(x.shape[0]), x] += 1.0
            out[start : start + x.shape[0]] = np.floor(np.clip(y, -CLIP, CLIP) * 2.0**FRACTION_BITS)
        return out

    def midpoints(self, reports: np.ndarray) -> np.ndarray:
        """(D, k) the midpoints of the reported cells: the reports as real vectors."""
        return (np.asarray(reports, dtype=float) + 0.5) * 2.0**-FRACTION_BITS

    def _checked(self, reports: np.ndarray) -> np.ndarray:
        require_memory(
            8.0 * reports.size,
            f"the {reports.shape[0]} x {self.domain.size} likelihood of {self.name}'s reports",
            hint="use fewer users or values",
        )
        limit = int(CLIP) << FRACTION_BITS
        bad = (reports < -limit) | (reports > limit)
        if bad.any():
            raise EstimationError(
                f"report coordinate {int(reports[bad][0])} is outside she's fixed-point range (+-2^{30 + FRACTION_BITS})",
                hint="check that the reports were produced by this mechanism",
            )
        return reports

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        reports = self._checked(reports)
        return self.eps * (np.clip(self.midpoints(reports), 0.0, 1.0) - 1.0)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        from scipy.sparse import csr_matrix

        reports = self._checked(reports)
        r = math.exp(-self.eps)
        rows, cols = np.nonzero(reports >= 0)  # cells at or above 0: a factor above e^-eps
        m = np.clip(self.midpoints(reports[rows, cols]), 0.0, 1.0)
        # (e^(eps (m - 1)) - e^-eps) / (1 - e^-eps), without cancellation
        weights = np.expm1(self.eps * m) / math.expm1(self.eps)
        support = csr_matrix((weights, (rows, cols)), shape=reports.shape)
        return np.zeros(reports.shape[0]), rank_one_plus_sparse(support, r)

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # Wang et al. (2017): the mean report. A cell's midpoint is the report up to 2^-33.
        counts = np.asarray(counts, dtype=float)
        total = np.zeros(self.domain.size)
        step = self._chunk()
        for start in range(0, reports.shape[0], step):
            rows = slice(start, start + step)
            total += np.einsum("d,dx->x", counts[rows], self.midpoints(reports[rows]))
        return total / counts.sum()

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        """Wang et al. 2017: 8 / eps^2, the variance 2 (2/eps)^2 of a Laplace coordinate, for every value
        and population (the fixed-point cells add 2^-64 / 12)."""
        return np.full(self.domain.size, 2 * self.scale**2)


@hookimpl
def register_mechanisms(register):
    register(SummationHistogramEncoding)
