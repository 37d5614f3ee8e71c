"""The Square Wave mechanism (Li, Wang, Lopuhaä-Zwakenberg, Li & Škorić, SIGMOD 2020, Sec. 4).

A value v in [0, 1] is reported as y in [-b, 1 + b] with density ``p = e^eps / (2b e^eps + 1)`` on
``[v - b, v + b]`` and ``q = 1 / (2b e^eps + 1)`` elsewhere; by default
``b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))``, the paper's choice (it maximizes an
upper bound of the mutual information between v and y). The bands of v = 0 and v = 1 are disjoint
(b < 1/2), so the ratio p / q = e^eps is reached: eps-LDP, tight.

SW is made for distribution estimation (EM, or EMS: ``ibu`` with ``smoothing = "ems"``); it is
biased for the mean, ``E[y | v] = q (1 + 2b) / 2 + 2b (p - q) v``, which this affine map undoes
(derived from the density; the paper gives no mean estimator). As for the Piecewise
Mechanism, the 2k band ends cut [-b, 1 + b] into cells on which every value's density is
constant: the cells are exact, finite outputs (``ldpsim.model.numeric``), and the values whose
band holds a cell are contiguous (structured likelihood ``constant_plus_intervals``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    ROW_SUM_TOL,
    BandMechanism,
    Param,
    ParameterError,
    Privacy,
    band_cells,
    constant_plus_intervals,
    hookimpl,
)

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


def optimal_b(eps: float) -> float:
    """The paper's b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps)), written with expm1 for small eps."""
    e = math.exp(eps)
    return (eps * e - math.expm1(eps)) / (2 * e * (math.expm1(eps) - eps))


class SquareWave(BandMechanism):
    """Square Wave (Li et al., SIGMOD 2020): density e^eps times higher within b of the value mapped to [0, 1]."""

    name = "square_wave"
    input_range = (0.0, 1.0)
    eps = Param("float", ge=1e-3, le=20, doc="privacy level: the mechanism is eps-LDP")
    b = Param(
        "float",
        None,
        gt=0,
        lt=0.5,
        doc="half-width of the high band (default: the paper's, which maximizes mutual information)",
    )

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def half_width(self) -> float:
        """b: the high band is [v - b, v + b]."""
        return optimal_b(self.eps) if self.b is None else float(self.b)

    @property
    def p(self) -> float:
        """Density on the band, e^eps / (2b e^eps + 1)."""
        return 1 / (2 * self.half_width + math.exp(-self.eps))

    @property
    def q(self) -> float:
        """Density elsewhere, 1 / (2b e^eps + 1) = p / e^eps."""
        return self.p * math.exp(-self.eps)

    @property
    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        """(v_x - b, v_x + b) for every value."""
        b = self.half_width
        return self.inputs - b, self.inputs + b

    def mean_response(self) -> tuple[float, float]:
        """E[y | v] = q (1 + 2b) / 2 + 2b (p - q) v: the integral of y against the density."""
        b = self.half_width
        return self.q * (1 + 2 * b) / 2, 2 * b * (self.p - self.q)

    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        b = self.half_width
        return band_cells(-b, 1 + b, *self.bands)

    def _matrix(self) -> np.ndarray:
        # The band's ends are doubles near [0, 1], each off by up to 1.1e-16, so a value's mass on its band of
        # 2b is off by up to ~1e-16 / b: past the matrix's tolerance when b < ~1e-7 (the default b at eps > ~18).
        matrix = super()._matrix()
        off = float(np.abs(matrix.sum(axis=1) - 1.0).max())
        if off > ROW_SUM_TOL:
            raise ParameterError(
                f"b = {self.half_width:.3g} (eps = {self.eps:g}) makes the high band too narrow for doubles: a value's"
                f" report probabilities sum to 1 +- {off:.2g}",
                field="b" if self.b is not None else "eps",
                hint="give a wider b" if self.b is not None else "give eps <= 18, or a wider b",
            )
        return matrix

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        shift, runs = self.band_runs(reports)
        return shift, constant_plus_intervals(runs, self.domain.size, math.exp(-self.eps))

    def density(self, y: np.ndarray) -> np.ndarray:
        """The paper's density of y for each value: p within b of v, q elsewhere in [-b, 1 + b]."""
        y = np.asarray(y, dtype=float)[:, None]
        b = self.half_width
        e = math.exp(self.eps)
        p, q = e / (2 * b * e + 1), 1 / (2 * b * e + 1)
        v = self.inputs[None, :]
        inside = np.abs(y - v) <= b
        return np.where((y >= -b) & (y <= 1 + b), np.where(inside, p, q), 0.0)


@hookimpl
def register_mechanisms(register):
    register(SquareWave)
