"""The estimation engine: the log-likelihood of aggregated observations and
the generalized iterative Bayesian update (GIBU, Algorithm 1 of
ElSalamouny & Palamidessi, EuroS&P 2020).

For distinct report tuples ``d`` observed ``c_d`` times, with
``G[d, x] = P(report tuple d | x)`` (a product over the user's reports),

    L(theta) = sum_d c_d log sum_x theta_x G[d, x].

``G`` is stored row-rescaled, ``G = diag(exp(shift)) H`` with
``max_x H[d, x] = 1``: the product of many report probabilities is formed in
log space and never underflows, and both the EM update and the gradient are
unchanged by rescaling a row, so they use ``H`` directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import EstimationError, ParameterError
from .observations import Observations, ReportGroup

#: default per-user tolerance: GIBU stops when |L(t) - L(t-1)| < DEFAULT_TOL * n
DEFAULT_TOL = 1e-8
#: default cap on GIBU iterations
DEFAULT_MAX_ITER = 10_000


class Likelihood:
    """L(theta), its gradient and the EM update for fixed observations."""

    def __init__(self, observations: Observations):
        if observations.n == 0:
            raise EstimationError("there are no observations", hint="simulate or load at least one report")
        groups = [g.canonical() for g in observations.groups]
        log_g = np.concatenate([g.log_likelihood() for g in groups])
        shift = log_g.max(axis=1)
        impossible = np.flatnonzero(~np.isfinite(shift))
        if impossible.size:
            raise _impossible_report(groups, int(impossible[0]))
        self.observations = observations
        self.shift = shift
        self.H = np.exp(log_g - shift[:, None])
        self.counts = np.concatenate([g.counts for g in groups]).astype(float)
        self.n = float(self.counts.sum())
        self._constant = float(self.counts @ shift)

    @classmethod
    def of(cls, observations: Observations) -> Likelihood:
        """The (cached) likelihood of ``observations``."""
        cached = observations.__dict__.get("_likelihood")
        if cached is None:
            cached = observations.__dict__["_likelihood"] = cls(observations)
        return cached

    @property
    def size(self) -> int:
        """|X|, the number of values."""
        return self.H.shape[1]

    def loglik(self, theta: np.ndarray) -> float:
        """L(theta); ``-inf`` if some observed report has probability 0 under theta."""
        with np.errstate(divide="ignore"):
            return float(self.counts @ np.log(self.H @ theta)) + self._constant

    def gradient(self, theta: np.ndarray) -> np.ndarray:
        """dL/dtheta_x = sum_d c_d G[d, x] / (G theta)_d (rescaling cancels)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.H.T @ (self.counts / (self.H @ theta))

    def posterior_sum(self, theta: np.ndarray) -> np.ndarray:
        """sum over users of P(X = x | their reports; theta): the E-step, eq. (13)."""
        return theta * self.gradient(theta)

    def em_step(self, theta: np.ndarray) -> tuple[np.ndarray, float]:
        """One GIBU update; returns (theta_next, L(theta)) from a single pass over G."""
        p = self.H @ theta
        with np.errstate(divide="ignore"):
            loglik = float(self.counts @ np.log(p)) + self._constant
        with np.errstate(divide="ignore", invalid="ignore"):
            nxt = theta * (self.H.T @ (self.counts / p)) / self.n
        return nxt, loglik


@dataclass(frozen=True)
class EMResult:
    theta: np.ndarray
    loglik: float
    iterations: int
    converged: bool
    trace: np.ndarray | None = None  # L(theta^t) for t = 0..iterations


def check_start(start: np.ndarray | None, size: int) -> np.ndarray:
    """A full-support starting distribution (uniform if ``start`` is None)."""
    if start is None:
        return np.full(size, 1.0 / size)
    theta = np.asarray(start, dtype=float)
    if theta.shape != (size,):
        raise ParameterError(f"has {theta.size} entries, the domain has {size}", field="start", hint="give one entry per value")
    if not np.all(np.isfinite(theta)) or np.any(theta < 0) or not math.isclose(theta.sum(), 1.0, abs_tol=1e-9):
        raise ParameterError("is not a distribution", field="start", hint="give non-negative entries summing to 1")
    if np.any(theta == 0):
        raise ParameterError(
            f"is zero at index {int(np.argmin(theta))}",
            field="start",
            hint="an EM update never raises a zero, so that value would be excluded (001, remark after Theorem 4): "
            "give every value positive mass",
        )
    return theta / theta.sum()


def gibu(
    likelihood: Likelihood,
    start: np.ndarray | None = None,
    *,
    delta: float | None = None,
    max_iter: int = DEFAULT_MAX_ITER,
    trace: bool = False,
) -> EMResult:
    """Run GIBU until |L(t) - L(t-1)| < delta or ``max_iter`` updates.

    ``delta`` defaults to ``DEFAULT_TOL * n``: L is a sum over the n users, so
    its increments grow with n and a fixed per-user tolerance keeps the
    stopping point comparable across population sizes. The returned theta is
    the last iterate whose log-likelihood is known, so ``loglik`` is exactly
    L(theta).
    """
    theta = check_start(start, likelihood.size)
    if delta is None:
        delta = DEFAULT_TOL * likelihood.n
    if not delta > 0:
        raise ParameterError(f"must be > 0, got {delta}", field="delta", hint="use a positive tolerance")
    history = []
    previous = -math.inf
    iterations = 0
    converged = False
    while True:
        nxt, loglik = likelihood.em_step(theta)
        if trace:
            history.append(loglik)
        if abs(loglik - previous) < delta:
            converged = True
            break
        if iterations == max_iter:
            break
        theta, previous = nxt, loglik
        iterations += 1
    if not math.isfinite(loglik) or not np.all(np.isfinite(theta)):
        raise EstimationError(
            "GIBU broke down numerically (non-finite log-likelihood)",
            hint="report this with the scenario; the mechanism's likelihoods may be inconsistent",
        )
    theta = theta / theta.sum()
    return EMResult(theta, loglik, iterations, converged, np.array(history) if trace else None)


def _impossible_report(groups: list[ReportGroup], row: int) -> EstimationError:
    for group in groups:
        if row < len(group.counts):
            report = tuple(int(v) for v in group.reports[row])
            plan = ", ".join(repr(m) for m in group.plan)
            return EstimationError(
                f"report {report} of plan [{plan}] has probability 0 under every value of the domain",
                hint="the reports do not come from these mechanisms on this domain",
            )
        row -= len(group.counts)
    raise AssertionError("row out of range")
