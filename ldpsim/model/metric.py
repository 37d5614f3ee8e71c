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
    #: domain kinds the metric works on; None means any
    domain_kinds: ClassVar[tuple[str, ...] | None] = None
    #: unit of the metric's values, shown on plot axes; "distance" means the domain's distance
    #: unit (a grid's ``unit``, e.g. km), "" means unitless
    units: ClassVar[str] = ""
    #: extra result variables this metric gives per estimate (``source="metric"``, dims starting
    #: with ``"estimator"``), computed by :meth:`_outputs`; its main value is the results' ``error``
    outputs: ClassVar[tuple[Variable, ...]] = ()

    def _check_domain(self, domain: Domain) -> None:
        """Further checks of the domain against the parameters; raise ParameterError."""

    def check_domain(self, domain: Domain) -> None:
        """Raise ParameterError if the metric cannot score distributions over ``domain``."""
        self._require_domain_kind(domain, self.domain_kinds)
        self._check_domain(domain)

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        raise NotImplementedError

    def __call__(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        estimate = np.asarray(estimate, dtype=float)
        truth = np.asarray(truth, dtype=float)
        if estimate.shape != (domain.size,) or truth.shape != (domain.size,):
            raise ValueError(f"metric '{self.name}' needs two vectors of length {domain.size}")
        self.check_domain(domain)
        return float(self._compute(estimate, truth, domain))

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
