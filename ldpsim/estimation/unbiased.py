"""Unbiased frequency estimates: what matrix-inversion estimators post-process, and their moments.

A plan's unbiased estimate is, per plan of reports:

* one mechanism: its own unbiased estimate if it has one, else ``q A^+`` (A its matrix), in closed form
  when the mechanism declares ``A = a I + b 11^T`` (:meth:`~ldpsim.Mechanism.diagonal_plus_constant`,
  k-RR): ``A^-1 = (I - c 11^T) / a`` with ``c = b / (a + |X| b)``, O(|X|) instead of a dense solve;
* several reports: ``q A^+`` of the plan's joint matrix (a row-wise Kronecker product) when it has at
  most :data:`MAX_JOINT_OUTPUTS` columns; beyond, the average of each report's own unbiased estimate
  (its mechanism's, or its matrix inverted). Given the users' values the reports are drawn
  independently, so each is an unbiased estimate and so is their average; the joint matrix, which
  grows as the product of the reports' outputs, is never formed (OUE on 10 values, 4 reports:
  80 GiB).

:func:`plan_moments` gives the per-user variances of that estimate, which its intervals state and the
planner's analytic answers use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..base.errors import EstimationError
from ..base.memory import require_memory
from ..model.mechanism import Mechanism
from .observations import Observations, merge_rows

#: largest joint output alphabet of a plan whose joint matrix INV inverts: 2 M columns of a 100-value
#: domain take 1.6 GB per copy; a plan with more is estimated report by report (see the module's doc)
MAX_JOINT_OUTPUTS = 2_000_000


def count_estimate_variance(theta: np.ndarray, p: float, q: float, p_minus_q: float | None = None) -> np.ndarray:
    """``n Var[f_hat(x)]`` of ``f_hat(x) = (C_x / n - q) / (p - q)`` for a fixed population.

    The estimate of every "pure" frequency oracle (Wang et al. 2017): a report supports x
    with probability p if the user holds x, q otherwise, independently across users, so
    ``C_x`` sums n theta_x Bernoulli(p) and n (1 - theta_x) Bernoulli(q) draws and
    ``n Var = (theta_x p (1 - p) + (1 - theta_x) q (1 - q)) / (p - q)^2``.

    Parameters
    ----------
    theta
        The users' empirical distribution.
    p, q
        The probabilities of supporting x for a user holding x, and holding another value.
    p_minus_q
        ``p - q`` computed without cancellation, if the caller has it.

    Returns
    -------
    numpy.ndarray
        The per-user variances, one per value.
    """
    theta = np.asarray(theta, dtype=float)
    gap = p - q if p_minus_q is None else p_minus_q
    return (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / gap**2


def _finite_matrix(mech: Mechanism) -> np.ndarray:
    """``mech.matrix``, or EstimationError if the mechanism has none (infinitely many outputs)."""
    m = mech.matrix
    if m is None:
        raise EstimationError(
            f"matrix inversion needs mechanisms with a finite matrix; {mech!r} has none",
            hint="use ibu for this mechanism",
        )
    return m


def plan_matrix(plan: Sequence[Mechanism]) -> np.ndarray:
    """``(|X|, prod |Z_j|)`` matrix of a plan: P(report tuple | x), a row-wise Kronecker product.

    Raises
    ------
    EstimationError
        If the plan has more than :data:`MAX_JOINT_OUTPUTS` joint outputs, before the product is formed.
    """
    joint: np.ndarray | None = None
    for mech in plan:
        m = _finite_matrix(mech)
        if joint is not None and float(joint.shape[1]) * m.shape[1] > MAX_JOINT_OUTPUTS:
            raise EstimationError(
                f"the plan [{', '.join(map(repr, plan))}] has more than {MAX_JOINT_OUTPUTS:,} joint outputs",
                hint="use ibu, which works on the observed reports only",
            )
        joint = m if joint is None else (joint[:, :, None] * m[:, None, :]).reshape(m.shape[0], -1)
    assert joint is not None, "a plan has at least one mechanism"
    if joint.shape[1] > MAX_JOINT_OUTPUTS:
        raise EstimationError(
            f"{plan[0]!r} has more than {MAX_JOINT_OUTPUTS:,} outputs",
            hint="use ibu, which works on the observed reports only",
        )
    return joint


def _output_count(mech: Mechanism) -> int | None:
    """A mechanism's number of outputs: declared, else its matrix's columns (None without a finite matrix)."""
    count = mech.output_count()
    if count is None and mech.matrix is not None:
        count = int(mech.matrix.shape[1])
    return count


def inverts_jointly(plan: Sequence[Mechanism]) -> bool:
    """Whether a plan of several reports is estimated through its joint matrix (else report by report).

    Joint when every mechanism has a finite matrix and their outputs multiply to at most
    :data:`MAX_JOINT_OUTPUTS`; a plan of one report is always estimated as itself.
    """
    if len(plan) == 1:
        return True
    joint = 1.0
    for mech in plan:
        count = _output_count(mech)
        if count is None:
            return False
        joint *= count
    return joint <= MAX_JOINT_OUTPUTS


def inversion_bytes(plan: Sequence[Mechanism]) -> float | None:
    """Bytes matrix inversion takes on ``plan``: three copies of the (|X|, prod |Z_j|) matrix it inverts.

    That is the joint matrix of a plan estimated jointly, the largest report's matrix of one estimated
    report by report (:func:`inverts_jointly`). None when the plan needs no matrix (a mechanism with
    its own unbiased estimate) or its mechanisms cannot tell their output count without building it.
    """
    if len(plan) == 1 and (plan[0].capabilities.unbiased_estimate or plan[0].diagonal_plus_constant() is not None):
        return None
    if not inverts_jointly(plan):
        alone = [inversion_bytes((mech,)) for mech in plan]
        return max((b for b in alone if b is not None), default=None)
    counts = [mech.output_count() for mech in plan]
    if any(c is None for c in counts):
        return None
    joint = float(np.prod(np.array(counts, dtype=float)))
    return 3 * 8.0 * plan[0].domain.size * joint


def check_unbiased_memory(plans: Sequence[Sequence[Mechanism]]) -> None:
    """Refuse, before a run, plans whose matrices :func:`unbiased_estimate` could not hold in memory.

    A plan's (|X|, prod |Z_j|) matrix and the least-squares solve on it take about three copies of
    it; a plan estimated report by report (:func:`inverts_jointly`) only each report's matrix.
    Mechanisms with their own unbiased estimate, or that cannot tell their output count without
    building the matrix, are left to the checks made when the matrix is built.
    """
    for plan in plans:
        if not inverts_jointly(plan):
            check_unbiased_memory([(mech,) for mech in plan])
            continue
        nbytes = inversion_bytes(plan)
        if nbytes is None:
            continue
        joint = nbytes / (3 * 8.0 * plan[0].domain.size)
        size = plan[0].domain.size
        require_memory(
            nbytes,
            f"matrix inversion on the {size} x {joint:.0f} matrix of [{', '.join(m.name for m in plan)}]",
            hint="drop the inversion estimators (ibu uses the mechanisms' structured likelihoods), or use fewer values",
        )


def unbiased_estimate(observations: Observations) -> np.ndarray:
    """v with E[v] = theta: per plan, the mechanism's own unbiased estimate if it has one,
    else q A^+ (A^-1 when square), or for a plan too large to invert jointly the average of its
    reports' (see the module's doc); averaged with weights n_plan / n. Per-bit counts drawn without
    reports (:attr:`Observations.tallies`) give their mechanism's estimate from those counts.

    Each plan's users are an iid sample of the population, so each plan gives
    an unbiased estimate; weighting by size combines them. Computed once per
    observations (read-only): every inversion estimator of a run, and its
    intervals, start from it.
    """
    return observations.derived("unbiased_estimate", lambda: _unbiased_estimate(observations))


def _unbiased_estimate(observations: Observations) -> np.ndarray:
    total = np.zeros(observations.domain.size)
    for group in observations.groups:
        if inverts_jointly(group.plan):
            v = _plan_estimate(group.plan, group.reports, group.counts, group.n)
        else:  # report by report: each an unbiased estimate, and so their average (see the module's doc)
            v = np.zeros(observations.domain.size)
            for mech, cols in group.columns():
                reports, counts = merge_rows(cols, group.counts)
                v += _plan_estimate((mech,), reports, counts, group.n)
            v /= len(group.plan)
        total += group.n / observations.n * v
    for tally in observations.tallies:  # per-bit counts drawn without reports: the mechanism's estimate from them
        mech = tally.plan[0]
        from_bits = mech.bit_count_estimate(tally.tally, tally.n)
        if from_bits is None:
            raise EstimationError(
                f"{mech!r} has no unbiased estimate for these parameters", hint="use ibu, on users drawn one by one"
            )
        total += tally.n / observations.n * from_bits
    total.setflags(write=False)
    return total


def _plan_estimate(plan: Sequence[Mechanism], reports: np.ndarray, counts: np.ndarray, n: float) -> np.ndarray:
    """The unbiased estimate of one plan's reports: the mechanism's own, or q A^+ of the plan's matrix."""
    if len(plan) == 1:  # a mechanism may know a better unbiased estimate than inverting its matrix
        v = plan[0].unbiased_estimate(reports, counts)
        if v is not None:
            return v
        structure = plan[0].diagonal_plus_constant()
        if structure is not None:
            return _diagonal_plus_constant_estimate(plan[0], structure, reports, counts, n)
    a = plan_matrix(plan)
    widths = [_finite_matrix(mech).shape[1] for mech in plan]
    flat = np.ravel_multi_index(tuple(reports.T), widths)
    q = np.zeros(a.shape[1])
    np.add.at(q, flat, counts / n)
    v, *_ = np.linalg.lstsq(a.T, q, rcond=None)
    return v


def _diagonal_plus_constant_estimate(
    mech: Mechanism, structure: tuple[float, float], reports: np.ndarray, counts: np.ndarray, n: float
) -> np.ndarray:
    """``q A^-1`` for ``A = a I + b 11^T``: ``(q - c sum(q)) / a`` with ``c = b / (a + |X| b)``, O(|X|).

    ``A^-1 = (I - c 11^T) / a`` (Sherman-Morrison); A is symmetric, so ``q A^-1 = A^-1 q``. The same
    numbers as the dense solve to rounding (the tests compare them).
    """
    a, b = structure
    k = mech.domain.size
    z = reports[:, 0]
    mech.require_outputs(z, k)
    q = np.zeros(k)
    np.add.at(q, z, counts / n)
    return (q - b / (a + k * b) * q.sum()) / a


@dataclass(frozen=True)
class Moments:
    """Per-user moments of a plan's unbiased estimate ``v`` from n users whose values are drawn from theta.

    Attributes
    ----------
    variance
        ``(K,)`` n Var[v_x], the users' values drawn from theta: what the estimate's intervals state.
    given
        ``(K,)`` n Var[v_x | the users' values]: the spread of its error against the users' own
        values (what the metrics score); None where not asked for.
    bias
        ``(K,)`` E[v] - theta: zero but for a matrix without a left inverse.
    covariance
        ``(K, K)`` n Cov[v], or None where only the variances are known (a mechanism's own estimate).
    source
        Where the moments come from: ``matrix`` (the inverted matrix's exact covariance),
        ``estimate_variance`` (the mechanism's closed form) or ``per report`` (their average's).
    """

    variance: np.ndarray
    given: np.ndarray | None
    bias: np.ndarray
    covariance: np.ndarray | None
    source: str
    #: n Cov[v | the users' values] and the matrix R with E[v | values] = R theta (None: the identity), where
    #: known: what averaging reports needs
    given_covariance: np.ndarray | None = None
    mean_map: np.ndarray | None = None


def plan_moments(plan: Sequence[Mechanism], theta: np.ndarray, *, given: bool = True) -> Moments | None:
    """The per-user moments of the unbiased estimate :func:`unbiased_estimate` forms for ``plan``.

    * A mechanism with its own unbiased estimate: its declared ``n Var[v_x]`` for a fixed population
      (:meth:`~ldpsim.Mechanism.estimate_variance`), plus, for users drawn from theta, the variance
      of their empirical frequency: ``n Var[v_x] = estimate_variance(theta)_x + theta_x (1 - theta_x)``
      (law of total variance; the first term is linear in the users' empirical distribution, so its
      mean over the draws is its value at theta). No covariance between values: None.
    * A matrix inverted, ``v = q A^+``: linear in the multinomial frequencies q with mean
      ``lambda = theta A``, so ``n Cov[v] = A^+T (diag(lambda) - lambda lambda^T) A^+`` exactly, and
      given the users' values ``A^+T (diag(lambda) - A^T diag(theta) A) A^+``.
    * Reports estimated one by one and averaged (``tau`` of them): independent given the values, so
      ``n Cov[v | values] = sum_j C_j / tau^2`` and ``n Cov[v] = that + R (diag(theta) - theta theta^T) R^T``,
      ``R`` the mean of the reports' ``E[v_j | values] = R_j theta``.

    Parameters
    ----------
    plan
        The plan's mechanisms.
    theta
        ``(K,)`` the distribution the users' values are drawn from.
    given
        Also the variances given the users' values (a little more work for a matrix).

    Returns
    -------
    Moments or None
        None where a mechanism's own estimate has no declared variance.
    """
    theta = np.asarray(theta, dtype=float)
    if len(plan) == 1 and plan[0].capabilities.unbiased_estimate:
        return _declared_moments(plan[0], theta)
    structure = plan[0].diagonal_plus_constant() if len(plan) == 1 else None
    if structure is not None:
        return _diagonal_plus_constant_moments(*structure, theta, given)
    if inverts_jointly(plan):
        return _matrix_moments(plan_matrix(plan), theta, given)
    parts = [plan_moments((mech,), theta) for mech in plan]
    if any(part is None for part in parts):
        return None
    return _averaged(theta, [part for part in parts if part is not None])


def _declared_moments(mech: Mechanism, theta: np.ndarray) -> Moments | None:
    declared = mech.estimate_variance(theta)
    if declared is None:
        return None
    return Moments(declared + theta * (1 - theta), declared, np.zeros(theta.size), None, "estimate_variance")


def _matrix_moments(a: np.ndarray, theta: np.ndarray, given: bool) -> Moments:
    lam = theta @ a
    pinv = np.linalg.pinv(a.T)  # v = pinv(A^T) q, as lstsq solves it
    second = (pinv * lam) @ pinv.T
    mean = pinv @ lam
    total = second - np.outer(mean, mean)
    if not given:
        return Moments(np.diag(total).copy(), None, mean - theta, total, "matrix")
    r = pinv @ a.T
    fixed = second - (r * theta) @ r.T
    return Moments(np.diag(total).copy(), np.diag(fixed).copy(), mean - theta, total, "matrix", fixed, r)


def _diagonal_plus_constant_moments(a: float, b: float, theta: np.ndarray, given: bool) -> Moments:
    """:func:`_matrix_moments` for ``A = a I + b 11^T`` in O(|X|^2), without the matrix or its pseudo-inverse.

    With ``A^-1 = (I - c 11^T) / a`` (``c = b / (a + |X| b)``, A symmetric) and ``lambda = theta A``:
    ``A^-1 diag(lambda) A^-1 = (diag(lambda) - c (1 lambda^T + lambda 1^T) + c^2 sum(lambda) 11^T) / a^2``,
    the mean ``A^-1 lambda``, and ``R = A^-1 A = I`` (so ``A^+T A^T diag(theta) A A^+ = diag(theta)``).
    """
    k = theta.size
    require_memory(
        3 * 8.0 * k * k,
        f"the {k} x {k} covariance of the unbiased estimate",
        hint="estimate without intervals, or use fewer values",
    )
    c = b / (a + k * b)
    lam = a * theta + b * theta.sum()
    mean = (lam - c * lam.sum()) / a
    second = np.full((k, k), c * c * lam.sum())
    second -= c * lam[None, :]
    second -= c * lam[:, None]
    second[np.diag_indices(k)] += lam
    second /= a * a
    total = second - np.outer(mean, mean)
    if not given:
        return Moments(np.diag(total).copy(), None, mean - theta, total, "matrix")
    fixed = second.copy()
    fixed[np.diag_indices(k)] -= theta
    return Moments(np.diag(total).copy(), np.diag(fixed).copy(), mean - theta, total, "matrix", fixed, np.eye(k))


def _averaged(theta: np.ndarray, parts: list[Moments]) -> Moments:
    tau = len(parts)
    givens = [p.given for p in parts if p.given is not None]
    assert len(givens) == tau, "each report's moments are asked with their variances given the values"
    fixed = np.sum(givens, axis=0) / tau**2
    bias = np.sum([p.bias for p in parts], axis=0) / tau
    maps = [p.mean_map for p in parts]
    r: np.ndarray | None = None
    if all(m is None for m in maps):  # every report unbiased: E[v | values] is the users' distribution
        variance = fixed + theta * (1 - theta)
    else:
        eye = np.eye(theta.size)
        r = np.sum([eye if m is None else m for m in maps], axis=0) / tau
        variance = fixed + (r * r) @ theta - (r @ theta) ** 2
    covariance = fixed_cov = None
    known = [p.given_covariance for p in parts if p.given_covariance is not None]
    if len(known) == tau:  # matrices alone (each with its map)
        assert r is not None, "a matrix's moments carry their mean map"
        fixed_cov = np.sum(known, axis=0) / tau**2
        covariance = fixed_cov + (r * theta) @ r.T - np.outer(r @ theta, r @ theta)
    return Moments(variance, fixed, bias, covariance, "per report", fixed_cov, r)
