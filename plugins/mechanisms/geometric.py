"""The truncated linear geometric mechanism."""

from __future__ import annotations

import math

import numpy as np

from ldpsim import Mechanism, Param, Privacy, hookimpl


class Geometric(Mechanism):
    """Truncated geometric: two-sided geometric noise, clamped to the range (001 eqs. 22-23)."""

    name = "geometric"
    domain_kinds = ("integers",)
    eps = Param("float", gt=0, doc="eps per unit of distance: eps-geo-indistinguishable (d-privacy)")

    @property
    def privacy(self) -> Privacy:
        return Privacy("geo", self.eps)

    @property
    def _alpha(self) -> float:
        """Ratio of probabilities of neighbouring outputs: exp(-eps * step)."""
        return math.exp(-self.eps * self.domain.step)

    def _matrix(self) -> np.ndarray:
        # P(z|x) = c_z alpha^|z-x|, c_z = 1/(1+alpha) at both ends, (1-alpha)/(1+alpha) inside:
        # the untruncated mechanism with all mass beyond an end moved onto it.
        k = self.domain.size
        alpha = self._alpha
        idx = np.arange(k)
        m = alpha ** np.abs(idx[:, None] - idx[None, :]) * ((1 - alpha) / (1 + alpha))
        m[:, [0, -1]] /= 1 - alpha
        return m

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray:
        # 004 Prop. 8.2: P(z|x) decreases with |z - x|, so values beyond the extreme
        # reports are beaten on every report by the extreme reported value.
        mask = np.zeros(self.domain.size, dtype=bool)
        mask[reports[:, 0].min() : reports[:, 0].max() + 1] = True
        return mask

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # The difference of two iid Geometric(1 - alpha) variables is two-sided geometric.
        p = 1.0 - self._alpha
        n = values.shape[0]
        noise = rng.geometric(p, size=n) - rng.geometric(p, size=n)
        return np.clip(values + noise, 0, self.domain.size - 1)[:, None]


@hookimpl
def register_mechanisms(register):
    register(Geometric)
