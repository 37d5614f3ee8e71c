"""The metric contract: (estimate, truth, domain) to a number."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from .domains import Domain
from .params import Configurable
from .variables import Variable


class Metric(Configurable):
    """Base class of error metrics. Subclasses implement :meth:`_compute`.

    A metric meets its domain only when called, so :meth:`check_domain` lets a
    scenario refuse an unsuitable one (say, a numeric statistic on categories)
    before the run starts.
    """

    kind: ClassVar[str] = "metric"
    _DERIVED: ClassVar[tuple[str, ...]] = (*Configurable._DERIVED, "_checked_domain")
    #: domain kinds the metric works on; None means any
    domain_kinds: ClassVar[tuple[str, ...] | None] = None
    #: unit of the metric's values, shown on plot axes; "distance" means the domain's distance
    #: unit (a grid's or integers' ``unit``, e.g. km, years), "" means unitless (see :meth:`value_units`)
    units: ClassVar[str] = ""
    #: extra result variables this metric gives per estimate (``source="metric"``, dims starting
    #: with ``"estimator"``), computed by :meth:`_outputs`; its main value is the results' ``error``
    outputs: ClassVar[tuple[Variable, ...]] = ()
    #: outputs of the estimate the metric reads (an interval's ``lower`` and ``upper``); such a metric
    #: implements :meth:`_compute_from` and scores NaN where an estimator did not give them
    reads: ClassVar[tuple[str, ...]] = ()
    #: parameters a scenario fills from the run when it does not give them; ``"users"``: the run's
    #: number of users (a metric sees distributions, not counts, yet 002's E/N needs N)
    from_run: ClassVar[tuple[str, ...]] = ()
    #: what estimates the metric scores, by :attr:`ldpsim.Estimator.gives` (``"distribution"``, ``"mean"``,
    #: ``"vector-mean"``); None: any, as a metric that ignores the estimate. A scenario pairing a metric with an
    #: estimator whose estimate it cannot score is refused: TV of numeric-mean's two-point stand-in says nothing
    scores: ClassVar[tuple[str, ...] | None] = ("distribution",)

    def value_units(self) -> str:
        """The unit of this metric's values as configured: the class's :attr:`units` (``"distance"`` standing
        for the domain's unit). Override it where a parameter changes the unit, as squaring an error does
        (``"distance²"``)."""
        return type(self).units

    @classmethod
    def can_score(cls, gives: str) -> bool:
        """Whether the metric scores the estimates of an estimator whose :attr:`~ldpsim.Estimator.gives` is ``gives``."""
        return cls.scores is None or gives in cls.scores

    def _check_domain(self, domain: Domain) -> None:
        """Further checks of the domain against the parameters; raise ParameterError."""

    def check_domain(self, domain: Domain) -> None:
        """Raise ParameterError if the metric cannot score distributions over ``domain``."""
        self._require_domain_kind(domain, self.domain_kinds)
        self._check_domain(domain)

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        raise NotImplementedError

    def _compute_from(
        self, estimate: np.ndarray, truth: np.ndarray, domain: Domain, outputs: Mapping[str, np.ndarray]
    ) -> float:
        """The score of a metric that :attr:`reads` the estimate's outputs (given as ``outputs``)."""
        raise NotImplementedError

    def __call__(
        self,
        estimate: np.ndarray,
        truth: np.ndarray,
        domain: Domain,
        outputs: Mapping[str, Any] | None = None,
    ) -> float:
        """The metric's value for one estimate; ``outputs`` are the estimate's extras (``Estimate.extras``)."""
        estimate = np.asarray(estimate, dtype=float)
        truth = np.asarray(truth, dtype=float)
        size = domain.size
        if estimate.shape != (size,) or truth.shape != (size,):
            raise ValueError(f"metric '{self.name}' needs two vectors of length {size}")
        # checked once per domain, not per call: a sweep scores thousands of estimates on one domain, and the
        # check was a quarter of a call. Remembered by the domain's cached identity, which the domain forgets
        # when it changes, and forgotten here when a parameter is set (``_DERIVED``)
        seen = domain.identity()
        if self.__dict__.get("_checked_domain") is not seen:
            self.check_domain(domain)
            self.__dict__["_checked_domain"] = seen
        if not self.reads:
            return float(self._compute(estimate, truth, domain))
        outputs = outputs or {}
        if any(name not in outputs for name in self.reads):
            return float("nan")  # the estimator does not give what this metric reads
        found = {name: np.asarray(outputs[name], dtype=float) for name in self.reads}
        return float(self._compute_from(estimate, truth, domain, found))

    def _outputs(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> Mapping[str, Any]:
        """Values of the declared :attr:`outputs` for one estimate (default: none)."""
        return {}

    def output_values(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> dict[str, np.ndarray]:
        """Checked :meth:`_outputs`: exactly the declared outputs, as arrays of their dtypes."""
        values = dict(self._outputs(np.asarray(estimate, dtype=float), np.asarray(truth, dtype=float), domain))
        declared = {v.name: v for v in type(self).outputs}
        if set(values) != set(declared):
            raise ValueError(f"metric '{self.name}' returned outputs {sorted(values)}, declared {sorted(declared)}")
        return {name: np.asarray(value, dtype=declared[name].dtype) for name, value in values.items()}
