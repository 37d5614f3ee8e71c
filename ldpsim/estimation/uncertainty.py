"""How sure is an estimate: standard errors and confidence intervals for each value's frequency.

Two estimators, two derivations:

* **MLE (GIBU run to its certificate).** The observed Fisher information of the multinomial
  likelihood, ``J = sum_d c_d g_d g_d^T / (g_d . theta)^2`` (``g_d`` the likelihood row of report
  tuple d), restricted to the face of the simplex the estimate lies on: the values with positive
  mass, moving along directions that keep the total at 1. Wald intervals ``theta_x +- z se_x`` on
  that face. Values with no mass sit on the boundary, where the Wald interval would have zero width
  and the asymptotics do not hold (a value is taken to be there when it holds less than one user's
  mass and moving mass to it lowers L): their interval is ``[0, u]``, with ``u`` where the quadratic
  approximation of L along the path ``theta + t (e_x - theta)`` (mass t moved to x from all the
  others) has dropped by ``z^2 / 2`` nats (a one-dimensional likelihood-ratio bound; it uses the
  gradient there, which is <= n at an MLE).
* **Matrix inversion.** The unbiased estimate ``v = q A^+`` is linear in the observed frequencies
  ``q``, so its covariance is exact: ``A^+T (diag(lambda) - lambda lambda^T) A^+ / n`` per plan,
  with ``lambda`` estimated by ``theta A`` (``theta`` the projected estimate), and plans weighted by
  their share of the users. A mechanism's own unbiased estimate (OUE, RAPPOR, local hashing,
  Hadamard, subset selection, CMS) has the variance it declares in closed form
  (``Mechanism.estimate_variance``) plus the users' sampling: ``(estimate_variance(theta) +
  theta (1 - theta)) / n`` per value (see :func:`ldpsim.estimation.unbiased.plan_moments`).

A linear statistic of an MLE (a range's answer, a share) gets its interval from the same covariance
without forming it, on any domain size (:func:`linear_intervals`: conjugate gradients through the
likelihood's products, where :func:`mle_uncertainty` stops at :data:`MAX_INTERVAL_VALUES`).

Both are asymptotic: they hold when every value's expected count of users is large, and the MLE's
only for values inside the simplex. The guide's page "How sure is an estimate" (docs/guide/uncertainty.md) reports measured coverage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..base.errors import ParameterError
from .engine import Likelihood
from .observations import Observations, ReportGroup
from .simplex import project_simplex
from .unbiased import plan_matrix, plan_moments

#: largest domain for which the K x K information matrix is formed
MAX_INTERVAL_VALUES = 4096
#: a value is on the boundary when its mass is below this many users' and moving mass to it lowers L
BOUNDARY_USERS = 1.0
#: relative fall of the preconditioned residual at which :func:`linear_intervals` stops its conjugate gradients
CG_TOL = 1e-10
#: ... and the iterations it may take at most (NaN bounds beyond)
CG_MAX_ITER = 3000
#: rows of the likelihood handled at once when forming the information
_CHUNK = 1 << 16


def check_level(level: float) -> float:
    """A confidence level in (0, 1), or a one-line ParameterError."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ParameterError(f"must be in (0, 1), got {level!r}", field="confidence", hint="e.g. confidence = 0.95")
    return float(level)


@dataclass(frozen=True)
class Uncertainty:
    """What an interval at any level is computed from.

    ``se[x]`` is the standard error of value x's frequency (NaN on the boundary, inf where the
    data cannot tell values apart); on the boundary, ``slope[x] <= 0`` and ``curvature[x] > 0`` are
    the first and second derivatives of L along the path that moves mass to x. ``covariance`` is
    the (K, K) covariance of the estimate where one is known (zero rows on the MLE's boundary).
    """

    estimate: np.ndarray
    se: np.ndarray
    boundary: np.ndarray
    slope: np.ndarray
    curvature: np.ndarray
    method: str
    covariance: np.ndarray | None = None

    def linear_interval(self, weights: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
        """(value, lower, upper) of the linear statistic ``weights . theta`` (a mean, a sum, a share).

        A Wald interval from the covariance, ``w . theta +- z sqrt(w' Cov w)``. On the MLE's boundary the
        covariance is zero, so values estimated at zero add no width: the interval is the one of the
        statistic given the face the estimate lies on.

        Raises
        ------
        ValueError
            If the weights are not one finite number per value, or no covariance is known.
        """
        w = np.asarray(weights, dtype=float)
        if w.shape != self.estimate.shape or not np.all(np.isfinite(w)):
            raise ValueError(f"weights must be {self.estimate.size} finite numbers, one per value")
        if self.covariance is None:
            raise ValueError(
                f"the {self.method} uncertainty has no covariance (per-value variances only, as a mechanism's declared"
                " estimate_variance gives them, or values the data cannot tell apart): a linear statistic needs one;"
                " estimate with mle and intervals = true, or use bootstrap_uncertainty"
            )
        value = float(w @ self.estimate)
        spread = float(np.sqrt(max(w @ self.covariance @ w, 0.0)))
        z = normal_quantile(level)
        return value, value - z * spread, value + z * spread

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) bounds of each value's frequency at confidence ``level``, within [0, 1]."""
        z = normal_quantile(level)
        lower = np.clip(self.estimate - z * self.se, 0.0, 1.0)
        upper = np.clip(self.estimate + z * self.se, 0.0, 1.0)
        if self.boundary.any():
            d, a = self.slope[self.boundary], self.curvature[self.boundary]
            with np.errstate(divide="ignore", invalid="ignore"):
                reach = np.where(a > 0, (d + np.sqrt(d * d + a * z * z)) / a, 1.0)
            lower[self.boundary] = 0.0
            upper[self.boundary] = np.clip(reach, 0.0, 1.0)
        unknown = ~np.isfinite(self.se) & ~self.boundary
        lower[unknown], upper[unknown] = 0.0, 1.0
        return lower, upper


def _unknown(theta: np.ndarray, method: str) -> Uncertainty:
    k = theta.size
    nan = np.full(k, np.nan)
    return Uncertainty(theta, np.full(k, np.inf), np.zeros(k, dtype=bool), nan, nan, method)


def information(likelihood: Likelihood, theta: np.ndarray) -> np.ndarray:
    """The observed Fisher information ``-d^2 L / d theta^2`` (K x K) at ``theta``."""
    h, counts = likelihood.H, likelihood.counts
    p = np.asarray(h @ theta, dtype=float).ravel()
    weight = np.divide(counts, p * p, out=np.zeros_like(p), where=p > 0)
    k = theta.size
    if isinstance(h, np.ndarray):
        info = np.zeros((k, k))
        for start in range(0, h.shape[0], _CHUNK):
            rows = h[start : start + _CHUNK]
            info += rows.T @ (rows * weight[start : start + _CHUNK, None])
        return info
    columns = []
    step = max(1, (1 << 24) // max(1, h.shape[0]))  # columns of H formed at once: at most 128 MB
    for start in range(0, k, step):
        block = np.eye(k)[:, start : start + step]
        hb = np.asarray(h @ block)
        columns.append(np.asarray(h.T @ (hb * weight[:, None])))
    return np.concatenate(columns, axis=1)


def _face(likelihood: Likelihood, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dL/dtheta, boundary mask) at ``theta``: the values off the MLE's face."""
    _, grad = likelihood.em_parts(theta)
    # an MLE has dL/dtheta_x = n inside the simplex and <= n on its boundary (KKT); an iterate
    # converging to a zero keeps a tiny positive mass there, so the rule reads both
    return grad, (theta * likelihood.n < BOUNDARY_USERS) & (grad < likelihood.n)


def mle_uncertainty(observations: Observations, theta: np.ndarray) -> Uncertainty:
    """Standard errors of an MLE on its face of the simplex, and what bounds the values on its boundary."""
    theta = np.asarray(theta, dtype=float)
    k = theta.size
    if k > MAX_INTERVAL_VALUES:
        return _unknown(theta, "none: more values than MAX_INTERVAL_VALUES")
    likelihood = Likelihood.of(observations)
    n = likelihood.n
    grad, boundary = _face(likelihood, theta)
    info = information(likelihood, theta)
    face = np.flatnonzero(~boundary)
    se = np.full(k, np.nan)
    full = np.zeros((k, k))
    if face.size == 1:
        se[face] = 0.0
    elif face.size > 1:
        # directions on the face that keep the total at 1: u -> (u, -sum u)
        m = face.size
        basis = np.vstack([np.eye(m - 1), -np.ones((1, m - 1))])
        reduced = basis.T @ info[np.ix_(face, face)] @ basis
        eig = np.linalg.eigvalsh(reduced)
        if eig.min() <= 1e-10 * max(eig.max(), 1e-300):  # the data cannot tell these values apart
            se[face] = np.inf
        else:
            cov = basis @ np.linalg.solve(reduced, basis.T)
            se[face] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
            full[np.ix_(face, face)] = cov
    slope = grad - n  # dL/dt at t = 0 along theta + t (e_x - theta): sum_x theta_x g_x = n
    curvature = np.diag(info) - 2 * grad + n  # -d2L/dt2 there
    known = bool(np.all(np.isfinite(se[face]))) if face.size else True
    return Uncertainty(theta, se, boundary, slope, curvature, "fisher", full if known else None)


def unbiased_uncertainty(observations: Observations, estimate: np.ndarray) -> Uncertainty:
    """Standard errors of the unbiased estimate (:func:`ldpsim.unbiased_estimate`) from its exact variances.

    Per plan, :func:`ldpsim.estimation.unbiased.plan_moments` at ``theta``, the projection of the
    estimate onto the simplex: for ``v = q A^+``, ``Cov(v) = A^+T (diag(lambda) - lambda lambda^T) A^+ / n``,
    exact for the true output distribution ``lambda``, estimated by ``theta A``. (Plugging in the
    observed frequencies instead gives zero variance to outputs nobody reported, and intervals that
    are too short where reports are rare: 89 % coverage of nominal 95 % for the truncated geometric
    at eps = 2 in scenarios/coverage.toml.) For a mechanism's own unbiased estimate, the variances it
    declares (``estimate_variance``) plus the users' sampling, ``theta (1 - theta)``; it declares no
    covariance between values, so the result has none (no :meth:`Uncertainty.linear_interval`). A
    mechanism whose own estimate declares no variance leaves every value's error unknown (infinite).
    Plans are weighted by their share of the users: ``Var = sum_plans (n_plan / n)^2 Var_plan``.
    """
    estimate = np.asarray(estimate, dtype=float)
    theta = project_simplex(estimate)
    k = observations.domain.size
    variance = np.zeros(k)
    cov: np.ndarray | None = np.zeros((k, k))
    for group in observations.groups:
        moments = plan_moments(group.plan, theta, given=False)
        if moments is None:
            return _unknown(estimate, "none: the mechanism's own unbiased estimate declares no variance")
        share = (group.n / observations.n) ** 2
        variance += share * moments.variance / group.n
        cov = None if cov is None or moments.covariance is None else cov + share * moments.covariance / group.n
    se = np.sqrt(np.clip(variance, 0.0, None))
    k_nan = np.full(k, np.nan)
    return Uncertainty(estimate, se, np.zeros(k, dtype=bool), k_nan, k_nan, "exact", cov)


def bootstrap_uncertainty(
    observations: Observations,
    theta: np.ndarray,
    estimate: Callable[[Observations], np.ndarray],
    *,
    replicates: int = 200,
    seed: int | None = None,
) -> Uncertainty:
    """Standard errors by a parametric bootstrap at count level: re-simulate from ``theta``, re-estimate.

    Each plan's report counts are drawn as one multinomial of its users over its outputs with
    probabilities ``theta A`` (exactly the law of the counts the simulation would give, without
    drawing users), ``estimate`` is applied to every replicate, and the standard error of each value
    is the replicates' spread. Unlike the Fisher information it needs no interior estimate and no
    large-sample curvature, and it measures the estimator actually used (an early-stopped IBU, a
    projected inversion); it costs ``replicates`` estimations. The generator is derived with
    ``SeedSequence`` from ``seed``, or from the observed counts, so an estimate's interval is the same
    every time it is computed. Plans need a finite matrix (their joint one, for several reports).
    """
    theta = np.clip(np.asarray(theta, dtype=float), 0.0, None)
    theta = theta / theta.sum()
    if seed is None:
        digest = hashlib.sha256()
        for group in observations.groups:
            digest.update(np.ascontiguousarray(group.reports).tobytes())
            digest.update(np.ascontiguousarray(group.counts).tobytes())
        seed = int.from_bytes(digest.digest()[:8], "little")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    laws = []
    for group in observations.groups:
        a = plan_matrix(group.plan)
        widths = [m.shape[1] for m in (mech.matrix for mech in group.plan) if m is not None]
        outputs = np.array(np.unravel_index(np.arange(a.shape[1]), widths)).T  # every joint report tuple
        law = np.clip(theta @ a, 0.0, None)
        laws.append((group, outputs, law / law.sum()))
    draws = np.empty((replicates, theta.size))
    for b in range(replicates):  # one estimation per replicate: the cost is the estimator's, not Python's
        groups = []
        for group, outputs, law in laws:
            counts = rng.multinomial(round(group.n), law)  # expected counts sum to the users, up to rounding
            keep = counts > 0
            groups.append(ReportGroup(group.plan, outputs[keep], counts[keep]))
        draws[b] = estimate(Observations(observations.domain, groups))
    se = draws.std(axis=0, ddof=1)
    k_nan = np.full(theta.size, np.nan)
    covariance = np.cov(draws, rowvar=False)
    return Uncertainty(theta, se, np.zeros(theta.size, dtype=bool), k_nan, k_nan, "bootstrap", covariance)


def linear_intervals(
    observations: Observations,
    theta: np.ndarray,
    weights: np.ndarray,
    level: float = 0.95,
    *,
    tol: float = CG_TOL,
    max_iter: int = CG_MAX_ITER,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wald intervals of linear statistics ``weights @ theta`` of an MLE, on any domain size.

    The variance of ``w . theta`` is ``w' Cov w`` with the covariance of :func:`mle_uncertainty` (the
    inverse Fisher information on the MLE's face, along directions that keep the total at 1; values
    on the boundary add nothing), computed without forming the K x K information: ``Cov w`` is the
    solution u of ``P J u = P w`` with u on the face's tangent space (P projects onto it), by
    conjugate gradients through the likelihood's products, ``J v = H' (c / (H theta)^2 * H v)``
    (one pass each way per iteration, all statistics at once), preconditioned by the multinomial
    covariance ``(diag(theta) - theta theta') / n``, the exact answer when reports name values
    without noise. So a range of a 2^20-leaf histogram gets its interval where the dense path
    stops at :data:`MAX_INTERVAL_VALUES`. Where the data cannot tell the face's values apart (the
    dense path's infinite standard errors) the iterations do not converge: NaN bounds.

    Parameters
    ----------
    observations
        The reports the MLE was computed from.
    theta
        The MLE (certify it first: the intervals assume a maximum).
    weights
        ``(K,)`` or ``(S, K)``: one statistic per row (a range: ones on its values).
    level
        Confidence level in (0, 1).
    tol
        Stop a statistic's iterations when its preconditioned residual has fallen by this factor.
    max_iter
        Iterations at most; a statistic not converged by then gets NaN bounds.

    Returns
    -------
    tuple of numpy.ndarray
        ``(value, lower, upper)``, each of shape ``(S,)`` (a scalar array for 1-D weights):
        ``w . theta -+ z sqrt(w' Cov w)``.

    Raises
    ------
    ParameterError
        If the weights are not finite numbers, one per value (per row).
    """
    theta = np.asarray(theta, dtype=float)
    k = theta.size
    raw = np.asarray(weights, dtype=float)
    w = np.atleast_2d(raw)
    if w.ndim != 2 or w.shape[1] != k or not np.all(np.isfinite(w)):
        raise ParameterError(
            f"must be {k} finite numbers per statistic, got shape {raw.shape}",
            field="weights",
            hint="give one row of weights over the domain's values per statistic",
        )
    z = normal_quantile(level)
    likelihood = Likelihood.of(observations)
    grad, boundary = _face(likelihood, theta)
    face = np.flatnonzero(~boundary)
    value = w @ theta
    spread = np.zeros(w.shape[0])
    if face.size > 1:
        spread = np.sqrt(np.clip(_tangent_quadratic(likelihood, theta, face, w[:, face].T, tol, max_iter), 0.0, None))
    lower, upper = value - z * spread, value + z * spread
    if raw.ndim == 1:
        return value[0], lower[0], upper[0]
    return value, lower, upper


def _tangent_quadratic(
    likelihood: Likelihood, theta: np.ndarray, face: np.ndarray, rhs: np.ndarray, tol: float, max_iter: int
) -> np.ndarray:
    """``w' B (B' J B)^-1 B' w`` for each column w of ``rhs`` (on the face), by preconditioned conjugate gradients
    on the tangent space; NaN where they did not converge."""
    h, counts = likelihood.H, likelihood.counts
    p = np.asarray(h @ theta, dtype=float).ravel()
    weight = np.divide(counts, p * p, out=np.zeros_like(p), where=p > 0)[:, None]
    k, cols = theta.size, rhs.shape[1]
    # the multinomial covariance, diag(d) - d d' / sum d, on the face; a value there with less than one user's
    # mass (the data pull mass to it) counts as one user's, or the iterations could not move it
    d = (np.maximum(theta[face], BOUNDARY_USERS / likelihood.n) / likelihood.n)[:, None]
    d_sum = float(d.sum())

    def info(v: np.ndarray) -> np.ndarray:  # P J v on the face
        full = np.zeros((k, cols))
        full[face] = v
        out = np.asarray(h.T @ (np.asarray(h @ full).reshape(-1, cols) * weight)).reshape(k, cols)[face]
        return out - out.mean(axis=0)

    def precondition(r: np.ndarray) -> np.ndarray:
        dr = d * r
        return dr - d * (dr.sum(axis=0) / d_sum)

    r = rhs - rhs.mean(axis=0)  # P w
    b = r.copy()
    u = np.zeros_like(r)
    zr = precondition(r)
    rz = np.einsum("ij,ij->j", r, zr)
    goal = tol * tol * rz
    step = zr.copy()
    live = rz > 0  # a statistic constant on the face has no variance: u = 0
    failed = np.zeros(cols, dtype=bool)
    for _ in range(max_iter):
        if not live.any():
            break
        a_step = info(step)
        curvature = np.einsum("ij,ij->j", step, a_step)
        failed |= live & ~(curvature > 0)  # not positive definite: values the data cannot tell apart
        live &= ~failed
        alpha = np.where(live, rz / np.where(live, curvature, 1.0), 0.0)
        u += alpha * step
        r -= alpha * a_step
        zr = precondition(r)
        rz_new = np.einsum("ij,ij->j", r, zr)
        beta = np.where(live, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        rz = rz_new
        live &= rz > goal
        step = zr + beta * step
    out = np.einsum("ij,ij->j", b, u)
    out[failed | live] = np.nan  # live: not converged within max_iter
    return out


def normal_quantile(level: float) -> float:
    """z with P(|N(0, 1)| <= z) = level."""
    from scipy.stats import norm  # here, not at import: scipy.stats alone takes ~1 s to import

    return float(norm.ppf(0.5 + check_level(level) / 2))


__all__ = [
    "MAX_INTERVAL_VALUES",
    "Uncertainty",
    "bootstrap_uncertainty",
    "check_level",
    "information",
    "linear_intervals",
    "mle_uncertainty",
    "normal_quantile",
    "unbiased_uncertainty",
]
