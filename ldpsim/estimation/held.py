"""Observations held elsewhere, in parts: the likelihood's passes as map-reduce over the parts (issue 31).

A run too large for one process keeps each shard's reports where the shard was drawn (an executor's
worker, see :meth:`ldpsim.Executor.hold`). Nothing the estimators compute needs them together:
``L(theta) = sum_s L_s(theta)``, its gradient and its Hessian are sums over the parts, so a pass is one
``(L_s, gradient_s)`` per part, computed where the part lives, and a sum here: a few kilobytes each way
however many reports. GIBU, SQUAREM and the KKT certificate read the likelihood through exactly these
(:meth:`Likelihood.em_parts`, :meth:`Likelihood.certify`), so they run unchanged on :class:`HeldLikelihood`.
The Newton solver runs on :class:`HeldSolver`: each part keeps its ``H_s x`` for the points the solver
evaluates and forms its own Hessian (from every row, or a sample of them, as the solver would for that part
alone); the solver sums them.

The sums are taken in part order, so the numbers do not depend on where or in what order the parts' work
ran; they differ from the merged likelihood's in the last digits (another order of summation), and the Newton
steps from the merged run's (another sample of rows), not the certified MLE.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..model.domains import Domain
from .engine import Likelihood
from .hessian_rows import RowSample, dense_likelihood, sampled_rows
from .interior_point import Point, Solver
from .observations import Observations

#: points whose ``H_s x`` a part keeps: the solver completes and forms the Hessian at the last one it evaluated
KEPT_POINTS = 3


class Parts(Protocol):
    """Parts held somewhere that a function can be mapped over where they are (:class:`ldpsim.Held`)."""

    def map(self, function: Callable[[Observations, Any], Any], argument: Any) -> list[Any]: ...


def part_sizes(observations: Observations, _: object = None) -> tuple[float, int, float]:
    """One part's users, distinct reports and likelihood constant (``L_s = sum c log (H_s x) + constant``)."""
    if not observations.n:
        return 0.0, 0, 0.0
    return observations.n, observations.n_distinct, Likelihood.of(observations).constant


def part_pass(observations: Observations, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """One part's pass, where the part lives: ``(L_s(theta), dL_s/dtheta)`` of its likelihood (cached there);
    a part without reports (a shard with no chunk) adds nothing."""
    if not observations.n:
        return 0.0, np.zeros(observations.domain.size)
    return Likelihood.of(observations).em_parts(theta)


class _PartNewton:
    """A part's side of :class:`HeldSolver`: its Newton products, and ``H_s x`` at the last points evaluated."""

    def __init__(self, likelihood: Likelihood):
        dense = dense_likelihood(likelihood)
        sample = None if dense is not None else sampled_rows(likelihood, always=True)
        self.solver = None if dense is None and sample is None else Solver(likelihood, dense, None, sample)
        self.points: dict[int, np.ndarray] = {}

    @classmethod
    def of(cls, observations: Observations) -> _PartNewton:
        return observations.derived(_PartNewton, lambda: cls(Likelihood.of(observations)))


def part_newton(observations: Observations, _: object = None) -> tuple[bool, bool]:
    """(whether the part forms a Hessian, whether from every row): what :class:`HeldSolver` asks first."""
    if not observations.n:
        return True, True
    solver = _PartNewton.of(observations).solver
    if solver is None:
        return False, False
    return True, solver.sample is None or solver.sample.every_row


def part_point(observations: Observations, point: tuple[int, np.ndarray]) -> float:
    """``-sum_d c_d log (H_s x)_d`` of the part at ``x``, its ``H_s x`` kept under ``key`` (``point``)."""
    if not observations.n:
        return 0.0
    key, x = point
    part = _PartNewton.of(observations)
    assert part.solver is not None  # asked by part_newton first
    p = part.solver.times(x)
    part.points[key] = p
    for old in sorted(part.points)[:-KEPT_POINTS]:
        del part.points[old]
    with np.errstate(divide="ignore"):
        return -float(np.einsum("d,d->", part.solver.c, np.log(p)))


def part_gradient(observations: Observations, key: int) -> np.ndarray:
    """``H_s^T (c / H_s x)`` at the point kept under ``key``."""
    if not observations.n:
        return np.zeros(observations.domain.size)
    part = _PartNewton.of(observations)
    assert part.solver is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        return part.solver.transpose_times(part.solver.c / part.points[key])


def part_hessian(observations: Observations, key: int) -> np.ndarray:
    """``H_s^T diag(c / (H_s x)^2) H_s`` at the point kept under ``key``, from every row or the part's sample."""
    size = observations.domain.size
    if not observations.n:
        return np.zeros((size, size))
    part = _PartNewton.of(observations)
    assert part.solver is not None
    # the part's solver weighs rows by c / n_s
    return part.solver.hessian(Point(np.empty(0), part.points[key], 0.0)) * part.solver.n


class HeldLikelihood(Likelihood):
    """``L(theta) = sum_s L_s(theta)`` of parts held elsewhere, read through their passes.

    What GIBU and the certificate read of a :class:`~ldpsim.estimation.engine.Likelihood` (``size``, ``n``,
    ``constant``, :meth:`em_parts`, :meth:`certify`; the EM step and the certificate from them), on the whole
    domain. It has no operator ``H`` (the rows are where the parts are): the Newton solver runs on
    ``HeldSolver`` instead.
    """

    def __init__(self, size: int, parts: Parts):  # not Likelihood's: there are no reports here
        sizes = parts.map(part_sizes, None)
        self._size = size
        self.parts = parts
        self.n = float(sum(n for n, _, _ in sizes))
        self.n_distinct = int(sum(d for _, d, _ in sizes))
        self._constant = float(sum(c for _, _, c in sizes))
        self.support = None

    @property
    def size(self) -> int:
        """``|X|``, the number of values."""
        return self._size

    def em_parts(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(L(theta), dL/dtheta): one pass over every part, summed in part order."""
        loglik, grad = 0.0, np.zeros(self.size)
        for part_loglik, part_grad in self.parts.map(part_pass, np.ascontiguousarray(theta, dtype=float)):
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


class HeldSolver(Solver):
    """The Newton solver's products on a :class:`HeldLikelihood`: each a map over its parts and a sum (f, the
    gradient and the Hessian; the rest is :class:`Solver`'s, which forms its systems from :meth:`hessian`).

    ``f(x) = -sum_d w_d log (H x)_d + sum_x x`` sums the parts' ``-sum c log (H_s x)`` (each part keeps its
    ``H_s x``, :data:`KEPT_POINTS` of them, under the point's :attr:`Point.key`), the gradient their
    ``H_s^T (c / H_s x)``, and the Hessian their own, each formed as the solver forms one for that part alone
    (from every row, or a sample of them). Not Solver's constructor: there are no rows here.
    """

    def __init__(self, likelihood: HeldLikelihood, every_row: bool):
        self.lik = self.held = likelihood
        self.device = None
        self.dense = False
        self.named = None
        # the iteration policy asks only whether the Hessian is exact: a sample of every row says it is
        self.sample = RowSample(np.zeros(0, np.int64), np.zeros(0), np.zeros((0, likelihood.size)), every_row)
        self.n = likelihood.n
        self.passes = 0
        self._keys = itertools.count()

    @classmethod
    def of(cls, likelihood: HeldLikelihood) -> HeldSolver | None:
        """The solver, or None when a part forms no Hessian (an operator without rows: SQUAREM instead)."""
        ready = likelihood.parts.map(part_newton, None)
        if not all(formed for formed, _ in ready):
            return None
        return cls(likelihood, all(every for _, every in ready))

    def point(self, x: np.ndarray) -> Point:
        """f at x: one pass over every part, which keeps its ``H_s x``."""
        self.passes += 1
        key = next(self._keys)
        total = 0.0
        for negative in self.held.parts.map(part_point, (key, np.ascontiguousarray(x, dtype=float))):
            total += negative
        f = total / self.n + float(x.sum())
        return Point(x, np.empty(0), f if math.isfinite(f) else math.inf, key=key)

    def gradient_of(self, pt: Point) -> np.ndarray:
        """``H^T (w / p)`` at ``pt``: the parts' ``H_s^T (c / H_s x)`` summed, over n."""
        grad = np.zeros(self.lik.size)
        for part in self.held.parts.map(part_gradient, pt.key):
            grad += part
        return grad / self.n

    def hessian(self, pt: Point) -> np.ndarray:
        """B at ``pt``: the parts' Hessians summed, over n."""
        hess = np.zeros((self.lik.size, self.lik.size))
        for part in self.held.parts.map(part_hessian, pt.key):
            hess += part
        return hess / self.n


class HeldObservations(Observations):
    """Observations whose reports are held elsewhere, in parts; only their likelihood's sums come here.

    Estimators that read the observations through ``Likelihood.of(observations)`` alone (declared by
    :meth:`ldpsim.Estimator.reads_passes`) estimate from them as from merged observations; they have no
    groups here (``groups`` is empty), no likely subset, and ``n_distinct`` is the parts' distinct
    reports summed (a report sent in two parts counts twice).

    Parameters
    ----------
    domain
        The domain of the values.
    parts
        Each part's :class:`~ldpsim.Observations`, where it is (:class:`ldpsim.Held` of them): asked their sizes
        here, then a map over them for every pass.
    """

    def __init__(self, domain: Domain, parts: Parts):
        super().__init__(domain, [])
        self._held = HeldLikelihood(domain.size, parts)
        self.__dict__["n"] = self._held.n  # the cached property's slot: the parts' users

    @property
    def n_distinct(self) -> int:
        """The parts' distinct reports, summed."""
        return self._held.n_distinct

    def likely_subset(self) -> np.ndarray | None:
        """None: a likely subset is a function of the reports, which are not here."""
        return None

    def held_likelihood(self, support: np.ndarray | None = None) -> HeldLikelihood:
        """The likelihood of the parts (on the whole domain: ``support`` must be None)."""
        if support is not None:
            raise ValueError("held observations have no likelihood on a subset of the domain")
        return self._held

    def __repr__(self) -> str:
        return f"HeldObservations(n={self.n}, distinct={self.n_distinct})"
