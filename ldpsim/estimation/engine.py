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
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.errors import EstimationError, ParameterError
from ..base.memory import require_memory
from .backend import Backend, as_backend
from .observations import Observations, ReportGroup
from .operators import (
    named_values_likelihood,
    rank_one_plus_sparse,  # noqa: F401  (kept importable from here)
)

if TYPE_CHECKING:
    from scipy.sparse.linalg import LinearOperator

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
        blocks: list[np.ndarray | LinearOperator] = []
        shifts: list[np.ndarray] = []
        for group in groups:
            # a mechanism may build its likelihood on the support alone (a planar box on a large grid),
            # where it would give a structured likelihood for the whole domain (the same size policy)
            mech = group.plan[0]
            own = (
                mech.subset_likelihood(group.reports, support)
                if support is not None and len(group.plan) == 1 and mech.domain.size >= mech.structured_min_size
                else None
            )
            if own is not None:
                shifts.append(own[0])
                blocks.append(own[1])
                continue
            shift, block = _block(group)
            if support is not None:
                # an operator may know a cheaper form of itself on the support (a convolution on its box)
                narrowed = getattr(block, "restricted", None)
                parts = narrowed(support) if narrowed is not None else None
                if parts is not None:
                    shift, block = parts
                else:
                    block = block[:, support] if isinstance(block, np.ndarray) else _columns(block, support)
            shifts.append(shift)
            blocks.append(block)
        shift = np.concatenate(shifts)
        self.H: np.ndarray | LinearOperator
        dense = [b for b in blocks if isinstance(b, np.ndarray)]
        if len(dense) == len(blocks):
            self.H = np.concatenate(dense)
            row_max = self.H.max(axis=1)
        else:  # one block with exact rows (a convolution) stays itself: dense_likelihood reads them
            exact = len(blocks) == 1 and callable(getattr(blocks[0], "rows", None))
            self.H = blocks[0] if exact else _stack(blocks)
            # an operator whose entries are all positive (see operators.with_min_entry) has no impossible report
            positive = getattr(self.H, "min_entry", 0.0) > 0
            row_max = np.ones(self.H.shape[0]) if positive else self.H @ np.ones(self.H.shape[1])
        impossible = np.flatnonzero(~np.isfinite(shift) | ~(row_max > 0))
        if impossible.size:
            raise _impossible_report(groups, int(impossible[0]), restricted=support is not None)
        # the observations hold this likelihood (``of`` caches it in them): a strong reference back would make a
        # cycle, which only the garbage collector frees, and it seldom runs where the arrays are big and the
        # objects few (a run estimating after each of 10 rounds held every round's likelihood: 3x its peak)
        self._observations = weakref.ref(observations)
        self._observed = (observations.domain, observations.groups)
        self.support = support
        self.shift = shift
        self.counts = np.concatenate([g.counts for g in groups]).astype(float)
        self.n = float(self.counts.sum())
        self._constant = _dot(self.counts, shift)
        #: ``H`` as a dense ``(D, |X|)`` array once a solver has formed it
        #: (:func:`~ldpsim.estimation.hessian_rows.dense_likelihood`), else None: a cache that lives with the likelihood
        self.dense_matrix: np.ndarray | None = None

    @property
    def observations(self) -> Observations:
        """The observations this is the likelihood of (the same reports in a new object, should they be gone)."""
        found = self._observations()
        return found if found is not None else Observations(*self._observed)

    def expand(self, theta: np.ndarray) -> np.ndarray:
        """theta over the whole domain (zeros outside the support)."""
        if self.support is None:
            return theta
        full = np.zeros(self.support.shape[0])
        full[self.support] = theta
        return full

    @classmethod
    def of(cls, observations: Observations, support: np.ndarray | None = None) -> Likelihood:
        """The (cached) likelihood of ``observations``, optionally on a support; of observations held elsewhere
        (:class:`~ldpsim.estimation.held.HeldObservations`), the likelihood of their parts' passes."""
        held = observations.held_likelihood(support)
        if held is not None:
            return held
        if support is not None and np.all(support):
            support = None  # the whole domain: share the unrestricted likelihood
        key = None if support is None else np.asarray(support, dtype=bool).tobytes()
        return observations.derived((cls, key), lambda: cls(observations, support))

    @property
    def size(self) -> int:
        """``|X|``, the number of values."""
        return self.H.shape[1]

    @property
    def constant(self) -> float:
        """``sum_d c_d shift_d``, the part of L that rescaling the rows took out of ``H``:
        ``L(theta) = sum_d c_d log (H theta)_d + constant``, for solvers that evaluate the sum themselves."""
        return self._constant

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
        loglik, grad = self.em_parts(theta)
        return theta * grad / self.n, loglik

    def em_parts(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(L(theta), dL/dtheta) from one pass over G: the EM image is theta * gradient / n."""
        p = self.H @ theta
        with np.errstate(divide="ignore"):
            loglik = _dot(self.counts, np.log(p)) + self._constant
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = np.asarray(self.H.T @ (self.counts / p)).ravel()
        return loglik, grad

    def certify(self, theta: np.ndarray) -> tuple[float, float, float]:
        """(L(theta), relative KKT violation, gap bound) of any distribution: one pass over G.

        The numbers of :meth:`em_parts` then :meth:`certificate` (``(inf, inf)`` where L is
        ``-inf``), computed by the same operations in the same order, so they are bit-identical.
        It is what an estimator without a certificate of its own gets after every estimate: on
        the small dense likelihoods of a sweep of millisecond runs, the two calls' conversions and
        floating-point contexts cost as much as the products, so a dense ``H`` takes a lean path.
        """
        H = self.H
        if not isinstance(H, np.ndarray):
            loglik, grad = self.em_parts(theta)
            return (loglik, *self.certificate(grad)) if loglik > -math.inf else (loglik, math.inf, math.inf)
        p = H @ theta  # >= 0, as H and theta are
        if p.all():  # no zero to take the log of or divide by: no floating-point error state to set up
            loglik = _dot(self.counts, np.log(p)) + self._constant
            top = float(np.maximum.reduce(H.T @ (self.counts / p))) / self.n  # np.max's reduction, called directly
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                loglik = _dot(self.counts, np.log(p)) + self._constant
                if not loglik > -math.inf:
                    return loglik, math.inf, math.inf
                top = float(np.maximum.reduce(H.T @ (self.counts / p))) / self.n
        if not math.isfinite(top):
            return loglik, math.inf, math.inf
        excess = max(top - 1.0, 0.0)
        return loglik, excess, self.n * math.log1p(excess)

    def certificate(self, grad: np.ndarray) -> tuple[float, float]:
        """(relative KKT violation, bound on L(MLE) - L(theta)) from the gradient at theta.

        With g = dL/dtheta, sum_x theta_x g_x = n at every theta (each user's posterior sums to 1),
        and by Jensen's inequality (log is concave; weights c_d / n) for every theta* in the simplex

            L(theta*) - L(theta) = sum_d c_d log((G theta*)_d / (G theta)_d)
                                 <= n log(sum_x theta*_x g_x / n) <= n log(max_x g_x / n).

        So ``max_x g_x / n - 1`` (>= 0) is the relative KKT violation, zero exactly at an MLE, and
        ``n log(max_x g_x / n)`` bounds the log-likelihood still to gain: a duality-gap certificate.
        On a likely subset the bound holds against every MLE, which lies in it (004 Thm. 8.1).
        """
        return kkt_certificate(grad, self.n)


def kkt_certificate(grad: np.ndarray, n: float) -> tuple[float, float]:
    """(relative KKT violation, gap bound) from the gradient of a likelihood of ``n`` users
    (:meth:`Likelihood.certificate`, for any likelihood that gives its gradient)."""
    top = float(np.max(grad)) / n
    if not math.isfinite(top):
        return math.inf, math.inf
    excess = max(top - 1.0, 0.0)
    return excess, n * math.log1p(excess)


#: the stopping rules of :func:`gibu`
STOP_RULES = ("delta", "kkt")
#: the fixed-point schemes of :func:`gibu`
ACCELERATIONS = ("none", "squarem")


def binomial_smoothing(theta: np.ndarray) -> np.ndarray:
    """EMS's smoothing step (Li et al., SIGMOD 2020, after Silverman et al. 1990): the binomial kernel (1, 2, 1) / 4.

    Each value gets half its mass and a quarter of each neighbour's on an ordered domain; at the
    ends the kernel is cut and its remaining weights renormalized ((2, 1) / 3), then the result is
    renormalized to a distribution. A theta with full support keeps it.
    """
    theta = np.asarray(theta, dtype=float)
    out = 2 * theta
    out[1:] += theta[:-1]
    out[:-1] += theta[1:]
    out /= 4.0
    out[[0, -1]] *= 4.0 / 3.0
    return out / out.sum()


#: default relative KKT violation at which the exact-MLE rule stops
DEFAULT_TOL = 1e-6


@dataclass(frozen=True)
class EMResult:
    theta: np.ndarray
    loglik: float
    iterations: int  # EM-map evaluations after the start (passes over G, less one)
    converged: bool
    trace: np.ndarray | None = None  # L of every evaluated iterate that was kept, in order
    rule: str = "delta"  # the stopping rule that ran: "delta" or "kkt"
    kkt: float = math.nan  # relative KKT violation max_x g_x / n - 1 at theta
    gap: float = math.nan  # n log(1 + kkt) >= L(MLE) - L(theta), in nats


def check_start(start: np.ndarray | None, size: int) -> np.ndarray:
    """A full-support starting distribution (uniform if ``start`` is None)."""
    if start is None:
        return np.full(size, 1.0 / size)
    theta = np.asarray(start, dtype=float)
    if theta.shape != (size,):
        raise ParameterError(
            f"has {theta.size} entries, the domain has {size}", field="start", hint="give one entry per value"
        )
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
    stop: str = "delta",
    tol: float = DEFAULT_TOL,
    accelerate: str = "none",
    smooth: Callable[[np.ndarray], np.ndarray] | None = None,
    backend: Backend | str | None = None,
) -> EMResult:
    """Run GIBU until its stopping rule holds or after ``max_iter`` evaluations of the EM map.

    ``stop="delta"`` is the paper's rule: stop when ``|L(t) - L(t-1)| < delta``, in nats of the whole
    log-likelihood, by default :data:`DEFAULT_DELTA` = 0.01 for every n. L is a sum over the users,
    but the statistically meaningful differences of L are not: two distributions whose
    log-likelihoods differ by a fraction of a nat are equally supported by the data, whether there
    are 10^3 or 10^6 users. A per-user threshold (delta proportional to n) would chase such
    differences for longer the fewer users there are, and for strongly smoothing mechanisms the MLE
    they lead to overfits the noise: early stopping is an estimator in its own right.

    ``stop="kkt"`` computes the exact MLE: it stops when the relative KKT violation
    max_x g_x / n - 1 is below ``tol``, which certifies L(MLE) - L(theta) <= n log(1 + tol)
    (:meth:`Likelihood.certificate`); a small step is no such proof.

    ``accelerate="squarem"`` extrapolates the EM map (SQUAREM, scheme S3 of Varadhan and Roland,
    Scand. J. Stat. 2008) and keeps an extrapolated point only if it is a distribution with full
    support and does not lower L; otherwise it takes the plain EM step. L never decreases either way.

    ``smooth`` (e.g. :func:`binomial_smoothing`: EMS, Li et al. SIGMOD 2020) is applied to every EM
    image before the next iteration. EMS is not EM: it converges to a smoothed fixed point, not to
    the MLE, and L may decrease; only the plain update with the delta rule is offered with it.

    ``backend`` (a :class:`~ldpsim.estimation.backend.Backend` or its name; default: the active one,
    numpy outside :func:`~ldpsim.estimation.backend.using_backend`) is where the passes run: the likelihood is
    moved to its device once (:func:`~ldpsim.estimation.device.on_device`) and the iterates stay there; the
    result is a numpy array. With float32 passes the returned certificate is recomputed in float64.

    The returned theta is the last iterate whose log-likelihood is known, so ``loglik`` is exactly
    L(theta), and ``kkt``/``gap`` are its certificate.
    """
    theta = check_start(start, likelihood.size)
    if delta is None:
        delta = DEFAULT_DELTA
    if not delta > 0:
        raise ParameterError(f"must be > 0, got {delta}", field="delta", hint="use a positive tolerance")
    if not tol > 0:
        raise ParameterError(
            f"must be > 0, got {tol}", field="tol", hint="use a positive relative KKT tolerance, e.g. 1e-6"
        )
    if stop not in STOP_RULES:
        raise ParameterError(f"unknown rule {stop!r}", field="stop", hint=f"use one of {', '.join(STOP_RULES)}")
    if accelerate not in ACCELERATIONS:
        raise ParameterError(
            f"unknown scheme {accelerate!r}", field="accelerate", hint=f"use one of {', '.join(ACCELERATIONS)}"
        )
    if smooth is not None and (stop != "delta" or accelerate != "none"):
        raise ParameterError(
            "a smoothing step cannot be combined with stop = kkt or an acceleration (EMS does not reach the MLE)",
            field="smoothing",
            hint='use stop = "delta" and accelerate = "none" with smoothing',
        )
    chosen = as_backend(backend)
    if chosen.native:
        run = _Run(likelihood, delta, max_iter, stop, tol, trace, smooth)
    else:
        from .device import on_device  # the array API path: imported when a run asks for it

        device_smooth = None if smooth is None else lambda t: chosen.to_device(smooth(chosen.to_numpy(t)))
        run = _Run(on_device(likelihood, chosen), delta, max_iter, stop, tol, trace, device_smooth, chosen)
        theta = chosen.to_device(theta)
    if accelerate == "squarem":
        run.squarem(theta)
    else:
        run.plain(theta)
    run.certify()
    found = run.theta if chosen.native else chosen.to_numpy(run.theta)
    if not math.isfinite(run.loglik) or not np.all(np.isfinite(found)):
        raise EstimationError(
            "GIBU broke down numerically (non-finite log-likelihood)",
            hint="report this with the scenario; the mechanism's likelihoods may be inconsistent",
        )
    theta = found / found.sum()
    loglik, kkt, gap, converged = run.loglik, run.kkt, run.gap, run.converged
    if chosen.precision != "float64":  # the passes' own certificate is float32's: the returned one is float64's
        loglik, kkt, gap = likelihood.certify(theta)
        converged = converged and (stop != "kkt" or kkt < tol)
    return EMResult(
        theta,
        loglik,
        run.evaluations - 1,
        converged,
        np.array(run.history) if trace else None,
        stop,
        kkt,
        gap,
    )


class _Run:
    """The state of one GIBU run: the kept iterate, its L, gradient and certificate, the evaluation count.

    The certificate is computed from the kept gradient at every step only under the KKT rule, which
    stops on it; under the delta rule once, for the returned iterate (:meth:`certify`): on small
    domains it was a fifth of a pass.
    """

    def __init__(
        self,
        likelihood: Any,  # a Likelihood, or its passes on a device (device.DeviceLikelihood)
        delta: float,
        max_iter: int,
        stop: str,
        tol: float,
        trace: bool,
        smooth: Callable[[np.ndarray], np.ndarray] | None = None,
        backend: Backend | None = None,
    ):
        self.smooth = smooth
        # numpy itself on the native path (its operations exactly as before); else the backend's array namespace
        self.xp: Any = np if backend is None else backend.xp
        self.dot = _dot if backend is None else lambda a, b: float(self.xp.sum(a * b))
        self.lik, self.delta, self.max_iter, self.stop, self.tol, self.trace = (
            likelihood,
            delta,
            max_iter,
            stop,
            tol,
            trace,
        )
        self.evaluations = 0
        self.history: list[float] = []
        self.theta = (
            np.full(likelihood.size, np.nan) if backend is None else backend.to_device(np.full(likelihood.size, np.nan))
        )
        self.grad: np.ndarray | None = None
        self.loglik = self.kkt = self.gap = math.nan
        self.converged = False

    def evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(L(theta), EM image of theta, gradient dL/dtheta): one pass over G."""
        self.evaluations += 1
        loglik, grad = self.lik.em_parts(theta)
        return loglik, theta * grad / self.lik.n, grad

    def keep(self, theta: np.ndarray, loglik: float, grad: np.ndarray, previous: float) -> bool:
        """Record ``theta`` (and its L and gradient) as the current iterate; True if the run must stop there."""
        self.theta, self.loglik, self.grad = theta, loglik, grad
        if self.trace:
            self.history.append(loglik)
        if self.stop == "kkt":
            self.kkt, self.gap = self.lik.certificate(grad)
            self.converged = self.kkt < self.tol
        else:
            self.converged = abs(loglik - previous) < self.delta
        return self.converged or self.evaluations > self.max_iter

    def certify(self) -> None:
        """The kept iterate's certificate, if its rule did not compute it."""
        if self.stop != "kkt" and self.grad is not None:
            self.kkt, self.gap = self.lik.certificate(self.grad)

    def plain(self, theta: np.ndarray) -> None:
        previous = -math.inf
        while True:
            loglik, image, grad = self.evaluate(theta)
            if self.keep(theta, loglik, grad, previous):
                return
            theta, previous = (image if self.smooth is None else self.smooth(image)), loglik

    def squarem(self, theta0: np.ndarray) -> None:
        # One cycle: theta1 = F(theta0), theta2 = F(theta1), r = theta1 - theta0, v = theta2 - 2 theta1 + theta0,
        # alpha = -|r| / |v| (S3), theta' = theta0 - 2 alpha r + alpha^2 v; then F(theta') starts the next cycle.
        # alpha = -1 gives theta2 exactly; steps are capped at step_max, which grows while they succeed.
        step_max = 1.0
        loglik0, image0, grad0 = self.evaluate(theta0)
        if self.keep(theta0, loglik0, grad0, -math.inf):
            return
        while True:
            theta1 = image0
            loglik1, theta2, grad1 = self.evaluate(theta1)
            if self.keep(theta1, loglik1, grad1, loglik0):
                return
            r = theta1 - theta0
            v = theta2 - theta1 - r
            # norms by _dot, not np.linalg.norm: its threaded BLAS dot stalled when other processes held the
            # cores (a third of a 10^5-cell joint MLE's 77 s with two OpenBLAS threads on a loaded machine)
            norm_v = math.sqrt(self.dot(v, v))
            alpha = -math.sqrt(self.dot(r, r)) / norm_v if norm_v > 0 else -1.0
            capped = alpha <= -step_max
            alpha = max(min(alpha, -1.0), -step_max)
            candidate = theta0 - 2 * alpha * r + alpha * alpha * v
            if alpha < -1.0:
                # A value the extrapolation drives to or below zero is falling fast: extrapolate it geometrically
                # instead (theta2^2 / theta0, its own rate of decay over two more steps), so every iterate keeps
                # full support; a zero could never be raised again (001, remark after Theorem 4).
                with np.errstate(divide="ignore", invalid="ignore"):
                    fallen = theta2 * _fmin_one(self.xp, theta2 / theta0)
                candidate = self.xp.where(candidate > 0, candidate, fallen)
                candidate = candidate / self.xp.sum(candidate)  # numpy's sum is candidate.sum()
                loglik, image, grad = self.evaluate(candidate)
                if loglik >= loglik1:  # the safeguard: an extrapolation never lowers L
                    if capped and alpha == -step_max:
                        step_max *= 4
                    theta0, loglik0, image0 = candidate, loglik, image
                    if self.keep(candidate, loglik, grad, loglik1):
                        return
                    continue
                step_max = max(1.0, step_max / 4)
            elif capped:
                step_max *= 4  # the plain step was all the cap allowed: allow longer ones
            theta0 = theta2  # the plain EM step
            loglik0, image0, grad0 = self.evaluate(theta0)
            if self.keep(theta0, loglik0, grad0, loglik1):
                return


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """sum(a * b) without BLAS: its threaded 1-D dot stalls when other processes load the cores."""
    return float(np.einsum("d,d->", a, b))


def _fmin_one(xp: Any, ratio: Any) -> Any:
    """``fmin(ratio, 1)``: numpy's own on the native path; elsewhere a NaN (0 / 0) counts as 1, as fmin's does."""
    if xp is np:
        return np.fmin(ratio, 1.0)
    return xp.where(ratio < 1.0, ratio, xp.ones_like(ratio))


def _block(group: ReportGroup) -> tuple[np.ndarray, np.ndarray | LinearOperator]:
    """(shift, H) for one group: the mechanism's structured operator, or dense from log-likelihoods."""
    if len(group.plan) == 1:
        parts = group.plan[0].likelihood_operator(group.reports)
        if parts is not None:
            return parts
    rows, size = group.reports.shape[0], group.plan[0].domain.size
    named = [m.named_value_likelihood() for m in group.plan]
    if len(group.plan) > 1 and all(pair is not None for pair in named):
        for mech, column in group.columns():  # the same check a dense likelihood makes
            mech.require_outputs(column[:, 0], size)
        hit, miss = np.array(named, dtype=float).T
        return named_values_likelihood(group.reports, hit, miss, size)
    require_memory(
        24.0 * rows * size,  # the log-likelihoods, their sum over the plan and the rescaled rows
        f"the dense {rows} x {size} likelihood of plan [{', '.join(m.name for m in group.plan)}]",
        hint="use one mechanism with a structured likelihood per user (k-RR, geometric, laplace, exponential, "
        "planar, unary, local hashing), fewer distinct reports or fewer values",
    )
    log_g = group.log_likelihood()
    shift = log_g.max(axis=1)
    with np.errstate(invalid="ignore"):
        return shift, np.exp(log_g - shift[:, None])


def _columns(op: LinearOperator, support: np.ndarray) -> LinearOperator:
    """``op`` restricted to the columns in ``support``."""
    from scipy.sparse.linalg import LinearOperator  # imported only when structured blocks are used

    full = support.shape[0]

    def matvec(theta: np.ndarray) -> np.ndarray:
        x = np.zeros(full)
        x[support] = np.ravel(theta)
        return op @ x

    return LinearOperator(
        (op.shape[0], int(support.sum())), matvec=matvec, rmatvec=lambda w: (op.T @ np.ravel(w))[support], dtype=float
    )


def _stack(blocks: Sequence[np.ndarray | LinearOperator]) -> LinearOperator:
    """Blocks of rows as one operator."""
    from scipy.sparse.linalg import LinearOperator

    rows = np.cumsum([0] + [b.shape[0] for b in blocks])
    cols = blocks[0].shape[1]

    def matvec(theta: np.ndarray) -> np.ndarray:
        theta = np.ravel(theta)
        return np.concatenate([np.ravel(b @ theta) for b in blocks])

    def rmatvec(w: np.ndarray) -> np.ndarray:
        w = np.ravel(w)
        # starting from zeros(cols), not 0: the same additions, typed as an array
        return sum((np.ravel(b.T @ w[rows[i] : rows[i + 1]]) for i, b in enumerate(blocks)), np.zeros(cols))

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
