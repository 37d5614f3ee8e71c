"""A second-order solver for the exact MLE: a primal-dual interior-point method on the simplex.

The MLE maximizes L(theta) = sum_d c_d log (H theta)_d + const over the simplex. EM (GIBU) and
its SQUAREM extrapolation take thousands of passes over the data where the likelihood is flat,
as it is for strongly smoothing mechanisms (small eps, large domains). Like mixsqp (Kim,
Carbonetto, Stephens, Anitescu, JCGS 2020) this solver drops the equality constraint,

    minimize f(x) = -sum_d w_d log (H x)_d + sum_x x      subject to x >= 0,   w = c / n,

whose minimizers are exactly the MLEs (at a minimizer, sum_x x = sum_x x_x dL/dx_x / n = 1),
and takes Newton steps with the dense Hessian B = H^T diag(w / (H x)^2) H. Instead of mixsqp's
active-set QP it handles x >= 0 with a primal-dual barrier (Mehrotra's predictor-corrector,
Nocedal & Wright ch. 19), which needs no combinatorial search when most of the MLE's
components are zero (small eps): each iteration is one Cholesky factorization of an |X| x |X|
matrix, and tens of iterations reach the KKT certificate of
:meth:`~ldpsim.estimation.engine.Likelihood.certificate`. A last Newton step on the face the
barrier identified sets the MLE's zeros to exactly zero.

The Newton iterations start after :data:`WARM_PASSES` SQUAREM passes, which certify the easy
problems (large eps) at EM's cost and give the barrier a start near the MLE. The dense Hessian
costs D |X|^2 operations for D distinct reports, so it is used only when that is affordable
(:data:`~ldpsim.estimation.hessian_rows.DENSE_MAX_FLOPS`). Beyond, where the operator reads its own rows (unary
encodings, subset selection, local hashing, sketches: millions of distinct reports), the Hessian is formed from a
deterministic sample of them (:func:`~ldpsim.estimation.hessian_rows.sampled_rows`): an estimate that makes the
Newton steps inexact but still descent steps, checked by the exact line search and certificate. Otherwise, and
whenever the Newton iterations stall, the solver hands over to SQUAREM (:func:`~ldpsim.estimation.engine.gibu`),
which is what ``mle`` ran before (its passes over a small structured likelihood's exact dense rows,
:data:`~ldpsim.estimation.hessian_rows.DENSE_PASS_MAX_SIZE`). On a large domain whose operator reads a few of its
columns cheaply (a convolution on a 64 x 64 grid or larger), each step instead minimizes the quadratic model over
the values x >= 0 of an active set, the MLE's likely support (sequential quadratic programming, as mixsqp),
certified on the whole domain (:func:`~ldpsim.estimation.active_set.active_set_mle`). On request
(``hessian="cg"``) Newton systems are solved instead by conjugate gradients through the likelihood's structured
operator. Everything is deterministic: fixed rules, no randomness.

This module chooses the strategy. Each lives in its own module, which uses only those listed before it, and each
budget is set (and tuned) in the module that applies it:

- :mod:`~ldpsim.estimation.linalg`: Cholesky solvers (float64, and float32 refined to float64) and the step to
  the boundary;
- :mod:`~ldpsim.estimation.hessian_rows`: the rows a Hessian is formed from (dense, sampled, k-RR's named
  values), their budgets, and the likelihood SQUAREM's passes run over;
- :mod:`~ldpsim.estimation.interior_point`: the Newton systems (:class:`~ldpsim.estimation.interior_point.Solver`)
  and the barrier iterations, line search and polish;
- :mod:`~ldpsim.estimation.nonnegative_qp`: the active set's quadratic subproblem;
- :mod:`~ldpsim.estimation.active_set`: sequential quadratic programming on an active set, and its budgets.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..base.errors import EstimationError, ParameterError
from .active_set import active_set_mle
from .backend import Backend, as_backend
from .engine import DEFAULT_TOL, EMResult, Likelihood, check_start, gibu
from .held import HeldLikelihood, HeldSolver
from .hessian_rows import dense_likelihood, likelihood_for_passes, named_columns, sampled_rows
from .interior_point import SHARPEN, Solver, full_support, predictor_corrector

if TYPE_CHECKING:
    from .device import DeviceLikelihood

#: how Newton systems are solved (see :func:`newton_mle`)
HESSIANS = ("auto", "sampled", "cg", "active")
#: SQUAREM passes before the Newton solver starts (cheap problems are certified by then) ...
WARM_PASSES = 10
#: ... and before Newton with a sampled Hessian: its problems (millions of distinct reports) are never cheap,
#: and each SQUAREM iteration saved one Newton pass or less (OUE, OLH, THE, subset selection at k = 1024,
#: n = 10^6: 2 passes fewer with 1 than with 3, 6 fewer for OUE at eps = 4, the same maximum and zeros)
SAMPLED_WARM_PASSES = 1
#: ... and before the active set (:func:`~ldpsim.estimation.active_set.active_set_mle`): ten leave nearly every
#: value of a 64 x 64 grid above its threshold (:data:`~ldpsim.estimation.active_set.ACTIVE_THRESHOLD`)
ACTIVE_WARM_PASSES = 100


def newton_mle(
    likelihood: Likelihood,
    start: np.ndarray | None = None,
    *,
    tol: float = DEFAULT_TOL,
    max_iter: int = 1_000_000,
    trace: bool = False,
    warm_passes: int | None = None,
    hessian: str = "auto",
    backend: Backend | str | None = None,
) -> EMResult:
    """The exact MLE by a primal-dual interior-point Newton method, certified to relative KKT ``tol``.

    Parameters
    ----------
    likelihood
        The observations' likelihood (possibly restricted to a likely subset).
    start
        Full-support starting distribution (default uniform); the result's log-likelihood is never
        below its own.
    tol
        Stop when max_x dL/dtheta_x / n - 1 < tol, so L(MLE) - L(theta) <= n log(1 + tol).
    max_iter
        Cap on the passes of the SQUAREM fallback (see :func:`~ldpsim.estimation.engine.gibu`).
    trace
        Keep L of every kept iterate.
    warm_passes
        SQUAREM passes from ``start`` before the Newton iterations (which start from their result):
        problems EM certifies quickly stay as cheap as EM. Default :data:`WARM_PASSES`, or
        :data:`SAMPLED_WARM_PASSES` with a sampled Hessian, :data:`ACTIVE_WARM_PASSES` on an active set.
    hessian
        "auto": form and factorize the Hessian; where that is too costly
        (:data:`~ldpsim.estimation.hessian_rows.DENSE_MAX_ENTRIES`,
        :data:`~ldpsim.estimation.hessian_rows.DENSE_MAX_FLOPS`), form it from a sample of rows
        (:func:`~ldpsim.estimation.hessian_rows.sampled_rows`) if the operator reads its rows, else, where
        the operator reads a few of its columns cheaply (a convolution on a large grid), iterate on an
        active set (:func:`~ldpsim.estimation.active_set.active_set_mle`), else run SQUAREM. "sampled":
        the sampled Hessian whatever the size. "active": the active set whatever the size (the operator
        must read its rows). "cg": conjugate gradients through Hessian-vector products, whatever the size
        (fewer passes than SQUAREM in benchmarks/RESULTS.md, but at small eps its CG runs hit
        :data:`~ldpsim.estimation.interior_point.CG_MAX_ITER`: the preconditioner does not capture a
        smoothing kernel's ill-conditioning).
    backend
        Where the passes, the products and the Hessian's formation run (a
        :class:`~ldpsim.estimation.backend.Backend` or its name; default: the active one, numpy outside
        :func:`~ldpsim.estimation.backend.using_backend`). The strategy, the factorizations and the
        active set's subproblems are the host's whatever the backend, so it chooses as on the CPU.

    Returns
    -------
    EMResult
        ``iterations`` counts passes over the data after the start: products with H (each line-search
        trial) and Hessian formations. ``rule`` is "kkt".
    """
    theta0 = check_start(start, likelihood.size)
    if not tol > 0:
        raise ParameterError(
            f"must be > 0, got {tol}", field="tol", hint="use a positive relative KKT tolerance, e.g. 1e-6"
        )
    if hessian not in HESSIANS:
        raise ParameterError(f"unknown mode {hessian!r}", field="hessian", hint=f"use one of {', '.join(HESSIANS)}")
    if isinstance(likelihood, HeldLikelihood):  # the rows are held elsewhere, in parts
        return _held_newton(likelihood, theta0, tol, max_iter, trace, warm_passes, hessian)
    reads_rows = isinstance(likelihood.H, np.ndarray) or callable(getattr(likelihood.H, "rows", None))
    if hessian in ("sampled", "active") and not reads_rows:  # both form their Hessians from exact rows
        raise ParameterError(
            "this likelihood's operator cannot read its rows",
            field="hessian",
            hint="use hessian='auto'; a structured operator offers rows through ldpsim.with_exact_rows",
        )
    chosen = as_backend(backend)
    named = named_columns(likelihood) if hessian == "auto" else None
    dense = None if hessian != "auto" or named is not None else dense_likelihood(likelihood)
    sample = None
    if hessian == "sampled" or (hessian == "auto" and dense is None and named is None):
        sample = sampled_rows(likelihood, always=hessian == "sampled")
    passes = likelihood_for_passes(likelihood, dense)
    active = hessian == "active" or (
        hessian == "auto" and dense is None and named is None and sample is None and _cheap_columns(likelihood)
    )
    if warm_passes is None:
        warm_passes = ACTIVE_WARM_PASSES if active else WARM_PASSES if sample is None else SAMPLED_WARM_PASSES
    if dense is None and named is None and sample is None and hessian == "auto" and not active:
        return gibu(
            passes, theta0, stop="kkt", tol=tol, max_iter=max_iter, trace=trace, accelerate="squarem", backend=chosen
        )
    warm = gibu(
        passes,
        theta0,
        stop="kkt",
        tol=tol,
        max_iter=min(warm_passes, max_iter),
        trace=trace,
        accelerate="squarem",
        backend=chosen,
    )
    if warm.converged or max_iter <= warm_passes:
        return warm
    if active:
        return active_set_mle(likelihood, passes, warm, tol, max_iter, trace, chosen)
    solver = Solver(likelihood, dense, named, sample, _device(likelihood, chosen))
    return _iterate(solver, likelihood, passes, warm, tol, max_iter, trace, chosen)


def _held_newton(
    likelihood: HeldLikelihood,
    theta0: np.ndarray,
    tol: float,
    max_iter: int,
    trace: bool,
    warm_passes: int | None,
    hessian: str,
) -> EMResult:
    """Newton on a likelihood held in parts: each iteration's Hessian the sum of the parts' (each formed where
    its rows are, from all of them or a sample), its products and gradients sums of the parts'; SQUAREM on the
    parts' passes where a part forms no Hessian or another mode is asked."""
    solver = HeldSolver.of(likelihood) if hessian in ("auto", "sampled") else None
    if solver is None:
        return gibu(likelihood, theta0, stop="kkt", tol=tol, max_iter=max_iter, trace=trace, accelerate="squarem")
    warm_passes = SAMPLED_WARM_PASSES if warm_passes is None else warm_passes
    warm = gibu(
        likelihood, theta0, stop="kkt", tol=tol, max_iter=min(warm_passes, max_iter), trace=trace, accelerate="squarem"
    )
    if warm.converged or max_iter <= warm_passes:
        return warm
    return _iterate(solver, likelihood, likelihood, warm, tol, max_iter, trace, as_backend(None))


def _iterate(
    solver: Solver,
    likelihood: Likelihood,
    passes: Likelihood,
    warm: EMResult,
    tol: float,
    max_iter: int,
    trace: bool,
    chosen: Backend,
) -> EMResult:
    """The interior-point iterations from SQUAREM's ``warm`` start, SQUAREM again (over ``passes``) should they
    stall: the certified MLE."""
    solver.passes = warm.iterations + 1
    history: list[float] = list(warm.trace) if warm.trace is not None else []
    # EM's iterates can underflow to zero: mix in a trace of the uniform so every value can still rise
    interior = full_support(warm.theta)
    best = predictor_corrector(solver, interior, tol, history)
    if best.kkt >= tol or best.loglik < warm.loglik:
        # stalled (round-off at extreme precision, a degenerate Hessian): SQUAREM from the likelier of the
        # Newton iterate and the warm start, both of full support
        full = bool(np.all(best.x > 0))
        theta = best.x / best.x.sum() if full and best.loglik >= warm.loglik else interior
        # on to tol * SHARPEN, as the Newton iterations go once certified: SQUAREM from another start than
        # `mle`'s own could stop just inside tol and below it (a 4-value BLH problem: 1.2e-6 nats lower)
        em = gibu(
            passes,
            theta,
            stop="kkt",
            tol=tol * SHARPEN,
            max_iter=max_iter,
            trace=trace,
            accelerate="squarem",
            backend=chosen,
        )
        history.extend(em.trace if em.trace is not None else [])
        return EMResult(
            em.theta,
            em.loglik,
            solver.passes + em.iterations,
            em.kkt < tol,
            np.array(history) if trace else None,
            "kkt",
            em.kkt,
            em.gap,
        )
    theta = best.x / best.x.sum()
    if not math.isfinite(best.loglik):
        raise EstimationError(
            "the Newton solver broke down numerically (non-finite log-likelihood)",
            hint="report this with the scenario; the mechanism's likelihoods may be inconsistent",
        )
    return EMResult(
        theta,
        # from the distribution itself, as EM's: no rounding from rescaling x (a pass on the device, if there is one)
        likelihood.loglik(theta) if solver.device is None else solver.device.loglik(theta),
        solver.passes - 1,
        True,
        np.array(history) if trace else None,
        "kkt",
        best.kkt,
        likelihood.n * math.log1p(best.kkt),
    )


def _device(likelihood: Likelihood, backend: Backend) -> DeviceLikelihood | None:
    """The likelihood's products on the backend's device, or None on the native numpy path."""
    if backend.native:
        return None
    from .device import on_device

    return on_device(likelihood, backend)


def _cheap_columns(likelihood: Likelihood) -> bool:
    """Whether the likelihood's operator reads a few of its columns at their cost alone (a convolution's kernel
    lookups), which the active set (:func:`active_set_mle`) needs on a domain too large for its whole rows."""
    return callable(getattr(likelihood.H, "rows", None)) and bool(getattr(likelihood.H, "rows_take_columns", False))
