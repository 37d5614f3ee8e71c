"""The active set's quadratic subproblem: argmin over y >= 0 of ``y^T B y / 2 + c^T y`` for positive definite B.

:func:`nonnegative_qp` is what each step of :func:`~ldpsim.estimation.active_set.active_set_mle` solves over the
values it keeps: a primal-dual interior point whose systems are factorized in single precision and refined
(:func:`~ldpsim.estimation.linalg.refined_cholesky`), tried after a guess of the solution's positive values where
one is given. Its solution has exact zeros.
"""

from __future__ import annotations

import numpy as np

from .linalg import TO_BOUNDARY, longest_step, refined_cholesky

#: interior-point iterations of one quadratic subproblem (each a Cholesky factorization over the active set; they
#: took 8-24 on grids up to 256 x 256) and the complementarity they reach, relative to the linear term
QP_MAX_ITER, QP_TOL = 100, 1e-14
#: guesses of the subproblem's positive values tried before its interior point (:func:`_guessed_face`): once the
#: active set's support settles (:data:`~ldpsim.estimation.active_set.QP_GUESS_NEWCOMERS`), on the 256 x 256 grid
#: at eps = 0.25, n = 10^6, they reached the solution within 2-7 factorizations where the interior point took 9-15
#: (5 guesses left 2 of them to it)
QP_GUESSES = 8
#: Gondzio's centrality correctors per such iteration while its step is short (< 0.9): a solve each with the
#: iteration's factorization, kept if they lengthen the step (four 256 x 256 subproblems: 67 factorizations -> 60)
QP_CORRECTORS = 2


def nonnegative_qp(hess: np.ndarray, c: np.ndarray, start: np.ndarray, guess: np.ndarray | None = None) -> np.ndarray:
    """argmin over y >= 0 of y^T hess y / 2 + c^T y, for positive definite ``hess``: the active set's subproblem.

    A primal-dual interior-point method (Mehrotra's predictor-corrector) on the Jacobi-scaled problem (values
    whose curvature differs by orders of magnitude then converge alike): the data are not read, so it runs
    until the complementarity is negligible (:data:`QP_TOL`), where a value's size and its multiplier's
    separate by orders of magnitude. The values smaller than their multiplier are set to exactly zero, and if
    the problem restricted to the others has a positive solution (one factorization), that is returned.
    Its systems are factorized in single precision and refined to double's accuracy
    (:func:`refined_cholesky`: 1.5-2x faster at 2,400 values), in double where that fails, and each
    factorization also serves Gondzio's correctors (:data:`QP_CORRECTORS`), which save iterations. The affine
    (predictor) step only sets the centring and the corrector's second-order term, so its solve is not refined
    (the same iterations, 3-10% faster). With ``guess`` (a mask of the likely positive values) the faces it leads
    to are tried first (:func:`_guessed_face`).
    """
    from scipy.linalg import LinAlgError

    d = np.sqrt(np.maximum(np.diag(hess), np.finfo(float).tiny))
    q = hess / d[:, None] / d[None, :]
    c = c / d
    m = c.size
    single = q.astype(np.float32)
    single[np.abs(single) < 1e-30] = 0.0  # scaled products stay out of float32's subnormals, which are slow
    rowsum = np.abs(q).sum(axis=1)
    scale = max(1.0, float(np.abs(c).max()))
    residual_tol = 1e3 * QP_TOL * scale
    if guess is not None and (guessed := _guessed_face(q, single, c, rowsum, guess, residual_tol)) is not None:
        return guessed / d
    y = np.maximum(start * d, 0.0)
    y += 1e-3 * max(float(y.max()), 1e-12)
    z = np.maximum(q @ y + c, 1e-3 * scale)
    for _ in range(QP_MAX_ITER):
        residual = q @ y + c - z
        mu = float(y @ z) / m
        if mu < QP_TOL * scale * max(1.0, float(y.sum())) / m and float(np.abs(residual).max()) < residual_tol:
            break
        try:
            solve = refined_cholesky(q, single, z / y, rowsum)
            dy = solve(-residual - z, refine=False)  # the affine step (mu = 0): its centring, then the corrector
            dz = -z - z / y * dy
            mu_aff = float((y + longest_step(y, dy) * dy) @ (z + longest_step(z, dz) * dz)) / m
            target = (mu_aff / mu) ** 3 * mu  # Mehrotra's centring
            comp = y * z + dy * dz - target
            dy = solve(-residual - comp / y)
            dz = (-comp - z * dy) / y
            a_y, a_z = longest_step(y, dy, 1.0 / TO_BOUNDARY), longest_step(z, dz, 1.0 / TO_BOUNDARY)
            for _ in range(QP_CORRECTORS):  # pull the products at the step's end into [0.1, 10] x target
                if min(a_y, a_z) >= 0.9:
                    break
                t_y, t_z = min(1.0, 1.5 * a_y), min(1.0, 1.5 * a_z)
                v = (y + t_y * dy) * (z + t_z * dz)
                t = np.clip(v, 0.1 * target, 10.0 * target) - v
                t = np.maximum(t, -10.0 * target)
                c_comp = comp - t
                c_dy = dy + solve(t / y)
                c_dz = (-c_comp - z * c_dy) / y
                b_y, b_z = longest_step(y, c_dy, 1.0 / TO_BOUNDARY), longest_step(z, c_dz, 1.0 / TO_BOUNDARY)
                if min(b_y, b_z) < min(a_y, a_z) + 0.05:
                    break
                comp, dy, dz, a_y, a_z = c_comp, c_dy, c_dz, b_y, b_z
        except LinAlgError:
            break
        y = y + min(1.0, TO_BOUNDARY * a_y) * dy
        z = np.maximum(z + min(1.0, TO_BOUNDARY * a_z) * dz, 1e-300)
    free = np.flatnonzero(y >= z)
    out = np.zeros(m)
    out[free] = y[free]
    if free.size:
        try:
            face = _face(q, single, c, rowsum, free)
        except LinAlgError:
            face = None
        if face is not None and np.all(face > 0):
            out[free] = face
    return out / d


def _face(q: np.ndarray, single: np.ndarray, c: np.ndarray, rowsum: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The minimizer of the scaled subproblem on the face where only the values ``index`` may be nonzero, without
    their sign constraints: one factorization of ``q``'s block refined to double's accuracy (raises LinAlgError)."""
    block = np.ix_(index, index)
    return refined_cholesky(q[block], single[block], np.zeros(index.size), rowsum[index])(-c[index])


def _guessed_face(
    q: np.ndarray, single: np.ndarray, c: np.ndarray, rowsum: np.ndarray, free: np.ndarray, residual_tol: float
) -> np.ndarray | None:
    """The scaled subproblem's solution (``q`` of unit diagonal, ``single`` its float32 copy, ``rowsum`` its rows'
    absolute sums) if a guess of its positive values ``free`` leads to it within :data:`QP_GUESSES` exchanges, else
    None; a gradient counts as negative below ``-residual_tol``, the interior point's residual tolerance.

    Each guess is one factorization, the minimizer over its face: it is the solution when its values are
    positive and no other value's gradient is negative (the KKT conditions); otherwise the values that are not
    positive leave the guess and those of negative gradient join it (Kim and Park's block exchange). Once the active
    set's support settles, the iterate's positive values are nearly the solution's: 2-7 factorizations instead of
    the interior point's 9-15. The face's systems are solved to double's accuracy (:func:`refined_cholesky`) and
    the gradients checked to the interior point's residual tolerance, so the solution is the one it would find.
    """
    from scipy.linalg import LinAlgError

    for _ in range(QP_GUESSES):
        index = np.flatnonzero(free)
        if not index.size:
            return None
        try:
            face = _face(q, single, c, rowsum, index)
        except LinAlgError:
            return None
        y = np.zeros(c.size)
        y[index] = face
        low, up = free & (y <= 0), ~free & (q @ y + c < -residual_tol)
        if not low.any() and not up.any():
            return y
        free = (free & ~low) | up
    return None
