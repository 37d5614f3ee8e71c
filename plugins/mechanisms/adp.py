"""ADP, the adaptive frequency oracle (Wang, Blocki, Li & Jha, USENIX Security 2017, Sec. 4.4).

Of k-RR (GRR) and OUE, use the one whose unbiased estimate has the lower variance for
the domain's size k and eps. Their per-user variances near theta_x = 0 are
``(k - 2 + e^eps) / (e^eps - 1)^2`` (GRR) and ``4 e^eps / (e^eps - 1)^2`` (OUE), so
ADP picks GRR when ``k < 3 e^eps + 2`` and OUE otherwise (e.g. at eps = 1, GRR up to
k = 10 and OUE from k = 11; at eps = 3, GRR up to k = 62).

An ``adp`` instance delegates every hook to the chosen mechanism, created through
the registry (``krr`` or ``oue``): its reports, likelihood (exact, so GIBU is the MLE),
matrix, unbiased estimate and privacy are that mechanism's; :attr:`ADP.chosen` names it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ldpsim import Mechanism, Param, Privacy, get_registry, hookimpl


def adp_choice(k: int, eps: float) -> str:
    """``"krr"`` if k < 3 e^eps + 2 (GRR's variance is the lower), else ``"oue"``."""
    return "krr" if k < 3.0 * math.exp(min(eps, 700.0)) + 2.0 else "oue"


class ADP(Mechanism):
    """ADP (Wang, Blocki, Li & Jha 2017): k-RR if k < 3 e^eps + 2, else OUE, whichever estimates with less variance."""

    name = "adp"
    # OUE's likelihood operator needs e^-eps to stay a normal float
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")

    def _validate(self) -> None:
        #: the mechanism ADP delegates to
        self.inner: Mechanism = get_registry().create(
            "mechanism", adp_choice(self.domain.size, self.eps), self.domain, eps=self.eps
        )
        # instance attributes shadow the class defaults: they are the chosen mechanism's
        self.report_width = self.inner.report_width
        self.structured_min_size = self.inner.structured_min_size

    @property
    def chosen(self) -> str:
        """Name of the mechanism this instance delegates to: ``"krr"`` or ``"oue"``."""
        return self.inner.name

    @property
    def privacy(self) -> Privacy:
        return self.inner.privacy

    def output_labels(self) -> list[str] | None:
        """The chosen mechanism's output labels."""
        return self.inner.output_labels()

    # Every hook is the chosen mechanism's checked public method (a capability it lacks returns None).
    def _matrix(self) -> np.ndarray | None:
        return self.inner.matrix

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.inner.sample(values, rng)

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        return self.inner.log_likelihood(reports)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        return self.inner.structured_likelihood(reports)

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        return self.inner.unbiased_estimate(reports, counts)

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        return self.inner.likely_subset(reports)

    def _output_count(self) -> int | None:
        return self.inner.output_count()

    def _named_value_likelihood(self) -> tuple[float, float] | None:
        return self.inner.named_value_likelihood()

    def _log_matrix(self) -> np.ndarray | None:
        return self.inner.log_matrix if self.inner.capabilities.log_matrix else None

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        return self.inner.estimate_variance(theta)


@hookimpl
def register_mechanisms(register):
    register(ADP)
