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
barrier identified sets the MLE's zero components to exactly zero.

The Newton iterations start after :data:`WARM_PASSES` SQUAREM passes, which certify the easy
problems (large eps) at EM's cost and give the barrier a start near the MLE. The dense Hessian
costs D |X|^2 operations for D distinct reports, so it is used only when that is affordable
(:data:`DENSE_MAX_FLOPS`). Beyond, where the operator reads its own rows (unary encodings, subset
selection, local hashing, sketches: millions of distinct reports), the Hessian is formed from a
deterministic sample of them (:func:`sampled_rows`): an estimate that makes the Newton steps inexact
but still descent steps, checked by the exact line search and certificate. Otherwise, and whenever
the Newton iterations stall, the solver hands over to SQUAREM (:func:`~ldpsim.estimation.engine.gibu`), which is what ``mle`` ran before (its
passes over a small structured likelihood's exact dense rows, :data:`DENSE_PASS_MAX_SIZE`). On a
large domain whose operator reads a few of its columns cheaply (a convolution on a 64 x 64 grid or
larger), each step instead minimizes the quadratic model over the values x >= 0 of an active set, the
MLE's likely support (sequential quadratic programming, as mixsqp), certified on the whole domain
(:func:`_active_set`). On request (``hessian="cg"``) Newton systems are solved instead by
conjugate gradients through the likelihood's structured operator. Everything is deterministic: fixed rules, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..base.errors import EstimationError, ParameterError
from .engine import DEFAULT_TOL, EMResult, Likelihood, check_start, gibu

#: the dense likelihood is formed when D |X| entries fit in this many (8 bytes each)
DENSE_MAX_ENTRIES = 1 << 24
#: ... and one Hessian, D |X|^2 multiply-adds, costs at most this many (about a second on one core):
#: beyond, tens of Newton iterations cost more than the SQUAREM passes they save on cheap operators
#: (OUE at k = 100, n = 10^5 took 14 s against SQUAREM's 10 s, with D |X|^2 = 10^9)
DENSE_MAX_FLOPS = 5e8
#: below this many values, SQUAREM's passes (the warm start, the fallback) run on the dense likelihood when
#: it fits (:data:`DENSE_MAX_ENTRIES`): on a planar grid a dense pass was 3.4x faster than the FFT one
DENSE_PASS_MAX_SIZE = 1024
#: a Hessian from a sample of rows (see :func:`sampled_rows`) reads this many rows per value ...
SAMPLE_ROWS_PER_VALUE = 16
#: ... and costs at most this many multiply-adds (about a second on one core)
SAMPLED_MAX_FLOPS = 2e10
#: how Newton systems are solved (see :func:`newton_mle`)
HESSIANS = ("auto", "sampled", "cg", "active")
#: the active set (see :func:`_active_set`): a Hessian over its values costs at most this many multiply-adds
#: (D |S|^2 in single precision: about a second and a half on one core; the MLE of a 256 x 256 grid at eps = 0.25,
#: n = 10^6 keeps 2,415 values, which 1e11 (1,745 at its D) could not hold) ...
ACTIVE_MAX_FLOPS = 2e11
#: ... after this many SQUAREM passes (ten leave nearly every value of a 64 x 64 grid above the threshold) ...
ACTIVE_WARM_PASSES = 100
#: ... it starts with the values whose mass exceeds this multiple of the uniform's and whose KKT condition
#: does not push them down (gradient >= 1) ...
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
#: and its subproblems small, and its positive values a good guess of the subproblem's (:data:`QP_GUESSES`). On the
#: 256 x 256 grid at eps = 0.25, n = 10^6: 0.5 took 17 steps, S at the budget from the 7th, 23-25 s; 0.3 took 18,
#: 22 s; 0.15 20 steps, 15-16 s, never at the budget until the 16th; 0.1 25 steps, 14 s (nearer the step cap)
ACTIVE_NEWCOMERS = 0.15
#: once S holds the budget's values and others still violate their KKT condition, the budget grows by this factor,
#: up to ACTIVE_MAX_GROWTH times its start (a 256 x 256 draw whose MLE has more positive values than 2,469: S full
#: from step 15, the KKT violation stuck at 9.4e-6, and SQUAREM from there or the warm start crawling)
ACTIVE_GROWTH, ACTIVE_MAX_GROWTH = 1.25, 2.0
#: the active set's Hessian brings a report's weight up to date when it moved by more than this factor
#: (:class:`_ActiveHessian`). On the 256 x 256 grid at eps = 0.25, n = 10^6: 0.05 took 16 steps, 29.3-30.3 s,
#: of which 4.8 s updating 112,424 weights; 0.2 one step more, 27.8-28.1 s; 128 x 128: 4.4 s and 4.2 s
ACTIVE_REWEIGHT = 0.2
#: interior-point iterations of one quadratic subproblem (each a Cholesky factorization over the active set; they
#: took 8-24 on grids up to 256 x 256) and the complementarity they reach, relative to the linear term
QP_MAX_ITER, QP_TOL = 100, 1e-14
#: guesses of the subproblem's positive values tried before its interior point (:func:`_guessed_face`), when the
#: newcomers are at most this fraction of the values kept. On the 256 x 256 grid at eps = 0.25, n = 10^6 with half
#: as many newcomers as values kept, the last 7 of 17 steps had under 15 %, and the guesses reached the solution
#: within 2-7 factorizations where the interior point took 9-15 (5 guesses left 2 of them to it); with
#: :data:`ACTIVE_NEWCOMERS` at 0.15 they reached it at 18 of 20 steps
QP_GUESSES, QP_GUESS_NEWCOMERS = 8, 0.15
#: Gondzio's centrality correctors per such iteration while its step is short (< 0.9): a solve each with the
#: iteration's factorization, kept if they lengthen the step (four 256 x 256 subproblems: 67 factorizations -> 60)
QP_CORRECTORS = 2
#: SQUAREM passes before the Newton solver starts (cheap problems are certified by then) ...
WARM_PASSES = 10
#: ... and before Newton with a sampled Hessian: its problems (millions of distinct reports) are never cheap,
#: and each SQUAREM iteration saved one Newton pass or less (OUE, OLH, THE, subset selection at k = 1024,
#: n = 10^6: 2 passes fewer with 1 than with 3, 6 fewer for OUE at eps = 4, the same maximum and zeros)
SAMPLED_WARM_PASSES = 1
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
#: fraction of the way to the boundary a step may go
_TO_BOUNDARY = 0.995
#: refinements of a float32 solve (:func:`_refined_cholesky`) before it falls back on a float64 factorization
_REFINEMENTS = 10
#: the scale 1 / sqrt(1 + extra) below which :func:`_refined_cholesky` leaves a row out of its factorization
_DECOUPLED = 1e-3
_EPS = float(np.finfo(float).eps)
#: Armijo's sufficient-decrease constant and the step shrink factor of the line search
_ARMIJO, _SHRINK = 1e-4, 0.5


def dense_likelihood(likelihood: Likelihood) -> np.ndarray | None:
    """The row-rescaled likelihood ``H`` as a dense (D, |X|) array, or None if it is too costly.

    Structured operators are read from their exact rows where they have them, else materialized
    column block by column block (a product with identity columns); dense ones are returned as
    they are. Cached per likelihood.
    """
    rows, size = likelihood.H.shape
    if rows * size > DENSE_MAX_ENTRIES or float(rows) * size * size > DENSE_MAX_FLOPS:
        return None
    cached = getattr(likelihood, "_dense", None)
    if cached is not None:
        return cached
    if isinstance(likelihood.H, np.ndarray):
        dense = likelihood.H
    elif (exact := _exact_dense(likelihood)) is not None:
        return exact
    else:
        dense = np.empty((rows, size))
        block = max(1, min(size, (1 << 22) // max(rows, size)))
        for lo in range(0, size, block):
            cols = np.zeros((size, min(block, size - lo)))
            cols[np.arange(lo, lo + cols.shape[1]), np.arange(cols.shape[1])] = 1.0
            dense[:, lo : lo + cols.shape[1]] = np.asarray(likelihood.H @ cols).reshape(rows, -1)
        np.maximum(dense, 0.0, out=dense)  # FFT round-off never makes a probability negative
    likelihood._dense = dense  # type: ignore[attr-defined]  # a cache that lives with the likelihood
    return dense


@dataclass
class RowSample:
    """A deterministic sample of a likelihood's rows, dense: ``H[index]`` with each row's weight in the sample.

    Drawn by systematic sampling proportional to the counts (positions ``(i + 1/2) n / m`` on the
    cumulative counts), so ``sum_i weight_i g(index_i)`` is an unbiased, low-variance estimate of
    ``sum_d (c_d / n) g(d)`` for any per-report g: the Hessian ``H^T diag(w / p^2) H`` in particular.
    """

    index: np.ndarray
    weight: np.ndarray
    rows: np.ndarray
    #: the sample is every row at its own weight: the Hessian is exact (to single precision)
    every_row: bool = False


def sampled_rows(likelihood: Likelihood, *, always: bool = False) -> RowSample | None:
    """The rows a Hessian in single precision is formed from: all of them when there are fewer than
    :data:`SAMPLE_ROWS_PER_VALUE` per value, else a sample of that many per value; None when the
    likelihood is neither dense nor an operator with exact rows
    (:func:`~ldpsim.estimation.operators.with_exact_rows`) or, unless ``always``, when the Hessian
    would cost more than :data:`SAMPLED_MAX_FLOPS`.

    Where the float64 Hessian is out of reach (a million distinct reports of OUE, subset selection or
    local hashing at k = 1000: ``D |X|^2 = 10^12``), one formed from tens of thousands of rows has a relative
    error of about ``sqrt(|X| / m)`` and costs a fraction of a pass per Newton iteration; the steps it gives
    are checked by the exact line search and certificate, so it changes how fast the solver converges,
    never what it converges to. With every row (a 32 x 32 grid's 1024 reports) it is the exact Hessian
    to single precision, at a quarter of the float64 one's cost.
    """
    H = likelihood.H
    exact_rows = (lambda index: H[index]) if isinstance(H, np.ndarray) else getattr(H, "rows", None)
    rows, size = H.shape
    m = min(SAMPLE_ROWS_PER_VALUE * size, rows)
    if not callable(exact_rows) or (not always and float(m) * size * size > SAMPLED_MAX_FLOPS):
        return None
    if m == rows:  # every row, at its own weight: the exact Hessian
        index = np.arange(rows)
        rows_read = np.asarray(exact_rows(index), dtype=np.float32)
        return RowSample(index, likelihood.counts / likelihood.n, rows_read, every_row=True)
    cumulative = np.cumsum(likelihood.counts)
    positions = (np.arange(m) + 0.5) * (cumulative[-1] / m)
    picked = np.minimum(np.searchsorted(cumulative, positions, side="right"), rows - 1)
    index, times = np.unique(picked, return_counts=True)
    return RowSample(index, times / m, np.asarray(exact_rows(index), dtype=np.float32))


@dataclass
class _Point:
    """An iterate x > 0 (not normalized) with what one pass over H gives about it."""

    x: np.ndarray
    p: np.ndarray  # H x
    f: float  # -sum w log p + sum x
    loglik: float = math.nan  # L(x / sum x)
    kkt: float = math.nan
    grad: np.ndarray = field(default_factory=lambda: np.zeros(0))  # H^T (w / p)


class _Solver:
    """One likelihood's products: H x, H^T v, and Newton systems (B + diag) dx = rhs, B the Hessian of f.

    With ``dense`` (D, |X|) the Hessian is formed and factorized, and with a ``sample``
    (:class:`RowSample`) it is formed from those rows alone; without either, its systems are solved by
    conjugate gradients through Hessian-vector products B v = H^T (w / p^2 * (H v)), two applications
    of the structured operator, preconditioned by diag((B x + z) / x): since B has nonnegative entries,
    diag(B x / x) bounds B from above (the majorizer behind EM's update), so the first CG step is an
    EM-like step and the next ones add the curvature EM ignores.
    """

    def __init__(
        self,
        likelihood: Likelihood,
        dense: np.ndarray | None,
        named: tuple[np.ndarray, float] | None = None,
        sample: RowSample | None = None,
    ):
        self.lik = likelihood
        self.H = likelihood.H if dense is None else dense
        self.dense = dense is not None
        self.named = named  # (the value each report names or -1, r): H = r 1 1^T + (1 - r) S, see named_columns
        self.sample = sample  # rows that stand for all of them in the Hessian, see sampled_rows
        self.c = likelihood.counts
        self.n = likelihood.n
        self.w = self.c / self.n
        self.sqrt_w = np.sqrt(self.w)
        self.passes = 0

    def point(self, x: np.ndarray) -> _Point:
        """f and H x at x: one pass (the gradient, when the point is kept, completes it)."""
        self.passes += 1
        p = np.asarray(self.H @ x).ravel()
        with np.errstate(divide="ignore", invalid="ignore"):
            f = -float(np.einsum("d,d->", self.w, np.log(p))) + float(x.sum())
        return _Point(x, p, f if math.isfinite(f) else math.inf)

    def complete(self, pt: _Point) -> None:
        """The gradient, L(x / sum x) and its certificate (see Likelihood.certificate)."""
        s = float(pt.x.sum())
        pt.grad = np.asarray(self.H.T @ (self.w / pt.p)).ravel()
        pt.loglik = self.n * (-(pt.f - s) - math.log(s)) + self.lik._constant
        pt.kkt = max(s * float(pt.grad.max()) - 1.0, 0.0)  # g(theta) / n = s H^T(w / p)

    def system(
        self, pt: _Point, diag: np.ndarray, free: np.ndarray | None = None, rtol: float = 1e-2
    ) -> Callable[[np.ndarray], np.ndarray]:
        """A solver of (B + diag(diag)) dx = rhs at ``pt``, over the ``free`` values only if given."""
        if self.named is not None:
            self.passes += 1
            return self._woodbury(pt, diag, free)
        if self.dense or self.sample is not None:
            if self.sample is None:
                self.passes += 1  # forming the Hessian reads H once
                a = self.H * (self.sqrt_w / pt.p)[:, None]
                hess = a.T @ a
            else:  # a sample's Hessian reads its rows only, in single precision: an estimate to ~sqrt(|X| / m) anyway
                scale = np.sqrt(self.sample.weight) / pt.p[self.sample.index]
                top = scale.max()
                a32 = self.sample.rows * (scale / top).astype(np.float32)[:, None]
                hess = (a32.T @ a32).astype(float) * top**2
            if free is not None:
                hess = hess[np.ix_(free, free)]
            return _factor(hess + np.diag(diag))
        return self._cg(pt, diag, free, rtol)

    def _woodbury(self, pt: _Point, diag: np.ndarray, free: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
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
        self, pt: _Point, diag: np.ndarray, free: np.ndarray | None, rtol: float
    ) -> Callable[[np.ndarray], np.ndarray]:
        from scipy.sparse.linalg import LinearOperator, cg

        weight = self.w / pt.p**2
        size = pt.x.size
        mask = np.ones(size, dtype=bool) if free is None else free
        m = int(mask.sum())

        def hess(v: np.ndarray) -> np.ndarray:
            full = np.zeros(size)
            full[mask] = np.ravel(v)
            out = np.asarray(self.H.T @ (weight * np.asarray(self.H @ full).ravel())).ravel()[mask]
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


def named_columns(likelihood: Likelihood) -> tuple[np.ndarray, float] | None:
    """(per report: the column of the value it names, or -1 off the support; r) when every user sent one
    report naming a value, P(z | z) > P(z | x != z) (k-RR), so H[d, x] = 1 at the named value and r
    elsewhere; None otherwise. Checked against a product with H, so a mechanism scaling its rows
    differently is simply not treated as this structure."""
    groups = likelihood.observations.groups
    if len(groups) != 1 or len(groups[0].plan) != 1:
        return None
    pair = groups[0].plan[0].named_value_likelihood()
    if pair is None or not pair[0] > pair[1]:
        return None
    r = math.exp(pair[1] - pair[0])
    columns = groups[0].reports[:, 0]
    if likelihood.support is not None:
        columns = np.where(likelihood.support, np.cumsum(likelihood.support) - 1, -1)[columns]
    probe = np.cos(np.arange(likelihood.size))  # any vector with distinct entries
    expected = r * probe.sum() + (1.0 - r) * np.where(columns >= 0, probe[np.maximum(columns, 0)], 0.0)
    if columns.size != likelihood.H.shape[0] or not np.allclose(
        np.asarray(likelihood.H @ probe).ravel(), expected, rtol=1e-12, atol=1e-12 * likelihood.size
    ):
        return None
    return columns, r


def _factor(matrix: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
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
            factor = cho_factor(scaled + ridge * np.eye(len(d)) if ridge else scaled, check_finite=False)
        except LinAlgError:
            continue
        return lambda rhs: cho_solve(factor, rhs / d, check_finite=False) / d
    raise LinAlgError("not positive definite")


def newton_mle(
    likelihood: Likelihood,
    start: np.ndarray | None = None,
    *,
    tol: float = DEFAULT_TOL,
    max_iter: int = 1_000_000,
    trace: bool = False,
    warm_passes: int | None = None,
    hessian: str = "auto",
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
        "auto": form and factorize the Hessian; where that is too costly (:data:`DENSE_MAX_ENTRIES`,
        :data:`DENSE_MAX_FLOPS`), form it from a sample of rows (:func:`sampled_rows`) if the operator
        reads its rows, else, where the operator reads a few of its columns cheaply (a convolution on a
        large grid), iterate on an active set (:func:`_active_set`), else run SQUAREM. "sampled": the
        sampled Hessian whatever the size. "active": the active set whatever the size (the operator must
        read its rows). "cg": conjugate gradients through Hessian-vector products, whatever the size
        (fewer passes than SQUAREM in
        benchmarks/RESULTS.md, but at small eps its CG runs hit :data:`CG_MAX_ITER`: the
        preconditioner does not capture a smoothing kernel's ill-conditioning).

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
    reads_rows = isinstance(likelihood.H, np.ndarray) or callable(getattr(likelihood.H, "rows", None))
    if hessian in ("sampled", "active") and not reads_rows:  # both form their Hessians from exact rows
        raise ParameterError(
            "this likelihood's operator cannot read its rows",
            field="hessian",
            hint="use hessian='auto'; a structured operator offers rows through ldpsim.with_exact_rows",
        )
    named = named_columns(likelihood) if hessian == "auto" else None
    dense = None if hessian != "auto" or named is not None else dense_likelihood(likelihood)
    sample = None
    if hessian == "sampled" or (hessian == "auto" and dense is None and named is None):
        sample = sampled_rows(likelihood, always=hessian == "sampled")
    passes = _for_passes(likelihood, dense)
    active = hessian == "active" or (
        hessian == "auto" and dense is None and named is None and sample is None and _cheap_columns(likelihood)
    )
    if warm_passes is None:
        warm_passes = ACTIVE_WARM_PASSES if active else WARM_PASSES if sample is None else SAMPLED_WARM_PASSES
    if dense is None and named is None and sample is None and hessian == "auto" and not active:
        return gibu(passes, theta0, stop="kkt", tol=tol, max_iter=max_iter, trace=trace, accelerate="squarem")
    warm = gibu(
        passes, theta0, stop="kkt", tol=tol, max_iter=min(warm_passes, max_iter), trace=trace, accelerate="squarem"
    )
    if warm.converged or max_iter <= warm_passes:
        return warm
    if active:
        return _active_set(likelihood, passes, warm, tol, max_iter, trace)
    solver = _Solver(likelihood, dense, named, sample)
    solver.passes = warm.iterations + 1
    history: list[float] = list(warm.trace) if warm.trace is not None else []
    # EM's iterates can underflow to zero: mix in a trace of the uniform so every value can still rise
    interior = (1.0 - _MIX) * warm.theta + _MIX / warm.theta.size
    best = _interior_point(solver, interior, tol, history)
    if best.kkt >= tol or best.loglik < warm.loglik:
        # stalled (round-off at extreme precision, a degenerate Hessian): SQUAREM from the likelier of the
        # Newton iterate and the warm start, both of full support
        full = bool(np.all(best.x > 0))
        theta = best.x / best.x.sum() if full and best.loglik >= warm.loglik else interior
        # on to tol * SHARPEN, as the Newton iterations go once certified: SQUAREM from another start than
        # `mle`'s own could stop just inside tol and below it (a 4-value BLH problem: 1.2e-6 nats lower)
        em = gibu(passes, theta, stop="kkt", tol=tol * SHARPEN, max_iter=max_iter, trace=trace, accelerate="squarem")
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
        likelihood.loglik(theta),  # from the distribution itself, as EM's: no rounding from rescaling x
        solver.passes - 1,
        True,
        np.array(history) if trace else None,
        "kkt",
        best.kkt,
        likelihood.n * math.log1p(best.kkt),
    )


def _cheap_columns(likelihood: Likelihood) -> bool:
    """Whether the likelihood's operator reads a few of its columns at their cost alone (a convolution's kernel
    lookups), which the active set (:func:`_active_set`) needs on a domain too large for its whole rows."""
    return callable(getattr(likelihood.H, "rows", None)) and bool(getattr(likelihood.H, "rows_take_columns", False))


def _active_set(
    likelihood: Likelihood, passes: Likelihood, warm: EMResult, tol: float, max_iter: int, trace: bool
) -> EMResult:
    """The exact MLE on a large domain whose MLE has a small support: sequential quadratic programming on an active set.

    At small eps on a large grid the MLE is zero on most values (3,919 of 4,096 on a 64 x 64 grid at
    eps = 0.25; 63,121 of 65,536 on a 256 x 256 one at n = 10^6), and a Hessian over the whole domain
    cannot be formed. As in mixsqp (Kim, Carbonetto, Stephens, Anitescu 2020), each step minimizes the
    quadratic model of f at x over the active set S, subject to x >= 0
    (:func:`_nonnegative_qp`), with the Hessian over S kept up to date in single precision from the exact
    columns ``H[:, S]`` (:class:`_ActiveHessian`), then takes the longest step
    towards its solution that Armijo's rule accepts, through the whole operator. The subproblem's solution
    has exact zeros, so the iterates do: a value leaves S when it is zero, and the values whose KKT
    condition fails most (gradient above 1: :meth:`Likelihood.certificate`) join it, one per neighbourhood
    first (:func:`_newcomers`), at most :data:`ACTIVE_NEWCOMERS` as many as S keeps. Only the whole domain's certificate ends the iterations, so the result is certified exactly as
    SQUAREM's would be.

    This replaced restricted interior-point problems solved round after round (each about 13 Hessians,
    with zeros identified only when a final step kept the certificate): one Hessian per step is what a pass
    over the data costs here, and the subproblems' many factorizations are over |S| values alone.

    S starts from the warm start's values with more than :data:`ACTIVE_THRESHOLD` times the uniform's
    mass that EM is not draining, thinned evenly to :data:`ACTIVE_START` of what a Hessian of
    :data:`ACTIVE_MAX_FLOPS` holds (so it still covers every region the data does). When L stops rising (:data:`ACTIVE_STALL`), or the KKT
    violation would need more than :data:`ACTIVE_MAX_STEPS` steps even at its fastest rate so far
    (:func:`_steps_to_tol`: a support too large for the budget), SQUAREM continues from the warm start: what
    ``mle`` runs on such domains without this path.
    """
    from .operators import exact_block

    H = likelihood.H
    size, rows = likelihood.size, H.shape[0]
    budget = initial_budget = max(1, int(math.sqrt(ACTIVE_MAX_FLOPS / rows)))
    history: list[float] = list(warm.trace) if warm.trace is not None else []
    solver = _Solver(likelihood, None)
    solver.passes = warm.iterations + 1  # passes so far, the warm start's included
    g = np.asarray(likelihood.gradient(warm.theta)).ravel() / likelihood.n
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
        y = _nonnegative_qp(hess, grad_f[active] - hess @ xa, xa, guess=xa > 0 if settled else None)
        direction = y - xa
        slope = float(grad_f[active] @ direction)
        if not slope < 0:
            break
        full, exact = np.zeros(size), pt.x.copy()
        full[active], exact[active] = direction, y  # the QP's solution itself at a full step: its zeros exact
        trial = _backtrack(solver, pt.x, full, pt.f, slope, 1.0, exact=exact)
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
        loglik, kkt, gap = likelihood.certify(theta)  # from the distribution itself, as EM's
        solver.passes += 1
        if kkt < tol and loglik >= warm.loglik:
            return EMResult(
                theta, loglik, solver.passes - 1, True, np.array(history) if trace else None, "kkt", kkt, gap
            )
    # SQUAREM from the warm start: an active set's iterate has exact zeros, which EM raises only from a trace of
    # mass, thousands of times slower (136,501 passes on a 64 x 64 grid where SQUAREM from the warm start takes 12,000)
    count = solver.passes
    start = (1.0 - _MIX) * warm.theta + _MIX / size
    em = gibu(passes, start, stop="kkt", tol=tol, max_iter=max(0, max_iter - count), trace=trace, accelerate="squarem")
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


def _nonnegative_qp(hess: np.ndarray, c: np.ndarray, start: np.ndarray, guess: np.ndarray | None = None) -> np.ndarray:
    """argmin over y >= 0 of y^T hess y / 2 + c^T y, for positive definite ``hess``: the active set's subproblem.

    A primal-dual interior-point method (Mehrotra's predictor-corrector) on the Jacobi-scaled problem (values
    whose curvature differs by orders of magnitude then converge alike): the data are not read, so it runs
    until the complementarity is negligible (:data:`QP_TOL`), where a value's size and its multiplier's
    separate by orders of magnitude. The values smaller than their multiplier are set to exactly zero, and if
    the problem restricted to the others has a positive solution (one factorization), that is returned.
    Its systems are factorized in single precision and refined to double's accuracy
    (:func:`_refined_cholesky`: 1.5-2x faster at 2,400 values), in double where that fails, and each
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
            solve = _refined_cholesky(q, single, z / y, rowsum)
            dy = solve(-residual - z, refine=False)  # the affine step (mu = 0): its centring, then the corrector
            dz = -z - z / y * dy
            mu_aff = float((y + _step(y, dy) * dy) @ (z + _step(z, dz) * dz)) / m
            target = (mu_aff / mu) ** 3 * mu  # Mehrotra's centring
            comp = y * z + dy * dz - target
            dy = solve(-residual - comp / y)
            dz = (-comp - z * dy) / y
            a_y, a_z = _step(y, dy, 1.0 / _TO_BOUNDARY), _step(z, dz, 1.0 / _TO_BOUNDARY)
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
                b_y, b_z = _step(y, c_dy, 1.0 / _TO_BOUNDARY), _step(z, c_dz, 1.0 / _TO_BOUNDARY)
                if min(b_y, b_z) < min(a_y, a_z) + 0.05:
                    break
                comp, dy, dz, a_y, a_z = c_comp, c_dy, c_dz, b_y, b_z
        except LinAlgError:
            break
        y = y + min(1.0, _TO_BOUNDARY * a_y) * dy
        z = np.maximum(z + min(1.0, _TO_BOUNDARY * a_z) * dz, 1e-300)
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
    return _refined_cholesky(q[block], single[block], np.zeros(index.size), rowsum[index])(-c[index])


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
    the interior point's 9-15. The face's systems are solved to double's accuracy (:func:`_refined_cholesky`) and
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


def _refined_cholesky(
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
    :func:`_factor` makes); a small ridge rescues one that round-off made indefinite."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    for ridge in (0.0, 1e-12, 1e-9, 1e-6):
        try:
            factor = cho_factor(matrix + ridge * np.eye(len(matrix)) if ridge else matrix, check_finite=False)
        except LinAlgError:
            continue
        return lambda rhs: cho_solve(factor, rhs, check_finite=False)
    raise LinAlgError("not positive definite")


def _exact_dense(likelihood: Likelihood) -> np.ndarray | None:
    """A structured likelihood's exact rows (a convolution's: each entry a sum of positives) as one dense
    array, cached with the likelihood; None if its operator has no exact rows.

    Products with identity columns would re-run a convolution's accuracy guard on nearly every entry.
    """
    exact_rows = getattr(likelihood.H, "rows", None)
    if not callable(exact_rows):
        return None
    dense = getattr(likelihood, "_dense", None)
    if dense is None:
        dense = np.asarray(exact_rows(np.arange(likelihood.H.shape[0])), dtype=float)
        likelihood._dense = dense  # type: ignore[attr-defined]  # a cache that lives with the likelihood
    return dense


def _for_passes(likelihood: Likelihood, dense: np.ndarray | None) -> Likelihood:
    """``likelihood`` itself, or a shallow copy over its dense matrix where a dense pass is the cheaper one.

    Below :data:`DENSE_PASS_MAX_SIZE` values an operator that says so (``dense_passes_faster``: an FFT
    convolution and its accuracy guard) costs more per pass than a dense product; its exact rows are
    materialized once (cached with ``likelihood``) when they fit. Same probabilities, so the same MLE,
    certified the same way.
    """
    small = likelihood.size <= DENSE_PASS_MAX_SIZE and likelihood.H.shape[0] * likelihood.size <= DENSE_MAX_ENTRIES
    # only where a dense pass is the cheaper one (a convolution's FFT and guard; packed bits are cheaper as they are)
    if dense is None and small and getattr(likelihood.H, "dense_passes_faster", False):
        dense = _exact_dense(likelihood)
    if dense is None or dense is likelihood.H:
        return likelihood
    copy = object.__new__(type(likelihood))
    copy.__dict__.update(likelihood.__dict__)
    copy.H = dense
    return copy


def _interior_point(solver: _Solver, theta0: np.ndarray, tol: float, history: list[float]) -> _Point:
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
            a_p, a_d = _step(x, dx_aff), _step(z, dz_aff)
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
        alpha = min(1.0, _TO_BOUNDARY * _step(x, dx, 1.0 / _TO_BOUNDARY))
        merit = pt.f - target * float(np.log(x).sum())
        trial = _backtrack(solver, x, dx, merit, slope, alpha, barrier=target)
        if trial is None:
            break
        solver.complete(trial)
        history.append(trial.loglik)
        z = np.maximum(z + min(1.0, _TO_BOUNDARY * _step(z, dz, 1.0 / _TO_BOUNDARY)) * dz, 1e-300)
        pt = trial
        certified, was = pt.kkt < tol, best.kkt < tol
        if (certified and not was) or (certified == was and pt.loglik >= best.loglik):
            best, best_z = pt, z
    if best.kkt < tol:
        return _polish(solver, best, best_z, tol, history) or best
    return best


def _backtrack(
    solver: _Solver,
    origin: np.ndarray,
    direction: np.ndarray,
    start: float,
    slope: float,
    alpha: float,
    *,
    barrier: float = 0.0,
    exact: np.ndarray | None = None,
) -> _Point | None:
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


def _step(v: np.ndarray, dv: np.ndarray, cap: float = 1.0) -> float:
    """The longest step in [0, cap] keeping v + step * dv >= 0."""
    neg = dv < 0
    if not np.any(neg):
        return cap
    return min(cap, float(np.min(-v[neg] / dv[neg])))


def _polish(solver: _Solver, pt: _Point, z: np.ndarray, tol: float, history: list[float]) -> _Point | None:
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
