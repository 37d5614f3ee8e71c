"""The exact MLE on a large domain whose MLE has a small support: sequential quadratic programming on an active set.

Where the operator reads a few of its columns cheaply (a convolution on a 64 x 64 grid or larger) and no Hessian
over the whole domain is affordable, :func:`~ldpsim.estimation.newton.newton_mle` hands over to
:func:`active_set_mle`: each step minimizes the quadratic model over the values x >= 0 of an active set S, the
MLE's likely support (:func:`~ldpsim.estimation.nonnegative_qp.nonnegative_qp`), with the Hessian over S kept up to
date (:class:`_ActiveHessian`), and the iterations are certified on the whole domain.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .engine import EMResult, Likelihood, gibu
from .interior_point import Solver, backtrack, full_support
from .nonnegative_qp import nonnegative_qp

if TYPE_CHECKING:
    from .backend import Backend

#: a Hessian over the active set's values costs at most this many multiply-adds (D |S|^2 in single precision:
#: about a second and a half on one core; the MLE of a 256 x 256 grid at eps = 0.25, n = 10^6 keeps 2,415 values,
#: which 1e11 (1,745 at its D) could not hold) ...
ACTIVE_MAX_FLOPS = 2e11
#: ... it starts, after :data:`~ldpsim.estimation.newton.ACTIVE_WARM_PASSES` SQUAREM passes, with the values whose
#: mass exceeds this multiple of the uniform's and whose KKT condition does not push them down (gradient >= 1) ...
ACTIVE_THRESHOLD = 1.0
#: ... thinned to this fraction of what the Hessian's budget holds (the first step keeps about 40 % of them
#: whatever their number, and its cost grows with their cube: the 256 x 256 grid at eps = 0.25, n = 10^6, took
#: 48.6 s from the whole budget, 41.3 s from half of it and 42.0 s from 30 %) ...
ACTIVE_START = 0.5
#: ... takes at most this many steps (each one Hessian over the active set), and hands over to SQUAREM when L has
#: not risen for :data:`ACTIVE_STALL` of them, or when the KKT violation, falling at its fastest mean rate over
#: :data:`ACTIVE_RATE_STEPS` steps, would need more steps than that: the support is then too large for the budget
#: or the start far from it (a 128 x 128 grid at eps = 1: KKT 2.8e9 at the start, halving per step, where SQUAREM
#: certifies in 12 s; the 256 x 256 grid's at eps = 0.25 fell from 244 by half per step, more slowly while S was
#: full, then fast: 20 steps, 17 since newcomers come one per neighbourhood, 20 with fewer of them per step). The
#: first steps' KKT need not fall at all (the start is a thinned warm start).
ACTIVE_MAX_STEPS, ACTIVE_STALL, ACTIVE_RATE_STEPS = 40, 3, 3
#: newcomers to the active set are first the values that violate their KKT condition most within this many cells
#: along each axis of a grid (:func:`_newcomers`; 1 took 11 steps on a 128 x 128 grid at eps = 0.25, 2 took 11 with a
#: lower KKT at the end)
ACTIVE_SPREAD = 2
#: at most this fraction of the values the active set keeps join it per step (at least 64). Few newcomers keep S
#: and its subproblems small, and its positive values a good guess of the subproblem's
#: (:data:`QP_GUESS_NEWCOMERS`). On the 256 x 256 grid at eps = 0.25, n = 10^6: 0.5 took 17 steps, S at the
#: budget from the 7th, 23-25 s; 0.3 took 18, 22 s; 0.15 20 steps, 15-16 s, never at the budget until the 16th;
#: 0.1 25 steps, 14 s (nearer the step cap)
ACTIVE_NEWCOMERS = 0.15
#: once S holds the budget's values and others still violate their KKT condition, the budget grows by this factor,
#: up to ACTIVE_MAX_GROWTH times its start (a 256 x 256 draw whose MLE has more positive values than 2,469: S full
#: from step 15, the KKT violation stuck at 9.4e-6, and SQUAREM from there or the warm start crawling)
ACTIVE_GROWTH, ACTIVE_MAX_GROWTH = 1.25, 2.0
#: the active set's Hessian brings a report's weight up to date when it moved by more than this factor
#: (:class:`_ActiveHessian`). On the 256 x 256 grid at eps = 0.25, n = 10^6: 0.05 took 16 steps, 29.3-30.3 s,
#: of which 4.8 s updating 112,424 weights; 0.2 one step more, 27.8-28.1 s; 128 x 128: 4.4 s and 4.2 s
ACTIVE_REWEIGHT = 0.2
#: the subproblem is first given a guess of its positive values (:data:`~ldpsim.estimation.nonnegative_qp.QP_GUESSES`)
#: when the newcomers are at most this fraction of the values kept. On the 256 x 256 grid at eps = 0.25, n = 10^6 with
#: half as many newcomers as values kept, the last 7 of 17 steps had under 15 %, and the guesses reached the solution
#: within 2-7 factorizations where the interior point took 9-15; with :data:`ACTIVE_NEWCOMERS` at 0.15 they
#: reached it at 18 of 20 steps
QP_GUESS_NEWCOMERS = 0.15


def active_set_mle(
    likelihood: Likelihood,
    passes: Likelihood,
    warm: EMResult,
    tol: float,
    max_iter: int,
    trace: bool,
    backend: Backend | None = None,
) -> EMResult:
    """The exact MLE on a large domain whose MLE has a small support: sequential quadratic programming on an active set.

    At small eps on a large grid the MLE is zero on most values (3,919 of 4,096 on a 64 x 64 grid at
    eps = 0.25; 63,121 of 65,536 on a 256 x 256 one at n = 10^6), and a Hessian over the whole domain
    cannot be formed. As in mixsqp (Kim, Carbonetto, Stephens, Anitescu 2020), each step minimizes the
    quadratic model of f at x over the active set S, subject to x >= 0
    (:func:`nonnegative_qp`), with the Hessian over S kept up to date in single precision from the exact
    columns ``H[:, S]`` (:class:`_ActiveHessian`), then takes the longest step
    towards its solution that Armijo's rule accepts, through the whole operator. The subproblem's solution
    has exact zeros, so the iterates do: a value leaves S when it is zero, and the values whose KKT
    condition fails most (gradient above 1: :meth:`Likelihood.certificate`) join it, one per neighbourhood
    first (:func:`_newcomers`), at most :data:`ACTIVE_NEWCOMERS` as many as S keeps. Only the whole domain's
    certificate ends the iterations, so the result is certified exactly as SQUAREM's would be.

    This replaced restricted interior-point problems solved round after round (each about 13 Hessians,
    with zeros identified only when a final step kept the certificate): one Hessian per step is what a pass
    over the data costs here, and the subproblems' many factorizations are over |S| values alone.

    S starts from the warm start's values with more than :data:`ACTIVE_THRESHOLD` times the uniform's
    mass that EM is not draining, thinned evenly to :data:`ACTIVE_START` of what a Hessian of
    :data:`ACTIVE_MAX_FLOPS` holds (so it still covers every region the data does). When L stops rising
    (:data:`ACTIVE_STALL`), or the KKT violation would need more than :data:`ACTIVE_MAX_STEPS` steps even at
    its fastest rate so far (:func:`_steps_to_tol`: a support too large for the budget), SQUAREM continues from
    the warm start: what ``mle`` runs on such domains without this path.

    With a ``backend`` other than numpy's native path the products and SQUAREM's passes run on its device;
    the column reads, the subproblems and the certificate of the result stay on the host.
    """
    from .operators import exact_block

    H = likelihood.H
    size, rows = likelihood.size, H.shape[0]
    budget = initial_budget = max(1, int(math.sqrt(ACTIVE_MAX_FLOPS / rows)))
    history: list[float] = list(warm.trace) if warm.trace is not None else []
    device = None
    if backend is not None and not backend.native:
        from .device import on_device

        device = on_device(likelihood, backend)
    solver = Solver(likelihood, None, device=device)
    solver.passes = warm.iterations + 1  # passes so far, the warm start's included
    g = (
        np.asarray(likelihood.gradient(warm.theta)).ravel()
        if device is None
        else solver.transpose_times(likelihood.counts / solver.times(warm.theta))
    ) / likelihood.n
    solver.passes += 1
    columns = np.flatnonzero((warm.theta * size > ACTIVE_THRESHOLD) & (g >= 1.0))
    if columns.size == 0:  # no value stands out yet: the likeliest few start
        columns = np.sort(np.argsort(-warm.theta, kind="stable")[: min(size, 64)])
    initial = max(1, int(ACTIVE_START * budget))
    if columns.size > initial:  # evenly thinned: every region the candidates cover keeps some
        columns = columns[np.round(np.linspace(0, columns.size - 1, initial)).astype(np.intp)]
    x = np.zeros(size)
    x[columns] = warm.theta[columns] / warm.theta[columns].sum()
    pt = solver.point(x)
    solver.complete(pt)
    hessians = _ActiveHessian(H, rows, budget, exact_block)
    best_f, stalled, kkts = pt.f, 0, [pt.kkt]
    for step in range(ACTIVE_MAX_STEPS):
        if pt.kkt < tol or solver.passes >= max_iter or stalled >= ACTIVE_STALL or not math.isfinite(pt.f):
            break
        if step >= ACTIVE_RATE_STEPS and _steps_to_tol(kkts, tol) > ACTIVE_MAX_STEPS:
            break
        grad_f = 1.0 - pt.grad
        kept = np.flatnonzero(pt.x > 0)
        violating = np.flatnonzero((pt.x == 0) & (grad_f < -tol))
        if violating.size and kept.size >= budget and budget < ACTIVE_MAX_GROWTH * initial_budget:
            # the MLE's support is larger than the budget: S grows rather than hand over to SQUAREM, which crawls
            budget = min(int(ACTIVE_GROWTH * budget), int(ACTIVE_MAX_GROWTH * initial_budget))
            hessians.grow(budget)
        room = min(budget - kept.size, max(int(ACTIVE_NEWCOMERS * kept.size), 64))
        violating = _newcomers(H, grad_f, violating, max(room, 0))
        active = np.union1d(kept, violating)
        hess = hessians.hessian(active, solver.sqrt_w / pt.p, exact=violating.size == 0)
        if hess is None:
            break
        solver.passes += 1  # bringing the Hessian up to date reads H[:, S] at most once
        xa = pt.x[active]
        # few newcomers: the support has nearly settled, and its positive values are a guess worth a factorization
        settled = violating.size <= QP_GUESS_NEWCOMERS * kept.size
        y = nonnegative_qp(hess, grad_f[active] - hess @ xa, xa, guess=xa > 0 if settled else None)
        direction = y - xa
        slope = float(grad_f[active] @ direction)
        if not slope < 0:
            break
        full, exact = np.zeros(size), pt.x.copy()
        full[active], exact[active] = direction, y  # the QP's solution itself at a full step: its zeros exact
        trial = backtrack(solver, pt.x, full, pt.f, slope, 1.0, exact=exact)
        if trial is None:
            break
        solver.complete(trial)
        history.append(trial.loglik)
        pt = trial
        kkts.append(pt.kkt)
        stalled = 0 if pt.f < best_f - 1e-15 * abs(best_f) else stalled + 1
        best_f = min(best_f, pt.f)
    if pt.kkt < tol and math.isfinite(pt.f):
        theta = pt.x / pt.x.sum()
        # from the distribution itself, as EM's (a pass on the device, if there is one)
        loglik, kkt, gap = likelihood.certify(theta) if device is None else device.certify(theta)
        solver.passes += 1
        if kkt < tol and loglik >= warm.loglik:
            return EMResult(
                theta, loglik, solver.passes - 1, True, np.array(history) if trace else None, "kkt", kkt, gap
            )
    # SQUAREM from the warm start: an active set's iterate has exact zeros, which EM raises only from a trace of
    # mass, thousands of times slower (136,501 passes on a 64 x 64 grid where SQUAREM from the warm start takes 12,000)
    count = solver.passes
    start = full_support(warm.theta)
    em = gibu(
        passes,
        start,
        stop="kkt",
        tol=tol,
        max_iter=max(0, max_iter - count),
        trace=trace,
        accelerate="squarem",
        backend=backend,
    )
    history.extend(em.trace if em.trace is not None else [])
    return EMResult(
        em.theta,
        em.loglik,
        count + em.iterations,
        em.converged,
        np.array(history) if trace else None,
        "kkt",
        em.kkt,
        em.gap,
    )


def _newcomers(H: object, grad_f: np.ndarray, violating: np.ndarray, room: int) -> np.ndarray:
    """The ``room`` values of ``violating`` that join the active set: the most violated, those whose violation is the
    largest of their neighbourhood first, where the operator knows one (a grid's ``local_minima``).

    Neighbours of a value missing from the support violate their KKT conditions nearly as much as it does, and the
    subproblem keeps one of them and sets the rest to zero: taken by violation alone, the newcomers crowd into the
    worst regions. One per region covers more of them per step: 16 steps instead of 20 on a 256 x 256 grid at
    eps = 0.25, 11 instead of 16 on a 128 x 128 one (``bench_mle.py``).
    """
    order = violating[np.argsort(grad_f[violating], kind="stable")]
    local_minima = getattr(H, "local_minima", None)
    if local_minima is not None and order.size > room:
        field = np.full(grad_f.size, np.inf)
        field[order] = grad_f[order]
        first = local_minima(field, ACTIVE_SPREAD)[order]
        order = np.concatenate([order[first], order[~first]])
    return order[:room]


def _steps_to_tol(kkts: list[float], tol: float) -> float:
    """The steps taken (``kkts`` has one KKT violation more) plus those the last needs to fall below ``tol`` at
    the fastest mean rate it fell over any :data:`ACTIVE_RATE_STEPS` consecutive steps: optimistic, so the active
    set is abandoned only when even that would take too long, not while it finds the support at a slower pace."""
    now, window = kkts[-1], ACTIVE_RATE_STEPS
    if now < tol:
        return len(kkts) - 1
    rates = [math.log(a / b) / window for a, b in zip(kkts[:-window], kkts[window:]) if a > b > 0]
    if not rates:
        return math.inf
    return len(kkts) - 1 + math.log(now / tol) / max(rates)


class _ActiveHessian:
    """The Hessian ``H[:, S]^T diag(w) H[:, S]`` of an active set S, kept up to date from step to step instead of
    formed afresh (D |S|^2 multiply-adds, a second and a half at 256 x 256).

    The exact columns of the values in S are kept in single precision, one per row of an array of the budget's
    size allocated once; a value that joins S is read (:func:`~ldpsim.estimation.operators.exact_block`) into
    a slot after those kept (the last kept move into the slots of those that left). Alongside is their
    weighted Gram matrix, summed with weights that may lag the current ones: a new value's products with
    every slot are added with them (D |S| |new|), and a report's weight is brought up to date only when it
    moved by more than :data:`ACTIVE_REWEIGHT` relatively (two symmetric rank-|R| updates over the reports R
    that did). The subproblems need no better while S changes: the 256 x 256 grid took 16 steps with the
    Hessian formed afresh each time, as many with weights within 5 % and one more within 20 %, in less time
    (``bench_mle.py``).

    Once no value joins S, the Hessian is formed afresh: Newton's last steps on a settled support converge
    quickly only with the exact one. With weights 5 % off, the 256 x 256 grid at n = 10^5 crawled from KKT
    1e-5 to 4e-6 in steps too small to change L, and the active set handed over; with every weight updated
    instead of formed afresh, the rounding the updates had accumulated raised the KKT of the n = 10^6 one
    from 2.3e-6 to 4.3e-6. The certificate is the whole domain's either way, so the result is not
    approximate. Weights are held relative to the first step's largest, so no single-precision product
    overflows.
    """

    def __init__(self, H: object, rows: int, capacity: int, read: Callable[..., np.ndarray | None]):
        self.H, self.read = H, read
        self.everyone = np.arange(rows)
        self.data = np.empty((capacity, rows), dtype=np.float32)  # pages touched as slots fill
        self.values = np.zeros(0, dtype=np.intp)  # the value in each of the first len(values) slots
        self.gram = np.zeros((0, 0))
        self.weights = np.zeros(0)  # each report's weight in ``gram``, relative to ``top`` squared
        self.top = 0.0

    def hessian(self, active: np.ndarray, scale: np.ndarray, exact: bool) -> np.ndarray | None:
        """``H[:, active]^T diag(scale^2) H[:, active]`` (within :data:`ACTIVE_REWEIGHT` in its weights unless
        ``exact``), or None if the operator cannot read the columns. ``active`` is sorted and holds at most
        ``capacity`` values."""
        self._drop(np.isin(self.values, active))
        new = active[~np.isin(active, self.values)]
        kept = self.values.size
        if new.size:
            part = self.read(self.H, self.everyone, new, np.float32)
            if part is None:
                return None
            self.data[kept : kept + new.size] = part.T
            self.values = np.concatenate([self.values, new])
        m, data = self.values.size, self.data[: self.values.size]
        if exact or not self.weights.size:
            self._afresh(data, scale)
        else:
            if new.size:  # the kept values' block as it was, the new values' rows and columns with the held weights
                gram = np.empty((m, m))
                gram[:kept, :kept] = self.gram
                cross = (data @ (data[kept:] * self.weights.astype(np.float32)).T).astype(float)
                gram[:, kept:] = cross
                gram[kept:, :] = cross.T
                self.gram = gram
            weights = (scale / self.top) ** 2
            moved = np.flatnonzero(np.abs(weights - self.weights) > ACTIVE_REWEIGHT * self.weights)
            change = weights[moved] - self.weights[moved]
            for sign in (1.0, -1.0):  # two symmetric products: up and down
                part = moved[sign * change > 0]
                if part.size:
                    block = data[:, part] * np.sqrt(sign * (weights[part] - self.weights[part])).astype(np.float32)
                    self.gram += sign * (block @ block.T).astype(float)
            self.weights[moved] = weights[moved]
            if not np.all(np.diag(self.gram) > 0):
                # the updates can leave a diagonal entry below zero where weights fall fast (a 256 x 256 grid whose
                # start's KKT was 4e4: -5e7 against a largest 4.5e7 after three steps of 6x smaller diagonals;
                # cause not pinned down): formed afresh instead, or its subproblem broke down and SQUAREM took over
                self._afresh(data, scale)
        order = np.argsort(self.values, kind="stable")
        where = order[np.searchsorted(self.values, active, sorter=order)]
        return self.gram[np.ix_(where, where)] * self.top**2

    def _afresh(self, data: np.ndarray, scale: np.ndarray) -> None:
        """The Gram matrix from every product, with the current weights."""
        self.top = float(scale.max())
        self.weights = (scale / self.top) ** 2
        scaled = data * (scale / self.top).astype(np.float32)
        self.gram = (scaled @ scaled.T).astype(float)  # a @ a.T: numpy takes BLAS's symmetric product

    def grow(self, capacity: int) -> None:
        """Room for ``capacity`` values: the kept columns copied into a larger array."""
        data = np.empty((capacity, self.data.shape[1]), dtype=np.float32)
        data[: self.values.size] = self.data[: self.values.size]
        self.data = data

    def _drop(self, held: np.ndarray) -> None:
        """Forget the values not ``held``: the last held ones move into their slots, so the held stay the first."""
        k = int(held.sum())
        holes = np.flatnonzero(~held[:k])
        movers = k + np.flatnonzero(held[k:])
        if holes.size:
            self.data[holes] = self.data[movers]
            self.values[holes] = self.values[movers]
            self.gram[holes, :] = self.gram[movers, :]
            self.gram[:, holes] = self.gram[:, movers]
        self.values = self.values[:k]
        self.gram = self.gram[:k, :k]
