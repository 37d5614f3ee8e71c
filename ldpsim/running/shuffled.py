"""Shuffled cohorts: a scenario cohort's ``shuffled = true`` and the central guarantee its results record.

A cohort table may say its reports pass through a shuffler (``shuffled = true``, with an optional
central ``delta``, default :data:`DEFAULT_DELTA`): its users' reports are then mixed among the
cohort's own users, and each grid point records the central eps the variation-ratio bound
(:func:`ldpsim.shuffle_guarantee`) certifies for them at that delta (result variables
``central_eps`` and ``central_delta``, per cohort; NaN for a cohort that is not shuffled). The
bound is for one report per user: a shuffled cohort's plan is one mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..base.errors import ScenarioError
from ..model.mechanism import Mechanism
from ..theory.shuffle import shuffle_guarantee

#: the central delta of a shuffled cohort that gives none
DEFAULT_DELTA = 1e-6


def shuffle_delta(table: Mapping[str, Any], where: str, plan: tuple[Mechanism, ...]) -> float | None:
    """The central delta of a cohort table that says ``shuffled = true`` (None if it is not shuffled).

    Parameters
    ----------
    table, where
        The cohort's table and its field (``cohorts.NAME``).
    plan
        Its report plan (empty for an attacker cohort).

    Returns
    -------
    float or None
        The delta, in (0, 1).

    Raises
    ------
    ScenarioError
        A non-boolean ``shuffled``, a ``delta`` outside (0, 1) or without ``shuffled = true``, or a
        shuffled cohort with several reports per user or no reports of its own.
    """
    shuffled = table.get("shuffled", False)
    if not isinstance(shuffled, bool):
        raise ScenarioError(
            f"must be true or false, got {shuffled!r}", field=f"{where}.shuffled", hint="shuffled = true"
        )
    if not shuffled:
        if "delta" in table:
            raise ScenarioError(
                "is the central delta of a shuffled cohort", field=f"{where}.delta", hint="add shuffled = true"
            )
        return None
    delta = table.get("delta", DEFAULT_DELTA)
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
        raise ScenarioError(f"must be in (0, 1), got {delta!r}", field=f"{where}.delta", hint="e.g. delta = 1e-8")
    if len(plan) != 1:
        raise ScenarioError(
            "a shuffled cohort's users send one report each" if plan else "an attacker cohort is not shuffled",
            field=f"{where}.shuffled",
            hint="give the cohort one report, or leave shuffled out",
        )
    return float(delta)


def cohort_central(cohorts: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(central eps, central delta) of each cohort (NaN where not shuffled); None when none is shuffled.

    A cohort of fewer than 2 users (a share rounded to nothing) records its mechanism's own eps0.
    """
    deltas = [getattr(c, "shuffled", None) for c in cohorts]
    if all(d is None for d in deltas):
        return None
    eps = np.full(len(cohorts), np.nan)
    delta = np.full(len(cohorts), np.nan)
    for i, (cohort, d) in enumerate(zip(cohorts, deltas)):
        if d is None:
            continue
        mech = cohort.plan[0]
        if cohort.users >= 2:
            eps[i] = shuffle_guarantee(mech, cohort.users, d).eps
        else:
            level = shuffle_guarantee(mech, 2, d).eps0
            eps[i] = level if math.isfinite(level) else np.inf
        delta[i] = d
    return eps, delta
