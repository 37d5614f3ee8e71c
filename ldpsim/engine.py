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

#: default stopping threshold: GIBU stops when |L(t) - L(t-1)| < DEFAULT_DELTA (nats), whatever n is
DEFAULT_DELTA = 0.01
#: default cap on GIBU iterations
DEFAULT_MAX_ITER = 10_000


class Likelihood:
    """L(theta), its gradient and the EM update for fixed observations.

    ``support`` (a boolean mask over the domain) restricts theta to a likely
    subset (004 Sec. 8): methods then take and return vectors over the
    support only; :meth:`expand` puts zeros back.
    """

    def __init__(self, observations: Observations, support: np.ndarray | None = None):
        if observations.n == 0:
            raise EstimationError("there are no observations", hint="simulate or load at least one report")
        groups = [g.canonical() for g in observations.groups]
        blocks, shifts = [], []
        for group in groups:
            shift, block = _block(group)
            if support is not None:
                block = block[:, support] if isinstance(block, np.ndarray) else _columns(block, support)
            shifts.append(shift)
            blocks.append(block)
        shift = np.concatenate(shifts)
        if all(isinstance(b, np.ndarray) for b in blocks):
            self.H = np.concatenate(blocks)
            row_max = self.H.max(axis=1)
        else:
            self.H = _stack(blocks)
            row_max = self.H @ np.ones(self.H.shape[1])
        impossible = np.flatnonzero(~np.isfinite(shift) | ~(row_max > 0))
        if impossible.size:
            raise _impossible_report(groups, int(impossible[0]), restricted=support is not None)
        self.observations = observations
        self.support = support
        self.shift = shift
        self.counts = np.concatenate([g.counts for g in groups]).astype(float)
        self.n = float(self.counts.sum())
        self._constant = _dot(self.counts, shift)

    def expand(self, theta: np.ndarray) -> np.ndarray:
        """theta over the whole domain (zeros outside the support)."""
        if self.support is None:
            return theta
        full = np.zeros(self.support.shape[0])
        full[self.support] = theta
        return full

    @classmethod
    def of(cls, observations: Observations, support: np.ndarray | None = None) -> Likelihood:
        """The (cached) likelihood of ``observations``, optionally on a support."""
        cache = observations.__dict__.setdefault("_likelihoods", {})
        if support is not None and np.all(support):
            support = None  # the whole domain: share the unrestricted likelihood
        key = None if support is None else np.asarray(support, dtype=bool).tobytes()
        if key not in cache:
            cache[key] = cls(observations, support)
        return cache[key]

    @property
    def size(self) -> int:
        """|X|, the number of values."""
        return self.H.shape[1]

    def loglik(self, theta: np.ndarray) -> float:
        """L(theta); ``-inf`` if some observed report has probability 0 under theta."""
        with np.errstate(divide="ignore"):
            return _dot(self.counts, np.log(self.H @ theta)) + self._constant

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
            loglik = _dot(self.counts, np.log(p)) + self._constant
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

    ``delta`` is in nats of the whole log-likelihood and defaults to
    :data:`DEFAULT_DELTA` = 0.01 for every n. L is a sum over the users, but
    the statistically meaningful differences of L are not: two distributions
    whose log-likelihoods differ by a fraction of a nat are equally supported
    by the data, whether there are 10^3 or 10^6 users. A per-user threshold
    (delta proportional to n) would chase such differences for longer the
    fewer users there are, and for strongly smoothing mechanisms the MLE they
    lead to overfits the noise. The returned theta is the last iterate whose
    log-likelihood is known, so ``loglik`` is exactly L(theta).
    """
    theta = check_start(start, likelihood.size)
    if delta is None:
        delta = DEFAULT_DELTA
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


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """sum(a * b) without BLAS: its threaded 1-D dot stalls when other processes load the cores."""
    return float(np.einsum("d,d->", a, b))


def rank_one_plus_sparse(support, r: float):  # noqa: ANN001  (a scipy.sparse CSR matrix)
    """H = r 1 1^T + (1 - r) S as a scipy LinearOperator: H[d, x] = 1 where S[d, x] = 1, else r.

    The likelihood of a report that only says "x is in this set" (unary encodings, local
    hashing) has this shape, up to a per-report factor: mechanisms return it from
    ``_likelihood_operator`` so GIBU never forms a dense (reports x values) array.
    """
    from scipy.sparse.linalg import LinearOperator

    one_minus_r = -math.expm1(math.log(r))  # no cancellation for r close to 1 (small eps)
    support_t = support.T  # a CSC view, no copy

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta)
        return r * theta.sum() + one_minus_r * (support @ theta)

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w)
        return r * w.sum() + one_minus_r * (support_t @ w)

    def matmat(m: np.ndarray) -> np.ndarray:
        return r * m.sum(axis=0, keepdims=True) + one_minus_r * (support @ m)

    def rmatmat(m: np.ndarray) -> np.ndarray:
        return r * m.sum(axis=0, keepdims=True) + one_minus_r * (support_t @ m)

    return LinearOperator(support.shape, matvec=matvec, rmatvec=rmatvec, matmat=matmat, rmatmat=rmatmat, dtype=float)


def _block(group: ReportGroup) -> tuple[np.ndarray, object]:
    """(shift, H) for one group: the mechanism's structured operator, or dense from log-likelihoods."""
    if len(group.plan) == 1:
        parts = group.plan[0].likelihood_operator(group.reports)
        if parts is not None:
            return parts
    log_g = group.log_likelihood()
    shift = log_g.max(axis=1)
    with np.errstate(invalid="ignore"):
        return shift, np.exp(log_g - shift[:, None])


def _columns(op, support: np.ndarray):
    """``op`` restricted to the columns in ``support``."""
    from scipy.sparse.linalg import LinearOperator  # imported only when structured blocks are used

    full = support.shape[0]

    def matvec(theta):
        x = np.zeros(full)
        x[support] = np.ravel(theta)
        return op @ x

    return LinearOperator((op.shape[0], int(support.sum())), matvec=matvec, rmatvec=lambda w: (op.T @ np.ravel(w))[support], dtype=float)


def _stack(blocks: list):
    """Blocks of rows as one operator."""
    from scipy.sparse.linalg import LinearOperator

    rows = np.cumsum([0] + [b.shape[0] for b in blocks])
    cols = blocks[0].shape[1]

    def matvec(theta):
        theta = np.ravel(theta)
        return np.concatenate([np.ravel(b @ theta) for b in blocks])

    def rmatvec(w):
        w = np.ravel(w)
        return sum(np.ravel(b.T @ w[rows[i] : rows[i + 1]]) for i, b in enumerate(blocks))

    return LinearOperator((int(rows[-1]), cols), matvec=matvec, rmatvec=rmatvec, dtype=float)


def _impossible_report(groups: list[ReportGroup], row: int, *, restricted: bool = False) -> EstimationError:
    for group in groups:
        if row < len(group.counts):
            report = tuple(int(v) for v in group.reports[row])
            plan = ", ".join(repr(m) for m in group.plan)
            where = "value of the support" if restricted else "value of the domain"
            return EstimationError(
                f"report {report} of plan [{plan}] has probability 0 under every {where}",
                hint="the reports do not come from these mechanisms on this domain",
            )
        row -= len(group.counts)
    raise AssertionError("row out of range")
