"""A third-party mechanism plugin: one small file plus an entry point."""

import numpy as np

from ldpsim import Mechanism, Param, Privacy, hookimpl


class Neighbour(Mechanism):
    """Report the true value, or with probability p one of its two neighbours (clamped at the ends)."""

    name = "neighbour"
    domain_kinds = ("integers",)
    p = Param("float", 0.5, ge=0, le=1, doc="probability of moving to a neighbour")

    @property
    def privacy(self):
        return Privacy("none", float("inf"))  # zeros in the matrix: no LDP guarantee

    def _matrix(self):
        k = self.domain.size
        m = np.zeros((k, k))
        for step, weight in ((-1, self.p / 2), (0, 1 - self.p), (1, self.p / 2)):
            np.add.at(m, (np.arange(k), np.clip(np.arange(k) + step, 0, k - 1)), weight)
        return m


@hookimpl
def register_mechanisms(register):
    register(Neighbour)
