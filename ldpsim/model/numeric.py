"""Mechanisms for numeric values (Duchi et al.'s one-bit mechanism, the Piecewise, Hybrid and Square Wave mechanisms).

The literature defines them on a real interval (``[-1, 1]`` or ``[0, 1]``) with a continuous
report ``y``. On a finite input domain each value x's output density is piecewise constant in y,
with breakpoints from a finite set: the union over x of the ends of x's "high band". Cut the
output range at all of them and every x's density is constant on each cell, so the cell holding
``y`` is a sufficient statistic for x: ``P(cell c | x) = density_x(c) * width_c`` is an exact,
finite likelihood (GIBU on cell counts is the exact MLE), the mechanism is a matrix like any
other, and users are simulated by counts. A continuous report is the cell plus a uniform draw
inside it (:meth:`NumericMechanism.continuous_reports`), needed only to reproduce the papers'
estimators literally: the unbiased mean from the cells' midpoints (:meth:`unbiased_mean`) is
``E[y | cell]``, the papers' estimator Rao-Blackwellized, unbiased with a smaller variance.

Values are mapped linearly onto :attr:`NumericMechanism.input_range`: the domain's ``low`` to its
first end, ``high`` to its second, so the extremes of the domain are the extremes of the papers'
interval and the declared eps is exactly the matrix's.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import ClassVar

import numpy as np

from ..base.errors import EstimationError
from .domains import Integers
from .mechanism import Mechanism


class NumericMechanism(Mechanism):
    """Base of numeric mechanisms: values mapped onto an interval, outputs that are cells or atoms of the real line.

    A subclass implements :meth:`_layout` (the output columns), ``_matrix`` (their probabilities)
    and :meth:`density` (the paper's density, for tests), and, when ``E[y | t]`` is not ``t``,
    :meth:`mean_response`. The output count, the unbiased mean and its variance follow.
    """

    domain_kinds = ("integers",)
    #: the paper's input interval: the domain's low value maps to the first end, its high value to the second
    input_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)

    # ------------------------------------------------------------------ hooks
    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        """``(left, right)``: output column j is the interval [left_j, right_j] of reported values
        (an atom when they are equal); cells in increasing order, not overlapping."""
        raise NotImplementedError

    def density(self, y: np.ndarray) -> np.ndarray:
        """The paper's density of continuous reports, written from its formulas (tests compare it with the cells).

        Parameters
        ----------
        y
            Continuous reports.

        Returns
        -------
        numpy.ndarray
            ``(len(y), |X|)`` the density of each report under each value (for an atom: its probability).
        """
        raise NotImplementedError

    def mean_response(self) -> tuple[float, float]:
        """``(alpha, beta)`` with ``E[y | t] = alpha + beta t``; (0, 1) for the unbiased mechanisms."""
        return 0.0, 1.0

    # ------------------------------------------------------------- geometry
    @cached_property
    def inputs(self) -> np.ndarray:
        """t_x: each domain value mapped onto :attr:`input_range` (read-only)."""
        lo, hi = self.input_range
        k = self.domain.size
        t = lo + (hi - lo) * np.arange(k) / (k - 1)
        t[-1] = hi  # exact ends: the extremes carry the tight privacy level
        t.setflags(write=False)
        return t

    @cached_property
    def outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(left, right)``: the interval of reported values each output column stands for (read-only)."""
        left, right = self._layout()
        for arr in (left, right):
            arr.setflags(write=False)
        return left, right

    def _output_count(self) -> int:
        return int(self.outputs[0].size)

    def output_labels(self) -> list[str]:
        """Each output as its interval of reported values ``[a, b]``, or the atom's value."""
        left, right = self.outputs
        return [f"{a:.6g}" if a == b else f"[{a:.6g}, {b:.6g}]" for a, b in zip(left, right)]

    # ------------------------------------------------------ continuous reports
    def continuous_reports(self, reports: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The papers' continuous reports behind output columns: uniform within each cell (an atom's value).

        Given its cell, y is uniform on it for every x (the density is constant there), so these
        follow the paper's mechanism exactly.

        Parameters
        ----------
        reports
            (n, 1) or (n,) output columns, as :meth:`sample` gives them.
        rng
            The generator of the uniform draws.

        Returns
        -------
        numpy.ndarray
            n real reports.
        """
        z = np.asarray(reports, dtype=np.int64).reshape(-1)
        left, right = self.outputs
        self.require_outputs(z, left.size)
        return left[z] + (right[z] - left[z]) * rng.random(z.size)

    def cells_of(self, y: np.ndarray) -> np.ndarray:
        """The output column of each continuous report: an atom it equals, else the cell holding it.

        Parameters
        ----------
        y
            Continuous reports.

        Returns
        -------
        numpy.ndarray
            Their output columns (a point on the edge of two cells goes to the right one).

        Raises
        ------
        EstimationError
            If a report is outside the output range.
        """
        y = np.asarray(y, dtype=float)
        left, right = self.outputs
        atoms = np.flatnonzero(left == right)
        cells = np.flatnonzero(left < right)
        # cells tile the output range in order: the last one starting at or before y holds it
        pos = np.clip(np.searchsorted(left[cells], y, side="right") - 1, 0, cells.size - 1)
        out = cells[pos] if cells.size else np.full(y.shape, -1)
        for a in atoms:
            out = np.where(y == left[a], a, out)
        if np.any(out < 0) or (cells.size and np.any((y < left[cells[0]]) | (y > right[cells[-1]]))):
            raise EstimationError(f"a report is outside the outputs of {self!r}", hint="check the reports")
        return out

    # ------------------------------------------------------------ the mean
    @property
    def _span(self) -> tuple[int, int]:
        """(low, high) of the integers domain (the only kind these mechanisms accept)."""
        domain = self.domain
        assert isinstance(domain, Integers)
        return domain.low, domain.high

    @property
    def value_scale(self) -> float:
        """Domain units per unit of t."""
        lo, hi = self.input_range
        low, high = self._span
        return float(high - low) / (hi - lo)

    @cached_property
    def midpoints(self) -> np.ndarray:
        """E[y | output column]: the cells' midpoints and the atoms' values (read-only)."""
        left, right = self.outputs
        m = (left + right) / 2
        m.setflags(write=False)
        return m

    def unbiased_mean(self, reports: np.ndarray, counts: np.ndarray) -> float:
        """The users' mean value, unbiased, in the domain's units, from output columns and their counts.

        The papers average the continuous reports and undo ``E[y | t] = alpha + beta t``; here each
        report counts as its cell's midpoint ``E[y | cell]``, which has the same expectation and, by
        Rao-Blackwell, a variance no larger (:meth:`mean_variance`).

        Parameters
        ----------
        reports
            (D, 1) or (D,) output columns.
        counts
            (D,) how many users sent each.

        Returns
        -------
        float
            The estimate of ``sum_x theta_x value_x`` (it may leave ``[low, high]``).
        """
        z = np.asarray(reports, dtype=np.int64).reshape(-1)
        self.require_outputs(z, self.midpoints.size)
        counts = np.asarray(counts, dtype=float)
        alpha, beta = self.mean_response()
        t_hat = (float(counts @ self.midpoints[z]) / counts.sum() - alpha) / beta
        return float(self._span[0] + (t_hat - self.input_range[0]) * self.value_scale)

    def mean_variance(self, theta: np.ndarray, *, continuous: bool = False) -> float:
        """n Var of the unbiased mean for n users with distribution ``theta``, in squared domain units.

        Exact, from the matrix: each user's report is an independent draw from ``theta A``.

        Parameters
        ----------
        theta
            The users' distribution over the domain.
        continuous
            True: the papers' estimator, the average of the continuous reports (adds the
            variance of y within its cell, width^2 / 12); False: the midpoints' estimator
            that :meth:`unbiased_mean` computes.

        Returns
        -------
        float
            The per-user variance.
        """
        left, right = self.outputs
        probs = np.asarray(theta, dtype=float) @ self._finite_matrix()
        m = self.midpoints
        second = m**2 + ((right - left) ** 2 / 12 if continuous else 0.0)
        var = float(probs @ second - (probs @ m) ** 2)
        return var * (self.value_scale / self.mean_response()[1]) ** 2


class BandMechanism(NumericMechanism):
    """A numeric mechanism whose density is ``p`` on each value's band and ``q = p / e^eps`` elsewhere
    (Piecewise, Square Wave). A subclass gives :attr:`bands`, :attr:`p`, :attr:`q` and ``_layout``;
    the matrix, the likely subset and the band runs of the structured likelihood follow."""

    @property
    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) ends of every value's band."""
        raise NotImplementedError

    @property
    def p(self) -> float:
        """Density on a value's band."""
        raise NotImplementedError

    @property
    def q(self) -> float:
        """Density elsewhere on the output range."""
        raise NotImplementedError

    def _matrix(self) -> np.ndarray:
        return band_matrix(*self.outputs, *self.bands, self.p, self.q)

    def band_runs(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(shift, runs)`` of reported cells: ``log(width * p)``, and the values whose band holds the
        cell as ``[start, stop)`` runs; the likelihood is ``exp(shift)`` on the run, ``e^-eps`` times that
        elsewhere (``ldpsim.constant_plus_intervals``)."""
        z = reports[:, 0]
        left, right = self.outputs
        self.require_outputs(z, left.size)
        return np.log((right - left)[z] * self.p), band_rows(left, right, *self.bands)[z]

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        z = np.unique(reports[:, 0])
        self.require_outputs(z, self.outputs[0].size)
        return runs_mask(band_rows(*self.outputs, *self.bands)[z], self.domain.size)


def band_cells(low: float, high: float, band_low: np.ndarray, band_high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(left, right)``: the cells of [low, high] cut at every band end (bands clipped to the range).

    A cell then lies wholly inside x's band or wholly outside it, for every x.
    """
    edges = np.unique(np.concatenate([[low, high], np.clip(band_low, low, high), np.clip(band_high, low, high)]))
    return edges[:-1], edges[1:]


def band_matrix(
    left: np.ndarray, right: np.ndarray, band_low: np.ndarray, band_high: np.ndarray, p: float, q: float
) -> np.ndarray:
    """``(|X|, J)`` ``P(c | x) = width_c * (p if c is in x's band else q)``: densities q on the range, p on the band.

    The band ends are compared as the same floats that cut the cells (:func:`band_cells`), so
    membership has no rounding.
    """
    band_low = np.clip(band_low, left[0], right[-1])
    band_high = np.clip(band_high, left[0], right[-1])
    inside = (band_low[:, None] <= left[None, :]) & (right[None, :] <= band_high[:, None])
    return (right - left)[None, :] * np.where(inside, p, q)


def band_rows(left: np.ndarray, right: np.ndarray, band_low: np.ndarray, band_high: np.ndarray) -> np.ndarray:
    """(J, 2): for each cell, the first and one-past-last x whose band holds it.

    Band ends must be nondecreasing in x: the values whose band holds a cell are then a
    contiguous run, so a report's likelihood is one constant plus a step on that run
    (:func:`ldpsim.constant_plus_intervals`).
    """
    band_low = np.clip(band_low, left[0], right[-1])
    band_high = np.clip(band_high, left[0], right[-1])
    first = np.searchsorted(band_high, right, side="left")  # band_high_x >= right_c
    stop = np.searchsorted(band_low, left, side="right")  # band_low_x <= left_c
    return np.column_stack([first, np.maximum(stop, first)])


def piecewise_bands(eps: float, t: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, float, float]:
    """The Piecewise Mechanism's ``(C, l(t), r(t), p, q)`` (Wang et al., ICDE 2019, Algorithm 2) for inputs t in [-1, 1].

    Reports lie in [-C, C], ``C = (e^(eps/2) + 1) / (e^(eps/2) - 1)``, with density
    ``p = (e^eps - e^(eps/2)) / (2 e^(eps/2) + 2)`` on ``[l(t), r(t)]``, ``l(t) = (C + 1)/2 t - (C - 1)/2``,
    ``r(t) = l(t) + C - 1``, and ``q = p / e^eps`` elsewhere. Shared by the Piecewise and Hybrid
    mechanisms; written with expm1 so small eps keeps its precision.
    """
    half = math.expm1(eps / 2)  # e^(eps/2) - 1
    c = (half + 2) / half
    p = (half + 1) * half / (2 * (half + 2))
    low = (c + 1) / 2 * np.asarray(t, dtype=float) - (c - 1) / 2
    return c, low, low + 2 / half, p, p * math.exp(-eps)


def runs_mask(runs: np.ndarray, size: int) -> np.ndarray | None:
    """The values covered by any of the runs ``[first, stop)`` (a likely subset), or None if none is.

    For band mechanisms (004 Def. 2): a value whose band holds no reported cell has the low
    density on every report, which any value whose band holds one matches on every report and
    beats on that one, so any MLE is zero outside the union of the reported cells' runs.
    """
    steps = np.zeros(size + 1)
    np.add.at(steps, runs[:, 0], 1.0)
    np.add.at(steps, runs[:, 1], -1.0)
    mask = np.cumsum(steps)[:size] > 0.5
    return mask if mask.any() else None
