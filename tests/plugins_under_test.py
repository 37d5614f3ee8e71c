"""Deliberately broken mechanisms: the contract kit must catch them."""

from __future__ import annotations

import numpy as np

from ldpsim import Privacy, get_registry, hookimpl

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


OUE = get_registry().get("mechanism", "oue").cls


class DoublyPerturbedOUE(OUE):
    """OUE whose client perturbs the true bit twice: the pure-LDP #11 bug.

    The client keeps its true bit with probability p, then runs the
    perturbation meant for the 0 bits over the whole vector, true bit included:
    the true bit is 1 with probability p + (1 - p) q instead of p. Its matrix,
    likelihood and declared eps are OUE's (right); only the sampler is wrong,
    and less private than declared (eps 1.29 instead of 0.5, 1.55 instead of 1).
    """

    name = "doubly-perturbed-oue"

    def _sample(self, values, rng):
        k, n = self.domain.size, values.shape[0]
        kept = rng.random(n) < self.p
        bits = rng.random((n, k)) < self.q  # meant for the 0 bits, applied to all of them
        bits[np.arange(n), values] |= kept
        return self.pack_bits(bits)


@hookimpl
def register_mechanisms(register):
    register(BiasedKRR)
    register(OverclaimingKRR)
    register(DoublyPerturbedOUE)
