"""The mechanism contract.

A mechanism is built from a domain and validated parameters. It samples
reports for an array of true values (domain indices) with an explicitly
passed :class:`numpy.random.Generator`, vectorized; gives the log-likelihood
``log P(report | x)`` of reports for every ``x``; and declares the privacy
guarantee it claims (:class:`Privacy`). A report is a row of ``report_width``
integers: an output index for matrix mechanisms (column ``z`` of the matrix),
or whatever encoding the mechanism documents.

A subclass implements *hooks* (names starting with ``_``); the rest of ldpsim
calls only the *public wrappers*, which check what the hooks return and name
the mechanism when it is wrong. Optional hooks are *capabilities*: overriding
one declares it, and :attr:`Mechanism.capabilities` says which a mechanism
declares (a declared hook may still return None for particular reports or
parameters, meaning "not here").

=================================  ================================  ==========================
hook (a subclass implements)       public wrapper (the core calls)   capability flag
=================================  ================================  ==========================
``privacy`` (property)             ``privacy``                       required
``_matrix()``                      ``matrix``, ``output_size``       required, or the next two
``_sample(values, rng)``           ``sample(values, rng)``           required without a matrix
``_log_likelihood(reports)``       ``log_likelihood(reports)``       required without a matrix
``_structured_likelihood(r)``      ``likelihood_operator(r)``,       ``structured_likelihood``
                                   ``structured_likelihood(r)``
``_unbiased_estimate(r, counts)``  ``unbiased_estimate(r, counts)``  ``unbiased_estimate``
``_likely_subset(r)``              ``likely_subset(r)``              ``likely_subset``
``_subset_likelihood(r, mask)``    ``subset_likelihood(r, mask)``    ``subset_likelihood``
``_output_count()``                ``output_count()``                ``output_count``
``_named_value_likelihood()``      ``named_value_likelihood()``      ``named_value_likelihood``
``_log_matrix()``                  ``log_matrix``                    ``log_matrix``
``rounds``, ``prefix(t)``,         the same names                    ``rounds``
``round_columns(t)``,
``round_channel(t)``
``_estimate_variance(theta)``      ``estimate_variance(theta)``      ``estimate_variance``
``_sample_counts(counts, rng)``    ``sample_counts(counts, rng)``    ``sample_counts``
``_diagonal_plus_constant()``      ``diagonal_plus_constant()``      ``diagonal_plus_constant``
``_sample_bit_counts(c, rng)``     ``sample_bit_counts(c, rng)``     ``sample_bit_counts``
``_bit_counts(r, counts)``,        ``bit_counts(r, counts)``,
``_bit_count_estimate(tally, n)``  ``bit_count_estimate(tally, n)``
=================================  ================================  ==========================

Required: ``privacy``, and either ``_matrix`` (finitely many outputs: sampling
and likelihoods follow from it) or ``_sample`` and ``_log_likelihood`` (bit
vectors, unbounded integers; ``_matrix`` may then still return one when it is small).

Capabilities:

* structured likelihood: ``(shift, H)`` with ``P(report_d | x) = exp(shift_d) H[d, x]``,
  ``H`` anything with ``H @ v`` and ``H.T @ w`` (a scipy ``LinearOperator`` or sparse
  matrix; ``constant_plus_column``, ``convolution_likelihood`` and ``rank_one_plus_sparse``
  build them), so GIBU never forms a dense (reports x values) array. The size policy is
  applied here, once: :meth:`Mechanism.likelihood_operator`, what estimation uses, offers
  it only on domains of at least :attr:`Mechanism.structured_min_size` values (default
  :data:`STRUCTURED_MIN_SIZE`; a mechanism whose dense likelihood is never the cheaper one,
  bit vectors or hashed reports, sets 0). :meth:`Mechanism.structured_likelihood` gives it
  whatever the size.
* unbiased estimate: an estimate of the distribution whose expectation is the true one
  for any number of users, one included (it may leave the simplex), from distinct reports
  and their counts; matrix inversion uses it instead of inverting the matrix.
* likely subset: a non-empty mask over the domain outside which every value is beaten by
  another on every report, strictly on one (004 Definitions 2-3): any MLE is zero there.
* subset likelihood: ``(shift, H)`` over the values of a likely subset only, built at the
  subset's cost (planar mechanisms: a convolution over the subset's box, whatever the grid's
  size); estimation on a likely subset uses it instead of restricting the whole likelihood.
* output count: the number of columns ``_matrix`` would return, known without building
  it, so that a matrix too large for the machine is refused before it is allocated.
* named-value likelihood: ``(log P(z | z), log P(z | x != z))`` for one-column reports
  that name a domain index (k-RR); plans of several such reports then get a sparse
  likelihood (``named_values_likelihood``).
* log matrix: ``log P(z | x)`` in closed form. Where ``eps`` times a distance exceeds
  about 745, matrix entries underflow to exactly 0 although the mechanism gives them a
  positive probability; the privacy levels and likelihoods are then computed from the
  closed-form logarithms, so a private mechanism is never reported as ``eps = inf``.

* rounds: one report covers several rounds of collection (a memoized protocol: one report of
  ``rounds`` blocks of columns holding the sequence y_1..y_tau). ``rounds`` says how many;
  ``prefix(t)`` is the mechanism of the first t rounds (its reports are the first columns of
  this one's, those of rounds 0..t-1); ``round_columns(t)`` the columns of round t (0-based);
  ``round_channel(t)`` the one-report channel of round t alone (rows summing to 1), what the
  per-round baselines estimate through. Estimates over time (a scenario's
  ``rounds = "every"``) truncate reports with them. These four are overridden together and
  under their own names (there is no wrapper: the defaults describe a one-round mechanism).
* estimate variance: ``n Var[f_hat(x)]`` of the unbiased estimate (the mechanism's own, or the
  inverted matrix's) for n users whose empirical distribution is theta, in closed form (Wang et
  al. 2017's formulas and their equivalents): what ``ldpsim check mechanism`` prints beside a
  simulation.
* sample counts: the report counts of a population given how many users hold each value (one
  report each), with the law of ``sum_x Multinomial(counts[x], M[x])``, drawn by the mechanism
  itself at less than the matrix's O(|X| |Z|) cost (k-RR: O(k)). The simulation's count path
  (:func:`ldpsim.theory.sampling.sample_cohort`) uses it instead of one multinomial per value
  over the dense matrix; without it (the default, or a hook returning None) that path is unchanged.

Hooks that read reports call :meth:`Mechanism.require_outputs` to refuse values that
are not outputs. ``ldpsim.testing.check_mechanism`` checks each declared capability
against the dense likelihood and the matrix.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ..base.arguments import require_generator
from ..base.errors import ContractError
from ..base.memory import require_memory
from .capabilities import OptionalHooks
from .privacy import Privacy

#: rows of a mechanism matrix must sum to 1 within this tolerance
ROW_SUM_TOL = 1e-9

#: below this many values a dense likelihood is faster than a structured one (measured: numpy's
#: dense products beat the FFT's fixed costs on small domains); the default of
#: :attr:`Mechanism.structured_min_size`
STRUCTURED_MIN_SIZE = 512

#: the checked methods the core calls; subclasses implement the hooks behind them, never these
PUBLIC_WRAPPERS = (
    "matrix",
    "output_size",
    "sample",
    "log_likelihood",
    "likelihood",
    "likelihood_operator",
    "structured_likelihood",
    "unbiased_estimate",
    "likely_subset",
    "subset_likelihood",
    "output_count",
    "named_value_likelihood",
    "log_matrix",
    "estimate_variance",
    "sample_counts",
    "diagonal_plus_constant",
    "sample_bit_counts",
    "bit_counts",
    "bit_count_estimate",
    "require_outputs",
    "capabilities",
)


def stochastic_defect(m: np.ndarray) -> str | None:
    """What keeps the 2-D ``m`` from being row-stochastic, in words naming where (rows and columns counted
    from 0); None if nothing does. A non-finite entry first, then the most negative one, then the row whose
    sum is furthest from 1 (beyond ``ROW_SUM_TOL``)."""
    bad = ~np.isfinite(m)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        return f"has a non-finite entry, {m[i, j]} at row {i}, column {j} (counting from 0)"
    if m.size and m.min() < 0:
        i, j = np.unravel_index(np.argmin(m), m.shape)
        return f"has negative entries, the least {m[i, j]:.6g} at row {i}, column {j} (counting from 0)"
    off = np.abs(m.sum(axis=1) - 1.0)
    if off.size and off.max() > ROW_SUM_TOL:
        i = int(np.argmax(off))
        return f"row {i} sums to {m[i].sum():.12g}, not 1 (rows counting from 0)"
    return None


class Mechanism(OptionalHooks):
    """Base class of mechanisms. Subclasses set ``name`` and a one-line docstring.

    The module docstring (:mod:`ldpsim.model.mechanism`) lists the hooks a
    subclass implements and the checked public methods that call them; the
    optional hooks' defaults and wrappers are in its base, ``OptionalHooks``
    (:mod:`ldpsim.model.capabilities`).
    """

    kind: ClassVar[str] = "mechanism"
    #: integers per report (an instance may set its own, e.g. in _validate, when it depends on the domain)
    report_width: int = 1
    #: True if the declared privacy level is exactly the one the matrix has; False for
    #: mechanisms that post-process a guarantee (e.g. remapping continuous noise to the
    #: domain), whose matrix may be more private than declared
    tight_privacy: ClassVar[bool] = True
    #: smallest domain on which :meth:`likelihood_operator` offers the structured likelihood; a class
    #: sets 0 when its dense likelihood is never cheaper, and an instance may set its own (to compare paths)
    structured_min_size: int = STRUCTURED_MIN_SIZE
    #: True if reports are (encoded) real numbers whose log-likelihood is a log-density, given up to a
    #: per-report constant (relative to a measure that does not depend on x, so that it stays <= 0):
    #: GIBU and every ratio P(z|x) / P(z|x') are unchanged, but a report has no probability of its own,
    #: and the contract checks test the sampler through likelihood ratios
    report_density: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        legacy = cls.__dict__.get("_likelihood_operator")
        if legacy is not None:  # the hook's former name; such hooks applied their own size policy
            warnings.warn(
                f"{cls.__qualname__}._likelihood_operator is deprecated: implement _structured_likelihood,"
                " and set structured_min_size if the structured likelihood does not pay off on small domains",
                DeprecationWarning,
                stacklevel=2,
            )
            if "_structured_likelihood" not in cls.__dict__:
                cls._structured_likelihood = legacy  # type: ignore[method-assign]
                cls.structured_min_size = 0

    # ------------------------------------------------------------ required hooks
    @property
    def privacy(self) -> Privacy:
        """The guarantee this mechanism claims."""
        raise NotImplementedError(f"{type(self).__name__} must declare its privacy guarantee")

    def _matrix(self) -> np.ndarray | None:
        """The ``(|X|, |Z|)`` row-stochastic matrix, or None if outputs are not finite."""
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
        """``(D, |X|)`` log P(report | x); default: from the matrix."""
        if self.matrix is None:
            raise NotImplementedError(f"{type(self).__name__} has no matrix and must implement _log_likelihood")
        z = reports[:, 0]
        self.require_outputs(z, self.matrix.shape[1])
        return self._log_matrix_t[z]

    # ------------------- rounds (overridden under these names, with ``rounds`` in OptionalHooks)
    def prefix(self, t: int) -> Mechanism:
        """The mechanism of the first ``t`` rounds, ``1 <= t <= rounds``.

        Its reports are the first columns of this mechanism's reports, those of
        rounds ``0 .. t - 1``; ``prefix(rounds)`` is this mechanism. Default: ``self`` for t = 1.
        """
        self._require_round(t, 1, "prefix")
        return self

    def round_columns(self, t: int) -> slice:
        """The report columns of round ``t`` (0-based, ``0 <= t < rounds``); default: all columns."""
        self._require_round(t, 0, "round_columns")
        return slice(0, self.report_width)

    def round_channel(self, t: int) -> Mechanism:
        """The one-report channel of round ``t`` alone (0-based): how a report of that round,
        seen without the others, depends on the true value. Default: ``self`` for t = 0."""
        self._require_round(t, 0, "round_channel")
        return self

    def _require_round(self, t: int, first: int, hook: str) -> None:
        last = first + self.rounds - 1
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not first <= t <= last:
            raise ValueError(f"{self!r}.{hook}: round {t!r} is not in {first}..{last}")

    # ------------------------------------------------------------- public API
    @cached_property
    def matrix(self) -> np.ndarray | None:
        """The validated, read-only row-stochastic matrix (None for infinite outputs)."""
        outputs = self.output_count()
        if outputs is not None:
            k = self.domain.size
            require_memory(
                8.0 * k * outputs,
                f"the dense {k} x {outputs} matrix of {self.name}",
                hint="estimate with ibu (it uses the mechanism's structured likelihood), or use fewer values",
            )
        m = self._call("_matrix")
        if m is None:
            return None
        m = np.array(m, dtype=float)
        if m.ndim != 2 or m.shape[0] != self.domain.size:
            raise ContractError(f"{self!r}: matrix has shape {m.shape}, expected ({self.domain.size}, outputs)")
        defect = stochastic_defect(m)
        if defect is not None:
            raise ContractError(f"{self!r}: matrix {defect}")
        m.setflags(write=False)
        return m

    @property
    def output_size(self) -> int | None:
        """Number of possible outputs, or None if unbounded."""
        return None if self.matrix is None else int(self.matrix.shape[1])

    def sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports, shape (len(values), report_width), for true values given as domain indices."""
        require_generator(rng)
        values = np.asarray(values)
        if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
            raise ValueError("values must be a 1-D array of domain indices")
        values = values.astype(np.int64, copy=False)
        if values.size and (values.min() < 0 or values.max() >= self.domain.size):
            raise ValueError(f"values must be domain indices in 0..{self.domain.size - 1}")
        require_memory(  # the reports themselves, before any is drawn (SHE: k integers per user)
            8.0 * values.shape[0] * self.report_width,
            f"the {values.shape[0]:,} reports of {self.name} ({self.report_width} integers each)",
            hint="sample fewer users at a time, or simulate by counts (ldpsim.theory.sampling.sample_cohort)",
        )
        reports = np.asarray(self._call("_sample", values, rng), dtype=np.int64)
        if reports.shape != (values.shape[0], self.report_width):
            raise ContractError(
                f"{self!r}._sample returned shape {reports.shape}, expected ({values.shape[0]}, {self.report_width})"
            )
        return reports

    def log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        """``(len(reports), |X|)`` array of log P(report | x) (``-inf`` where impossible)."""
        reports = self._check_reports(reports)
        out = np.asarray(self._call("_log_likelihood", reports), dtype=float)
        if out.shape != (reports.shape[0], self.domain.size):
            raise ContractError(
                f"{self!r}._log_likelihood returned shape {out.shape}, expected ({reports.shape[0]}, {self.domain.size})"
            )
        if np.isnan(out).any() or (out > 1e-9).any():
            raise ContractError(f"{self!r}._log_likelihood returned NaN or a probability above 1")
        return out

    def likelihood(self, reports: np.ndarray) -> np.ndarray:
        """``(len(reports), |X|)`` array of P(report | x)."""
        return np.exp(self.log_likelihood(reports))

    def likelihood_operator(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """The likelihood estimation should use for these reports: structured, or None for dense.

        The size policy: the structured likelihood (if declared) on domains of at
        least :attr:`structured_min_size` values, None below (a dense array from
        :meth:`log_likelihood` is faster there).

        Parameters
        ----------
        reports
            (D, report_width) integer reports.

        Returns
        -------
        tuple or None
            ``(shift, H)`` as :meth:`structured_likelihood` gives it, or None.
        """
        reports = self._check_reports(reports)
        if self.domain.size < self.structured_min_size:
            return None
        return self._checked_structured(reports)

    def structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """The structured likelihood of ``reports`` whatever the domain's size.

        Parameters
        ----------
        reports
            (D, report_width) integer reports.

        Returns
        -------
        tuple or None
            ``(shift, H)``: a (D,) float array and a ``(D, |X|)`` operator with
            ``P(report_d | x) = exp(shift_d) * H[d, x]``; None if the mechanism has none.
        """
        return self._checked_structured(self._check_reports(reports))

    # -------------------------------------------------------------- internals
    def _checked_structured(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        if not self.capabilities.structured_likelihood:
            return None
        parts = self._structured_likelihood(reports)
        if parts is None:
            return None
        shift, op = parts
        shift = np.asarray(shift, dtype=float)
        if shift.shape != (reports.shape[0],) or tuple(op.shape) != (reports.shape[0], self.domain.size):
            raise ContractError(
                f"{self!r}._structured_likelihood returned shapes {shift.shape} and {tuple(op.shape)},"
                f" expected ({reports.shape[0]},) and ({reports.shape[0]}, {self.domain.size})"
            )
        return shift, op

    def _finite_matrix(self) -> np.ndarray:
        """The matrix, for code paths that only run when there is one."""
        m = self.matrix
        if m is None:
            raise NotImplementedError(f"{type(self).__name__} has no matrix")
        return m

    @cached_property
    def log_matrix(self) -> np.ndarray | None:
        """Read-only ``(|X|, |Z|)`` log P(z | x): the logarithm of :attr:`matrix`, and where an entry underflowed
        (0 or subnormal, below ~2.2e-308) the mechanism's closed form if it declares one (``_log_matrix``).

        Only the underflowed entries come from the closed form, so likelihoods elsewhere are those of the matrix.

        Returns
        -------
        numpy.ndarray or None
            None for a mechanism without a matrix.
        """
        m = self.matrix
        if m is None:
            return None
        with np.errstate(divide="ignore"):
            out = np.log(m)
        tiny = m < np.finfo(float).tiny  # 0 or subnormal: underflowed, or at least short of relative precision
        if tiny.any() and self.capabilities.log_matrix:
            exact = self._log_matrix()
            if exact is not None:
                exact = np.asarray(exact, dtype=float)
                if exact.shape != m.shape or np.isnan(exact).any() or (exact > 1e-12).any():
                    raise ContractError(f"{self!r}._log_matrix must return log-probabilities of shape {m.shape}")
                if not np.allclose(exact[~tiny], out[~tiny], rtol=0, atol=1e-9):
                    raise ContractError(f"{self!r}._log_matrix does not match its matrix")
                out[tiny] = exact[tiny]
        out.setflags(write=False)
        return out

    @cached_property
    def _log_matrix_t(self) -> np.ndarray:
        log_m = self.log_matrix
        if log_m is None:
            raise NotImplementedError(f"{type(self).__name__} has no matrix")
        return np.ascontiguousarray(log_m.T)

    @cached_property
    def _cdf(self) -> tuple[np.ndarray, int]:
        """Row CDFs laid end to end, row x shifted by x, for one vectorized searchsorted."""
        m = self._finite_matrix()
        cum = np.minimum(np.cumsum(m, axis=1), 1.0)
        cum[:, -1] = 1.0
        cum = cum + np.arange(m.shape[0])[:, None]
        return cum.ravel(), m.shape[1]
