"""The papers' theory as checks a user can run.

For a mechanism (:func:`mechanism_report`): the privacy it really provides
(LDP, d-privacy per unit of distance, LIP under a prior), whether it
identifies the distribution (004, Theorem "Identification": |X| linearly
independent columns) and, where 004 Sec. 7.6 gives one, the bound on the
expected squared error of matrix inversion beside its exact value and a
simulation; and for a frequency oracle that declares it, the per-user variance
n Var[f_hat(x)] of its unbiased estimate (Wang et al. 2017's formulas and their
equivalents) beside a simulated one.

For observations and an estimate (:func:`check_estimate`): whether L is
strictly concave (004, Theorem "strict concavity", condition (iii)), whether
the MLE is unique, and a KKT certificate: theta is an MLE iff
dL/dtheta_x <= n for every x, with equality where theta_x > 0.
"""

from __future__ import annotations

import math
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.errors import LdpsimError
from ..estimation.engine import Likelihood
from ..estimation.observations import Observations
from ..model.mechanism import Mechanism
from ..model.memoized import MemoizedMechanism, PrivacyOverTime
from ..model.privacy import Privacy, geo_level, ldp_level, lip_level
from ..model.tuples import TupleMechanism
from .tuples import TupleReport, joint_log_channel, tuple_report

#: relative tolerance on singular values for numerical rank
RANK_TOL = 1e-10
#: probabilities at or below this count as zero (an EM iterate never reaches 0 exactly)
ZERO = 1e-6
#: KKT violation below which an estimate counts as an MLE
MLE_TOL = 1e-3
#: KKT violation below which the zero set of an estimate is trusted to judge uniqueness
NEAR_MLE = 1e-2

#: strict concavity of each likelihood checked (Likelihood.of shares one per observations); an entry
#: goes with its likelihood
_CONCAVE: weakref.WeakKeyDictionary[Likelihood, bool] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class InvBound:
    """A bound of 004 Sec. 7.6 on n * E||v - theta||^2 for v = q A^-1, beside its exact value and a simulation."""

    source: str
    kind: str  # "upper" or "lower"
    bound: float  # per user: the bound on E||v - theta||^2 is bound / n
    exact: float  # n * E||v - theta||^2 for the uniform theta, from the matrix
    simulated: float | None  # n * mean ||v - theta||^2 over simulations, if run
    users: int | None = None

    @property
    def holds(self) -> bool:
        return self.exact <= self.bound * (1 + 1e-9) if self.kind == "upper" else self.exact >= self.bound * (1 - 1e-9)


@dataclass(frozen=True)
class VarianceCheck:
    """The declared n Var[f_hat(x)] of a frequency oracle's unbiased estimate beside a simulation.

    The population is fixed (``users`` users spread as evenly as possible over the values);
    ``simulated`` is n times each value's sample variance over ``runs`` independent runs.
    """

    formula: tuple[float, ...]  # n Var per value, from Mechanism.estimate_variance
    simulated: tuple[float, ...] | None  # n times the sample variance per value, if simulated
    users: int
    runs: int

    @property
    def standard_error(self) -> float:
        """Approximate standard error of the simulated mean: values taken as independent, estimates near normal."""
        return float(np.mean(self.formula) * math.sqrt(2.0 / max(self.runs - 1, 1) / len(self.formula)))

    def line(self) -> str:
        f = np.array(self.formula)
        spread = f"{f.mean():.4g}" if np.ptp(f) <= 1e-3 * f.mean() else f"{f.mean():.4g} (max {f.max():.4g})"
        out = f"variance    n Var[f_hat(x)] = {spread} for an even population (formula, mean over x)"
        if self.simulated is not None:
            out += (
                f"; simulated {np.mean(self.simulated):.4g} +- {self.standard_error:.2g}"
                f" over {self.runs} runs of {self.users} users"
            )
        return out


@dataclass(frozen=True)
class MechanismReport:
    mechanism: str
    declared: Privacy
    exact: bool  # levels computed on all outputs (a finite matrix) or on sampled ones (lower bounds)
    ldp_eps: float
    geo_eps: float
    lip_eps: float | None
    outputs: int | None
    size: int  # |X|
    rank: int
    condition: float
    identifiable: bool
    has_zeros: bool
    inv_bounds: list[InvBound] = field(default_factory=list)
    #: the level of the declared notion the probabilities give (under the declared prior for LIP);
    #: None when it cannot be computed (LIP without a finite matrix, or no formal guarantee)
    declared_notion_eps: float | None = None
    #: probabilities that are 0 in double precision beside positive ones of the same output while
    #: the smallest positive ones are near the floor (~1e-308): underflow, not impossibility. The
    #: levels above are then those of the representable probabilities, and cannot prove the claim.
    underflow: int = 0
    #: eps_1, eps_tau and eps_inf of a memoized (longitudinal) mechanism, None for others
    over_time: PrivacyOverTime | None = None
    #: the levels a memoized mechanism's parameters name (e.g. {"eps_1": 1.0, "eps_inf": 4.0})
    declared_levels: dict[str, float] = field(default_factory=dict)
    #: the declared variance of the unbiased estimate beside a simulation (frequency oracles declaring one)
    variance: VarianceCheck | None = None
    #: a tuple protocol's whole-tuple channel: what it identifies, its exact levels (None for other mechanisms)
    tuples: TupleReport | None = None

    @property
    def privacy_holds(self) -> bool | None:
        """Whether the probabilities keep the declared guarantee; None if that cannot be told.

        Levels from sampled outputs are lower bounds: above the claim they prove a violation,
        below it they prove nothing (None).
        """
        if self.declared_notion_eps is None:
            return None
        claim = self.declared.eps
        if self.declared_notion_eps <= claim + 1e-9 * max(1.0, abs(claim)):
            return True if self.exact and not self.underflow else None
        return False

    @property
    def consistent(self) -> bool:
        """IBU is consistent (004 Sec. 6): identification, and dominance, which finite outputs
        without zero probabilities guarantee."""
        return self.identifiable and self.outputs is not None and not self.has_zeros

    def lines(self) -> list[str]:
        """A readable account, one finding per line."""
        lower = "" if self.exact else " (at least: computed on sampled outputs)"
        out = [f"mechanism   {self.mechanism}", f"declares    {self.declared}: {self._verdict()}"]
        out.append(f"LDP         eps = {_num(self.ldp_eps)}{lower}: the smallest eps with P(z|x) <= e^eps P(z|x')")
        if not math.isnan(self.geo_eps):
            out.append(f"d-privacy   eps = {_num(self.geo_eps)} per unit of distance{lower}")
        if self.over_time is not None:
            levels = self.over_time
            out.append(
                f"over time   eps_1 = {_num(levels.eps_1)} (one report), eps_{levels.rounds} = {_num(levels.eps_tau)}"
                f" (all {levels.rounds} reports, {levels.method}), eps_inf = {_num(levels.eps_inf)} (memoization bound)"
            )
            if self.declared_levels:
                named = ", ".join(f"{key} = {_num(value)}" for key, value in self.declared_levels.items())
                out.append(f"parameters  {named}")
        if self.lip_eps is not None:
            out.append(f"LIP         eps = {_num(self.lip_eps)} under the given prior (002 Definition 3)")
        if self.outputs is not None:
            outs = f"{self.outputs} outputs"
        elif self.over_time is not None:  # memoized: finitely many report sequences, too many to list
            outs = "finitely many report sequences (too many to list: columns of sampled ones)"
        else:
            outs = "unbounded outputs"
        ident = "identifies the distribution" if self.identifiable else "does NOT identify the distribution"
        out.append(
            f"identity    rank {self.rank} for |X| = {self.size} values and {outs}, condition number "
            f"{_num(self.condition)}: {ident} (004 Thm. 6.1)"
        )
        if self.consistent:
            out.append("consistency IBU's estimate converges to the true distribution as n grows (004 Sec. 6)")
        elif self.identifiable:
            unlisted = "report sequences not listed" if self.over_time is not None else "unbounded outputs"
            out.append(
                f"consistency identification holds; the dominance condition is not guaranteed (zeros or {unlisted})"
            )
        else:
            out.append("consistency no: different distributions give the same report distribution")
        for b in self.inv_bounds:
            sim = "" if b.simulated is None else f", simulated {b.simulated:.4g}/n over {b.users} users"
            verdict = "holds" if b.holds else "VIOLATED"
            out.append(
                f"INV error   {b.kind} bound {b.bound:.4g}/n ({b.source}); exact {b.exact:.4g}/n for uniform theta{sim}: {verdict}"
            )
        if self.variance is not None:
            out.append(self.variance.line())
        if self.tuples is not None:
            out.extend(self.tuples.lines())
        return out

    def _verdict(self) -> str:
        holds, level = self.privacy_holds, self.declared_notion_eps
        if level is None:
            return "not checked" if self.declared.notion != "none" else "nothing to check"
        found = f"its probabilities give eps = {_num(level)}"
        if holds is None and self.underflow:
            return (
                f"not disproved ({found} where representable; {self.underflow} probabilities are below the"
                " double-precision floor of ~2.2e-308, 0 or without precision)"
            )
        if holds is None:
            return f"not disproved ({found} at least, on sampled outputs)"
        return f"holds ({found})" if holds else f"VIOLATED ({found})"


def mechanism_report(
    mech: Mechanism,
    *,
    prior: np.ndarray | None = None,
    users: int | None = None,
    repetitions: int = 200,
    seed: int = 0,
) -> MechanismReport:
    """Privacy levels, identifiability and INV error bounds of a mechanism, as a report; for a tuple protocol,
    also what its whole-tuple channel identifies and its exact levels (``ldpsim.theory.tuples.tuple_report``).

    It never fails: a mechanism that claims more privacy than it gives has a report whose
    ``privacy_holds`` is False and whose privacy line says VIOLATED. A test of a plugin uses
    :func:`ldpsim.testing.check_mechanism`, which raises.
    """
    k = mech.domain.size
    enumerated = _enumerated_tuples(mech)
    if enumerated is not None:  # a tuple protocol's whole channel: exact, where sampling would give lower bounds
        log_p = enumerated.T
        columns = np.exp(log_p).T
        exact = True
    elif mech.matrix is not None and mech.log_matrix is not None:
        columns = mech.matrix
        log_p = mech.log_matrix.T  # closed-form logarithms where entries underflow, if the mechanism has them
        exact = True
    else:  # unbounded outputs: the columns of the outputs a sample produces
        values = np.arange(k).repeat(max(1, 4000 // k))
        reports = np.unique(mech.sample(values, np.random.default_rng(seed)), axis=0)
        log_p = mech.log_likelihood(reports)
        columns = np.exp(log_p).T
        exact = False
    # closed-form logarithms replaced every underflowed entry; otherwise tiny entries cannot be judged
    underflow = 0 if exact and mech.capabilities.log_matrix else _underflowed(log_p)
    lip = None
    if prior is not None:
        prior = np.asarray(prior, dtype=float)
        if prior.shape != (k,):
            raise ValueError(f"prior must have {k} entries")
        lip = lip_level(columns, prior) if exact else None
    claim = mech.privacy
    ldp = ldp_level(log_p)
    # every pair of values against every output: on a product of attributes that is O(|X|^2 |Z|), minutes at
    # 10^3 cells, for a level no tuple protocol claims
    geo = (
        math.nan if isinstance(mech, TupleMechanism) and k > GEO_MAX_TUPLES else geo_level(log_p, mech.domain.distances)
    )
    if underflow:  # the level the normal probabilities give; 0 and subnormal ones cannot be judged
        representable = np.where(log_p >= _LOG_TINY, log_p, np.nan)
        ldp, geo = _nan_level(representable, None), _nan_level(representable, mech.domain.distances)
    declared_eps = {"ldp": ldp, "geo": geo}.get(claim.notion)
    if claim.notion == "lip" and claim.prior is not None and exact:
        declared_eps = lip_level(columns, np.asarray(claim.prior, dtype=float))
    singular = np.linalg.svd(columns, compute_uv=False)
    rank = int((singular > RANK_TOL * singular[0]).sum())
    condition = float(singular[0] / singular[k - 1]) if rank == k else math.inf
    return MechanismReport(
        mechanism=repr(mech),
        declared=claim,
        exact=exact,
        ldp_eps=ldp,
        geo_eps=geo,
        lip_eps=lip,
        outputs=log_p.shape[0] if enumerated is not None else mech.output_size,
        size=k,
        rank=rank,
        condition=condition,
        identifiable=rank == k,
        has_zeros=bool((columns == 0).any()),
        underflow=underflow,
        inv_bounds=inv_bounds(mech, users=users, repetitions=repetitions, seed=seed),
        declared_notion_eps=declared_eps,
        over_time=mech.privacy_over_time if isinstance(mech, MemoizedMechanism) else None,
        declared_levels={
            key: float(value)
            for key, value in mech.get_params().items()
            if key in ("eps_1", "eps_inf") and isinstance(mech, MemoizedMechanism)
        },
        variance=variance_check(mech, users=users, seed=seed),
        tuples=tuple_report(mech) if isinstance(mech, TupleMechanism) else None,
    )


#: a tuple protocol's d-privacy level (sum of the attributes' distances) is computed up to this many cells
GEO_MAX_TUPLES = 256


def _enumerated_tuples(mech: Mechanism) -> np.ndarray | None:
    """A tuple protocol's exact ``(|X|, |Z|)`` log-channel when its outputs can be enumerated, else None."""
    if not isinstance(mech, TupleMechanism):
        return None
    try:
        return joint_log_channel(mech)
    except LdpsimError:  # too many outputs, or parts without finite outputs: sample them, as for any mechanism
        return None


def check_mechanism(mech: Mechanism, **options: Any) -> MechanismReport:
    """Deprecated name of :func:`mechanism_report` (it shared its name with ``ldpsim.testing.check_mechanism``)."""
    warnings.warn(
        "ldpsim.check_mechanism is deprecated: it returns a report and never fails; use ldpsim.mechanism_report,"
        " or ldpsim.testing.check_mechanism in a test (it raises)",
        DeprecationWarning,
        stacklevel=2,
    )
    return mechanism_report(mech, **options)


def inv_bounds(mech: Mechanism, *, users: int | None = None, repetitions: int = 200, seed: int = 0) -> list[InvBound]:
    """004 Sec. 7.6, for matrices of the two shapes it covers: k-RR (an upper bound) and the
    truncated linear geometric mechanism with alpha = e^-eps > 1/2 (a lower bound)."""
    m = mech.matrix
    if m is None or m.shape[0] != m.shape[1] or np.linalg.matrix_rank(m) < m.shape[0]:
        return []
    k = m.shape[0]
    found = []
    rr = rr_parameters(m)
    if rr is not None:
        e = rr[0] / rr[1]  # e^eps
        found.append(("004 Prop. 7.6, k-RR", "upper", ((e + k - 1) / (e - 1)) ** 2))
    alpha = _truncated_geometric(m)
    if alpha is not None and alpha > 0.5:
        beta = 1 / (1 - alpha)
        found.append(("004 Prop. 7.6, linear geometric", "lower", beta**3 - 2 * alpha * beta**2 - 2))
    if not found:
        return []
    theta = np.full(k, 1.0 / k)
    inverse = np.linalg.inv(m)
    exact = inv_mse(m, theta, inverse)
    simulated = None
    if users:
        rng = np.random.default_rng(seed)
        lam = theta @ m
        q = rng.multinomial(users, lam / lam.sum(), size=repetitions) / users
        simulated = float(users * ((q @ inverse - theta) ** 2).sum(axis=1).mean())
    return [InvBound(src, kind, float(b), exact, simulated, users) for src, kind, b in found]


#: simulated runs of the variance check: enough that the mean over values has a standard error of
#: about 1.4% (sqrt(2 / (runs k))), at least 30 and at most 100 runs
VARIANCE_VALUE_RUNS = 10_000
#: the variance check draws report counts from the matrix (not one report per user) up to this many cells
VARIANCE_COUNT_CELLS = 1 << 20


def variance_check(mech: Mechanism, *, users: int | None = None, seed: int = 0) -> VarianceCheck | None:
    """The declared n Var[f_hat(x)] at an even population of ``users`` users, beside a simulation.

    Parameters
    ----------
    mech
        A mechanism; None is returned unless it declares ``estimate_variance``.
    users
        Users of the population (None or 0: formula only, for an even distribution).
    seed
        Seed of the simulation.

    Returns
    -------
    VarianceCheck or None
        The formula per value, and n times each value's sample variance over the runs.
    """
    if not mech.capabilities.estimate_variance:
        return None
    k = mech.domain.size
    n = int(users) if users else k
    counts = np.full(k, n // k) + (np.arange(k) < n % k)
    theta = counts / n
    formula = mech.estimate_variance(theta)
    if formula is None:
        return None
    if not users:
        return VarianceCheck(tuple(formula.tolist()), None, 0, 0)
    runs = int(min(100, max(30, math.ceil(VARIANCE_VALUE_RUNS / k))))
    values = np.repeat(np.arange(k), counts)
    m = mech.matrix if mech.report_width == 1 else None
    if m is not None and m.size > VARIANCE_COUNT_CELLS:
        m = None
    rng = np.random.default_rng(np.random.SeedSequence([seed, 8]))
    inverse = None
    estimates = np.empty((runs, k))
    for run in range(runs):  # each run is vectorized over its users
        if m is not None:  # by counts: sum_x Multinomial(c_x, M[x])
            rows = np.flatnonzero(counts)
            p = m[rows] / m[rows].sum(axis=1, keepdims=True)
            total = rng.multinomial(counts[rows], p).sum(axis=0)
            z = np.flatnonzero(total)
            reports, report_counts = z[:, None], total[z]
        else:
            reports, report_counts = np.unique(mech.sample(values, rng), axis=0, return_counts=True)
        v = mech.unbiased_estimate(reports, report_counts)
        if v is None:
            full = mech.matrix if mech.report_width == 1 else None
            if full is None:
                return VarianceCheck(tuple(formula.tolist()), None, 0, 0)
            if inverse is None:
                inverse = np.linalg.pinv(full)
            share = np.bincount(reports[:, 0], weights=report_counts, minlength=full.shape[1]) / n
            v = share @ inverse
        estimates[run] = v
    return VarianceCheck(tuple(formula.tolist()), tuple((n * estimates.var(axis=0, ddof=1)).tolist()), n, runs)


def inv_mse(matrix: np.ndarray, theta: np.ndarray, inverse: np.ndarray | None = None) -> float:
    """n * E||q A^-1 - theta||^2 exactly: q is multinomial with mean lam = theta A."""
    inverse = np.linalg.inv(matrix) if inverse is None else inverse
    lam = theta @ matrix
    return float(lam @ (inverse**2).sum(axis=1) - theta @ theta)


@dataclass(frozen=True)
class EstimateReport:
    loglik: float
    kkt_violation: float  # max over x of (g_x/n - 1)+, and of |g_x/n - 1| on the support; 0 for an MLE
    strictly_concave: bool
    unique_mle: bool | None  # None when the estimate is too far from an MLE to judge

    @property
    def is_mle(self) -> bool:
        return self.kkt_violation < MLE_TOL


def kkt_violation(lik: Likelihood, theta: np.ndarray) -> float:
    """How far theta is from the MLE conditions: dL/dtheta_x <= n, with equality where theta_x > 0."""
    g = lik.gradient(theta) / lik.n
    if not np.all(np.isfinite(g)):
        return math.inf
    above = float(np.max(g - 1.0, initial=0.0))
    support = theta > ZERO
    on_support = float(np.abs(g[support] - 1.0).max()) if support.any() else 0.0
    return max(above, on_support)


def strictly_concave(lik: Likelihood) -> bool:
    """004 Theorem (strict concavity), condition (iii): no nonzero w with sum(w) = 0 has G w = 0."""
    h = _dense(lik)
    k = h.shape[1]
    basis = _sum_zero_basis(k)
    projected = h @ basis  # G restricted to directions within the simplex
    singular = np.linalg.svd(projected, compute_uv=False)
    return bool(singular.size == k - 1 and singular[-1] > RANK_TOL * max(singular[0], 1e-300))


def unique_mle(lik: Likelihood, theta: np.ndarray) -> bool:
    """Whether the MLE theta is the only one.

    All MLEs give the same report probabilities (log is strictly concave), so
    the MLEs are the points theta + w of the simplex with G w = 0 and sum w = 0.
    theta is unique iff no such w points into the simplex: none is >= 0 on the
    values where theta is 0 (then theta + t w stays a distribution for small t).
    """
    from scipy.optimize import linprog

    h = _dense(lik)
    k = h.shape[1]
    system = np.vstack([h / np.abs(h).max(axis=1, keepdims=True), np.ones((1, k))])
    _, singular, vt = np.linalg.svd(system)
    null = vt[int((singular > RANK_TOL * singular[0]).sum()) :].T  # (k, d) basis of directions w
    if null.shape[1] == 0:
        return True
    zero = theta <= ZERO
    if not zero.any():
        return False  # an interior point with a free direction: both +w and -w stay inside
    sub = null[zero]
    if np.linalg.matrix_rank(sub) < null.shape[1]:
        return False  # a free direction that leaves the zero coordinates at zero: both signs stay inside
    # Otherwise look for w = null c with w >= 0 on the zeros and some positive: maximize their sum.
    res = linprog(
        -sub.sum(axis=0), A_ub=-sub, b_ub=np.zeros(sub.shape[0]), bounds=[(-1, 1)] * null.shape[1], method="highs"
    )
    return not (res.status == 0 and res.fun is not None and -res.fun > 1e-9)


def check_estimate(observations: Observations, theta: np.ndarray) -> EstimateReport:
    """Strict concavity, KKT certificate and uniqueness for ``theta`` on ``observations``."""
    lik = Likelihood.of(observations)
    theta = np.asarray(theta, dtype=float)
    violation = kkt_violation(lik, theta)
    # A property of the observations alone: computed once, whatever the number of estimates checked.
    concave = _CONCAVE.get(lik)
    if concave is None:
        concave = _CONCAVE[lik] = strictly_concave(lik)
    # Uniqueness is judged on the estimate's zero set, which needs an (almost) converged estimate.
    unique = True if concave else (unique_mle(lik, theta) if violation < NEAR_MLE else None)
    return EstimateReport(lik.loglik(theta), violation, concave, unique)


def _dense(lik: Likelihood) -> np.ndarray:
    """The rescaled likelihood rows as an array (a structured operator applied to the identity)."""
    return lik.H if isinstance(lik.H, np.ndarray) else np.asarray(lik.H @ np.eye(lik.H.shape[1]))


def _sum_zero_basis(k: int) -> np.ndarray:
    """An orthonormal (k, k-1) basis of {w : sum(w) = 0}."""
    q, _ = np.linalg.qr(np.eye(k) - 1.0 / k)
    return q[:, : k - 1]


def rr_parameters(matrix: np.ndarray | None) -> tuple[float, float] | None:
    """(p, q) if ``matrix`` is a randomized-response matrix: square, p on the diagonal, q > 0 elsewhere, p > q."""
    if matrix is None or matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        return None
    k = matrix.shape[0]
    p, q = matrix[0, 0], matrix[0, 1]
    off = ~np.eye(k, dtype=bool)
    if (
        p > q > 0
        and np.allclose(np.diag(matrix), p, rtol=1e-12, atol=0)
        and np.allclose(matrix[off], q, rtol=1e-12, atol=0)
    ):
        return float(p), float(q)
    return None


def _truncated_geometric(m: np.ndarray) -> float | None:
    """alpha if m is the truncated geometric matrix of 001 eqs. (22-23) on consecutive values."""
    k = m.shape[0]
    if k < 3 or m[1, 1] <= 0:
        return None
    alpha = m[1, 2] / m[1, 1]
    if not 0 < alpha < 1:
        return None
    z = np.arange(k)
    c = np.where((z == 0) | (z == k - 1), 1.0, 1 - alpha) / (1 + alpha)
    expected = c[None, :] * alpha ** np.abs(z[None, :] - z[:, None])
    return float(alpha) if np.allclose(m, expected, rtol=1e-9, atol=1e-300) else None


#: below this, the smallest positive probability of a mechanism suggests that its zeros are underflow
UNDERFLOW_HINT = 1e-250
_LOG_TINY = math.log(np.finfo(float).tiny)


def _underflowed(log_p: np.ndarray) -> int:
    """Probabilities that are 0 or subnormal (without relative precision) in outputs that also have normal
    ones, when the normal ones come near the floor: underflow rather than impossibility."""
    normal = log_p >= _LOG_TINY
    short = ~normal
    if not short.any() or not normal.any() or float(log_p[normal].min()) > math.log(UNDERFLOW_HINT):
        return 0
    return int(short[normal.any(axis=1)].sum())


def _nan_level(log_p: np.ndarray, distances: np.ndarray | None) -> float:
    """ldp_level / geo_level ignoring NaN entries (pairs with an unknown probability give no constraint)."""
    if distances is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            gaps = np.nanmax(log_p, axis=1) - np.nanmin(log_p, axis=1)
        return float(np.nanmax(gaps)) if np.isfinite(gaps).any() else 0.0
    return geo_level(log_p, distances)


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"
