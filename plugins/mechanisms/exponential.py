"""The exponential mechanism with the domain's distance."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ldpsim import Mechanism, Param, Privacy, hookimpl


class Exponential(Mechanism):
    """Exponential mechanism: P(z|x) ~ e^(-eps d(x,z) / 2) over the domain's values (001 Sec. IX-C, 004 Sec. 7.3)."""

    name = "exponential"
    #: the factor 1/2 buys the guarantee: two rows' normalizers differ by at most e^(eps d / 2), so the
    #: matrix's exact level lies in [eps/2, eps] (eps/2 when all normalizers are equal, e.g. categorical)
    tight_privacy = False
    eps = Param("float", gt=0, doc="eps per unit of the domain's distance: eps-geo-indistinguishable (d-privacy)")

    @property
    def privacy(self) -> Privacy:
        return Privacy("geo", self.eps)

    def _matrix(self) -> np.ndarray:
        # Normalized in log space: the largest weight of a row is e^0 (z = x), so the normalizer is >= 1 and
        # nothing overflows; only weights below ~1e-308 underflow.
        log_w = -0.5 * self.eps * self.domain.distances
        return np.exp(log_w - logsumexp(log_w, axis=1, keepdims=True))


@hookimpl
def register_mechanisms(register):
    register(Exponential)
