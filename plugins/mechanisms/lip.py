"""Prior-aware randomized response for localized information privacy (LIP, 002).

002 Definition 3: a mechanism is eps-LIP under the prior P if, for every x in the
prior's support and every output y, e^-eps <= P(Y=y) / P(Y=y|X=x) <= e^eps (eq. 5).

With a = e^-eps, 002 Theorems 2 and 3 give the MSE-optimal matrix

    q_mk = P(Y=k|X=m) = a P_k  (m != k),      q_mm = 1 - (1 - P_m) a,

that is A = (1 - a) I + a 1 P^T: report the true value with probability 1 - e^-eps, else a
fresh draw from the prior. So the output marginal is the prior (lambda_k = P_k), the
constraints with m != k hold with equality (P_k / q_mk = e^eps), and A is invertible
(eigenvalues 1 - a and 1) whatever the prior. The constraint with m = k is NOT automatic:
P_k / q_kk >= e^-eps iff P_k >= 1 / (1 + e^eps). Below that threshold the closed form is
only L-LIP with L = log((1 - a) / P_min + a) > eps (the ratio falls with P_k, so the
smallest positive prior entry P_min decides). For a prior with s positive entries some
P_k <= 1/s, so no such prior qualifies unless e^eps >= s - 1. The exact levels, for a
prior with at least two positive entries (LDP: with no zero entry, see below):

    LIP  L   = max(eps, log((1 - a) / P_min + a))
    LDP      = log(1 + (e^eps - 1) / P_min) = eps + log(q_kk / P_k) at P_min  (<= 2 L: 002 Theorem 1)

A point-mass prior is 0-LIP: under it X is known and Y = X.

Values with zero prior keep the theorem's row ((1 - a) e_k + a P). Definition 3 is 0/0
for them and :func:`ldpsim.lip_level` ignores them (and outputs of zero marginal): LIP
under the prior says nothing about a user whose value the prior rules out, and such a user
is exposed (output k comes from no other value, so the LDP level is infinite). Replacing
the row by the prior would hide them but make A singular: estimators could no longer tell
such users from the others, and GIBU and INV fail even when the prior is right (a uniform
prior on 4 of 10 values at eps = 2: TV 0.6 instead of 0.003). If some users may hold a
value, give it positive prior mass.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ldpsim import Mechanism, Param, ParameterError, Privacy, hookimpl

#: relative slack when comparing the matrix's level with eps (rounding at the boundary P_min = 1/(1+e^eps))
LEVEL_RTOL = 1e-9


class LIP(Mechanism):
    """Optimal eps-LIP randomized response under a prior (002 Theorem 3): q_mm = 1-(1-P_m)e^-eps, q_mk = P_k e^-eps."""

    name = "lip"
    #: where the closed form comes from, for messages
    theorem: ClassVar[str] = "Theorem 3"
    eps = Param(
        "float", gt=0, doc="privacy level: eps-LIP under the prior (2eps-LDP if no prior entry is 0, 002 Theorem 1)"
    )
    prior = Param(
        ("distribution", "str"),
        choices=("dataset",),
        doc="the users' prior over the domain, or \"dataset\" (a scenario uses the dataset's distribution)",
    )
    strict = Param(
        "bool",
        True,
        doc="refuse a prior under which the closed form is not eps-LIP (some positive P_k < 1/(1+e^eps)); "
        "false builds it and declares the level it has",
    )

    def _validate(self) -> None:
        if isinstance(self.prior, str):
            raise ParameterError(
                'is "dataset", which only a scenario can resolve (to the dataset\'s distribution)',
                field="prior",
                hint="give the prior as a list of numbers, one per domain value",
            )
        if self.prior.size != self.domain.size:
            raise ParameterError(
                f"has {self.prior.size} entries, the domain has {self.domain.size} values",
                field="prior",
                hint="give one prior probability per domain value, in domain order",
            )
        level = self.lip_level
        if self.strict and level > self.eps * (1 + LEVEL_RTOL):
            raise ParameterError(self._refusal(level), field="prior", hint=self._fix(level))

    # ------------------------------------------------------------ closed forms
    @property
    def support(self) -> np.ndarray:
        """Mask of the values with positive prior."""
        return np.asarray(self.prior) > 0

    @property
    def _p_min(self) -> float:
        return float(np.asarray(self.prior)[self.support].min())

    @property
    def _diagonal_gap(self) -> float:
        """max over the support of log(q_kk / P_k): the LIP ratio with m = k (largest at P_min)."""
        a = math.exp(-self.eps)
        return math.log(-math.expm1(-self.eps) / self._p_min + a)

    @property
    def lip_level(self) -> float:
        """The exact LIP level of the matrix under its prior (what :func:`ldpsim.lip_level` computes)."""
        if self.support.sum() < 2:
            return 0.0  # a point mass: X is known a priori and reports it, Y = X; nothing is learned
        return max(self.eps, self._diagonal_gap)

    @property
    def ldp_level(self) -> float:
        """The exact LDP level of the matrix: eps + log(q_kk / P_k) at P_min (<= 2 * lip_level); inf if a value has
        zero prior (its output comes from no other value)."""
        if not self.support.all():
            return math.inf
        return self.eps + self._diagonal_gap

    @property
    def privacy(self) -> Privacy:
        return Privacy("lip", self.lip_level, tuple(float(p) for p in self.prior))

    def _matrix(self) -> np.ndarray:
        prior = np.asarray(self.prior, dtype=float)
        a = math.exp(-self.eps)
        m = np.tile(a * prior, (prior.size, 1))
        # q_mm = (1 - a) + a P_m: expm1 keeps it accurate when eps is tiny
        np.fill_diagonal(m, -math.expm1(-self.eps) + a * prior)
        return m

    # --------------------------------------------------------------- messages
    def _refusal(self, level: float) -> str:
        p_min = self._p_min
        k = int(np.flatnonzero(np.asarray(self.prior) == p_min)[0])
        label = self.domain.labels()[k]
        threshold = 1 / (1 + math.exp(self.eps))
        return (
            f"the closed form of 002 {self.theorem} is not {self.eps:g}-LIP under this prior: value {label} has prior "
            f"{p_min:.4g} < 1/(1+e^eps) = {threshold:.4g}, so P(Y={label})/P(Y={label}|X={label}) = "
            f"{math.exp(-self._diagonal_gap):.4g} < e^-eps = {math.exp(-self.eps):.4g} (the matrix is {level:.4g}-LIP)"
        )

    def _fix(self, level: float) -> str:
        p_min = self._p_min
        s = int(self.support.sum())
        min_eps = math.log((1 - p_min) / p_min)
        threshold = 1 / (1 + math.exp(self.eps))
        if s * threshold <= 1:
            prior_fix = f"a less skewed prior with every positive entry >= {threshold:.4g}"
        else:
            floor = math.log(s - 1)
            prior_fix = f"a prior with fewer positive entries (with {s} of them none qualifies below eps = {floor:.4g})"
        return f"use eps >= {min_eps:.4g}, {prior_fix}, or strict = false to accept the {level:.4g}-LIP matrix"


class BinaryLIP(LIP):
    """Optimal binary eps-LIP (002 Theorem 2, Prop. 3): q0 = P(Y=1|X=0) = P1 e^-eps, q1 = P(Y=0|X=1) = (1-P1) e^-eps."""

    name = "lip-binary"
    theorem = "Theorem 2"

    def _validate(self) -> None:
        if self.domain.size != 2:
            raise ParameterError(
                f"needs a domain of exactly 2 values (0 and 1), got {self.domain.size}",
                field="domain",
                hint='use e.g. integers 0..1, or mechanism "lip" for larger domains',
            )
        super()._validate()

    @property
    def q0(self) -> float:
        """P(Y=1 | X=0) (eq. 15)."""
        m = self.matrix
        assert m is not None  # finitely many outputs: never None
        return float(m[0, 1])

    @property
    def q1(self) -> float:
        """P(Y=0 | X=1) (eq. 15)."""
        m = self.matrix
        assert m is not None  # finitely many outputs: never None
        return float(m[1, 0])


@hookimpl
def register_mechanisms(register):
    register(LIP)
    register(BinaryLIP)
