"""The rows a Newton step's Hessian is formed from: the dense likelihood, a sample of its rows, or the structure
of reports that each name one value; and the likelihood SQUAREM's passes run over.

The exact-MLE solver (:func:`~ldpsim.estimation.newton.newton_mle`) chooses its strategy from what these return:
the float64 Hessian ``B = H^T diag(w / (H x)^2) H`` needs the dense likelihood (:func:`dense_likelihood`),
affordable while D |X|^2 is below :data:`DENSE_MAX_FLOPS`; beyond, an operator that reads its own rows gives a
Hessian from a deterministic sample of them (:func:`sampled_rows`); k-RR's reports each name one value
(:func:`named_columns`), whose Hessian is a diagonal plus rank 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .engine import Likelihood

#: the dense likelihood is formed when D |X| entries fit in this many (8 bytes each)
DENSE_MAX_ENTRIES = 1 << 24
#: ... and one Hessian, D |X|^2 multiply-adds, costs at most this many (about a second on one core):
#: beyond, tens of Newton iterations cost more than the SQUAREM passes they save on cheap operators
#: (OUE at k = 100, n = 10^5 took 14 s against SQUAREM's 10 s, with D |X|^2 = 10^9)
DENSE_MAX_FLOPS = 5e8
#: below this many values, SQUAREM's passes (the warm start, the fallback) run on the dense likelihood when
#: it fits (:data:`DENSE_MAX_ENTRIES`): on a planar grid a dense pass was 3.4x faster than the FFT one
DENSE_PASS_MAX_SIZE = 1024
#: a Hessian from a sample of rows (see :func:`sampled_rows`) reads this many rows per value ...
SAMPLE_ROWS_PER_VALUE = 16
#: ... or as many as a formation of this many multiply-adds allows, when that is more (few values: tens of
#: milliseconds), so a channel of tens of values is formed from a hundred thousand rows, not a thousand
SAMPLED_FORM_FLOPS = 5e8
#: a sample whose Hessian costs at most this many multiply-adds is kept (and its Hessian formed) in double
#: precision: on flat likelihoods (every row 1 +- a small term, as TreeHist's words at eps/2) the single-precision
#: Gram matrix loses the small terms to rounding, its Newton steps fail, and the solver fell back to 5,313
#: SQUAREM passes (36 s at 2 x 10^5 users) where double precision takes 51 passes (1.4 s). Costlier samples
#: (k = 1024: 1.7 x 10^10) stay single, at twice the speed
DOUBLE_SAMPLE_FLOPS = 1e9
#: ... and costs at most this many multiply-adds (about a second on one core)
SAMPLED_MAX_FLOPS = 2e10


def dense_likelihood(likelihood: Likelihood) -> np.ndarray | None:
    """The row-rescaled likelihood ``H`` as a dense (D, |X|) array, or None if it is too costly.

    Structured operators are read from their exact rows where they have them, else materialized
    column block by column block (a product with identity columns); dense ones are returned as
    they are. Cached per likelihood.
    """
    rows, size = likelihood.H.shape
    if rows * size > DENSE_MAX_ENTRIES or float(rows) * size * size > DENSE_MAX_FLOPS:
        return None
    cached = likelihood.dense_matrix
    if cached is not None:
        return cached
    if isinstance(likelihood.H, np.ndarray):
        dense = likelihood.H
    elif (exact := _exact_dense(likelihood)) is not None:
        return exact
    else:
        dense = np.empty((rows, size))
        block = max(1, min(size, (1 << 22) // max(rows, size)))
        for lo in range(0, size, block):
            cols = np.zeros((size, min(block, size - lo)))
            cols[np.arange(lo, lo + cols.shape[1]), np.arange(cols.shape[1])] = 1.0
            dense[:, lo : lo + cols.shape[1]] = np.asarray(likelihood.H @ cols).reshape(rows, -1)
        np.maximum(dense, 0.0, out=dense)  # FFT round-off never makes a probability negative
    likelihood.dense_matrix = dense
    return dense


@dataclass
class RowSample:
    """A deterministic sample of a likelihood's rows, dense: ``H[index]`` with each row's weight in the sample.

    Drawn by systematic sampling proportional to the counts (positions ``(i + 1/2) n / m`` on the
    cumulative counts), so ``sum_i weight_i g(index_i)`` is an unbiased, low-variance estimate of
    ``sum_d (c_d / n) g(d)`` for any per-report g: the Hessian ``H^T diag(w / p^2) H`` in particular.
    """

    index: np.ndarray
    weight: np.ndarray
    rows: np.ndarray
    #: the sample is every row at its own weight: the Hessian is exact (to single precision)
    every_row: bool = False


def sampled_rows(likelihood: Likelihood, *, always: bool = False) -> RowSample | None:
    """The rows a Hessian is formed from: all of them when there are fewer than
    :data:`SAMPLE_ROWS_PER_VALUE` per value (or than :data:`SAMPLED_FORM_FLOPS` affords), else a sample of
    that many; in double precision up to :data:`DOUBLE_SAMPLE_FLOPS`, else single; None when the
    likelihood is neither dense nor an operator with exact rows
    (:func:`~ldpsim.estimation.operators.with_exact_rows`) or, unless ``always``, when the Hessian
    would cost more than :data:`SAMPLED_MAX_FLOPS`.

    Where the float64 Hessian is out of reach (a million distinct reports of OUE, subset selection or
    local hashing at k = 1000: ``D |X|^2 = 10^12``), one formed from tens of thousands of rows has a relative
    error of about ``sqrt(|X| / m)`` and costs a fraction of a pass per Newton iteration; the steps it gives
    are checked by the exact line search and certificate, so it changes how fast the solver converges,
    never what it converges to. With every row (a 32 x 32 grid's 1024 reports) it is the exact Hessian
    to single precision, at a quarter of the float64 one's cost.
    """
    H = likelihood.H
    exact_rows = (lambda index: H[index]) if isinstance(H, np.ndarray) else getattr(H, "rows", None)
    rows, size = H.shape
    m = min(max(SAMPLE_ROWS_PER_VALUE * size, int(SAMPLED_FORM_FLOPS / (size * size))), rows)
    if not callable(exact_rows) or (not always and float(m) * size * size > SAMPLED_MAX_FLOPS):
        return None
    dtype = np.float64 if float(m) * size * size <= DOUBLE_SAMPLE_FLOPS else np.float32
    if m == rows:  # every row, at its own weight: the exact Hessian
        index = np.arange(rows)
        rows_read = np.asarray(exact_rows(index), dtype=dtype)
        return RowSample(index, likelihood.counts / likelihood.n, rows_read, every_row=True)
    cumulative = np.cumsum(likelihood.counts)
    positions = (np.arange(m) + 0.5) * (cumulative[-1] / m)
    picked = np.minimum(np.searchsorted(cumulative, positions, side="right"), rows - 1)
    index, times = np.unique(picked, return_counts=True)
    return RowSample(index, times / m, np.asarray(exact_rows(index), dtype=dtype))


def named_columns(likelihood: Likelihood) -> tuple[np.ndarray, float] | None:
    """(per report: the column of the value it names, or -1 off the support; r) when every user sent one
    report naming a value, P(z | z) > P(z | x != z) (k-RR), so H[d, x] = 1 at the named value and r
    elsewhere; None otherwise. Checked against a product with H, so a mechanism scaling its rows
    differently is simply not treated as this structure."""
    groups = likelihood.observations.groups
    if len(groups) != 1 or len(groups[0].plan) != 1:
        return None
    pair = groups[0].plan[0].named_value_likelihood()
    if pair is None or not pair[0] > pair[1]:
        return None
    r = math.exp(pair[1] - pair[0])
    columns = groups[0].reports[:, 0]
    if likelihood.support is not None:
        columns = np.where(likelihood.support, np.cumsum(likelihood.support) - 1, -1)[columns]
    probe = np.cos(np.arange(likelihood.size))  # any vector with distinct entries
    expected = r * probe.sum() + (1.0 - r) * np.where(columns >= 0, probe[np.maximum(columns, 0)], 0.0)
    if columns.size != likelihood.H.shape[0] or not np.allclose(
        np.asarray(likelihood.H @ probe).ravel(), expected, rtol=1e-12, atol=1e-12 * likelihood.size
    ):
        return None
    return columns, r


def _exact_dense(likelihood: Likelihood) -> np.ndarray | None:
    """A structured likelihood's exact rows (a convolution's: each entry a sum of positives) as one dense
    array, cached with the likelihood; None if its operator has no exact rows.

    Products with identity columns would re-run a convolution's accuracy guard on nearly every entry.
    """
    exact_rows = getattr(likelihood.H, "rows", None)
    if not callable(exact_rows):
        return None
    dense = likelihood.dense_matrix
    if dense is None:
        dense = np.asarray(exact_rows(np.arange(likelihood.H.shape[0])), dtype=float)
        likelihood.dense_matrix = dense
    return dense


def likelihood_for_passes(likelihood: Likelihood, dense: np.ndarray | None) -> Likelihood:
    """``likelihood`` itself, or a shallow copy over its dense matrix where a dense pass is the cheaper one.

    Below :data:`DENSE_PASS_MAX_SIZE` values an operator that says so (``dense_passes_faster``: an FFT
    convolution and its accuracy guard) costs more per pass than a dense product; its exact rows are
    materialized once (cached with ``likelihood``) when they fit. Same probabilities, so the same MLE,
    certified the same way.
    """
    small = likelihood.size <= DENSE_PASS_MAX_SIZE and likelihood.H.shape[0] * likelihood.size <= DENSE_MAX_ENTRIES
    # only where a dense pass is the cheaper one (a convolution's FFT and guard; packed bits are cheaper as they are)
    if dense is None and small and getattr(likelihood.H, "dense_passes_faster", False):
        dense = _exact_dense(likelihood)
    if dense is None or dense is likelihood.H:
        return likelihood
    copy = object.__new__(type(likelihood))
    copy.__dict__.update(likelihood.__dict__)
    copy.H = dense
    return copy
