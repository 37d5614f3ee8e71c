"""The infinite-data limit: a cohort's expected report counts instead of drawn ones (``observe = "expected"``).

004's consistency results (Thm. 6.1, Fig. 6) are statements about IBU on the exact
asymptotic noisy distribution ``q = theta A``, with no sampling noise. In this mode each
cohort's observations are its expected report counts given its users' values: the count of
report tuple ``z`` is ``sum_x c_x A[x, z]``, real-valued, with ``A`` the plan's joint matrix
(a row-wise Kronecker product over its reports). The users' values are still drawn from the
dataset, so the truth a metric compares with is exactly the distribution the counts follow.

A report of a matrix mechanism is its output index (the mechanism contract), so this needs
every mechanism of the plan to have a finite matrix and one-column reports; other plans are
refused when the scenario is checked, before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..base.memory import MemoryLimitError, require_memory
from ..estimation.observations import ReportGroup
from ..model.mechanism import Mechanism

#: the observation modes of a scenario or cohort (``observe = ...``)
OBSERVE_MODES = ("sampled", "expected")


def expected_refusal(plan: Sequence[Mechanism]) -> str | None:
    """Why ``plan`` has no exact expected report counts, or None when it has them.

    Parameters
    ----------
    plan
        The mechanisms a user applies, one per report.

    Returns
    -------
    str or None
        One sentence naming the first mechanism at fault (infinitely many outputs,
        reports that are not output indices, a matrix too large to build).
    """
    for mech in plan:
        if mech.report_width != 1:
            return f"{mech!r} reports {mech.report_width} integers, not an output index of a finite matrix"
        try:
            m = mech.matrix
        except MemoryLimitError as exc:
            return f"the matrix of {mech!r} does not fit in memory ({exc.problem})"
        if m is None:
            return f"{mech!r} has infinitely many outputs (no finite matrix)"
    return None


def expected_bytes(plan: Sequence[Mechanism]) -> float:
    """Bytes of the (|X|, prod |Z_j|) joint expected-count array of a plan (0 if a size is unknown)."""
    outputs = 1.0
    for mech in plan:
        m = mech.matrix
        if m is None:
            return 0.0
        outputs *= m.shape[1]
    return 8.0 * plan[0].domain.size * outputs


def expected_group(
    plan: Sequence[Mechanism], counts: np.ndarray, prior: np.ndarray | None = None
) -> ReportGroup | None:
    """The expected report counts of users holding each value ``counts[x]`` times (None if no users).

    Parameters
    ----------
    plan
        The mechanisms each user applies; :func:`expected_refusal` must be None for it.
    counts
        (|X|,) how many users hold each value.
    prior
        The prior the collector knows for these users, if any (:class:`ReportGroup`).

    Returns
    -------
    ReportGroup or None
        Every report tuple of positive probability with its real-valued expected count
        ``sum_x counts[x] P(tuple | x)``; the counts sum to the number of users (up to rounding).
    """
    counts = np.asarray(counts, dtype=np.int64)
    if not int(counts.sum()):
        return None
    rows = np.flatnonzero(counts)
    widths = [int(mech.output_size or 0) for mech in plan]
    require_memory(
        8.0 * rows.size * float(np.prod(np.array(widths, dtype=float))),
        f"the expected counts of every report tuple of [{', '.join(m.name for m in plan)}]",
        hint='use observe = "sampled", or fewer reports per user',
    )
    # P(tuple | x) for the values users hold, one report at a time: a row-wise Kronecker product
    joint = counts[rows].astype(float)[:, None]
    for mech in plan:
        m = mech.matrix
        assert m is not None  # expected_refusal(plan) is None
        joint = (joint[:, :, None] * m[rows][:, None, :]).reshape(rows.size, -1)
    total = joint.sum(axis=0)
    z = np.flatnonzero(total > 0)
    reports = np.column_stack(np.unravel_index(z, widths)).astype(np.int64)
    return ReportGroup(tuple(plan), reports, total[z], prior)
