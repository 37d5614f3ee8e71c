"""Planar geo-indistinguishable mechanisms on grids: noise around the true cell, remapped to the nearest output cell.

Both mechanisms add translation-invariant noise to the true cell and report the nearest cell of an
axis-aligned output window. The nearest window cell of a point is the point's cell with its row and column
clamped to the window, so P(z|x) is the noise mass of a rectangle, strip, quadrant or half-plane of cell
offsets. Each mechanism supplies one *kernel*: the noise mass of every cell offset (di, dj) with
|di| < rows and |dj| < cols, with all offsets beyond that folded into one border bucket per side (no clamped
region splits a bucket). :func:`clamped_matrix` turns it into the matrix with one-sided cumulative sums, so
every entry is a sum of positive numbers: relative accuracy, even for entries of 1e-30 that the
log-likelihoods and privacy levels divide by.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    Grid,
    Mechanism,
    Param,
    ParameterError,
    Privacy,
    box_convolution_likelihood,
    convolution_likelihood,
    hookimpl,
)

if TYPE_CHECKING:  # scipy.sparse is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: relative error that truncating the planar geometric lattice may cause in any matrix entry
LATTICE_TRUNCATION = 1e-16
#: largest lattice radius (in cells) planar-geometric builds; its cost grows as the square
MAX_LATTICE_RADIUS = 20_000
#: bound on the temporaries of the lattice sums
CHUNK_BYTES = 100_000_000
#: the largest cell offset planar-laplace draws: any offset beyond the grid reports the same window edge, and
#: a larger one (a radius of 1e300 cells at eps = 1e-300) would not fit the int64 it is cast to
MAX_OFFSET = 1 << 62


# ------------------------------------------------------------------ kernel -> clamped matrix (shared)
def _mirror(quadrant: np.ndarray) -> np.ndarray:
    """(rows+1, cols+1) masses of offsets (i, j) >= 0, last row/col = offsets >= rows / >= cols, to the
    symmetric (2 rows + 1, 2 cols + 1) kernel ordered [beyond -rows, -(rows-1), ..., 0, ..., rows-1, beyond rows]."""
    q = np.concatenate([quadrant[::-1], quadrant[1:]], axis=0)
    return np.concatenate([q[:, ::-1], q[:, 1:]], axis=1)


def _axis_ranges(n: int, start: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, width) first and last kernel buckets (inclusive) of the offsets that take input coordinate r to
    window coordinate start + k: one bucket inside the window, every bucket up to the window's first row
    (from below) or from its last row (onwards) at its edges, all buckets if the window is one row wide."""
    last = 2 * n  # buckets 0..2n: offset o is bucket o + n; 0 and 2n are the folded tails
    lo = start + np.arange(width)[None, :] - np.arange(n)[:, None] + n
    hi = lo.copy()
    lo[:, 0] = 0
    hi[:, -1] = last
    return lo, hi


def _range_sums(kernel: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sums of ``kernel`` over bucket ranges [lo, hi] along its last axis.

    A range is one bucket, or starts at the first bucket, or ends at the last: cumulative sums from the
    open end give each as a sum of positive terms, where the usual difference of two cumulative sums would
    lose all relative precision on small masses.
    """
    last = kernel.shape[-1] - 1
    prefix = np.cumsum(kernel, axis=-1)
    suffix = np.cumsum(kernel[..., ::-1], axis=-1)[..., ::-1]
    assert np.all((lo == hi) | (lo == 0) | (hi == last))
    return np.where(lo == 0, prefix[..., hi], np.where(hi == last, suffix[..., lo], kernel[..., lo]))


def clamped_matrix(kernel: np.ndarray, rows: int, cols: int, window: tuple[int, int, int, int]) -> np.ndarray:
    """(rows*cols, window cells) matrix of noise with ``kernel`` (see :func:`_mirror`) clamped to ``window``.

    Each axis has O(rows) distinct ranges of offsets, so the masses of all their products form a small table
    and the matrix is one gather from it: O(size * window size).
    """
    r0, c0, wr, wc = window
    row_lo, row_hi = _axis_ranges(rows, r0, wr)
    col_lo, col_hi = _axis_ranges(cols, c0, wc)
    row_ranges, row_id = np.unique(np.stack([row_lo.ravel(), row_hi.ravel()], axis=1), axis=0, return_inverse=True)
    col_ranges, col_id = np.unique(np.stack([col_lo.ravel(), col_hi.ravel()], axis=1), axis=0, return_inverse=True)
    by_col = _range_sums(kernel, col_ranges[:, 0], col_ranges[:, 1])  # (row buckets, column ranges)
    table = _range_sums(by_col.T, row_ranges[:, 0], row_ranges[:, 1]).T  # (row ranges, column ranges)
    row_id = row_id.reshape(rows, wr)
    col_id = col_id.reshape(cols, wc)
    m = table[row_id[:, None, :, None], col_id[None, :, None, :]]  # (row, col, window row, window col)
    return m.reshape(rows * cols, wr * wc)


def _likely_range(coords: np.ndarray, width: int, start: int, n: int) -> np.ndarray:
    """(n,) mask of one axis of a planar likely subset, from the reports' window coordinates along it."""
    lo = 0 if coords.min() == 0 else start + int(coords.min()) - 1
    hi = n - 1 if coords.max() == width - 1 else start + int(coords.max()) + 1
    mask = np.zeros(n, dtype=bool)
    mask[lo : hi + 1] = True
    return mask


class _Planar(Mechanism):
    """Noise on the plane around the true cell, reported as the nearest cell of an output window."""

    domain_kinds = ("grid",)
    #: remapping to the window post-processes an eps-geo guarantee; the matrix may be more private
    tight_privacy = False
    eps = Param(
        "float", gt=0, doc="eps per unit of the grid's distance (a cell is `cell` units): eps-geo-indistinguishable"
    )
    window = Param(
        "vector",
        None,
        ge=0,
        doc="output cells [row0, col0, rows, cols] inside the grid (004 Sec. 6.4); default: the whole grid",
    )

    def _validate(self) -> None:
        if self.window is None:
            return
        grid = self._grid
        w = self.window
        if w.size != 4 or not np.all(w == np.round(w)):
            raise ParameterError(
                f"must be 4 integers [row0, col0, rows, cols], got {w.tolist()}",
                field="window",
                hint="e.g. window = [0, 0, 4, 4] for the 4x4 cells in the corner of row 0, column 0",
            )
        r0, c0, wr, wc = (int(v) for v in w)
        if wr < 1 or wc < 1:
            raise ParameterError(f"has {wr}x{wc} cells", field="window", hint="give at least one row and one column")
        if r0 + wr > grid.rows or c0 + wc > grid.cols:
            raise ParameterError(
                f"[{r0}, {c0}, {wr}, {wc}] reaches beyond the {grid.rows}x{grid.cols} grid",
                field="window",
                hint=f"keep row0 + rows <= {grid.rows} and col0 + cols <= {grid.cols}",
            )

    @property
    def privacy(self) -> Privacy:
        return Privacy("geo", self.eps)

    @property
    def _grid(self) -> Grid:
        """The domain, typed as the grid ``domain_kinds`` makes it."""
        return Grid.of(self.domain)

    @property
    def _window(self) -> tuple[int, int, int, int]:
        if self.window is None:
            return 0, 0, self._grid.rows, self._grid.cols
        r0, c0, wr, wc = (int(v) for v in self.window)
        return r0, c0, wr, wc

    @property
    def _a(self) -> float:
        """eps per cell: the noise decays as e^(-a r) with r in cells."""
        return self.eps * self._grid.cell

    def output_labels(self) -> list[str]:
        r0, c0, wr, wc = self._window
        return [f"({r},{c})" for r in range(r0, r0 + wr) for c in range(c0, c0 + wc)]

    def _quadrant(self, rows: int, cols: int) -> np.ndarray:
        """(rows+1, cols+1) noise masses of offsets (i, j) >= 0; the last row/column folds i >= rows / j >= cols.

        The grid's extent gives the grid's kernel; a likely subset's box gives the box's, the same
        masses with more of them folded (:meth:`_subset_likelihood`)."""
        raise NotImplementedError

    def _offsets(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n draws of the noise's (row, column) cell offset."""
        raise NotImplementedError

    @cached_property
    def _kernel(self) -> np.ndarray:
        return self._kernel_at((self._grid.rows, self._grid.cols))

    @cached_property
    def _kernels(self) -> dict[tuple[int, ...], np.ndarray]:
        return {}

    def _kernel_at(self, extent: tuple[int, ...]) -> np.ndarray:
        """The kernel of a grid of ``extent`` (rows, cols) cells, cached: the grid's, or a box's."""
        if extent not in self._kernels:
            self._kernels[extent] = _mirror(self._quadrant(int(extent[0]), int(extent[1])))
        return self._kernels[extent]

    def _matrix(self) -> np.ndarray:
        return clamped_matrix(self._kernel, self._grid.rows, self._grid.cols, self._window)

    def _output_count(self) -> int:
        return self._window[2] * self._window[3]

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        """(shift, H) as a 2-D FFT convolution with the kernel, clamped to the window: no |X| x |Z| matrix."""
        r0, c0, wr, wc = self._window
        grid = (self._grid.rows, self._grid.cols)
        return convolution_likelihood(self._kernel, grid, self._report_cells(reports), start=(r0, c0), window=(wr, wc))

    def _report_cells(self, reports: np.ndarray) -> np.ndarray:
        """(D, 2) window (row, col) of each report, after checking it is an output."""
        wr, wc = self._window[2:]
        z = reports[:, 0]
        self.require_outputs(z, wr * wc)
        return np.column_stack(np.divmod(z, wc))

    def _subset_likelihood(self, reports: np.ndarray, support: np.ndarray) -> tuple[np.ndarray, LinearOperator] | None:
        """The convolution over the support's box with the box's kernel: neither the grid's kernel (a
        quadrature per cell for planar Laplace) nor its FFT is built, so a grid far larger than the
        data costs what the data's region does."""
        r0, c0, wr, wc = self._window
        return box_convolution_likelihood(
            self._kernel_at,
            (self._grid.rows, self._grid.cols),
            self._report_cells(reports),
            support,
            start=(r0, c0),
            window=(wr, wc),
        )

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray:
        # The reports' bounding box, one cell wider on each side that no report reaches the window's edge
        # from, and reaching the grid's edge on a side where one does (004 Sec. 8.3, derived for the grid):
        # - A report z away from the window's edges has P(z|x) = K(z - x), and K strictly decreases in each
        #   coordinate's |offset| (planar geometric: e^(-a r); planar Laplace: the mass of a unit cell under a
        #   radially decreasing density decreases as the cell moves away along an axis). A report on a window
        #   edge collects a strip or quadrant of offsets, which gains mass as x moves towards it.
        # - So a value x below (above) every report's row is beaten on every report by x one row closer: it
        #   is outside any MLE's support. Not so beyond a window edge that a report sits on: those reports'
        #   probability grows further out (the non-identifiable case of 004 Fig. 6), so the box keeps it.
        # The extra cell keeps reports off the box's cut sides, so the convolution restricted to the box
        # is exact (ConvolutionOperator.restricted); 004 Prop. 8.3's hull-plus-delta region is smaller
        # inside the box's corners but not beyond its sides, where this argument is exact.
        r0, c0, wr, wc = self._window
        rows, cols = self._grid.rows, self._grid.cols
        row, col = self._report_cells(reports).T
        mask_rows = _likely_range(row, wr, r0, rows)
        mask_cols = _likely_range(col, wc, c0, cols)
        return (mask_rows[:, None] & mask_cols[None, :]).ravel()

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        r0, c0, wr, wc = self._window
        di, dj = self._offsets(values.shape[0], rng)
        row, col = np.divmod(values, self._grid.cols)
        row = np.clip(row + di, r0, r0 + wr - 1) - r0
        col = np.clip(col + dj, c0, c0 + wc - 1) - c0
        return (row * wc + col)[:, None]


# ------------------------------------------------------------------------------- planar geometric
def lattice_radius(a: float, rows: int, cols: int, limit: int | None = None) -> int:
    """Smallest R >= max(rows, cols) such that dropping the lattice points with max(|i|, |j|) > R changes any
    planar-geometric matrix entry by a relative LATTICE_TRUNCATION at most.

    Every entry sums e^(-a r) over a set holding an offset with |i| < rows, |j| < cols, of weight at least
    e^(-a r0) with r0 = hypot(rows, cols). The 8m points with max(|i|, |j|) = m are at distance >= m, so the
    dropped weight is at most sum_{m > R} 8 m q^m = 8 q^(R+1) (R + 1 - R q) / (1 - q)^2 with q = e^-a; the
    normalizer (>= 1, the origin) loses even less. For small a, R ~ (37 + log(8 R / a^2) + a r0) / a.

    With ``limit``, any R above it is returned as soon as one is known to be needed: a tiny a (eps = 1e-300)
    would otherwise double R past 2^53, where ``R + 1 - R q`` rounds to 0.
    """
    if limit is not None and not a * limit > 0:  # a underflows: no radius is enough
        return limit + 1
    budget = math.log(LATTICE_TRUNCATION) - a * math.hypot(rows, cols) - math.log(8) + 2 * math.log(-math.expm1(-a))
    q = math.exp(-a)

    def log_dropped(r: int) -> float:  # decreasing in r: its derivative is (1 - q) / (1 + r (1 - q)) - a < 0
        return -a * (r + 1) + math.log(r + 1 - r * q)

    lo = hi = max(rows, cols)
    while log_dropped(hi) > budget:
        if limit is not None and hi > limit:
            return hi
        lo, hi = hi, 2 * hi
    while lo < hi:  # smallest r in [lo, hi] within the budget
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if log_dropped(mid) > budget else (lo, mid)
    return hi


class PlanarGeometric(_Planar):
    """Planar geometric: lambda e^(-eps d(x,z)) on the infinite grid of centres, clamped to the output (001 eq. 24)."""

    name = "planar-geometric"

    def _validate(self) -> None:
        super()._validate()
        grid = self._grid
        if lattice_radius(self._a, grid.rows, grid.cols, MAX_LATTICE_RADIUS) > MAX_LATTICE_RADIUS:
            lo, hi = max(self._a, 1e-300), 1.0  # the radius decreases with a: bisect for the smallest a within it
            for _ in range(60):
                mid = math.sqrt(lo * hi)
                too_far = lattice_radius(mid, grid.rows, grid.cols, MAX_LATTICE_RADIUS) > MAX_LATTICE_RADIUS
                lo, hi = (mid, hi) if too_far else (lo, mid)
            unit = 10.0 ** (math.floor(math.log10(hi / grid.cell)) - 2)
            floor = math.ceil(hi / grid.cell / unit) * unit  # 3 digits, rounded up so that it works
            raise ParameterError(
                f"eps * cell = {self._a:.3g} spreads the noise over more than {MAX_LATTICE_RADIUS} cells",
                field="eps",
                hint=f"use eps >= {floor:.3g} on this grid, or larger cells",
            )

    def _quadrant(self, rows: int, cols: int) -> np.ndarray:
        # Lattice sums over offsets 0..R in each axis (by symmetry), in chunks of rows; the tails are sums of
        # positive terms. lambda = 1 / the sum over the whole plane (every entry of the mirrored kernel).
        a = self._a
        radius = lattice_radius(a, rows, cols)
        j = np.arange(radius + 1, dtype=float)
        per_row = np.empty((radius + 1, cols + 1))
        chunk = max(1, CHUNK_BYTES // (16 * (radius + 1)))
        for start in range(0, radius + 1, chunk):
            i = np.arange(start, min(radius + 1, start + chunk), dtype=float)[:, None]
            w = np.exp(-a * np.hypot(i, j))
            per_row[start : start + w.shape[0], :cols] = w[:, :cols]
            per_row[start : start + w.shape[0], cols] = w[:, cols:].sum(axis=1)
        quadrant = np.concatenate([per_row[:rows], per_row[rows:].sum(axis=0, keepdims=True)], axis=0)
        # every offset (i, j) counted once: axes appear in one quadrant, the rest in four
        total = 4 * quadrant[1:, 1:].sum() + 2 * quadrant[0, 1:].sum() + 2 * quadrant[1:, 0].sum() + quadrant[0, 0]
        return quadrant / total

    def _offsets(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        # Exact rejection sampling from the infinite lattice, independent of the matrix. Proposal: independent
        # two-sided geometric offsets, q(i, j) ~ e^(-s (|i| + |j|)) with s = a / sqrt(2); as
        # r >= (|i| + |j|) / sqrt(2), accepting with e^(-a r + s (|i| + |j|)) <= 1 leaves e^(-a r). Acceptance
        # is Z_target / Z_proposal >= pi/4 (its small-a limit), so a few vectorized rounds finish.
        a = self._a
        s = a / math.sqrt(2)
        p = -math.expm1(-s)
        di = np.empty(n, dtype=np.int64)
        dj = np.empty(n, dtype=np.int64)
        todo = np.arange(n)
        while todo.size:
            m = todo.size
            i = rng.geometric(p, m) - rng.geometric(p, m)
            j = rng.geometric(p, m) - rng.geometric(p, m)
            keep = rng.random(m) < np.exp(s * (np.abs(i) + np.abs(j)) - a * np.hypot(i, j))
            di[todo[keep]] = i[keep]
            dj[todo[keep]] = j[keep]
            todo = todo[~keep]
        return di, dj


# -------------------------------------------------------------------------------- planar Laplace
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    t, w = np.polynomial.legendre.leggauss(n)
    return (t + 1) / 2, w / 2


def _double_exponential(h: float, tmax: float) -> tuple[np.ndarray, np.ndarray]:
    """tanh-sinh nodes and weights on [0, 1]: they crowd doubly exponentially at both ends, where the
    integrands of unbounded regions vary on angular scales as small as a (noise decays over 1/a cells)."""
    t = np.arange(-tmax, tmax + h / 2, h)
    u = np.pi / 2 * np.sinh(t)
    return 1 / (1 + np.exp(-2 * u)), h * np.pi / 4 * np.cosh(t) / np.cosh(u) ** 2


#: quadrature rules on [0, 1] for one smooth piece of the angular integrand; errors measured against
#: scipy dblquad for a = 0.001 .. 12: ~1e-15 for cells, below 1e-10 for strips and quadrants
_CELL_RULE = _gauss_legendre(24)
_TAIL_RULE = _double_exponential(0.025, 3.0)


def _radial_mass(u_in: np.ndarray, u_out: np.ndarray) -> np.ndarray:
    """P(u_in < aR < u_out) for R ~ Gamma(2, 1/a), the radius of planar Laplace noise: tail Q(u) = e^-u (1 + u).

    Q(u_in) - Q(u_out) = e^-u_in (u_in (1 - e^-w) + P(w)) with w = u_out - u_in and P(w) = 1 - e^-w (1 + w),
    the regularized incomplete gamma P(2, w): positive terms only, accurate for thin and far annuli alike.
    """
    w = u_out - u_in
    from scipy.special import gammainc  # imported where used: `ldpsim list` stays fast

    return np.exp(-u_in) * (u_in * -np.expm1(-w) + gammainc(2.0, w))


def planar_laplace_mass(
    a: float, x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray, rule: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Mass of the density (a^2 / 2 pi) e^(-a r) over rectangles [x0, x1] x [y0, y1] (bounds may be infinite;
    no edge through the origin).

    In polar coordinates the radial integral is closed-form (:func:`_radial_mass` between the radii where the
    ray at angle theta enters and leaves the rectangle), leaving (1/2pi) times an integral over theta. The
    integrand is smooth between the directions of the corners and of the axes, where the entering and leaving
    sides change; each such piece that the rectangle's rays cross is integrated with ``rule``. The cusp of the
    density at the origin costs nothing: rays start there.
    """
    x0, x1, y0, y1 = (np.ravel(np.asarray(v, dtype=float)) for v in np.broadcast_arrays(x0, x1, y0, y1))
    angles = [np.zeros(x0.size), np.full(x0.size, 2 * np.pi)] + [np.full(x0.size, k * np.pi / 2) for k in (1, 2, 3)]
    for x in (x0, x1):
        for y in (y0, y1):
            finite = np.isfinite(x) & np.isfinite(y)
            angles.append(
                np.where(finite, np.mod(np.arctan2(np.where(finite, y, 0), np.where(finite, x, 1)), 2 * np.pi), 0)
            )
    cuts = np.sort(np.stack(angles, axis=1), axis=1)
    start, length = cuts[:, :-1], np.diff(cuts, axis=1)

    def crossing(k: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Radii where rays at theta enter and leave rectangle k (enter >= leave: missed)."""
        c, s = np.cos(theta), np.sin(theta)
        with np.errstate(divide="ignore", invalid="ignore"):
            tx0, tx1, ty0, ty1 = x0[k] / c, x1[k] / c, y0[k] / s, y1[k] / s
        enter = np.maximum(np.maximum(np.minimum(tx0, tx1), np.minimum(ty0, ty1)), 0.0)
        leave = np.minimum(np.maximum(tx0, tx1), np.maximum(ty0, ty1))
        return enter, leave

    # Pieces the rectangle's rays cross (crossing is decided per piece: its sides only change at cuts).
    rect, piece = np.nonzero(length > 0)
    enter, leave = crossing(rect, start[rect, piece] + length[rect, piece] / 2)
    hit = leave > enter
    rect, piece = rect[hit], piece[hit]
    nodes, weights = rule
    theta = start[rect, piece][:, None] + length[rect, piece][:, None] * nodes[None, :]
    enter, leave = crossing(rect[:, None], theta)
    leave = np.maximum(leave, enter)  # a node exactly on a cut may graze a corner
    with np.errstate(invalid="ignore"):
        density = _radial_mass(a * enter, a * leave)
    integral = (density @ weights) * length[rect, piece]
    return np.bincount(rect, weights=integral, minlength=x0.size) / (2 * np.pi)


class PlanarLaplace(_Planar):
    """Planar Laplace: noise (eps^2/2pi) e^(-eps r) around the centre, then the nearest output cell (004 Sec. 7.3)."""

    name = "planar-laplace"

    def _quadrant(self, rows: int, cols: int) -> np.ndarray:
        # In cell units the noise has density (a^2 / 2 pi) e^(-a r) and cell offset (i, j) covers
        # [j - 1/2, j + 1/2] x [i - 1/2, i + 1/2] (x = column, y = row). Offsets beyond the grid's extent are
        # whole strips and a quadrant, integrated exactly rather than truncated. Beyond a = 10^4 every cell but
        # the centre has mass below e^-5000 = 0 in double precision: capping a changes nothing but overflow.
        a = min(self._a, 1e4)
        i, j = np.meshgrid(np.arange(rows + 1.0), np.arange(cols + 1.0), indexing="ij")
        x0, y0 = j - 0.5, i - 0.5
        x1 = np.where(j < cols, j + 0.5, np.inf)
        y1 = np.where(i < rows, i + 0.5, np.inf)
        bounded = np.isfinite(x1) & np.isfinite(y1)
        quadrant = np.empty_like(x0)
        for rule, part in ((_CELL_RULE, bounded), (_TAIL_RULE, ~bounded)):
            quadrant[part] = planar_laplace_mass(a, x0[part], x1[part], y0[part], y1[part], rule)
        return quadrant

    def _validate(self) -> None:
        super()._validate()
        if not self._a > 0:
            raise ParameterError(
                f"eps * cell = {self.eps:g} * {self._grid.cell:g} rounds to 0: the noise has no scale",
                field="eps",
                hint="give a larger eps, or larger cells",
            )

    def _offsets(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        # Exact and independent of the matrix: a uniform direction, and a radius with density
        # eps^2 r e^(-eps r), i.e. Gamma(2, 1/eps); the point is in the cell whose centre is nearest.
        theta = rng.uniform(0.0, 2 * np.pi, n)
        radius = rng.gamma(2.0, 1.0 / self._a, n)  # in cells
        rows, cols = (np.clip(np.rint(radius * f(theta)), -MAX_OFFSET, MAX_OFFSET) for f in (np.sin, np.cos))
        return rows.astype(np.int64), cols.astype(np.int64)


@hookimpl
def register_mechanisms(register):
    register(PlanarGeometric)
    register(PlanarLaplace)
