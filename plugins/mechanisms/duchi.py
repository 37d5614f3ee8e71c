"""Duchi et al.'s one-bit mechanism for a numeric value (Duchi, Jordan & Wainwright, JASA 2018; as stated by
Wang et al., ICDE 2019, Algorithm 1).

A value t in [-1, 1] is reported as +B or -B, ``B = (e^eps + 1) / (e^eps - 1)``, with
``P(+B | t) = 1/2 + t (e^eps - 1) / (2 (e^eps + 1)) = 1/2 + t / (2B)``, so ``E[y | t] = t``: the
average report is an unbiased mean. The two probabilities range from ``1 / (e^eps + 1)`` to
``e^eps / (e^eps + 1)`` between t = -1 and t = 1, a ratio of exactly e^eps (the domain's ends map
to -1 and 1): eps-LDP, tight. Two outputs cannot tell apart more than two values' distributions:
on a domain of more than two values GIBU's MLE is not unique and matrix inversion is biased; the
mean is what this mechanism estimates.
"""

from __future__ import annotations

import math

import numpy as np

from ldpsim import NumericMechanism, Param, Privacy, hookimpl


class Duchi(NumericMechanism):
    """Duchi et al.'s one-bit mechanism: +-(e^eps+1)/(e^eps-1), the sign likelier toward the value mapped to [-1, 1]."""

    name = "duchi"
    eps = Param("float", gt=0, le=20, doc="privacy level: the mechanism is eps-LDP")

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def bound(self) -> float:
        """B = (e^eps + 1) / (e^eps - 1), the reports' magnitude (expm1: no cancellation at small eps)."""
        return (math.exp(self.eps) + 1) / math.expm1(self.eps)

    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        atoms = np.array([-self.bound, self.bound])
        return atoms, atoms.copy()

    def _matrix(self) -> np.ndarray:
        up = 0.5 + self.inputs / (2 * self.bound)
        return np.column_stack([1 - up, up])

    def density(self, y: np.ndarray) -> np.ndarray:
        """P(y | t) for y = +-B (0 elsewhere), from the paper's Bernoulli."""
        y = np.asarray(y, dtype=float)[:, None]
        e = math.exp(self.eps)
        up = (e - 1) / (2 * e + 2) * self.inputs[None, :] + 0.5
        return np.where(y == self.bound, up, np.where(y == -self.bound, 1 - up, 0.0))

    def report_variance(self) -> np.ndarray:
        """Var[y | t] = B^2 - t^2 for each value (Wang et al. 2019, Lemma 1), in units of t."""
        return self.bound**2 - self.inputs**2


@hookimpl
def register_mechanisms(register):
    register(Duchi)
