"""The mechanism contract.

A mechanism is built from a domain and validated parameters. It

* samples reports for an array of true values (domain indices) with an
  explicitly passed :class:`numpy.random.Generator`, vectorized;
* gives the log-likelihood ``log P(report | x)`` of reports for every ``x``;
* declares the privacy guarantee it claims (:class:`Privacy`).

A mechanism with finitely many outputs only has to implement
:meth:`Mechanism._matrix`, its row-stochastic matrix; sampling and likelihoods
follow from it. Mechanisms with huge or infinite output sets (bit vectors,
unbounded integers) implement :meth:`Mechanism._sample` and
:meth:`Mechanism._log_likelihood` instead.

A report is a row of ``report_width`` integers: an output index for matrix
mechanisms, or whatever encoding the mechanism documents.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ..base.errors import EstimationError
from ..base.memory import require_memory
from .domains import OnDomain
from .privacy import Privacy

#: rows of a mechanism matrix must sum to 1 within this tolerance
ROW_SUM_TOL = 1e-9


class Mechanism(OnDomain):
    """Base class of mechanisms. Subclasses set ``name`` and a one-line docstring."""

    kind: ClassVar[str] = "mechanism"
    #: integers per report (an instance may set its own, e.g. in _validate, when it depends on the domain)
    report_width: int = 1
    #: True if the declared privacy level is exactly the one the matrix has; False for
    #: mechanisms that post-process a guarantee (e.g. remapping continuous noise to the
    #: domain), whose matrix may be more private than declared
    tight_privacy: ClassVar[bool] = True

    # ----------------------------------------------------------------- contract
    @property
    def privacy(self) -> Privacy:
        """The guarantee this mechanism claims."""
        raise NotImplementedError(f"{type(self).__name__} must declare its privacy guarantee")

    def _matrix(self) -> np.ndarray | None:
        """The (|X|, |Z|) row-stochastic matrix, or None if outputs are not finite."""
        return None

    def output_labels(self) -> list[str] | None:
        """Printable labels of the outputs of a finite mechanism (default: the domain's, if square)."""
        m = self.matrix
        if m is not None and m.shape[1] == self.domain.size:
            return self.domain.labels()
        return None if m is None else [str(j) for j in range(m.shape[1])]

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports for ``values``; default: inverse-CDF sampling from the matrix."""
        if self.matrix is None:
            raise NotImplementedError(f"{type(self).__name__} has no matrix and must implement _sample")
        cum, width = self._cdf
        u = rng.random(values.shape[0])
        pos = np.searchsorted(cum, values + u, side="right")
        return (pos - values * width)[:, None]

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        """(D, |X|) log P(report | x); default: from the matrix."""
        if self.matrix is None:
            raise NotImplementedError(f"{type(self).__name__} has no matrix and must implement _log_likelihood")
        z = reports[:, 0]
        self._require_outputs(z, self.matrix.shape[1])
        return self._log_matrix_t[z]

    def _require_outputs(self, z: np.ndarray, width: int) -> None:
        """EstimationError naming the first report that is not an output index 0..width-1."""
        bad = (z < 0) | (z >= width)
        if bad.any():
            raise EstimationError(
                f"report {int(z[bad][0])} is not an output of {self!r} (outputs are 0..{width - 1})",
                hint="check that the reports were produced by this mechanism",
            )

    def _likelihood_operator(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """Optional: ``(shift, H)`` with ``P(report_d | x) = exp(shift_d) * H[d, x]``.

        ``H`` is a (D, |X|) scipy ``LinearOperator`` or sparse matrix (anything with
        ``H @ v`` and ``H.T @ w``). It lets GIBU use structured likelihoods (bit
        vectors, hashed reports) without forming a dense array. Used for plans
        made of this mechanism alone; None (the default) means "use
        :meth:`_log_likelihood`".
        """
        return None

    def _output_count(self) -> int | None:
        """Optional: the number of columns :meth:`_matrix` would return, known without building it,
        so that a matrix too large for this machine is refused before it is allocated."""
        return None

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        """Optional: an unbiased estimate of the distribution (may leave the simplex) from
        distinct reports and their counts, for matrix-inversion estimators when the
        mechanism has a better one than inverting its matrix (or has no matrix)."""
        return None

    def _named_value_likelihood(self) -> tuple[float, float] | None:
        """Optional: ``(log P(z | z), log P(z | x != z))`` if a report is one domain index z whose
        likelihood takes one value at x = z and another elsewhere (k-RR). Plans of several such
        reports then get a sparse likelihood (:func:`ldpsim.named_values_likelihood`)."""
        return None

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        """Optional: a boolean mask over the domain outside which every value is unlikely
        for these reports (004 Definitions 2-3), so any MLE is zero there. None if unknown."""
        return None

    # ------------------------------------------------------------- public API
    @cached_property
    def matrix(self) -> np.ndarray | None:
        """The validated, read-only row-stochastic matrix (None for infinite outputs)."""
        outputs = self._output_count()
        if outputs is not None:
            k = self.domain.size
            require_memory(
                8.0 * k * outputs,
                f"the dense {k} x {outputs} matrix of {self.name}",
                hint="estimate with ibu (it uses the mechanism's structured likelihood), or use fewer values",
            )
        m = self._matrix()
        if m is None:
            return None
        m = np.array(m, dtype=float)
        if m.ndim != 2 or m.shape[0] != self.domain.size:
            raise ValueError(f"{self!r}: matrix has shape {m.shape}, expected ({self.domain.size}, outputs)")
        if np.any(m < 0) or not np.allclose(m.sum(axis=1), 1.0, rtol=0, atol=ROW_SUM_TOL):
            raise ValueError(f"{self!r}: matrix is not row-stochastic")
        m.setflags(write=False)
        return m

    @property
    def output_size(self) -> int | None:
        """Number of possible outputs, or None if unbounded."""
        return None if self.matrix is None else int(self.matrix.shape[1])

    def sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports, shape (len(values), report_width), for true values given as domain indices."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator, e.g. numpy.random.default_rng(seed)")
        values = np.asarray(values)
        if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
            raise ValueError("values must be a 1-D array of domain indices")
        values = values.astype(np.int64, copy=False)
        if values.size and (values.min() < 0 or values.max() >= self.domain.size):
            raise ValueError(f"values must be domain indices in 0..{self.domain.size - 1}")
        reports = np.asarray(self._sample(values, rng), dtype=np.int64)
        if reports.shape != (values.shape[0], self.report_width):
            raise ValueError(
                f"{self!r}._sample returned shape {reports.shape}, expected ({values.shape[0]}, {self.report_width})"
            )
        return reports

    def log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        """(len(reports), |X|) array of log P(report | x) (``-inf`` where impossible)."""
        reports = self._check_reports(reports)
        out = np.asarray(self._log_likelihood(reports), dtype=float)
        if out.shape != (reports.shape[0], self.domain.size):
            raise ValueError(
                f"{self!r}._log_likelihood returned shape {out.shape}, expected ({reports.shape[0]}, {self.domain.size})"
            )
        if np.isnan(out).any() or (out > 1e-9).any():
            raise ValueError(f"{self!r}._log_likelihood returned NaN or a probability above 1")
        return out

    def likelihood_operator(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """Checked :meth:`_likelihood_operator`."""
        reports = self._check_reports(reports)
        parts = self._likelihood_operator(reports)
        if parts is None:
            return None
        shift, op = parts
        shift = np.asarray(shift, dtype=float)
        if shift.shape != (reports.shape[0],) or tuple(op.shape) != (reports.shape[0], self.domain.size):
            raise ValueError(f"{self!r}._likelihood_operator returned shapes {shift.shape} and {op.shape}")
        return shift, op

    def unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        """Checked :meth:`_unbiased_estimate`."""
        reports = self._check_reports(reports)
        v = self._unbiased_estimate(reports, np.asarray(counts))
        if v is not None:
            v = np.asarray(v, dtype=float)
            if v.shape != (self.domain.size,) or not np.all(np.isfinite(v)):
                raise ValueError(f"{self!r}._unbiased_estimate must return {self.domain.size} finite numbers")
        return v

    def likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        """Checked :meth:`_likely_subset`."""
        mask = self._likely_subset(self._check_reports(reports))
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (self.domain.size,) or not mask.any():
                raise ValueError(f"{self!r}._likely_subset must return a non-empty mask over the domain")
        return mask

    def likelihood(self, reports: np.ndarray) -> np.ndarray:
        """(len(reports), |X|) array of P(report | x)."""
        return np.exp(self.log_likelihood(reports))

    # -------------------------------------------------------------- internals
    def _check_reports(self, reports: np.ndarray) -> np.ndarray:
        reports = np.asarray(reports, dtype=np.int64)
        if reports.ndim == 1 and self.report_width == 1:
            reports = reports[:, None]
        if reports.ndim != 2 or reports.shape[1] != self.report_width:
            raise ValueError(f"reports must have shape (n, {self.report_width})")
        return reports

    @cached_property
    def _log_matrix_t(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.ascontiguousarray(np.log(self.matrix).T)

    @cached_property
    def _cdf(self) -> tuple[np.ndarray, int]:
        """Row CDFs laid end to end, row x shifted by x, for one vectorized searchsorted."""
        m = self.matrix
        cum = np.minimum(np.cumsum(m, axis=1), 1.0)
        cum[:, -1] = 1.0
        cum += np.arange(m.shape[0])[:, None]
        return cum.ravel(), m.shape[1]
