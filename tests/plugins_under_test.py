"""Deliberately broken mechanisms: the contract kit must catch them."""

from __future__ import annotations

import numpy as np

from ldpsim import Privacy, get_registry

KRR = get_registry().get("mechanism", "krr").cls


class BiasedKRR(KRR):
    """k-RR whose sampler keeps the true value a bit too often."""

    name = "biased-krr"

    def _sample(self, values, rng):
        keep = rng.random(values.shape[0]) < self._keep + 0.02
        other = (values + 1 + rng.integers(0, self.domain.size - 1, size=values.shape[0])) % self.domain.size
        return np.where(keep, values, other)[:, None]


class OverclaimingKRR(KRR):
    """k-RR that claims more privacy than it gives."""

    name = "overclaiming-krr"

    @property
    def privacy(self):
        return Privacy("ldp", self.eps / 2)
