"""Unbiased frequency estimates: what matrix-inversion estimators post-process."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..base.errors import EstimationError
from ..base.memory import require_memory
from ..model.mechanism import Mechanism
from .observations import Observations

#: largest joint output alphabet of a plan that INV will form a matrix for
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
    """``(|X|, prod |Z_j|)`` matrix of a plan: P(report tuple | x), a row-wise Kronecker product."""
    joint: np.ndarray | None = None
    for mech in plan:
        m = _finite_matrix(mech)
        joint = m if joint is None else (joint[:, :, None] * m[:, None, :]).reshape(m.shape[0], -1)
        if joint.shape[1] > MAX_JOINT_OUTPUTS:
            raise EstimationError(
                f"the plan [{', '.join(map(repr, plan))}] has more than {MAX_JOINT_OUTPUTS} joint outputs",
                hint="use ibu, which works on the observed reports only",
            )
    assert joint is not None, "a plan has at least one mechanism"
    return joint


def inversion_bytes(plan: Sequence[Mechanism]) -> float | None:
    """Bytes matrix inversion takes on ``plan``: three copies of its (|X|, prod |Z_j|) matrix.

    None when the plan needs no matrix (a mechanism with its own unbiased estimate) or its
    mechanisms cannot tell their output count without building it.
    """
    if len(plan) == 1 and plan[0].capabilities.unbiased_estimate:
        return None
    counts = [mech.output_count() for mech in plan]
    if any(c is None for c in counts):
        return None
    joint = float(np.prod(np.array(counts, dtype=float)))
    return 3 * 8.0 * plan[0].domain.size * joint


def check_unbiased_memory(plans: Sequence[Sequence[Mechanism]]) -> None:
    """Refuse, before a run, plans whose matrices :func:`unbiased_estimate` could not hold in memory.

    A plan's (|X|, prod |Z_j|) matrix and the least-squares solve on it take about three copies of
    it. Mechanisms with their own unbiased estimate, or that cannot tell their output count without
    building the matrix, are left to the checks made when the matrix is built.
    """
    for plan in plans:
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
    else q A^+ (A^-1 when square); averaged with weights n_plan / n.

    Each plan's users are an iid sample of the population, so each plan gives
    an unbiased estimate; weighting by size combines them. Computed once per
    observations (read-only): every inversion estimator of a run, and its
    intervals, start from it.
    """
    return observations.derived("unbiased_estimate", lambda: _unbiased_estimate(observations))


def _unbiased_estimate(observations: Observations) -> np.ndarray:
    total = np.zeros(observations.domain.size)
    for group in observations.groups:
        if len(group.plan) == 1:  # a mechanism may know a better unbiased estimate than inverting its matrix
            v = group.plan[0].unbiased_estimate(group.reports, group.counts)
            if v is not None:
                total += group.n / observations.n * v
                continue
        a = plan_matrix(group.plan)
        widths = [_finite_matrix(mech).shape[1] for mech in group.plan]
        flat = np.ravel_multi_index(tuple(group.reports.T), widths)
        q = np.zeros(a.shape[1])
        np.add.at(q, flat, group.counts / group.n)
        v, *_ = np.linalg.lstsq(a.T, q, rcond=None)
        total += group.n / observations.n * v
    total.setflags(write=False)
    return total
