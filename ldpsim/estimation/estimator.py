"""The estimator contract: observations in, a distribution over the domain out."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from ..base.errors import EstimationError
from ..base.threads import one_blas_thread
from ..model.domains import Domain
from ..model.mechanism import Mechanism
from ..model.params import Configurable, Param
from ..model.variables import DOMAIN, ROUND, TASK, Variable
from .backend import Backend, using_backend
from .engine import Likelihood
from .observations import Observations
from .unbiased import unbiased_estimate
from .uncertainty import Uncertainty, bootstrap_uncertainty, unbiased_uncertainty


@dataclass(frozen=True)
class Estimate:
    """An estimated distribution with diagnostics.

    ``loglik`` is L(distribution) for the observations, whatever the estimator,
    so estimators can be compared on the likelihood they reach; ``gap`` bounds
    how far it is from the maximum, L(MLE) - L(distribution) <= gap (nats), from
    the relative KKT violation ``kkt`` (see ``Likelihood.certificate``).
    ``rule`` names the stopping rule that ended an iterative estimator
    ("delta", "kkt"), or "none". ``extras`` holds the values of the outputs the
    estimator declares in its ``outputs`` (say, an interval's ``lower`` and ``upper``).
    """

    distribution: np.ndarray
    iterations: int = 0
    loglik: float = math.nan
    converged: bool = True
    seconds: float = 0.0
    rule: str = "none"
    kkt: float = math.nan
    gap: float = math.nan
    extras: Mapping[str, Any] = field(default_factory=dict)
    #: what intervals at any level come from (None: the estimator states no uncertainty)
    uncertainty: Uncertainty | None = field(default=None, compare=False, repr=False)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) confidence bounds of each value's frequency at ``level``.

        Raises
        ------
        ValueError
            If the estimator gave no uncertainty (set its ``intervals`` parameter).
        """
        if self.uncertainty is None:
            raise ValueError("this estimate has no uncertainty: estimate with intervals = true")
        return self.uncertainty.interval(level)

    def linear_interval(self, weights: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
        """(value, lower, upper) of the linear statistic ``weights . distribution`` (a mean: the values).

        Raises
        ------
        ValueError
            If the estimator gave no uncertainty, or its uncertainty has no covariance.
        """
        if self.uncertainty is None:
            raise ValueError("this estimate has no uncertainty: estimate with intervals = true")
        return self.uncertainty.linear_interval(weights, level)


#: result variables of an estimator that states its uncertainty (``intervals = true``); absent
#: from the results when no estimator gave them
INTERVAL_OUTPUTS: tuple[Variable, ...] = (
    Variable(
        "lower",
        ("estimator", TASK, ROUND, DOMAIN),
        "lower confidence bound of each value's frequency",
        optional=True,
    ),
    Variable(
        "upper",
        ("estimator", TASK, ROUND, DOMAIN),
        "upper confidence bound of each value's frequency",
        optional=True,
    ),
    Variable(
        "se",
        ("estimator", TASK, ROUND, DOMAIN),
        "standard error of each value's frequency (NaN on the simplex's boundary)",
        optional=True,
    ),
    Variable("confidence", ("estimator", TASK, ROUND), "confidence level of lower and upper", optional=True),
)


#: with ``certify = "auto"``, an estimator that maximizes the likelihood but gives no log-likelihood and
#: certificate of its own (a closed-form MLE, a pooled per-plan GIBU) gets them from one pass over the
#: whole-report likelihood when that likelihood spans at most this many (distinct report, value) pairs:
#: building it can cost far more than the estimate (OUE, k = 1000, 10^6 users: 19 s against 1 s for ``inv-p``)
CERTIFY_MAX_PAIRS = 250_000_000


#: the extras of an estimate without any (shared: read-only and empty)
_NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})


#: the fields of an estimate given as a bare distribution (all but the distribution, which replaces this one)
_BARE = Estimate(np.zeros(0))


def _updated(result: Estimate, **changes: Any) -> Estimate:
    """``dataclasses.replace(result, **changes)``, without its per-field introspection for a plain Estimate.

    Every estimate of a run passes through here once; ``replace`` re-runs the frozen dataclass's
    ``__init__`` field by field, a tenth of a sub-millisecond run's bookkeeping. A subclass of
    Estimate (which may check its fields) still goes through ``replace``.
    """
    if type(result) is not Estimate:
        return replace(result, **changes)
    new = object.__new__(Estimate)
    new.__dict__.update(result.__dict__)
    new.__dict__.update(changes)
    return new


class Estimator(Configurable):
    """Base class of estimators. Subclasses implement :meth:`_estimate`."""

    kind: ClassVar[str] = "estimator"
    #: True if the estimator inverts the plans' matrices (through :func:`ldpsim.unbiased_estimate`), so a
    #: run can refuse up front matrices that would not fit in memory
    inverts_matrices: ClassVar[bool] = False
    #: True if the estimate is meant to be the maximum-likelihood estimate (GIBU, a closed-form MLE): its
    #: certificate is how it is checked, so with ``certify = "auto"`` one that gives none of its own gets it.
    #: Other estimators (inversion, MMSE, projections) get one when asked (``certify = "always"``): on a sweep of
    #: sub-millisecond runs, certifying ``inv-p`` and ``mmse`` was a third of the runs' bookkeeping.
    maximizes_likelihood: ClassVar[bool] = False
    #: extra result variables this estimator gives (``source="estimate"``, dims starting with
    #: ``"estimator"``); :meth:`_estimate` returns their values in ``Estimate.extras``
    outputs: ClassVar[tuple[Variable, ...]] = ()
    #: what the estimate stands for, which decides the metrics that can score it (:attr:`ldpsim.Metric.scores`):
    #: ``"distribution"``, an estimate of the whole distribution; ``"mean"``, a mean carried as the least-spread
    #: distribution with that mean (``numeric-mean``); ``"vector-mean"``, a mean vector (``vector-mean``)
    gives: ClassVar[str] = "distribution"
    rounds = Param(
        "str",
        "all",
        choices=("all", "each"),
        doc="all: estimate from every round so far (GIBU on whole report sequences); each: from the last round's "
        "reports alone, through that round's one-report channel (the per-round baseline of the peers)",
    )

    certify = Param(
        "str",
        "auto",
        choices=("auto", "always", "never"),
        doc="the log-likelihood, KKT violation and gap of an estimate whose estimator gives none: always, never, "
        "or auto (for an estimator that maximizes the likelihood, such as a closed-form MLE, when the whole-report "
        "likelihood is at most CERTIFY_MAX_PAIRS report-value pairs; NaN otherwise, and for inversion and MMSE)",
    )

    def _estimate(self, observations: Observations) -> Estimate | np.ndarray:
        raise NotImplementedError

    def _certifies(self, observations: Observations) -> bool:
        """Whether :meth:`estimate` fills in a missing log-likelihood and certificate (``certify``)."""
        if self.certify != "auto":
            return self.certify == "always"
        return self.maximizes_likelihood and observations.n_distinct * observations.domain.size <= CERTIFY_MAX_PAIRS

    def check_setup(self, domain: Domain, plans: Sequence[tuple[Mechanism, ...]]) -> None:
        """Refuse, before any user is simulated, a domain or report plans this estimator cannot work with.

        A run calls it for every sweep point, so a point that would fail only when its turn
        comes (an estimator for one mechanism given another, a parameter whose length must be
        the domain's) fails when the scenario loads, before hours of other points ran. The
        default accepts everything; override it when :meth:`_estimate` would refuse or fail.

        Parameters
        ----------
        domain
            The domain of the point.
        plans
            The distinct report plans of the point's cohorts that have users.

        Raises
        ------
        LdpsimError
            One line saying what does not fit; ``field`` names the parameter at fault, if one is.
        """

    def takes_bit_counts(self) -> bool:
        """Whether this estimator, as configured, needs nothing but per-bit counts (:class:`ldpsim.BitTally`).

        A run whose every estimator takes them draws the per-bit counts of a mechanism declaring
        ``sample_bit_counts`` instead of its reports when it has too many users to draw them one by one
        (``ldpsim.theory.sampling.BIT_COUNT_MIN_INTS``). False by default: override it where
        :meth:`_estimate` reads only ``unbiased_estimate``.
        """
        return False

    def reads_passes(self) -> bool:
        """Whether this estimator, as configured, reads the observations only through their likelihood's passes.

        Such an estimator calls nothing of its observations but ``Likelihood.of(observations)`` (on the
        whole domain, or on ``observations.likely_subset()`` when that is not None) and, of that likelihood,
        ``size``, ``n``, ``em_parts``, ``em_step``, ``certify`` and ``certificate``, or hands it to
        :func:`ldpsim.gibu` or :func:`ldpsim.newton_mle`. A run then may keep its reports where
        they were drawn, in parts, and run each pass as map-reduce over them
        (:class:`ldpsim.HeldObservations`; ``passes = "shards"``). False by default: override it where that
        holds (``ibu`` and ``mle`` do).
        """
        return False

    @property
    def stopping_rule(self) -> str:
        """The rule that stops this estimator's iterations ("delta", "kkt"), "none" if not iterative."""
        return "none"

    def estimate(self, observations: Observations, *, backend: Backend | str | None = None) -> Estimate:
        """Estimate the distribution of the users' true values; timed and checked.

        With ``rounds = "each"`` the estimate (and its log-likelihood and certificate) is that
        of the last round's observations alone (:meth:`Observations.last_round`). It runs with one
        BLAS thread, as inside a run (see :mod:`ldpsim.base.threads`).

        ``backend`` (a ``Backend`` or a name: "numpy", "cupy", "torch", "auto"; see ``ldpsim.resolve_backend``)
        is where the likelihood's passes run (GIBU, SQUAREM, the Newton solver's products); None keeps the
        active one (numpy outside ``ldpsim.using_backend``). The estimate is a numpy array either way.
        """
        if not isinstance(observations, Observations):
            raise TypeError("estimate() needs an Observations instance")
        with one_blas_thread(), using_backend(backend):  # nested in a run's limit: free
            return self._estimate_checked(observations)

    def _estimate_checked(self, observations: Observations) -> Estimate:
        if observations.tallies and not self.takes_bit_counts():
            raise EstimationError(
                f"{self!r} reads whole reports; these observations hold per-bit counts of"
                f" {', '.join(repr(t.plan[0]) for t in observations.tallies)} drawn without reports",
                hint="estimate with inv-p or inv-n (without intervals), or simulate fewer users (drawn one by one)",
            )
        if self.rounds == "each":
            observations = observations.last_round()
        start = time.perf_counter()
        result = self._estimate(observations)
        seconds = time.perf_counter() - start
        if isinstance(result, Estimate):
            dist = np.asarray(result.distribution, dtype=float)
        else:  # a bare distribution: every other field of its estimate has its default
            dist, result = np.asarray(result, dtype=float), _BARE
        size = observations.domain.size
        # the sum is finite exactly when every entry is (a NaN or an infinity makes it NaN or infinite; finite
        # entries whose sum overflows fail the sum's test anyway): one reduction fewer than np.isfinite's
        total = dist.sum() if dist.shape == (size,) else math.nan
        low = dist.min() if math.isfinite(total) and abs(total - 1) <= 1e-6 else math.nan
        if not low >= -1e-9:
            raise ValueError(f"{self!r} returned something that is not a distribution over {size} values")
        # nothing below zero in a contiguous array: the clipped entries are the same numbers (a -0.0 at most turns
        # 0.0) laid out the same way, so their sum is ``total`` bit for bit and need not be taken again
        same = low >= 0.0 and dist.flags.c_contiguous
        dist = np.maximum(dist, 0.0)  # what np.clip(dist, 0.0, None) computes, without its dispatch
        dist /= total if same else dist.sum()
        dist.setflags(write=False)
        loglik, kkt, gap = result.loglik, result.kkt, result.gap
        if (math.isnan(loglik) or math.isnan(gap)) and self._certifies(observations):
            # one pass over the likelihood gives L and the certificate, for any estimator
            loglik, kkt, gap = Likelihood.of(observations).certify(dist)
        if result.uncertainty is not None and any(v.name == "lower" for v in type(self).outputs):
            level = float(getattr(self, "confidence", 0.95))
            lower, upper = result.uncertainty.interval(level)
            given = {**result.extras, "lower": lower, "upper": upper, "se": result.uncertainty.se, "confidence": level}
            extras = self._check_extras(given, size)
        else:
            extras = self._check_extras(result.extras, size) if result.extras else _NO_EXTRAS
        return _updated(result, distribution=dist, loglik=loglik, kkt=kkt, gap=gap, seconds=seconds, extras=extras)

    def _check_extras(self, extras: Mapping[str, Any], size: int) -> Mapping[str, Any]:
        """The declared outputs' values as read-only arrays; an undeclared one is a plugin bug."""
        declared = {v.name: v for v in type(self).outputs}
        unknown = set(extras) - set(declared)
        if unknown:
            raise ValueError(f"{self!r} returned undeclared outputs {sorted(unknown)}; declare them in `outputs`")
        checked = {}
        for name, value in extras.items():
            arr = np.asarray(value, dtype=declared[name].dtype)
            if DOMAIN in declared[name].item_dims and size not in arr.shape:
                raise ValueError(f"{self!r}: output '{name}' has shape {arr.shape}, expected one of {size} values")
            arr.setflags(write=False)
            checked[name] = arr
        return MappingProxyType(checked)


class IntervalEstimator(Estimator):
    """Base of estimators that can state their uncertainty (``intervals = true``).

    Subclasses implement :meth:`_point_estimate` (the estimate itself) and
    :meth:`_analytic_uncertainty` (its standard errors by a formula, or None where there is none).
    ``interval_method = "bootstrap"`` instead re-simulates the reports from the estimate and
    re-estimates (:func:`ldpsim.estimation.uncertainty.bootstrap_uncertainty`), for any subclass.
    The bounds at ``confidence`` become the declared outputs ``lower``, ``upper``, ``se``.
    """

    outputs = INTERVAL_OUTPUTS
    intervals = Param("bool", False, doc="also give each value's standard error and confidence interval")
    confidence = Param("float", 0.95, gt=0, lt=1, doc="confidence level of the intervals")
    interval_method = Param(
        "str",
        "analytic",
        choices=("analytic", "bootstrap"),
        doc="analytic: the estimator's formula (Fisher information, exact covariance); bootstrap: re-simulate "
        "the reports from the estimate and re-estimate",
    )
    replicates = Param("int", 200, ge=20, doc="bootstrap replicates (interval_method = bootstrap)")

    def _point_estimate(self, observations: Observations) -> Estimate | np.ndarray:
        raise NotImplementedError

    def _analytic_uncertainty(self, observations: Observations, estimate: Estimate) -> Uncertainty | None:
        return None

    def _estimate(self, observations: Observations) -> Estimate:
        result = self._point_estimate(observations)
        estimate = result if isinstance(result, Estimate) else Estimate(np.asarray(result, dtype=float))
        if not self.intervals:
            return estimate
        spread: Uncertainty | None
        if self.interval_method == "bootstrap":

            def again(replicate: Observations) -> np.ndarray:
                found = self._point_estimate(replicate)
                return np.asarray(found.distribution if isinstance(found, Estimate) else found, dtype=float)

            spread = bootstrap_uncertainty(observations, estimate.distribution, again, replicates=self.replicates)
        else:
            spread = self._analytic_uncertainty(observations, estimate)
        return replace(estimate, uncertainty=spread)


class InversionEstimator(IntervalEstimator):
    """Base of estimators that post-process an unbiased estimate (matrix inversion, 001 Sec. VII):
    subclasses implement :meth:`_postprocess`, taking the estimate off the simplex back onto it.

    Their analytic intervals come from the exact covariance of the unbiased estimate
    (:func:`ldpsim.estimation.uncertainty.unbiased_uncertainty`): the interval is the unbiased
    estimate's, centred on it, not on the post-processed estimate.
    """

    inverts_matrices: ClassVar[bool] = True

    def check_setup(self, domain: Domain, plans: Sequence[tuple[Mechanism, ...]]) -> None:
        """Refuse a plan with neither its own unbiased estimate nor a finite matrix to invert."""
        super().check_setup(domain, plans)
        for plan in plans:
            if len(plan) == 1 and plan[0].capabilities.unbiased_estimate:
                continue  # the mechanism's own unbiased estimate (it may still invert where it has none)
            for mech in plan:
                if mech.output_count() is None and mech.matrix is None:
                    raise EstimationError(
                        f"matrix inversion needs mechanisms with a finite matrix; {mech!r} has none",
                        hint="use ibu for this mechanism",
                    )

    def _postprocess(self, unbiased: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def takes_bit_counts(self) -> bool:
        """The point estimate reads only the unbiased estimate: per-bit counts do, unless intervals, a
        certificate or the per-round estimate need the reports (or the plans' groups)."""
        return not self.intervals and self.certify != "always" and self.rounds == "all"

    def _point_estimate(self, observations: Observations) -> np.ndarray:
        return self._postprocess(unbiased_estimate(observations))

    def _analytic_uncertainty(self, observations: Observations, estimate: Estimate) -> Uncertainty | None:
        return unbiased_uncertainty(observations, unbiased_estimate(observations))
