"""The Hybrid Mechanism (Wang et al., ICDE 2019, Sec. III-C): the Piecewise Mechanism with probability
``beta``, else Duchi et al.'s one-bit mechanism, both at eps.

``beta = 1 - e^(-eps/2)`` for ``eps > eps*`` and 0 below, ``eps* = log((-5 + 2 (6353 - 405 sqrt 241)^(1/3)
+ 2 (6353 + 405 sqrt 241)^(1/3)) / 27) ~ 0.61``: the mix with the smallest worst-case variance
(their Lemma 4). Both parts are unbiased, so the report is. The one-bit mechanism's two
reports +-B are atoms (the Piecewise part reports them with probability 0): the outputs are the
two atoms and the Piecewise cells (``ldpsim.model.numeric``), each with its probability under
the mix. Each part's ratio is at most e^eps and reaches it, and mixing with fixed weights
keeps it: eps-LDP, tight.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ldpsim import NumericMechanism, Param, Privacy, band_cells, band_matrix, hookimpl, piecewise_bands

#: below this eps the Hybrid Mechanism is the one-bit mechanism alone (Wang et al. 2019, Lemma 4)
EPS_STAR = math.log(
    (-5 + 2 * (6353 - 405 * math.sqrt(241)) ** (1 / 3) + 2 * (6353 + 405 * math.sqrt(241)) ** (1 / 3)) / 27
)


class Hybrid(NumericMechanism):
    """Hybrid Mechanism (Wang et al., ICDE 2019): Piecewise w.p. 1 - e^(-eps/2) (eps > 0.61), else Duchi et al.'s."""

    name = "hybrid"
    eps = Param("float", gt=0, le=20, doc="privacy level: the mechanism is eps-LDP")

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def beta(self) -> float:
        """The Piecewise Mechanism's share: 1 - e^(-eps/2) above eps* ~ 0.61, else 0."""
        return -math.expm1(-self.eps / 2) if self.eps > EPS_STAR else 0.0

    @property
    def bound(self) -> float:
        """B = (e^eps + 1) / (e^eps - 1): the one-bit mechanism's reports are +-B."""
        return (math.exp(self.eps) + 1) / math.expm1(self.eps)

    @cached_property
    def _piecewise(self) -> tuple[float, np.ndarray, np.ndarray, float, float]:
        return piecewise_bands(self.eps, self.inputs)

    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        atoms = np.array([-self.bound, self.bound])
        if self.beta == 0:
            return atoms, atoms.copy()
        c, low, high, _, _ = self._piecewise
        left, right = band_cells(-c, c, low, high)
        return np.concatenate([atoms, left]), np.concatenate([atoms, right])

    def _matrix(self) -> np.ndarray:
        up = 0.5 + self.inputs / (2 * self.bound)
        bit = (1 - self.beta) * np.column_stack([1 - up, up])
        if self.beta == 0:
            return bit
        _, low, high, p, q = self._piecewise
        left, right = self.outputs
        return np.hstack([bit, self.beta * band_matrix(left[2:], right[2:], low, high, p, q)])

    def density(self, y: np.ndarray) -> np.ndarray:
        """The mix's density of y (against Lebesgue measure plus the two atoms), from the papers' formulas."""
        y = np.asarray(y, dtype=float)[:, None]
        t = self.inputs[None, :]
        e, e2 = math.exp(self.eps), math.exp(self.eps / 2)
        b = (e + 1) / (e - 1)
        up = (e - 1) / (2 * e + 2) * t + 0.5
        bit = np.where(y == b, up, np.where(y == -b, 1 - up, 0.0))
        c = (e2 + 1) / (e2 - 1)
        low = (c + 1) / 2 * t - (c - 1) / 2
        p = (e - e2) / (2 * e2 + 2)
        piece = np.where(np.abs(y) <= c, np.where((low <= y) & (y <= low + c - 1), p, p / e), 0.0)
        return np.where(np.abs(y) == b, (1 - self.beta) * bit, self.beta * piece)


@hookimpl
def register_mechanisms(register):
    register(Hybrid)
