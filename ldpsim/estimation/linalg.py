"""The dense linear algebra of the exact-MLE solver's interior-point methods: Cholesky solvers, and the longest
step that keeps an iterate nonnegative.

The Newton systems of :mod:`~ldpsim.estimation.interior_point` are solved by :func:`factor`, the active set's
quadratic subproblems (:mod:`~ldpsim.estimation.nonnegative_qp`) by :func:`refined_cholesky`: a float32
factorization refined to float64's accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

#: fraction of the way to the boundary a step may go
TO_BOUNDARY = 0.995
#: refinements of a float32 solve (:func:`refined_cholesky`) before it falls back on a float64 factorization
_REFINEMENTS = 10
#: the scale 1 / sqrt(1 + extra) below which :func:`refined_cholesky` leaves a row out of its factorization
_DECOUPLED = 1e-3
_EPS = float(np.finfo(float).eps)


def factor(matrix: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A solver of ``matrix @ v = rhs`` for a symmetric positive (semi)definite matrix: one Jacobi-scaled
    Cholesky factorization, reused for every right-hand side.

    A ridge of growing size rescues matrices that round-off makes indefinite (a singular Hessian
    whose barrier term has vanished on some component).
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    d = np.sqrt(np.maximum(np.diag(matrix), np.finfo(float).tiny))
    scaled = matrix / d[:, None] / d[None, :]
    # entries of scaled size < 1e-150 change no solve, and their subnormal products slow LAPACK down 20x
    scaled[np.abs(scaled) < 1e-150] = 0.0
    for ridge in (0.0, 1e-12, 1e-9, 1e-6):
        try:
            cholesky = cho_factor(scaled + ridge * np.eye(len(d)) if ridge else scaled, check_finite=False)
        except LinAlgError:
            continue
        return lambda rhs: cho_solve(cholesky, rhs / d, check_finite=False) / d
    raise LinAlgError("not positive definite")


def refined_cholesky(
    q: np.ndarray, single: np.ndarray, extra: np.ndarray, rowsum: np.ndarray
) -> Callable[..., np.ndarray]:
    """A solver of ``(q + diag(extra)) @ v = rhs`` for q of unit diagonal (``single`` its float32 copy,
    ``rowsum`` bounds its rows' absolute sums) and extra >= 0: a float32 Cholesky factorization (half of
    float64's time) of the system scaled to unit diagonal, so that extra spanning many orders of magnitude
    costs float32 no accuracy, then float64 iterative refinement until the residual is as small as a float64
    factorization's would be (LAPACK's dsposv test, usually 1-2 refinements at condition ~5e4). Rows whose
    scale is below :data:`_DECOUPLED` (the zeros of the subproblem's last iterations) are left out of the
    factorization as unit rows, for refinement to account for their small coupling (up to 700 of 2,467 rows
    at 256 x 256: 0.37 of the factorization's time, 2-5 refinements). Where float32 fails (not positive definite, or
    refinement stalls), the float64 factorization of :func:`_cholesky`. ``solve(rhs, refine=False)`` is the
    float32 solve alone (while finite).
    """
    from scipy.linalg.blas import strsv
    from scipy.linalg.lapack import spotrf

    m = extra.size
    s = 1.0 / np.sqrt(1.0 + extra)
    kept = np.flatnonzero(s >= _DECOUPLED)
    s32 = s[kept].astype(np.float32)
    work = (single if kept.size == m else single[np.ix_(kept, kept)]) * s32[:, None]
    work *= s32[None, :]
    work[np.diag_indices(kept.size)] = 1.0
    # work is symmetric, so its transpose (Fortran order) is factorized in place without a copy
    upper, info = spotrf(work.T, lower=False, overwrite_a=True, clean=False)
    norm = float((s * rowsum).max()) + 1.0  # of the scaled matrix, at least
    fallback: list[Callable[[np.ndarray], np.ndarray]] = []

    def single_solve(rhs: np.ndarray) -> np.ndarray:
        u = s * rhs
        if kept.size:  # (none when every row is left out)
            u[kept] = strsv(upper, strsv(upper, u[kept].astype(np.float32), trans=1))
        return s * u

    def solve(rhs: np.ndarray, refine: bool = True) -> np.ndarray:
        if not fallback:
            v = single_solve(rhs)
            if not refine and np.all(np.isfinite(v)):
                return v
            previous = np.inf
            for _ in range(_REFINEMENTS):
                residual = rhs - q @ v - extra * v
                size = float(np.abs(s * residual).max())
                if size <= math.sqrt(m) * _EPS * norm * float(np.abs(v / s).max()):
                    return v
                if not size < 0.5 * previous:  # stalled (or not finite)
                    break
                previous = size
                v = v + single_solve(residual)
            fallback.append(_cholesky(q + np.diag(extra)))
        return fallback[0](rhs)

    if info != 0:
        fallback.append(_cholesky(q + np.diag(extra)))
    return solve


def _cholesky(matrix: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A solver of ``matrix @ v = rhs`` for a positive definite matrix with unit-order diagonal (no rescaling, as
    :func:`factor` makes); a small ridge rescues one that round-off made indefinite."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    for ridge in (0.0, 1e-12, 1e-9, 1e-6):
        try:
            cholesky = cho_factor(matrix + ridge * np.eye(len(matrix)) if ridge else matrix, check_finite=False)
        except LinAlgError:
            continue
        return lambda rhs: cho_solve(cholesky, rhs, check_finite=False)
    raise LinAlgError("not positive definite")


def longest_step(v: np.ndarray, dv: np.ndarray, cap: float = 1.0) -> float:
    """The longest step in [0, cap] keeping v + step * dv >= 0."""
    neg = dv < 0
    if not np.any(neg):
        return cap
    return min(cap, float(np.min(-v[neg] / dv[neg])))
