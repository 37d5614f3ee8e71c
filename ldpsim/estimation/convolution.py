"""The FFT convolution operator behind :func:`ldpsim.estimation.operators.convolution_likelihood`.

A module of its own because it subclasses scipy's ``LinearOperator``: importing
``scipy.sparse.linalg`` costs a noticeable part of a second, which ``import ldpsim``
and ``ldpsim list`` should not pay when no grid likelihood is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.sparse.linalg import LinearOperator

if TYPE_CHECKING:
    from .backend import Backend

#: an FFT product entry whose value is below GUARD times its rounding-error bound is recomputed
#: exactly, so every entry of H @ theta has a relative error below 1 / GUARD
GUARD = 1e8

_EPS = np.finfo(float).eps
#: entries computed at a time by the exact row evaluation
_CHUNK = 1 << 20


class ConvolutionOperator(LinearOperator):
    """Row-rescaled likelihood of noise ``kernel`` around the true value, clamped to an output window.

    ``P(z | x) = s_x * sum of kernel[o] over the offsets o with clamp(x + o) = z``, where clamp moves
    each coordinate into the window ``[start, start + window)`` (or, with ``clamp=False``, is the
    identity: outputs are positions, and offsets beyond the kernel have probability 0). Build it with
    :func:`convolution_likelihood`.

    Products are one real FFT convolution of the values' grid with the kernel (its spectrum computed
    once) plus cumulative sums folding the positions beyond the window onto its edges. Their error is
    absolute (about machine precision times the norms of kernel and vector); the rare entries of
    ``H @ theta`` small enough for that to matter are recomputed as exact dot products (:data:`GUARD`).
    """

    #: on small domains a product over its exact dense rows is faster than the FFT and its guard (3.4x
    #: below about 1,000 values): the exact-MLE solver materializes them (see ``hessian_rows.likelihood_for_passes``)
    dense_passes_faster = True

    def __init__(self, kernel, shape, outputs, start, window, clamp, column_scale):
        self.kernel = kernel
        self.grid = tuple(shape)
        self.half = tuple((s - 1) // 2 for s in kernel.shape)
        self.outputs = outputs  # (D, ndim) window coordinates
        self.start = tuple(start)
        self.window = tuple(window)
        self.clamp = clamp
        self.column_scale = column_scale  # (size,) or None
        self.full = tuple(n + 2 * h for n, h in zip(self.grid, self.half))  # positions -h .. n-1+h
        from scipy import fft  # here, not at import: scipy.fft is slow to import and only grids need it

        self.fft_shape = tuple(fft.next_fast_len(n, real=True) for n in self.full)
        self._spectrum: np.ndarray | None = None  # on the first product: a restricted copy may be all that runs
        self.positions = outputs + np.asarray(self.start)  # the reports' cells in domain coordinates
        self.flat_outputs = np.ravel_multi_index(tuple(outputs.T), self.window)
        self._cumulative: dict[tuple[int, ...], np.ndarray] = {}
        self.classes = self._row_classes()
        # the distinct classes, found once: the accuracy guard and exact rows look entries up per class
        self._class_list, self._class_ids = np.unique(self.classes, axis=0, return_inverse=True)
        self._class_ids = self._class_ids.ravel()
        # The value each row is scaled by: its own cell's, or for a window edge the farthest value beyond that
        # edge, which collects the most offsets; for a kernel decreasing away from 0, the row's maximum.
        far = np.where(self.classes == 1, 0, np.where(self.classes == 2, np.asarray(self.grid) - 1, self.positions))
        reference = self._at(self.classes, self.positions, far)
        if column_scale is not None:
            reference = reference * column_scale[np.ravel_multi_index(tuple(far.T), self.grid)]
        with np.errstate(divide="ignore"):
            self.shift = np.log(reference)
        self.row_scale = np.where(reference > 0, 1.0 / np.where(reference > 0, reference, 1.0), 0.0)
        # per axis: the window coordinate each position t (= index - half) folds onto, and where each starts
        self._fold = []
        for n, h, s, w in zip(self.grid, self.half, self.start, self.window):
            where = np.clip(np.arange(n + 2 * h) - h - s, 0, w - 1)
            self._fold.append((where, np.searchsorted(where, np.arange(w))))
        # Rounding error of an entry, in units of eps |kernel| |theta|: measured at most ~7 for a convolution
        # entry and ~75 for a folded edge of a 48 x 48 grid; bounded here by 4 log2(FFT size), times the
        # square root of the positions folded onto each edge coordinate.
        self._kernel_norm = float(np.linalg.norm(kernel))
        folded = np.where(self.classes > 0, np.sqrt(np.asarray(self.full, dtype=float)), 1.0).prod(axis=1)
        self._error_factor = 4 * math.log2(max(2, math.prod(self.fft_shape))) * folded
        # LinearOperator.__init__(dtype, shape) is real; scipy-stubs declare only the factory __new__
        super().__init__(float, (outputs.shape[0], math.prod(self.grid)))  # type: ignore[call-arg]

    @property
    def spectrum(self) -> np.ndarray:
        """The kernel's real FFT at :attr:`fft_shape`, computed once."""
        if self._spectrum is None:
            from scipy import fft

            self._spectrum = fft.rfftn(self.kernel, self.fft_shape)
        return self._spectrum

    def restricted(self, support: np.ndarray) -> tuple[np.ndarray, ConvolutionOperator] | None:
        """``(shift, H)`` of this likelihood on the values in ``support`` only, at the cost of their box.

        A likely subset (004 Sec. 8) is usually a small box around the reports on a large grid;
        restricting the columns of this operator would still convolve the whole grid. On a box,
        every offset between a report and a value is shorter than the box, so the kernel cropped
        to the box's extent (its tails folded, sums of positives) gives the same probabilities, and
        the window cut to the box clamps the same offsets onto each report, provided no report
        sits on a side where the box cuts the window (it would collect offsets it does not collect
        here). ``exp(shift_d) * H[d, x]`` equals this operator's for every x in the support.

        Parameters
        ----------
        support
            Boolean mask over the grid's values (flat, row-major).

        Returns
        -------
        tuple or None
            ``(shift, H)`` with H over the support's values in row-major order, or None when the
            support is not a box, misses a report, or cuts the window next to a report (use the
            column restriction of this operator then).
        """
        if not self.clamp:
            return None
        return box_likelihood(
            self._cropped, self.grid, self.positions, self.start, self.window, support, self.column_scale
        )

    def on_device(self, backend: Backend) -> DeviceConvolution:
        """This operator's products on ``backend``'s device (FFTs there; see ``DeviceConvolution``).

        Parameters
        ----------
        backend
            The backend (:mod:`ldpsim.estimation.backend`).

        Returns
        -------
        object
            A ``DeviceConvolution``: the products ``H @ theta`` and ``H.T @ w`` on device vectors.
        """
        return DeviceConvolution(self, backend)

    def guarded_rows(self, small: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """The entries ``small`` of ``H @ theta`` before row scaling, as exact dot products: what the accuracy guard
        (:data:`GUARD`) puts in place of FFT entries too small for their rounding error, on any backend.

        Parameters
        ----------
        small
            Row indices.
        theta
            The vector, on the host.

        Returns
        -------
        numpy.ndarray
            One entry per index of ``small``.
        """
        held = np.flatnonzero(theta)
        if held.size < theta.size // 2:
            return np.asarray(self._exact(small, held) @ theta[held])
        return np.asarray(self._exact(small) @ theta)

    def local_minima(self, field: np.ndarray, radius: int) -> np.ndarray:
        """Whether each value's entry of ``field`` (one per column) is the smallest within ``radius`` cells along
        every axis of the grid: the exact MLE's active set takes its newcomers from these first, one per region
        (``active_set._newcomers``).

        Parameters
        ----------
        field
            One number per value (column), in the grid's row-major order; ``inf`` where a value is no candidate.
        radius
            Half the side of the neighbourhood, in cells.

        Returns
        -------
        numpy.ndarray
            Boolean, one per value; ties count as minima.
        """
        from scipy import ndimage

        grid = np.asarray(field, dtype=float).reshape(self.grid)
        return (ndimage.minimum_filter(grid, size=2 * radius + 1, mode="nearest") == grid).ravel()

    def _cropped(self, shape: tuple[int, ...]) -> np.ndarray:
        """The kernel cropped to a box of ``shape``: offsets <= -n into one bucket, -n+1 .. n-1 as they are,
        >= n into one bucket, per axis (sums of positives)."""
        kernel = self.kernel
        for axis, (n, h) in enumerate(zip(shape, self.half)):
            kernel = np.add.reduceat(kernel, np.r_[0, np.arange(h - n + 1, h + n + 1)], axis=axis)
        return kernel

    # ----------------------------------------------------------------- products
    def _convolve(self, theta: np.ndarray) -> np.ndarray:
        """Noise masses at every reachable position (unclamped), shape ``full``."""
        grid = theta.reshape(self.grid)
        if self.column_scale is not None:
            grid = grid * self.column_scale.reshape(self.grid)
        from scipy import fft

        out = fft.irfftn(fft.rfftn(grid, self.fft_shape) * self.spectrum, self.fft_shape)
        return out[tuple(slice(0, n) for n in self.full)]

    def _window_masses(self, theta: np.ndarray) -> np.ndarray:
        """P(z | theta) for every window cell z, unscaled."""
        y = self._convolve(theta)
        if self.clamp:
            for axis, (_, starts) in enumerate(self._fold):
                y = np.add.reduceat(y, starts, axis=axis)
        else:
            y = y[tuple(slice(h + s, h + s + w) for h, s, w in zip(self.half, self.start, self.window))]
        return y

    def _matvec(self, theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta).astype(float, copy=False)
        y = np.maximum(self._window_masses(theta).ravel()[self.flat_outputs], 0.0)
        scale = theta if self.column_scale is None else theta * self.column_scale
        bound = self._error_factor * (_EPS * self._kernel_norm * float(np.linalg.norm(scale)))
        small = np.flatnonzero(y < GUARD * bound)
        if small.size:
            # only the values theta holds: an exact MLE's iterate is zero on most of a large grid, where the guard
            # fires on every report far from its support (a 256 x 256 grid: 4-15 s per product, not 0.02-0.15)
            y[small] = self.guarded_rows(small, theta)
        return y * self.row_scale

    def _rmatvec(self, w: np.ndarray) -> np.ndarray:
        w = np.ravel(w).astype(float, copy=False) * self.row_scale
        v = np.bincount(self.flat_outputs, weights=w, minlength=math.prod(self.window)).reshape(self.window)
        if self.clamp:
            u = v[np.ix_(*(where for where, _ in self._fold))]  # each position gets its window cell's weight
        else:
            u = np.zeros(self.full)
            u[tuple(slice(h + s, h + s + n) for h, s, n in zip(self.half, self.start, self.window))] = v
        from scipy import fft

        g = fft.irfftn(fft.rfftn(u, self.fft_shape) * np.conj(self.spectrum), self.fft_shape)
        g = np.maximum(g[tuple(slice(0, n) for n in self.grid)].ravel(), 0.0)
        return g if self.column_scale is None else g * self.column_scale

    def _matmat(self, m: np.ndarray) -> np.ndarray:
        return np.column_stack([self._matvec(col) for col in np.asarray(m).T])

    def _rmatmat(self, m: np.ndarray) -> np.ndarray:
        return np.column_stack([self._rmatvec(col) for col in np.asarray(m).T])

    # ------------------------------------------------------------ exact entries
    #: :meth:`rows` reads a subset of the columns at their cost alone (see ``operators.exact_block``)
    rows_take_columns = True

    def rows(self, rows: np.ndarray | Sequence[int], columns: np.ndarray | Sequence[int] | None = None) -> np.ndarray:
        """Rows ``H[rows, :]``, or ``H[rows][:, columns]``, as a dense array, each entry a sum of positive terms.

        ``columns`` reads only those values' entries: an active-set solver on a large grid needs the
        columns of the MLE's few thousand support values, and the whole rows (``D x |X|``) would not fit.
        Every entry is computed as in the whole rows, so the two agree exactly.
        """
        rows = np.asarray(rows, dtype=np.int64)
        picked = None if columns is None else np.asarray(columns, dtype=np.int64)
        return self._exact(rows, picked) * self.row_scale[rows, None]

    def _exact(self, rows: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """Unscaled rows (at ``columns`` only, if given): P(z_d | x) up to the factor the caller applies after
        the operator.

        Rows are taken class by class (:attr:`classes`, grouped once at construction), so each entry is
        one kernel lookup: no search for the classes of the (rows x values) pairs.
        """
        cells = np.indices(self.grid).reshape(len(self.grid), -1).T  # (size, ndim)
        if columns is not None:
            cells = cells[columns]
        out = np.empty((rows.size, cells.shape[0]))
        ids = self._class_ids[rows]
        chunk = max(1, _CHUNK // max(1, cells.shape[0]))
        for cls in np.unique(ids):
            members = np.flatnonzero(ids == cls)
            table = self._class_list[cls]
            for lo in range(0, members.size, chunk):
                part = members[lo : lo + chunk]
                out[part] = self._at(table, self.positions[rows[part]], cells)
        if self.column_scale is not None:
            out *= self.column_scale if columns is None else self.column_scale[columns]
        return out

    def _row_classes(self) -> np.ndarray:
        """(D, ndim): how each report's coordinate collects offsets: one (0), all up to (1) or from (2)
        its own (the window's first or last cell), or all of them (3, a window one cell wide)."""
        classes = np.zeros(self.outputs.shape, dtype=np.int64)
        if self.clamp:
            for axis, w in enumerate(self.window):
                o = self.outputs[:, axis]
                classes[:, axis] = 3 if w == 1 else np.where(o == 0, 1, np.where(o == w - 1, 2, 0))
        return classes

    def _cumulated(self, cls: tuple[int, ...]) -> np.ndarray:
        """The kernel summed, per axis, over the offsets a window edge collects (prefix/suffix sums of positives)."""
        if cls not in self._cumulative:
            k = self.kernel
            for axis, c in enumerate(cls):
                if c == 1:
                    k = np.cumsum(k, axis=axis)
                elif c == 2:
                    k = np.flip(np.cumsum(np.flip(k, axis), axis=axis), axis)
                elif c == 3:
                    k = np.broadcast_to(k.sum(axis=axis, keepdims=True), k.shape)
            self._cumulative[cls] = k
        return self._cumulative[cls]

    def _at(self, classes: np.ndarray, positions: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """Unscaled P(report at ``positions`` | value at ``cells``).

        Either elementwise (``classes``, ``positions`` and ``cells`` all (m, ndim)), or for one class
        ``classes`` (ndim,) shared by every report: then ``positions`` (r, ndim) and ``cells`` (c, ndim)
        give an (r, c) table.
        """
        half = np.asarray(self.half)
        top = np.asarray(self.kernel.shape) - 1
        if classes.ndim == 1:
            # one flat kernel index per (report, value), built axis by axis, and one take: numpy's fancy
            # indexing by a tuple of index arrays was most of the active set's column reads
            cls = tuple(int(c) for c in classes)
            table = np.ascontiguousarray(self._cumulated(cls))
            strides = np.asarray(table.strides) // table.itemsize
            flat = np.zeros((positions.shape[0], cells.shape[0]), dtype=np.intp)
            empty = None
            for a, c in enumerate(cls):
                index = positions[:, a, None] - cells[None, :, a] + half[a]
                # whether some offsets leave the kernel along this axis, from the ranges alone
                below = positions[:, a].min() - cells[:, a].max() + half[a] < 0
                above = positions[:, a].max() - cells[:, a].min() + half[a] > top[a]
                # no mass beyond the kernel, unless the report collects every offset on that side
                if c in (0, 1) and below:
                    empty = index < 0 if empty is None else empty | (index < 0)
                if c in (0, 2) and above:
                    empty = index > top[a] if empty is None else empty | (index > top[a])
                if below:
                    np.maximum(index, 0, out=index)
                if above:
                    np.minimum(index, top[a], out=index)
                flat += index * strides[a]
            out = table.ravel().take(flat)
            if empty is not None:
                out[empty] = 0.0
            return out
        index = positions - cells + half  # kernel index of the offset z - x
        classes = np.broadcast_to(classes, index.shape)
        # an offset beyond the kernel: no mass, unless the report collects every offset on that side
        empty = np.any(
            ((classes == 0) & ((index < 0) | (index > top)))
            | ((classes == 1) & (index < 0))
            | ((classes == 2) & (index > top)),
            axis=1,
        )
        index = np.clip(index, 0, top)
        out = np.zeros(positions.shape[0])
        for cls in np.unique(classes, axis=0):
            sel = np.all(classes == cls, axis=1)
            out[sel] = self._cumulated(tuple(int(c) for c in cls))[tuple(index[sel].T)]
        return np.where(empty, 0.0, out)


def support_box(
    support: np.ndarray, grid: Sequence[int], positions: np.ndarray, start: Sequence[int], window: Sequence[int]
) -> tuple[np.ndarray, tuple[int, ...], np.ndarray, np.ndarray] | None:
    """``(lo, shape, cut_first, cut_last)`` of a support on which a clamped convolution is its own box's.

    ``lo`` and ``shape`` are the support's bounding box, ``cut_first`` and ``cut_last`` the window cut
    to it (domain coordinates, inclusive). None when the support is not its whole bounding box, when a
    report (``positions``, domain coordinates) lies outside the cut window, or when a report sits on a
    side where the box cuts the window: there it would collect offsets that it does not collect in the
    whole window. See :meth:`ConvolutionOperator.restricted`.
    """
    mask = np.asarray(support, dtype=bool).reshape(tuple(grid))
    where = np.nonzero(mask)
    if where[0].size == 0:
        return None
    lo = np.array([w.min() for w in where])
    hi = np.array([w.max() for w in where])
    if where[0].size != math.prod(int(n) for n in hi - lo + 1):  # not every cell of the bounding box
        return None
    first = np.asarray(start)
    last = first + np.asarray(window) - 1
    cut_first, cut_last = np.maximum(first, lo), np.minimum(last, hi)
    pos = np.asarray(positions)
    if np.any(pos < cut_first) or np.any(pos > cut_last):
        return None
    if np.any((pos == cut_first) & (cut_first > first)) or np.any((pos == cut_last) & (cut_last < last)):
        return None
    return lo, tuple(int(n) for n in hi - lo + 1), cut_first, cut_last


def box_likelihood(
    kernel_at: Callable[[tuple[int, ...]], np.ndarray],
    shape: Sequence[int],
    positions: np.ndarray,
    start: Sequence[int],
    window: Sequence[int],
    support: np.ndarray,
    column_scale: np.ndarray | None = None,
) -> tuple[np.ndarray, ConvolutionOperator] | None:
    """``(shift, H)`` on the support's box, with the box's kernel ``kernel_at(box shape)``.

    The kernel of a box is the whole grid's cropped to it (offsets shorter than the box as they
    are, the rest folded per side): :meth:`ConvolutionOperator.restricted` crops its own, and a
    mechanism whose kernel costs the grid's size to build (quadratures per cell) computes the
    box's directly, so that it pays only for the box. ``column_scale`` is over the whole grid.
    None where the support does not allow it (:func:`support_box`).
    """
    box = support_box(support, shape, positions, start, window)
    if box is None:
        return None
    lo, box_shape, cut_first, cut_last = box
    kernel = np.asarray(kernel_at(box_shape), dtype=float)
    if kernel.shape != tuple(2 * n + 1 for n in box_shape):
        raise ValueError(f"kernel_at({box_shape}) must have shape {tuple(2 * n + 1 for n in box_shape)}")
    scale = None
    if column_scale is not None:
        cells = tuple(slice(a, a + n) for a, n in zip(lo, box_shape))
        scale = np.asarray(column_scale).reshape(tuple(shape))[cells].ravel()
    op = ConvolutionOperator(
        kernel, box_shape, np.asarray(positions) - cut_first, cut_first - lo, cut_last - cut_first + 1, True, scale
    )
    return op.shift, op


class DeviceConvolution:
    """A :class:`ConvolutionOperator`'s products on a backend's device, in the Python array API standard.

    The same computation as the host's: a real FFT convolution with the kernel's spectrum (computed once, on
    the device), the positions beyond the window folded onto its edges (sums of the slices beyond each edge,
    per axis), the reports' cells gathered; the transpose scatters each report's weight to its cell (a
    gather through the inverse map, as reports are distinct cells) and spreads the edges back. The accuracy
    guard is the host operator's: entries of ``H @ theta`` below :data:`GUARD` times their rounding bound are
    recomputed exactly there (:meth:`ConvolutionOperator.guarded_rows`) and sent back.
    """

    def __init__(self, op: ConvolutionOperator, backend: Backend):
        xp = backend.xp
        self.op, self.backend = op, backend
        kernel = backend.to_device(op.kernel)
        axes = tuple(range(len(op.grid)))
        self.spectrum = xp.fft.rfftn(kernel, s=op.fft_shape, axes=axes)
        self.axes = axes
        self.outputs = backend.to_device(op.flat_outputs, xp.int64)
        rows, cells = op.shape[0], math.prod(op.window)
        # each window cell's report (rows are distinct reports, so distinct cells), or the zero appended after them
        slot = np.full(cells, rows, dtype=np.int64)
        slot[op.flat_outputs] = np.arange(rows)
        self.distinct = bool(np.unique(op.flat_outputs).size == rows)
        self.slot = backend.to_device(slot, xp.int64)
        self.row_scale = backend.to_device(op.row_scale)
        self.column_scale = None if op.column_scale is None else backend.to_device(op.column_scale)
        self.folds = [backend.to_device(where, xp.int64) for where, _ in op._fold]
        self.cuts = [(int(starts[1]) if w > 1 else 0, int(starts[-1])) for (_, starts), w in zip(op._fold, op.window)]
        self.error_factor = backend.to_device(op._error_factor)

    def _take_axis(self, y: Any, axis: int, lo: int | None, hi: int | None) -> Any:
        index = tuple(slice(lo, hi) if a == axis else slice(None) for a in range(y.ndim))
        return y[index]

    def matvec(self, theta: Any) -> Any:
        """``H @ theta`` for a device vector."""
        xp, op = self.backend.xp, self.op
        scaled = theta if self.column_scale is None else theta * self.column_scale
        grid = xp.reshape(scaled, op.grid)
        y = xp.fft.irfftn(
            xp.fft.rfftn(grid, s=op.fft_shape, axes=self.axes) * self.spectrum, s=op.fft_shape, axes=self.axes
        )
        y = y[tuple(slice(0, n) for n in op.full)]
        if op.clamp:
            for axis, ((first, last), w) in enumerate(zip(self.cuts, op.window)):
                if w == 1:
                    y = xp.sum(y, axis=axis, keepdims=True)
                    continue
                parts = [
                    xp.sum(self._take_axis(y, axis, None, first), axis=axis, keepdims=True),
                    self._take_axis(y, axis, first, last),
                    xp.sum(self._take_axis(y, axis, last, None), axis=axis, keepdims=True),
                ]
                y = xp.concat(parts, axis=axis)
        else:
            y = y[tuple(slice(h + s, h + s + w) for h, s, w in zip(op.half, op.start, op.window))]
        y = xp.clip(xp.take(xp.reshape(y, (-1,)), self.outputs), min=0.0)
        bound = float(xp.sqrt(xp.sum(scaled * scaled))) * float(_EPS) * op._kernel_norm  # a Python float: no numpy
        small = y < (GUARD * bound) * self.error_factor
        if bool(xp.any(small)):
            host_small = np.flatnonzero(self.backend.to_numpy(small))
            exact = np.zeros(op.shape[0])
            exact[host_small] = op.guarded_rows(host_small, self.backend.to_numpy(theta))
            y = xp.where(small, self.backend.to_device(exact), y)
        return y * self.row_scale

    def rmatvec(self, w: Any) -> Any:
        """``H.T @ w`` for a device vector."""
        xp, op = self.backend.xp, self.op
        if not self.distinct:
            host = np.asarray(op.T @ self.backend.to_numpy(w)).ravel()
            return self.backend.to_device(host)
        weights = xp.concat([w * self.row_scale, xp.zeros(1, dtype=xp.float64, **_on(self.backend))])
        v = xp.reshape(xp.take(weights, self.slot), op.window)
        if op.clamp:
            u = v
            for axis, where in enumerate(self.folds):
                u = xp.take(u, where, axis=axis)
        else:
            u = xp.zeros(op.full, dtype=xp.float64, **_on(self.backend))
            u[tuple(slice(h + s, h + s + n) for h, s, n in zip(op.half, op.start, op.window))] = v
        g = xp.fft.irfftn(
            xp.fft.rfftn(u, s=op.fft_shape, axes=self.axes) * xp.conj(self.spectrum), s=op.fft_shape, axes=self.axes
        )
        g = xp.clip(xp.reshape(g[tuple(slice(0, n) for n in op.grid)], (-1,)), min=0.0)
        return g if self.column_scale is None else g * self.column_scale


def _on(backend: Backend) -> dict[str, Any]:
    return {} if backend.device is None else {"device": backend.device}
