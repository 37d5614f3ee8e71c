"""The exponential mechanism with the domain's distance."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    Grid,
    Integers,
    Mechanism,
    Param,
    Privacy,
    constant_plus_column,
    convolution_likelihood,
    hookimpl,
)

if TYPE_CHECKING:  # scipy.sparse is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


class Exponential(Mechanism):
    """Exponential mechanism: P(z|x) ~ e^(-eps d(x,z) / 2) over the domain's values (001 Sec. IX-C, 004 Sec. 7.3)."""

    name = "exponential"
    #: the factor 1/2 buys the guarantee: two rows' normalizers differ by at most e^(eps d / 2), so the
    #: matrix's exact level lies in [eps/2, eps] (eps/2 when all normalizers are equal, e.g. categorical)
    tight_privacy = False
    eps = Param("float", gt=0, doc="eps per unit of the domain's distance: eps-geo-indistinguishable (d-privacy)")

    @property
    def privacy(self) -> Privacy:
        return Privacy("geo", self.eps)

    def _matrix(self) -> np.ndarray:
        # Normalized in log space: the largest weight of a row is e^0 (z = x), so the normalizer is >= 1 and
        # nothing overflows; only weights below ~1e-308 underflow.
        return np.exp(self._log_matrix())

    def _log_matrix(self) -> np.ndarray:
        with np.errstate(over="ignore"):  # eps d beyond the double range: weight 0, as it should be
            log_w = -0.5 * self.eps * self.domain.distances
        from scipy.special import logsumexp  # imported where used: `ldpsim list` stays fast

        return log_w - logsumexp(log_w, axis=1, keepdims=True)

    def _output_count(self) -> int:
        return self.domain.size

    def _diagonal_plus_constant(self) -> tuple[float, float] | None:
        """On categories the matrix is k-RR's at eps/2, ``(keep - other) I + other 11^T``: inverted in O(k).
        None on ordered domains (their rows are not constant off the diagonal)."""
        if self.domain.name != "categorical":
            return None
        k, r = self.domain.size, math.exp(-0.5 * self.eps)
        keep = 1.0 / (1.0 + (k - 1) * r)
        return -math.expm1(-0.5 * self.eps) * keep, r * keep  # keep - other = (1 - r) keep, without cancellation

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        """(shift, H) without the matrix: weights e^(-eps d / 2) depend on z - x only (a convolution, with
        the normalizers 1 / Z_x as column factors), or, on categories, are one value off the report."""
        domain, k = self.domain, self.domain.size
        z = reports[:, 0]
        self.require_outputs(z, k)
        if domain.name == "categorical":
            r = math.exp(-0.5 * self.eps)
            return np.full(z.size, -math.log1p((k - 1) * r)), constant_plus_column(z, k, r)
        shape: tuple[int, ...]
        if domain.name == "integers":
            shape = (k,)
            offsets = np.abs(np.arange(1.0 - k, k)) * Integers.of(domain).step
            cells = z[:, None]
        else:  # a grid: Euclidean distance between centres, in units of the cell side
            grid = Grid.of(domain)
            shape = (grid.rows, grid.cols)
            i, j = np.meshgrid(
                np.arange(1.0 - grid.rows, grid.rows), np.arange(1.0 - grid.cols, grid.cols), indexing="ij"
            )
            offsets = np.hypot(i, j) * grid.cell
            cells = np.column_stack(np.divmod(z, grid.cols))
        kernel = np.exp(-0.5 * self.eps * offsets)
        from scipy.signal import fftconvolve  # imported where used: scipy.signal takes ~1 s to import

        normalizer = fftconvolve(np.ones(shape), kernel, mode="same")  # Z_x = sum_z w(z - x) >= 1: no cancellation
        return convolution_likelihood(kernel, shape, cells, clamp=False, column_scale=1.0 / normalizer.ravel())


@hookimpl
def register_mechanisms(register):
    register(Exponential)
