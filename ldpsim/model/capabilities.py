"""A mechanism's optional hooks (its capabilities): their defaults, the flags saying which a class declares,
and the checked public wrappers the core calls.

:class:`~ldpsim.model.mechanism.Mechanism` derives from :class:`OptionalHooks`; the contract as a whole
(which hooks there are, what each returns, the table of hooks and wrappers) is the docstring of
:mod:`ldpsim.model.mechanism`. A class declares a capability by overriding its hook, so the defaults
here are what "not declared" means, and :meth:`Capabilities.of` compares a class's hooks with them.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..base.arguments import require_generator, value_counts
from ..base.errors import ContractError, EstimationError, LdpsimError
from ..base.hooks import overrides
from .domains import OnDomain

#: capability flags whose hook is not the flag's name with a leading underscore
_HOOKS = {"rounds": "rounds"}
#: each mechanism class's capabilities, found once (see :meth:`Capabilities.of`)
_CAPABILITIES: weakref.WeakKeyDictionary[type, Capabilities] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Capabilities:
    """The optional hooks a mechanism class implements; each flag is named after its public wrapper.

    Attributes
    ----------
    structured_likelihood
        ``_structured_likelihood``: a likelihood operator without a dense (reports x values) array.
    unbiased_estimate
        ``_unbiased_estimate``: its own unbiased estimate of the distribution.
    likely_subset
        ``_likely_subset``: values that any MLE can give positive mass.
    subset_likelihood
        ``_subset_likelihood``: the likelihood on a likely subset's values, at the subset's cost.
    output_count
        ``_output_count``: the matrix's number of columns, known without building it.
    named_value_likelihood
        ``_named_value_likelihood``: a report names a value, likely at it and equally unlikely elsewhere.
    log_matrix
        ``_log_matrix``: the matrix's logarithms in closed form, exact where entries underflow.
    rounds
        ``rounds`` (with ``prefix``, ``round_columns``, ``round_channel``): one report covers several rounds.
    estimate_variance
        ``_estimate_variance``: n Var of the unbiased estimate, in closed form.
    sample_counts
        ``_sample_counts``: the report counts of users holding each value, drawn without the matrix's rows.
    diagonal_plus_constant
        ``_diagonal_plus_constant``: the matrix is ``a I + b 11^T``, inverted in closed form in O(k).
    sample_bit_counts
        ``_sample_bit_counts`` (with ``_bit_counts`` and ``_bit_count_estimate``): per-bit counts, the
        sufficient statistic of the mechanism's unbiased estimate, drawn without any report.
    """

    structured_likelihood: bool = False
    unbiased_estimate: bool = False
    likely_subset: bool = False
    subset_likelihood: bool = False
    output_count: bool = False
    named_value_likelihood: bool = False
    log_matrix: bool = False
    rounds: bool = False
    estimate_variance: bool = False
    sample_counts: bool = False
    diagonal_plus_constant: bool = False
    sample_bit_counts: bool = False

    @classmethod
    def of(cls, mechanism: type[OptionalHooks]) -> Capabilities:
        """The capabilities a mechanism class declares: the optional hooks it overrides.

        Found once per class (a class's methods do not change while it runs): walking its
        hierarchy for every hook on every run was a tenth of a sweep of small runs.
        """
        found = _CAPABILITIES.get(mechanism)
        if found is None or type(found) is not cls:
            hooks = {f.name: overrides(mechanism, OptionalHooks, _HOOKS.get(f.name, "_" + f.name)) for f in fields(cls)}
            found = _CAPABILITIES[mechanism] = cls(**hooks)
        return found

    @property
    def declared(self) -> frozenset[str]:
        """Names of the declared capabilities."""
        return frozenset(f.name for f in fields(self) if getattr(self, f.name))


class OptionalHooks(OnDomain):
    """The optional hooks of a mechanism with their defaults, and the checked wrappers that call them.

    The base of :class:`~ldpsim.model.mechanism.Mechanism`, which plugins subclass (never this class).
    It also holds what every wrapper uses: :meth:`_call` (a hook's failure names the mechanism) and
    :meth:`_check_reports`. ``rounds`` is here because it declares its capability; its companions
    ``prefix``, ``round_columns`` and ``round_channel``, which return mechanisms, are Mechanism's.
    """

    #: integers per report (the default, 1, and its documentation are :attr:`Mechanism.report_width`)
    report_width: int

    # ----------------------------------------------- optional hooks (capabilities)
    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """``(shift, H)`` with ``P(report_d | x) = exp(shift_d) * H[d, x]``, ``H`` a (D, |X|)
        ``LinearOperator`` or sparse matrix; None: use :meth:`_log_likelihood`."""
        return None

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        """An unbiased estimate of the distribution from distinct reports and their counts, when the
        mechanism has a better one than inverting its matrix (or has no matrix)."""
        return None

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        """A boolean mask over the domain outside which every value is unlikely for these reports
        (004 Definitions 2-3), so any MLE is zero there. None if unknown."""
        return None

    def _subset_likelihood(self, reports: np.ndarray, support: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """``(shift, H)`` with ``P(report_d | x) = exp(shift_d) * H[d, j]`` for ``x`` the j-th value of
        ``support`` (a likely subset), built without the whole domain's likelihood; None: restrict that."""
        return None

    def _output_count(self) -> int | None:
        """The number of columns :meth:`_matrix` would return, known without building it."""
        return None

    def _named_value_likelihood(self) -> tuple[float, float] | None:
        """``(log P(z | z), log P(z | x != z))`` if a report is one domain index z whose likelihood
        takes one value at x = z and another elsewhere (k-RR)."""
        return None

    def _log_matrix(self) -> np.ndarray | None:
        """The ``(|X|, |Z|)`` array of log P(z | x) in closed form (``-inf`` where impossible), or None."""
        return None

    @property
    def rounds(self) -> int:
        """How many rounds of collection one report of this mechanism covers (default 1)."""
        return 1

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        """``n Var[f_hat(x)]`` for every x, of the unbiased estimate from n users with empirical
        distribution ``theta``; None if unknown here."""
        return None

    def _sample_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """``(|Z|,)`` report counts of users holding value x ``counts[x]`` times, one report each, with
        the law of ``sum_x Multinomial(counts[x], matrix[x])``; None: draw from the matrix's rows."""
        return None

    def _diagonal_plus_constant(self) -> tuple[float, float] | None:
        """``(a, b)`` with ``matrix = a I + b 11^T`` (square, |X| x |X|): P(z | x) is ``a + b`` at z = x and
        ``b`` elsewhere (k-RR); ``a`` computed without cancellation. None: no such structure."""
        return None

    def _sample_bit_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """The per-bit counts (:meth:`_bit_counts`) of users holding value x ``counts[x]`` times, drawn with
        the law of their reports' without drawing any report (a binomial per value and bit); None: not here."""
        return None

    def _bit_counts(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The per-bit counts of distinct reports sent ``counts`` times: a fixed-length vector of whole numbers
        (how many reports set each bit, and whatever else the estimate reads), the companion of
        :meth:`_sample_bit_counts`."""
        raise NotImplementedError(f"{type(self).__name__} declares sample_bit_counts without _bit_counts")

    def _bit_count_estimate(self, tally: np.ndarray, n: int) -> np.ndarray | None:
        """The mechanism's unbiased estimate from per-bit counts of n users: the same numbers as
        :meth:`_unbiased_estimate` of reports with that tally; None where it has none."""
        raise NotImplementedError(f"{type(self).__name__} declares sample_bit_counts without _bit_count_estimate")

    # ------------------------------------------------------------- public API
    @property
    def capabilities(self) -> Capabilities:
        """The optional hooks this mechanism implements (see :class:`Capabilities`)."""
        return Capabilities.of(type(self))

    def require_outputs(self, z: np.ndarray, width: int) -> None:
        """Refuse report values that are not output indices, for hooks that index by them.

        Parameters
        ----------
        z
            Integer report values (one column of the reports).
        width
            Number of outputs: valid values are ``0 .. width - 1``.

        Raises
        ------
        EstimationError
            Naming the first value out of range: the reports do not come from this mechanism.
        """
        bad = (z < 0) | (z >= width)
        if bad.any():
            raise EstimationError(
                f"report {int(z[bad][0])} is not an output of {self!r} (outputs are 0..{width - 1})",
                hint="check that the reports were produced by this mechanism",
            )

    def unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        """The mechanism's own unbiased estimate of the distribution.

        Parameters
        ----------
        reports
            (D, report_width) distinct integer reports.
        counts
            (D,) how many users sent each.

        Returns
        -------
        numpy.ndarray or None
            ``|X|`` finite numbers with expectation the true distribution (they may
            leave the simplex); None if the mechanism has no estimate of its own.
        """
        reports = self._check_reports(reports)
        if not self.capabilities.unbiased_estimate:
            return None
        counts = np.asarray(counts)
        if counts.shape != (reports.shape[0],):
            raise ValueError(f"counts must have shape ({reports.shape[0]},), one per report, got {counts.shape}")
        v = self._unbiased_estimate(reports, counts)
        if v is not None:
            v = np.asarray(v, dtype=float)
            if v.shape != (self.domain.size,) or not np.all(np.isfinite(v)):
                raise ContractError(f"{self!r}._unbiased_estimate must return {self.domain.size} finite numbers")
        return v

    def likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        """A likely subset of the domain for ``reports`` (004 Sec. 8).

        Parameters
        ----------
        reports
            (D, report_width) integer reports.

        Returns
        -------
        numpy.ndarray or None
            A non-empty ``(|X|,)`` boolean mask outside which any MLE is zero; None if unknown.
        """
        reports = self._check_reports(reports)
        if not self.capabilities.likely_subset:
            return None
        mask = self._likely_subset(reports)
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (self.domain.size,) or not mask.any():
                raise ContractError(f"{self!r}._likely_subset must return a non-empty mask over the domain")
        return mask

    def subset_likelihood(self, reports: np.ndarray, support: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """The likelihood of ``reports`` on the values of ``support`` only, at the support's cost.

        Parameters
        ----------
        reports
            (D, report_width) integer reports.
        support
            ``(|X|,)`` boolean mask, a likely subset of these reports.

        Returns
        -------
        tuple or None
            ``(shift, H)``: a (D,) float array and a ``(D, support.sum())`` operator with
            ``P(report_d | x) = exp(shift_d) * H[d, j]`` for x the support's j-th value; None
            if the mechanism has none for this support (restrict the whole likelihood then).
        """
        reports = self._check_reports(reports)
        if not self.capabilities.subset_likelihood:
            return None
        support = np.asarray(support, dtype=bool)
        parts = self._subset_likelihood(reports, support)
        if parts is not None:
            shift, op = parts
            if np.shape(shift) != (reports.shape[0],) or tuple(op.shape) != (reports.shape[0], int(support.sum())):
                raise ContractError(
                    f"{self!r}._subset_likelihood must return (shift, H) of shapes ({reports.shape[0]},) and "
                    f"({reports.shape[0]}, {int(support.sum())})"
                )
        return parts

    def output_count(self) -> int | None:
        """The number of outputs of the matrix, known without building it (None if unknown or infinite)."""
        count = self._output_count()
        if count is None:
            return None
        if int(count) != count or count < 1:
            raise ContractError(f"{self!r}._output_count must return a positive integer or None, got {count!r}")
        return int(count)

    def named_value_likelihood(self) -> tuple[float, float] | None:
        """``(log P(z | z), log P(z | x != z))`` for reports that name a value, or None.

        Returns
        -------
        tuple of float or None
            Two log-probabilities (at most 0, not NaN); None if reports do not name values this way.
        """
        pair = self._named_value_likelihood()
        if pair is None:
            return None
        if self.report_width != 1 or len(pair) != 2:
            raise ContractError(f"{self!r}._named_value_likelihood: a named value is one report column and two numbers")
        hit, miss = (float(v) for v in pair)
        if not (hit <= 0 and miss <= 0):  # also refuses NaN
            raise ContractError(f"{self!r}._named_value_likelihood must return two log-probabilities, got {pair!r}")
        return hit, miss

    def estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        """Per-user variance ``n Var[f_hat(x)]`` of the unbiased estimate, in closed form.

        The estimate is :meth:`unbiased_estimate` (the inverted matrix's when the mechanism
        has none of its own); the n users are a fixed population whose values have the
        empirical distribution ``theta``, so only the mechanism's randomness counts.

        Parameters
        ----------
        theta
            ``(|X|,)`` the users' empirical distribution.

        Returns
        -------
        numpy.ndarray or None
            ``|X|`` non-negative finite numbers; None if the mechanism gives no closed form.
        """
        if not self.capabilities.estimate_variance:
            return None
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.domain.size,) or np.any(theta < 0) or not np.isclose(theta.sum(), 1.0):
            raise ValueError(f"theta must be a distribution over the {self.domain.size} values")
        v = self._estimate_variance(theta)
        if v is None:
            return None
        v = np.asarray(v, dtype=float)
        if v.shape != (self.domain.size,) or not np.all(np.isfinite(v)) or np.any(v < -1e-12):
            raise ValueError(f"{self!r}._estimate_variance must return {self.domain.size} non-negative numbers")
        return np.maximum(v, 0.0)

    def sample_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """How many users send each output, for users holding value x ``counts[x]`` times (one report each).

        The law is that of :meth:`sample` applied to every user and the reports counted:
        ``sum_x Multinomial(counts[x], matrix[x])``. Only a mechanism that declares the
        capability draws them (at less than the matrix's cost); the others return None and
        the simulation draws one multinomial per value from :attr:`matrix`.

        Parameters
        ----------
        counts
            ``(|X|,)`` non-negative integers: users per value.
        rng
            The generator of every draw.

        Returns
        -------
        numpy.ndarray or None
            ``(output_count(),)`` int64 counts summing to ``counts.sum()``; None if the mechanism
            does not draw its counts itself.
        """
        require_generator(rng)
        if not self.capabilities.sample_counts:
            return None
        counts = value_counts(counts, self.domain.size)
        out = self._call("_sample_counts", counts, rng)
        if out is None:
            return None
        out = np.asarray(out)
        outputs = self.output_count()
        if (
            out.ndim != 1
            or (outputs is not None and out.shape[0] != outputs)
            or out.dtype.kind not in "iu"
            or (out.size and out.min() < 0)
            or int(out.sum()) != int(counts.sum())
        ):
            raise ContractError(
                f"{self!r}._sample_counts must return one non-negative integer per output summing to the"
                f" {int(counts.sum())} users, got shape {out.shape} summing to {out.sum() if out.size else 0}"
            )
        return out.astype(np.int64, copy=False)

    def diagonal_plus_constant(self) -> tuple[float, float] | None:
        """The matrix as ``a I + b 11^T``, when the mechanism declares that structure.

        Such a matrix is inverted in closed form, ``(I - b / (a + k b) 11^T) / a`` on k values, so
        the unbiased estimate ``q A^-1`` costs O(k), not a dense solve of O(k^3)
        (:func:`ldpsim.unbiased_estimate` uses it).

        Returns
        -------
        tuple of float or None
            ``(a, b)`` with ``a > 0``, ``b >= 0`` and rows summing to 1 (``a + k b = 1``); None
            if the mechanism declares no such structure.
        """
        if not self.capabilities.diagonal_plus_constant:
            return None
        pair = self._call("_diagonal_plus_constant")
        if pair is None:
            return None
        a, b = (float(v) for v in pair)
        if not (a > 0 and b >= 0 and math.isclose(a + self.domain.size * b, 1.0, rel_tol=1e-9)):
            raise ContractError(
                f"{self!r}._diagonal_plus_constant must return (a > 0, b >= 0) with a + {self.domain.size} b = 1,"
                f" got {pair!r}"
            )
        return a, b

    def sample_bit_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """Per-bit counts of users holding value x ``counts[x]`` times, one report each, drawn without reports.

        The law is that of :meth:`bit_counts` of their sampled reports: for a unary encoding bit j is
        set by ``Binomial(counts[j], p) + Binomial(n - counts[j], q)`` users. What an estimator that
        reads only these counts (matrix inversion of a unary encoding or a sketch) needs, at a cost
        independent of the number of users.

        Parameters
        ----------
        counts
            ``(|X|,)`` non-negative integers: users per value.
        rng
            The generator of every draw.

        Returns
        -------
        numpy.ndarray or None
            int64 counts, as :meth:`bit_counts` gives them; None if the mechanism does not draw them.
        """
        require_generator(rng)
        if not self.capabilities.sample_bit_counts:
            return None
        counts = value_counts(counts, self.domain.size)
        out = self._call("_sample_bit_counts", counts, rng)
        if out is None:
            return None
        out = np.asarray(out)
        if out.ndim != 1 or out.dtype.kind not in "iu" or (out.size and out.min() < 0):
            raise ContractError(f"{self!r}._sample_bit_counts must return a vector of non-negative integers")
        return out.astype(np.int64, copy=False)

    def bit_counts(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The per-bit counts of distinct ``reports`` sent ``counts`` times (what :meth:`sample_bit_counts` draws).

        Parameters
        ----------
        reports
            (D, report_width) distinct integer reports.
        counts
            (D,) how many users sent each.

        Returns
        -------
        numpy.ndarray
            int64 whole-number counts, in the mechanism's own layout.
        """
        if not self.capabilities.sample_bit_counts:
            raise ContractError(f"{self!r} has no per-bit counts (it does not declare sample_bit_counts)")
        reports = self._check_reports(reports)
        counts = np.asarray(counts)
        if counts.shape != (reports.shape[0],):
            raise ValueError(f"counts must have shape ({reports.shape[0]},), one per report, got {counts.shape}")
        return np.asarray(self._call("_bit_counts", reports, counts)).astype(np.int64)

    def bit_count_estimate(self, tally: np.ndarray, n: int) -> np.ndarray | None:
        """The mechanism's unbiased estimate of the distribution from the per-bit counts of n users.

        Parameters
        ----------
        tally
            Per-bit counts, as :meth:`bit_counts` or :meth:`sample_bit_counts` give them.
        n
            The number of users.

        Returns
        -------
        numpy.ndarray or None
            ``|X|`` finite numbers with expectation the true distribution; None where the mechanism
            has no unbiased estimate (a sketch whose hashes cannot tell the values apart).
        """
        if not self.capabilities.sample_bit_counts:
            raise ContractError(f"{self!r} has no per-bit counts (it does not declare sample_bit_counts)")
        v = self._call("_bit_count_estimate", np.asarray(tally), int(n))
        if v is not None:
            v = np.asarray(v, dtype=float)
            if v.shape != (self.domain.size,) or not np.all(np.isfinite(v)):
                raise ContractError(f"{self!r}._bit_count_estimate must return {self.domain.size} finite numbers")
        return v

    # -------------------------------------------------------------- internals
    def _call(self, hook: str, *args: Any) -> Any:
        """A hook's result; a hook that raises anything but ldpsim's own errors is a broken plugin."""
        try:
            return getattr(self, hook)(*args)
        except (LdpsimError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            detail = " ".join(str(exc).split())[:200]
            raise ContractError(f"{self!r}.{hook} raised {type(exc).__name__}: {detail}") from exc

    def _check_reports(self, reports: np.ndarray) -> np.ndarray:
        reports = np.asarray(reports, dtype=np.int64)
        if reports.ndim == 1 and self.report_width == 1:
            reports = reports[:, None]
        if reports.ndim != 2 or reports.shape[1] != self.report_width:
            raise ValueError(f"reports must have shape (n, {self.report_width})")
        return reports
