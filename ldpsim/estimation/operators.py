"""Structured likelihood operators: GIBU's ``H`` without a dense (reports x values) array.

A mechanism's structured likelihood (its ``_structured_likelihood(reports)`` hook,
see :mod:`ldpsim.model.mechanism`) is ``(shift, H)`` with
``P(report_d | x) = exp(shift_d) H[d, x]`` (see :mod:`ldpsim.estimation.engine`). GIBU only
needs ``H @ theta`` and ``H.T @ w``; when the mechanism has structure these cost
far less than a dense product:

* :func:`constant_plus_column`: ``H[d, x] = 1`` at the reported value, ``r``
  elsewhere (k-RR, the exponential mechanism on categories): O(|X| + D).
* :func:`named_values_likelihood`: several reports that each name a value (a
  user reporting several times through k-RR): a constant plus r entries per row.
* :func:`rank_one_plus_sparse`: ``r`` off a sparse 0/1 pattern (unary
  encodings, local hashing).
* :func:`constant_plus_bits`: the same with the pattern kept as packed bit
  vectors (unary encodings): one table lookup per byte of a report.
* :func:`constant_plus_halfwords`: the same from bits packed value-major, 16
  values per halfword (local hashing computes them that way).
* :func:`constant_plus_intervals`: ``r`` off a contiguous run of values per
  row (the numeric mechanisms' output cells): O(|X| + D) by prefix sums.
* :func:`convolution_likelihood`: translation-invariant noise on a line or a
  grid, reported as a cell of an output window with positions beyond the
  window clamped to its edge (truncated geometric, Laplace, exponential,
  planar mechanisms): one FFT product per application, O(|X| log |X|).
* :func:`box_convolution_likelihood`: the same on a likely subset's box only,
  at the box's cost whatever the grid's size.

Rows keep their per-report scale (``max_x H[d, x]`` is 1, or within a small
factor of it), so nothing underflows however small eps * distance is; entries
that are below ~1e-308 of their row's maximum (far cells on a big grid) are
zero, as they are in the dense matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model.bitvectors import bit_sums, byte_patterns, halfword_rows, packed_kernels

if TYPE_CHECKING:  # scipy.sparse.linalg is imported where an operator is built: `import ldpsim` stays fast
    from scipy.sparse.linalg import LinearOperator

    from .convolution import ConvolutionOperator


def constant_plus_column(columns: np.ndarray, size: int, r: float) -> LinearOperator:
    """``H[d, x] = 1`` if ``x == columns[d]``, else ``r`` (0 <= r <= 1), in O(size + D) per product.

    The likelihood of k-ary randomized response rescaled by its largest entry:
    ``P(z | x) = p`` at ``x = z`` and ``q`` elsewhere, so ``r = q / p``.
    """
    from scipy.sparse.linalg import LinearOperator

    columns = np.asarray(columns, dtype=np.int64).ravel()
    one_minus_r = 1.0 - r

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta)
        return r * theta.sum() + one_minus_r * theta[columns]

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w)
        return r * w.sum() + one_minus_r * np.bincount(columns, weights=w, minlength=size)

    def matmat(m: np.ndarray) -> np.ndarray:
        return r * m.sum(axis=0, keepdims=True) + one_minus_r * m[columns]

    return with_min_entry(
        LinearOperator((columns.size, size), matvec=matvec, rmatvec=rmatvec, matmat=matmat, dtype=float), r
    )


def named_values_likelihood(
    reports: np.ndarray, log_hit: np.ndarray, log_miss: np.ndarray, size: int
) -> tuple[np.ndarray, LinearOperator]:
    """``(shift, H)`` for report tuples whose j-th report names a value ``z_j`` with
    ``P(z_j | x) = exp(log_hit[j])`` at ``x = z_j`` and ``exp(log_miss[j])`` elsewhere (k-RR).

    The product over a tuple is one constant for every x the tuple does not name and
    differs only at the (at most r) values it names, so ``H = c 1^T + S`` with S sparse,
    r entries per row: ``O(D r + |X|)`` per product instead of a dense ``D x |X|`` array. Formed in
    log space and rescaled per row, so thousands of reports per user do not underflow.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import LinearOperator

    reports = np.asarray(reports, dtype=np.int64)
    rows, width = reports.shape
    gain = np.asarray(log_hit, dtype=float) - np.asarray(log_miss, dtype=float)  # (r,)
    # per (row, named value): the summed log-gain of the reports naming it (duplicates are summed)
    named = coo_matrix(
        (np.tile(gain, rows), (np.repeat(np.arange(rows), width), reports.ravel())), shape=(rows, size)
    ).tocsr()
    best = np.maximum(named.max(axis=1).toarray().ravel(), 0.0)  # 0: a value the row does not name
    shift = float(np.sum(log_miss)) + best
    constant = np.exp(-best)
    per_row = np.repeat(constant, np.diff(named.indptr))
    named.data = np.exp(named.data - np.repeat(best, np.diff(named.indptr))) - per_row
    named_t = named.T.tocsr()

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta)
        return constant * theta.sum() + named @ theta

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w)
        return float(constant @ w) + named_t @ w

    def exact_rows(index: np.ndarray) -> np.ndarray:
        index = np.asarray(index, dtype=np.intp)
        return constant[index, None] + named[index].toarray()

    return shift, with_exact_rows(LinearOperator((rows, size), matvec=matvec, rmatvec=rmatvec, dtype=float), exact_rows)


def rank_one_plus_sparse(support, r: float) -> LinearOperator:  # a scipy.sparse CSR matrix
    """H = r 1 1^T + (1 - r) S as a scipy LinearOperator: H[d, x] = 1 where S[d, x] = 1, else r.

    The likelihood of a report that only says "x is in this set" (unary encodings, local
    hashing) has this shape, up to a per-report factor: mechanisms return it from
    ``_structured_likelihood`` so GIBU never forms a dense (reports x values) array.
    """
    from scipy.sparse.linalg import LinearOperator

    one_minus_r = -math.expm1(math.log(r))  # no cancellation for r close to 1 (small eps)
    support_t = support.T  # a CSC view, no copy

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta)
        return r * theta.sum() + one_minus_r * (support @ theta)

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w)
        return r * w.sum() + one_minus_r * (support_t @ w)

    def matmat(m: np.ndarray) -> np.ndarray:
        return r * m.sum(axis=0, keepdims=True) + one_minus_r * (support @ m)

    def rmatmat(m: np.ndarray) -> np.ndarray:
        return r * m.sum(axis=0, keepdims=True) + one_minus_r * (support_t @ m)

    operator = with_min_entry(
        LinearOperator(support.shape, matvec=matvec, rmatvec=rmatvec, matmat=matmat, rmatmat=rmatmat, dtype=float),
        r,
    )
    support_rows = getattr(support, "rows", None)
    if callable(support_rows):  # a structured support that reads its own rows (see with_exact_rows)
        return with_exact_rows(operator, lambda index: r + one_minus_r * support_rows(index))
    if hasattr(support, "tocsr"):  # a scipy.sparse matrix
        csr = support.tocsr()
        return with_exact_rows(
            operator, lambda index: r + one_minus_r * csr[np.asarray(index, dtype=np.intp)].toarray()
        )
    return operator


#: reports per block of ``B @ theta``: its sums, indices and lookups (1.5 MB) stay in cache across positions
_LOOKUP_ROWS = 1 << 16


def constant_plus_bits(words: np.ndarray, size: int, r: float, word_bits: int = 62) -> LinearOperator:
    """``H[d, x] = 1`` where bit x of packed report d is set, else ``r``, read from the packed words themselves.

    ``words`` (D, w) int64 hold bit x at bit ``x % word_bits`` of word ``x // word_bits`` (the
    layout of :class:`~ldpsim.model.bitvectors.BitVectorMechanism`). Nothing is unpacked: the reports'
    bytes are regrouped once into 16-bit halfwords, one contiguous row per halfword position
    (2 bytes per report and position, the packed size). Per product ``B @ theta``, a table of the
    sums of ``theta`` over the 256 patterns of each byte turns each byte into one lookup, position
    by position over blocks of reports (tables, sums and indices stay in cache); ``B.T @ w`` is one
    weighted count per (position, halfword pattern), folded to the 16 bits. The work is D lookups per
    8 values, a quarter to an eighth of the set bits a sparse matrix reads at OUE's densities (at
    k = 1024, D = 10^6: 0.13 s and 0.10 s, against 0.20 s and 0.17 s over the reports' rows with a
    weighted count per byte; benchmarks/RESULTS.md). Passes over 2^20 halfwords or more run as compiled
    loops (numba, ``ldpsim.model.kernels``): the same lookups in one sweep (the same sums, bit for bit) and
    ``B.T @ w`` as two 256-bin weighted histograms per position: a pass in about 0.1 s at that size.
    """
    words = np.ascontiguousarray(words, dtype="<i8")
    halves, column = halfword_rows(words, size, word_bits)
    unpacked_column = (np.arange(size) // word_bits) * 64 + np.arange(size) % word_bits

    def exact_rows(index: np.ndarray) -> np.ndarray:
        picked = words[np.asarray(index, dtype=np.intp)].view(np.uint8)
        return np.unpackbits(picked, axis=1, bitorder="little")[:, unpacked_column]

    return _halfwords_operator(halves, column, size, r, exact_rows)


def constant_plus_halfwords(halves: np.ndarray, size: int, r: float) -> LinearOperator:
    """:func:`constant_plus_bits` from the layout it regroups its words into: ``H[d, x] = 1`` where bit
    ``x % 16`` of ``halves[x // 16, d]`` is set, else ``r``.

    ``halves`` is ``(ceil(size / 16), D)`` uint16, one row per halfword position (bits from ``size``
    on are ignored). A mechanism that computes its bits value by value across all reports (local
    hashing) writes this layout directly, without packing rows that are then transposed twice.
    """
    halves = np.ascontiguousarray(halves, dtype="<u2")
    if halves.shape[0] != -(-size // 16):
        raise ValueError(f"{size} values take {-(-size // 16)} halfword positions, got {halves.shape[0]}")
    column = np.arange(halves.shape[0] * 16)
    column = np.where(column < size, column, -1).reshape(-1, 8)

    every_column = np.arange(size)

    def exact_rows(index: np.ndarray) -> np.ndarray:
        picked = np.ascontiguousarray(halves[:, np.asarray(index, dtype=np.intp)].T).view(np.uint8)
        # the columns taken by an index, as constant_plus_bits does: the same (column-major) layout, so
        # products with the rows (a small likelihood's dense passes) round the same way
        return np.unpackbits(picked, axis=1, bitorder="little")[:, every_column]

    return _halfwords_operator(halves, column, size, r, exact_rows)


def _halfwords_operator(
    halves: np.ndarray, column: np.ndarray, size: int, r: float, bits_of_rows: Callable[[np.ndarray], np.ndarray]
) -> LinearOperator:
    """The operator of packed halfwords ``(P, D)`` whose byte ``j`` (``2 p`` low, ``2 p + 1`` high) holds
    columns ``column[j]`` (-1: no column), with ``bits_of_rows(index)`` the rows' 0/1 bits."""
    from scipy.sparse.linalg import LinearOperator

    rows = halves.shape[1]
    pattern = byte_patterns()
    hit, where = column >= 0, np.nonzero(column >= 0)
    one_minus_r = -math.expm1(math.log(r)) if r > 0 else 1.0
    kernels = packed_kernels(halves.size)

    def bits_times(theta: np.ndarray) -> np.ndarray:
        padded = np.zeros(column.shape)
        padded[where] = theta[column[hit]]
        table = padded @ pattern.T  # (bytes, 256): sum of theta over the set bits of each byte pattern
        out = np.zeros(rows)
        if kernels is not None:  # compiled: the same additions in the same order, in one sweep
            kernels.halfword_lookups(halves, table, out)
            return out
        block = max(1, min(rows, _LOOKUP_ROWS))
        index, looked_up = np.empty(block, dtype=np.intp), np.empty(block)
        for lo in range(0, rows, block):  # a block of reports at a time: sums, index and lookups stay in cache
            part = out[lo : lo + block]
            idx, got = index[: part.size], looked_up[: part.size]
            for j in range(halves.shape[0]):
                half = halves[j, lo : lo + block]
                np.bitwise_and(half, 0xFF, out=idx)  # the low byte
                part += np.take(table[2 * j], idx, out=got)
                np.right_shift(half, 8, out=idx)  # the high byte
                part += np.take(table[2 * j + 1], idx, out=got)
        return out

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta).astype(float, copy=False)
        return r * theta.sum() + one_minus_r * bits_times(theta)

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w).astype(float, copy=False)
        return r * w.sum() + one_minus_r * bit_sums(halves, column, size, w)

    def exact_rows(index: np.ndarray) -> np.ndarray:
        return r + one_minus_r * bits_of_rows(index)

    operator = LinearOperator((rows, size), matvec=matvec, rmatvec=rmatvec, dtype=float)
    return with_exact_rows(with_min_entry(operator, r), exact_rows)


def with_exact_rows(operator: LinearOperator, rows: Callable[[np.ndarray], np.ndarray]) -> LinearOperator:
    """``operator`` given a ``rows(index)`` method: its rows ``H[index, :]`` as a dense float array, exactly.

    A structured likelihood that can read a few of its rows cheaply (from packed bits, a sparse
    pattern, a kernel) should offer them: the exact-MLE solver forms its Newton Hessian from a
    deterministic sample of rows (:func:`ldpsim.estimation.hessian_rows.sampled_rows`) where the whole
    Hessian would cost ``D |X|^2``, and materializes small likelihoods without products with identity
    columns. Without it the solver falls back to SQUAREM on such problems.

    Parameters
    ----------
    operator
        A ``(D, |X|)`` scipy ``LinearOperator``.
    rows
        ``index`` (int array) -> ``(len(index), |X|)`` array equal to ``operator`` applied to
        identity columns, restricted to those rows.

    Returns
    -------
    LinearOperator
        ``operator`` itself, with the method attached.
    """
    operator.rows = rows  # type: ignore[attr-defined]  # the same duck-typed method ConvolutionOperator has
    return operator


def with_min_entry(operator: LinearOperator, bound: float) -> LinearOperator:
    """``operator`` declaring ``min_entry = bound``: every entry of its matrix is at least ``bound``.

    With ``bound > 0`` no report is impossible under any distribution, so
    :class:`~ldpsim.estimation.engine.Likelihood` skips the pass ``H @ 1`` that finds such reports
    (a tenth of a second per million packed reports). An operator without the attribute is
    checked.

    Parameters
    ----------
    operator
        A ``(D, |X|)`` scipy ``LinearOperator``.
    bound
        A lower bound on every entry (``r`` of the constant-plus-pattern operators).

    Returns
    -------
    LinearOperator
        ``operator`` itself, with the attribute set.
    """
    operator.min_entry = float(bound)  # type: ignore[attr-defined]  # a declared capability, read by Likelihood
    return operator


#: entries of whole rows read at a time when an operator's rows cannot be restricted to some columns
_BLOCK_ENTRIES = 1 << 22


def exact_block(
    operator: np.ndarray | LinearOperator, index: np.ndarray, columns: np.ndarray, dtype: type = np.float64
) -> np.ndarray | None:
    """``H[index][:, columns]`` exactly, as a dense ``dtype`` array, or None if ``H`` cannot read its rows.

    A dense likelihood is indexed; an operator with exact rows (``rows(index)``, see
    :func:`with_exact_rows`) that declares ``rows_take_columns`` (a convolution, whose entries are
    kernel lookups) computes only those columns; any other reads whole rows a block at a time and keeps
    the columns, so its memory stays bounded by :data:`_BLOCK_ENTRIES` plus the result. The exact-MLE
    solver's active set (:mod:`ldpsim.estimation.active_set`) reads the columns of the values it keeps.
    """
    index = np.asarray(index, dtype=np.intp)
    columns = np.asarray(columns, dtype=np.intp)
    if isinstance(operator, np.ndarray):
        return np.asarray(operator[np.ix_(index, columns)], dtype=dtype)
    rows = getattr(operator, "rows", None)
    if not callable(rows):
        return None
    take = bool(getattr(operator, "rows_take_columns", False))
    out: np.ndarray = np.empty((index.size, columns.size), dtype=dtype)
    step = max(1, _BLOCK_ENTRIES // max(1, columns.size if take else operator.shape[1]))
    for lo in range(0, index.size, step):
        part = index[lo : lo + step]
        out[lo : lo + step] = rows(part, columns) if take else np.asarray(rows(part))[:, columns]
    return out


def constant_plus_intervals(runs: np.ndarray, size: int, r: float) -> LinearOperator:
    """``H[d, x] = 1`` for ``runs[d, 0] <= x < runs[d, 1]``, else ``r``: ``O(|X| + D)`` per product by prefix sums.

    The likelihood of a numeric mechanism's output cell rescaled by its largest entry (the
    Piecewise and Square Wave mechanisms: density p on a value's band, q elsewhere, and the
    values whose band holds a cell are contiguous), so ``r = q / p``. The run sums are
    differences of prefix sums; the constant term ``r * sum(theta)`` keeps their rounding
    relative to the result below ~1e-16 / r.
    """
    from scipy.sparse.linalg import LinearOperator

    runs = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    first, stop = runs[:, 0], runs[:, 1]
    one_minus_r = -math.expm1(math.log(r)) if r > 0 else 1.0

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta)
        prefix = np.concatenate([[0.0], np.cumsum(theta)])
        return r * prefix[-1] + one_minus_r * (prefix[stop] - prefix[first])

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w)
        steps = np.bincount(first, weights=w, minlength=size + 1) - np.bincount(stop, weights=w, minlength=size + 1)
        return r * w.sum() + one_minus_r * np.cumsum(steps)[:size]

    return with_min_entry(LinearOperator((runs.shape[0], size), matvec=matvec, rmatvec=rmatvec, dtype=float), r)


def _window_arguments(
    shape: Sequence[int], outputs: np.ndarray, start: Sequence[int] | None, window: Sequence[int] | None
) -> tuple[tuple[int, ...], np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """A grid's shape, its reports' window coordinates and its output window, checked (defaults: the grid)."""
    shape = tuple(int(s) for s in shape)
    outputs = np.asarray(outputs, dtype=np.int64).reshape(-1, len(shape))
    start = tuple(int(s) for s in (start if start is not None else (0,) * len(shape)))
    window = tuple(int(w) for w in (window if window is not None else np.subtract(shape, start)))
    if any(s < 0 or w < 1 or s + w > n for s, w, n in zip(start, window, shape)):
        raise ValueError(f"window start {start}, size {window} does not fit in {shape}")
    if outputs.size and (np.any(outputs < 0) or np.any(outputs >= np.asarray(window))):
        raise ValueError("outputs must be window coordinates")
    return shape, outputs, start, window


def convolution_likelihood(
    kernel: np.ndarray,
    shape: Sequence[int],
    outputs: np.ndarray,
    *,
    start: Sequence[int] | None = None,
    window: Sequence[int] | None = None,
    clamp: bool = True,
    column_scale: np.ndarray | None = None,
) -> tuple[np.ndarray, ConvolutionOperator]:
    """``(shift, H)`` for reports of translation-invariant noise on a line or grid of ``shape`` values.

    ``kernel`` (odd length per axis, centred) holds the noise mass of each offset o = z - x; with
    ``clamp`` its first and last entries may stand for every offset beyond them (folded tails), which
    is exact when the kernel reaches at least ``shape`` cells each way, as positions there lie outside
    any window. ``outputs`` are the reports' cells in window coordinates, (D, ndim) or (D,) on a line;
    the window is ``[start, start + window)`` per axis (default: the whole domain). ``column_scale``
    multiplies column x (a per-value normalizer, e.g. the exponential mechanism's 1 / Z_x).
    ``exp(shift_d)`` is P(z_d | x) at the value x in the report's own cell (for a window edge, at the
    farthest value beyond it): the row maximum for any kernel that decreases away from offset 0.
    """
    kernel = np.asarray(kernel, dtype=float)
    shape, outputs, start, window = _window_arguments(shape, outputs, start, window)
    if kernel.ndim != len(shape) or any(s % 2 == 0 for s in kernel.shape):
        raise ValueError(f"kernel must have odd length on each of {len(shape)} axes, got shape {kernel.shape}")
    if np.any(kernel < 0) or not np.all(np.isfinite(kernel)):
        raise ValueError("kernel entries must be finite and >= 0")
    if column_scale is not None:
        column_scale = np.asarray(column_scale, dtype=float).ravel()
    from .convolution import ConvolutionOperator  # scipy.sparse.linalg: imported when a grid needs it

    op = ConvolutionOperator(kernel, shape, outputs, start, window, clamp, column_scale)
    return op.shift, op


def box_convolution_likelihood(
    kernel_at: Callable[[tuple[int, ...]], np.ndarray],
    shape: Sequence[int],
    outputs: np.ndarray,
    support: np.ndarray,
    *,
    start: Sequence[int] | None = None,
    window: Sequence[int] | None = None,
) -> tuple[np.ndarray, ConvolutionOperator] | None:
    """:func:`convolution_likelihood` (clamped) on the values of ``support`` only, at the cost of its box.

    A likely subset (004 Sec. 8) of reports amid a large grid is a small box around them: this
    builds the convolution over that box without the grid's operator or kernel, so the grid's
    size costs nothing but the mask. ``kernel_at(box_shape)`` gives the kernel for a grid of that
    shape (offsets shorter than it as they are, the rest folded into one bucket per side), the
    grid's own kernel cropped. Exact for every value of the support when the support is its
    bounding box and no report sits on a side where the box cuts the output window (such a report
    would collect offsets it collects in the whole window); None otherwise.

    Parameters
    ----------
    kernel_at
        Box shape -> kernel of odd length ``2 n + 1`` per axis, centred, tails folded.
    shape
        The grid's shape.
    outputs
        The reports' cells in window coordinates, (D, ndim).
    support
        Boolean mask over the grid's values (flat, row-major).
    start, window
        The output window, as in :func:`convolution_likelihood`.

    Returns
    -------
    tuple or None
        ``(shift, H)`` with ``P(report_d | x) = exp(shift_d) H[d, x]`` for the support's values
        ``x`` in row-major order, or None (build the whole grid's likelihood then).
    """
    shape, outputs, start, window = _window_arguments(shape, outputs, start, window)
    support = np.asarray(support, dtype=bool).ravel()
    if support.size != math.prod(shape):
        raise ValueError(f"support must be a mask over the {math.prod(shape)} values, got {support.size}")
    from .convolution import box_likelihood  # scipy.sparse.linalg: imported when a grid needs it

    return box_likelihood(kernel_at, shape, outputs + np.asarray(start), start, window, support)


def __getattr__(name: str) -> Any:
    # ConvolutionOperator subclasses scipy's LinearOperator: defined in .convolution, imported on first use.
    if name in ("ConvolutionOperator", "GUARD"):
        from . import convolution

        return getattr(convolution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
