"""Observations held elsewhere, in parts: the likelihood's passes as map-reduce over the parts (issue 31).

A run too large for one process keeps each shard's reports where the shard was drawn (an executor's
worker, see :meth:`ldpsim.Executor.hold`). Nothing but the likelihood's passes ever needs them together:
``L(theta) = sum_s L_s(theta)`` and ``dL/dtheta = sum_s dL_s/dtheta`` over the parts, so a pass is one
``(L_s, gradient_s)`` per part, computed where the part lives, and a sum here: a few kilobytes each way
however many reports. GIBU, SQUAREM and the KKT certificate read the likelihood through exactly these
(:meth:`Likelihood.em_parts`, :meth:`Likelihood.certify`), so they run unchanged on
:class:`HeldLikelihood`; the Newton solver, which forms Hessians from the rows, falls back to SQUAREM on it
(the same MLE, certified to the same tolerance).

The sums are taken in part order, so the numbers do not depend on where or in what order the parts'
passes ran; they differ from the merged likelihood's in the last digits (another order of summation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ..model.domains import Domain
from .engine import Likelihood
from .observations import Observations

#: a pass over every part: ``(L_s(theta), dL_s/dtheta)`` for each part, in part order
Passes = Callable[[np.ndarray], Sequence[tuple[float, np.ndarray]]]


class Parts(Protocol):
    """Parts held somewhere that a function can be mapped over where they are (:class:`ldpsim.Held`)."""

    def map(self, function: Callable[[Observations, Any], Any], argument: Any) -> list[Any]: ...


def part_pass(observations: Observations, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """One part's pass, where the part lives: ``(L_s(theta), dL_s/dtheta)`` of its likelihood (cached there);
    a part without reports (a shard with no chunk) adds nothing."""
    if not observations.n:
        return 0.0, np.zeros(observations.domain.size)
    return Likelihood.of(observations).em_parts(theta)


def part_sizes(observations: Observations, _: object = None) -> tuple[float, int]:
    """One part's users and distinct reports, where the part lives."""
    return observations.n, observations.n_distinct


class HeldLikelihood(Likelihood):
    """``L(theta) = sum_s L_s(theta)`` of parts held elsewhere, read through their passes.

    What GIBU and the certificate read of a :class:`~ldpsim.estimation.engine.Likelihood` (``size``, ``n``,
    :meth:`em_parts`, :meth:`certify`; the EM step and the certificate from them), on the whole domain. It has no operator ``H``
    (the rows are where the parts are): solvers that read rows must not be given one (``newton_mle``
    falls back to SQUAREM).
    """

    def __init__(self, size: int, n: float, passes: Passes):  # not Likelihood's: there are no reports here
        self._size = size
        self.n = n
        self.support = None
        self._passes = passes

    @property
    def size(self) -> int:
        """``|X|``, the number of values."""
        return self._size

    @property
    def constant(self) -> float:
        """0: each part's :meth:`em_parts` includes its own."""
        return 0.0

    def em_parts(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(L(theta), dL/dtheta): one pass over every part, summed in part order."""
        loglik, grad = 0.0, np.zeros(self.size)
        for part_loglik, part_grad in self._passes(np.ascontiguousarray(theta, dtype=float)):
            loglik += part_loglik
            grad += part_grad
        return loglik, grad

    def loglik(self, theta: np.ndarray) -> float:
        """L(theta) (one pass)."""
        return self.em_parts(theta)[0]

    def gradient(self, theta: np.ndarray) -> np.ndarray:
        """dL/dtheta (one pass)."""
        return self.em_parts(theta)[1]

    def certify(self, theta: np.ndarray) -> tuple[float, float, float]:
        """(L(theta), relative KKT violation, gap bound) of any distribution: one pass."""
        loglik, grad = self.em_parts(theta)
        return (loglik, *self.certificate(grad)) if loglik > -math.inf else (loglik, math.inf, math.inf)


class HeldObservations(Observations):
    """Observations whose reports are held elsewhere, in parts; only their likelihood's passes come here.

    Estimators that read the observations through ``Likelihood.of(observations)`` alone (declared by
    :meth:`ldpsim.Estimator.reads_passes`) estimate from them as from merged observations; they have no
    groups here (``groups`` is empty), no likely subset, and ``n_distinct`` is the parts' distinct
    reports summed (a report sent in two parts counts twice).

    Parameters
    ----------
    domain
        The domain of the values.
    sizes
        Each part's ``(users, distinct reports)``, in part order.
    passes
        One pass over every part (``part_pass`` of each, in part order).
    """

    def __init__(self, domain: Domain, sizes: Sequence[tuple[float, int]], passes: Passes):
        super().__init__(domain, [])
        self._sizes = tuple(sizes)
        self._held = HeldLikelihood(domain.size, float(sum(n for n, _ in self._sizes)), passes)
        self.__dict__["n"] = sum(n for n, _ in self._sizes)  # the cached property's slot: the parts' users

    @property
    def n_distinct(self) -> int:
        """The parts' distinct reports, summed."""
        return int(sum(d for _, d in self._sizes))

    @property
    def parts(self) -> int:
        """How many parts hold the reports."""
        return len(self._sizes)

    def likely_subset(self) -> np.ndarray | None:
        """None: a likely subset is a function of the reports, which are not here."""
        return None

    def held_likelihood(self, support: np.ndarray | None = None) -> HeldLikelihood:
        """The likelihood of the parts, read through their passes (on the whole domain: ``support`` must be None)."""
        if support is not None:
            raise ValueError("held observations have no likelihood on a subset of the domain")
        return self._held

    @classmethod
    def over(cls, domain: Domain, parts: Parts) -> HeldObservations:
        """The held observations of ``parts`` (each one's :class:`~ldpsim.Observations`, where it is): their
        sizes asked once, then each pass one map of ``part_pass``."""
        return cls(domain, parts.map(part_sizes, None), lambda theta: parts.map(part_pass, theta))

    def __repr__(self) -> str:
        return f"HeldObservations(n={self.n}, distinct={self.n_distinct}, parts={self.parts})"
