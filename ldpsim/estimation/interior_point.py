"""The Newton solver's interior-point method: a primal-dual barrier on x >= 0 (Mehrotra's predictor-corrector,
Nocedal & Wright ch. 19) for ``f(x) = -sum_d w_d log (H x)_d + sum_x x``, whose minimizers are the MLEs.

:class:`Solver` holds one likelihood's products and Newton systems (the dense, sampled or k-RR Hessian, or
conjugate gradients); :func:`predictor_corrector` iterates from a full-support start to the KKT certificate, and
:func:`_polish` sets the MLE's zeros to exactly zero. :func:`backtrack` is the line search the active set
(:mod:`~ldpsim.estimation.active_set`) shares. The strategy that calls them is
:func:`~ldpsim.estimation.newton.newton_mle`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .engine import Likelihood
from .hessian_rows import RowSample
from .linalg import TO_BOUNDARY, factor, longest_step

if TYPE_CHECKING:
    from .device import DeviceLikelihood

#: interior-point iterations before handing over to SQUAREM
MAX_NEWTON_ITER = 100
#: initial complementarity per component (relative to 1 / |X|)
Z0 = 1e-4
#: once certified, Newton steps go on towards tol * SHARPEN, at most SHARPEN_STEPS of them (one with a sampled
#: Hessian, whose steps each cost a pass over millions of reports and gain less)
SHARPEN, SHARPEN_STEPS, SAMPLED_SHARPEN_STEPS = 1e-3, 3, 1
#: halvings of a step before the iterations are declared stalled
MAX_BACKTRACKS = 40
#: weight of the uniform distribution mixed into the warm start
_MIX = 1e-10
#: points evaluated on the face of the MLE's zeros (each after a Newton step but the first), or with a Hessian
#: from a sample of the rows (a pass over millions of reports and an inexact step each: the last two gained 1e-9
#: in KKT at OUE's k = 1024, n = 10^6 for 0.7 s; the zeros were exact after the first step)
POLISH_STEPS, SAMPLED_POLISH_STEPS = 4, 2
#: conjugate-gradient iterations per Newton system when the Hessian is not formed
CG_MAX_ITER = 50
#: Armijo's sufficient-decrease constant and the step shrink factor of the line search
_ARMIJO, _SHRINK = 1e-4, 0.5


def full_support(theta: np.ndarray) -> np.ndarray:
    """``theta`` with a trace of the uniform mixed in: EM's iterates can underflow to zero, and from a value of
    zero neither the barrier nor EM can raise it."""
    return (1.0 - _MIX) * theta + _MIX / theta.size


@dataclass
class Point:
    """An iterate x > 0 (not normalized) with what one pass over H gives about it."""

    x: np.ndarray
    p: np.ndarray  # H x
    f: float  # -sum w log p + sum x
    loglik: float = math.nan  # L(x / sum x)
    kkt: float = math.nan
    grad: np.ndarray = field(default_factory=lambda: np.zeros(0))  # H^T (w / p)
    #: where ``p`` is kept instead, by this key, when it is not here (the parts of a held likelihood)
    key: int = -1


class Solver:
    """One likelihood's products: H x, H^T v, and Newton systems (B + diag) dx = rhs, B the Hessian of f.

    With ``dense`` (D, |X|) the Hessian is formed and factorized, and with a ``sample``
    (:class:`~ldpsim.estimation.hessian_rows.RowSample`) it is formed from those rows alone; without either, its
    systems are solved by conjugate gradients through Hessian-vector products B v = H^T (w / p^2 * (H v)), two
    applications of the structured operator, preconditioned by diag((B x + z) / x): since B has nonnegative entries,
    diag(B x / x) bounds B from above (the majorizer behind EM's update), so the first CG step is an
    EM-like step and the next ones add the curvature EM ignores.

    With ``device`` (:func:`~ldpsim.estimation.device.on_device`) the products and the Hessian's formation run
    on that backend's device; vectors cross per pass, the factorization and the iterations stay on the host.
    """

    def __init__(
        self,
        likelihood: Likelihood,
        dense: np.ndarray | None,
        named: tuple[np.ndarray, float] | None = None,
        sample: RowSample | None = None,
        device: DeviceLikelihood | None = None,
    ):
        self.lik = likelihood
        self.device = device
        self._sample_rows: Any = None  # the sample's rows on the device, moved there on the first Hessian
        self.H = likelihood.H if dense is None else dense
        self.dense = dense is not None
        self.named = named  # (the value each report names or -1, r): H = r 1 1^T + (1 - r) S, see named_columns
        self.sample = sample  # rows that stand for all of them in the Hessian, see sampled_rows
        self.c = likelihood.counts
        self.n = likelihood.n
        self.w = self.c / self.n
        self.sqrt_w = np.sqrt(self.w)
        self.passes = 0

    def point(self, x: np.ndarray) -> Point:
        """f and H x at x: one pass (the gradient, when the point is kept, completes it)."""
        self.passes += 1
        p = self.times(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = -float(np.einsum("d,d->", self.w, np.log(p))) + float(x.sum())
        return Point(x, p, f if math.isfinite(f) else math.inf)

    def complete(self, pt: Point) -> None:
        """The gradient, L(x / sum x) and its certificate (see Likelihood.certificate)."""
        s = float(pt.x.sum())
        pt.grad = self.gradient_of(pt)
        pt.loglik = self.n * (-(pt.f - s) - math.log(s)) + self.lik.constant
        pt.kkt = max(s * float(pt.grad.max()) - 1.0, 0.0)  # g(theta) / n = s H^T(w / p)

    def gradient_of(self, pt: Point) -> np.ndarray:
        """``H^T (w / p)`` at ``pt``: one product."""
        return self.transpose_times(self.w / pt.p)

    def system(
        self, pt: Point, diag: np.ndarray, free: np.ndarray | None = None, rtol: float = 1e-2
    ) -> Callable[[np.ndarray], np.ndarray]:
        """A solver of (B + diag(diag)) dx = rhs at ``pt``, over the ``free`` values only if given."""
        if self.named is not None:
            self.passes += 1
            return self._woodbury(pt, diag, free)
        if self.dense or self.sample is not None:
            hess = self.hessian(pt)
            if free is not None:
                hess = hess[np.ix_(free, free)]
            return factor(hess + np.diag(diag))
        return self._cg(pt, diag, free, rtol)

    def hessian(self, pt: Point) -> np.ndarray:
        """B, the Hessian of f at ``pt``, formed from every row (``dense``) or from the ``sample``'s."""
        formed = self._device_hessian(pt)
        if formed is not None:
            if self.sample is None:
                self.passes += 1  # forming the Hessian reads H once
            return formed
        if self.sample is None:
            self.passes += 1  # forming the Hessian reads H once
            a = self.H * (self.sqrt_w / pt.p)[:, None]
            return a.T @ a
        # a sample's Hessian reads its rows only, in their precision (hessian_rows.sampled_rows)
        scale = np.sqrt(self.sample.weight) / pt.p[self.sample.index]
        top = scale.max()
        a = self.sample.rows * (scale / top).astype(self.sample.rows.dtype)[:, None]
        return (a.T @ a).astype(float) * top**2

    def times(self, x: np.ndarray) -> np.ndarray:
        """``H @ x`` (on the device, if the solver has one)."""
        return np.asarray(self.H @ x).ravel() if self.device is None else self.device.host_matvec(x)

    def transpose_times(self, v: np.ndarray) -> np.ndarray:
        """``H.T @ v`` (on the device, if the solver has one)."""
        return np.asarray(self.H.T @ v).ravel() if self.device is None else self.device.host_rmatvec(v)

    def _device_hessian(self, pt: Point) -> np.ndarray | None:
        """The (dense or sampled) Hessian formed on the device, or None (no device, or no dense rows there)."""
        if self.device is None:
            return None
        if self.sample is None:
            return self.device.gram(self.sqrt_w / pt.p)
        backend = self.device.backend
        if self._sample_rows is None:
            self._sample_rows = backend.to_device(self.sample.rows, backend.xp.float32)
        scale = np.sqrt(self.sample.weight) / pt.p[self.sample.index]
        top = scale.max()
        return self.device.gram32(self._sample_rows, scale / top) * top**2

    def _woodbury(self, pt: Point, diag: np.ndarray, free: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
        """Exact solves in O(|X|) when each report names one value (k-RR): H = r 1 1^T + (1 - r) S, with S
        one 1 per row, so B = (1 - r)^2 diag(omega) + r^2 Omega 1 1^T + r (1 - r) (1 omega^T + omega 1^T),
        where omega_x sums w_d / p_d^2 over the reports naming x and Omega over all: a diagonal plus rank 2."""
        from scipy.linalg import LinAlgError

        assert self.named is not None
        columns, r = self.named
        weight = self.w / pt.p**2
        named = columns >= 0
        omega = np.bincount(columns[named], weights=weight[named], minlength=pt.x.size)
        total = float(weight.sum())
        if free is not None:
            omega = omega[free]
        delta = (1.0 - r) ** 2 * omega + diag
        if not np.all(delta > 0):
            raise LinAlgError("singular diagonal part")
        u = np.column_stack([np.ones(omega.size), omega])  # B - diag part = u c u^T
        c = np.array([[r * r * total, r * (1.0 - r)], [r * (1.0 - r), 0.0]])
        inv_u = u / delta[:, None]
        small = np.eye(2) + c @ (u.T @ inv_u)

        def solve(rhs: np.ndarray) -> np.ndarray:
            base = rhs / delta
            return base - inv_u @ np.linalg.solve(small, c @ (u.T @ base))

        return solve

    def _cg(
        self, pt: Point, diag: np.ndarray, free: np.ndarray | None, rtol: float
    ) -> Callable[[np.ndarray], np.ndarray]:
        from scipy.sparse.linalg import LinearOperator, cg

        weight = self.w / pt.p**2
        size = pt.x.size
        mask = np.ones(size, dtype=bool) if free is None else free
        m = int(mask.sum())

        def hess(v: np.ndarray) -> np.ndarray:
            full = np.zeros(size)
            full[mask] = np.ravel(v)
            out = self.transpose_times(weight * self.times(full))[mask]
            return out + diag * np.ravel(v)

        with np.errstate(divide="ignore", invalid="ignore"):
            precond = pt.x[mask] / (pt.grad[mask] + diag * pt.x[mask])
        precond = np.where(np.isfinite(precond) & (precond > 0), precond, 0.0)
        operator = LinearOperator((m, m), matvec=hess, dtype=float)
        preconditioner = LinearOperator((m, m), matvec=lambda r: precond * np.ravel(r), dtype=float)

        def solve(rhs: np.ndarray) -> np.ndarray:
            count = [0]

            def tick(_: np.ndarray) -> None:
                count[0] += 1

            dx, _ = cg(operator, rhs, rtol=rtol, maxiter=CG_MAX_ITER, M=preconditioner, callback=tick)
            self.passes += count[0] + 1  # each CG iteration applies H and H^T once: one pass
            return dx

        return solve


def predictor_corrector(solver: Solver, theta0: np.ndarray, tol: float, history: list[float]) -> Point:
    """Mehrotra predictor-corrector iterations from theta0 (full support).

    Once certified to ``tol`` the iterations go on (at most :data:`SHARPEN_STEPS` more, or
    :data:`SAMPLED_SHARPEN_STEPS` with a sampled Hessian, while L rises)
    towards ``tol * SHARPEN``: Newton's last steps are cheap and make the estimate at least as likely
    as any EM iterate certified to ``tol``. Returns the certified point with the highest L, its zeros
    made exact by :func:`_polish` if that keeps the certificate, or if none is certified (the
    iterations stalled), the iterate with the highest L.
    """
    from scipy.linalg import LinAlgError

    m = theta0.size
    pt = solver.point(theta0.copy())
    solver.complete(pt)
    history.append(pt.loglik)
    # multipliers of x >= 0: the gradient where it is positive (values the MLE will likely drop), else small
    z = np.maximum(1.0 - pt.x.sum() * pt.grad, 0.0) + Z0 / (m * pt.x)
    best, best_z, sharpening = pt, z, 0
    # a sample of every row is the exact Hessian (a small likelihood): it sharpens as the exact one does
    sharpen_steps = SHARPEN_STEPS if solver.sample is None or solver.sample.every_row else SAMPLED_SHARPEN_STEPS
    for _ in range(MAX_NEWTON_ITER):
        if pt.kkt < tol:
            if pt.kkt < tol * SHARPEN or sharpening >= sharpen_steps:
                break
            sharpening += 1
        x = pt.x
        grad_f = 1.0 - pt.grad
        mu = float(x @ z) / m
        diag = z / x
        try:
            solve = solver.system(pt, diag, rtol=min(0.1, math.sqrt(pt.kkt)))
            # predictor (affine scaling: mu = 0) and its complementarity after the longest step
            dx_aff = solve(-grad_f)
            dz_aff = -z - diag * dx_aff
            a_p, a_d = longest_step(x, dx_aff), longest_step(z, dz_aff)
            mu_aff = float((x + a_p * dx_aff) @ (z + a_d * dz_aff)) / m
            target = min(1.0, (mu_aff / mu) ** 3) * mu if mu > 0 else 0.0
            # corrector: the second-order term of the complementarity, with the centring target
            dx = solve(-grad_f + (target - dx_aff * dz_aff) / x)
            slope = float((grad_f - target / x) @ dx)  # directional derivative of the barrier merit
            if not slope < 0:  # the corrector lost descent: the pure centring direction always has it
                dx = solve(-grad_f + target / x)
                slope = float((grad_f - target / x) @ dx)
        except LinAlgError:
            break
        dz = (target - dx_aff * dz_aff) / x - z - diag * dx
        alpha = min(1.0, TO_BOUNDARY * longest_step(x, dx, 1.0 / TO_BOUNDARY))
        merit = pt.f - target * float(np.log(x).sum())
        trial = backtrack(solver, x, dx, merit, slope, alpha, barrier=target)
        if trial is None:
            break
        solver.complete(trial)
        history.append(trial.loglik)
        z = np.maximum(z + min(1.0, TO_BOUNDARY * longest_step(z, dz, 1.0 / TO_BOUNDARY)) * dz, 1e-300)
        pt = trial
        certified, was = pt.kkt < tol, best.kkt < tol
        if (certified and not was) or (certified == was and pt.loglik >= best.loglik):
            best, best_z = pt, z
    if best.kkt < tol:
        return _polish(solver, best, best_z, tol, history) or best
    return best


def backtrack(
    solver: Solver,
    origin: np.ndarray,
    direction: np.ndarray,
    start: float,
    slope: float,
    alpha: float,
    *,
    barrier: float = 0.0,
    exact: np.ndarray | None = None,
) -> Point | None:
    """The first of the points ``origin + step * direction`` (negative entries clipped to zero) for ``step`` =
    ``alpha``, ``alpha / 2``, ... (:data:`MAX_BACKTRACKS` at most) whose merit, f minus ``barrier`` times the
    sum of log x, meets Armijo's condition against ``start`` and the directional derivative ``slope``; None if
    none does. One pass each. ``exact`` is the point at step 1 where the sum would round zeros away."""
    for _ in range(MAX_BACKTRACKS):
        x = exact if exact is not None and alpha == 1.0 else np.maximum(origin + alpha * direction, 0.0)
        cand = solver.point(x)
        merit = cand.f - barrier * float(np.log(cand.x).sum()) if barrier else cand.f
        if merit <= start + _ARMIJO * alpha * slope:
            return cand
        alpha *= _SHRINK
    return None


def _polish(solver: Solver, pt: Point, z: np.ndarray, tol: float, history: list[float]) -> Point | None:
    """Newton steps on the face {x_i = 0 where the multiplier exceeds x_i}: the MLE's zeros made exact.

    A value a step would drive to or below zero joins the zeros (an active-set step). The result is
    kept only if its certificate holds and L is not below the interior point's; otherwise None.
    """
    from scipy.linalg import LinAlgError

    free = pt.x >= z
    if np.all(free) or not np.any(free):
        return None
    x = np.where(free, pt.x, 0.0)
    best = None
    steps = POLISH_STEPS if solver.sample is None or solver.sample.every_row else SAMPLED_POLISH_STEPS
    for step in range(steps):
        cand = solver.point(x)
        if not math.isfinite(cand.f):
            break
        solver.complete(cand)
        if cand.kkt < tol and cand.loglik >= (pt.loglik if best is None else best.loglik):
            best = cand
            if cand.kkt < tol * SHARPEN:
                break
        if step == steps - 1:  # no point would evaluate the next step
            break
        try:
            dx = solver.system(cand, np.zeros(int(free.sum())), free, rtol=1e-3)(cand.grad[free] - 1.0)
        except LinAlgError:
            break
        x = x.copy()
        x[free] += dx
        dropped = free & (x <= 0)
        x[dropped] = 0.0
        free &= ~dropped
        if not np.any(free):
            break
    if best is not None:
        history.append(best.loglik)
    return best
