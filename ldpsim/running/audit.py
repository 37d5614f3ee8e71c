"""The audit of both code paths that produce reports: the per-user sampler and the simulation's count path.

The statistics live in :mod:`ldpsim.theory.audit`; the count path is the
simulation's own code (:func:`ldpsim.running.simulation.sample_cohort`), which
sits in this layer, so the audit that covers it is composed here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..model.mechanism import Mechanism
from ..theory.audit import MIN_REACH, AuditPath, AuditReport, audit_paths, sampler_draws
from .simulation import counted, sample_cohort


def count_draws(
    mech: Mechanism, value: int, n: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``n`` reports of ``value`` as the simulation draws a cohort of ``n`` users who all hold it."""
    counts = np.zeros(mech.domain.size, dtype=np.int64)
    counts[value] = n
    yield sample_cohort([mech], counts, [rng])


SAMPLER = AuditPath("sampler", "Mechanism.sample, per user", sampler_draws)
COUNTS = AuditPath(
    "counts",
    "the simulation's report counts (the mechanism's count sampler, or multinomial rows of the matrix)",
    count_draws,
)


def audit_mechanism(
    mech: Mechanism,
    *,
    draws: int = 10**6,
    seed: int = 0,
    confidence: float = 0.95,
    prior: np.ndarray | None = None,
    min_reach: float = MIN_REACH,
    values: Sequence[int] | None = None,
) -> AuditReport:
    """A statistical lower bound on the eps ``mech`` gives, from its sampler and from the simulation's count path.

    See :mod:`ldpsim.theory.audit` for the method. The count path is audited
    when the simulation uses it for this mechanism (one report with a usable
    matrix); otherwise the simulation calls the sampler, which the first path
    covers.

    Parameters
    ----------
    mech
        The mechanism whose claim (``mech.privacy``) is audited: eps-LDP, or
        geo-indistinguishability per unit distance; LIP claims are reported as
        not auditable.
    draws
        N: draws per value to choose the pair and event, and again for each value of the chosen pair.
    seed
        Seed of all draws.
    confidence
        With at least this probability no reported bound exceeds the true level
        of the code it audits (over both paths).
    prior
        For the Bayes vulnerability (default: a LIP claim's prior, else uniform).
    min_reach
        Refuse (``ParameterError`` naming the draws needed) when ``draws`` could
        not show this fraction of the declared eps even for a mechanism exactly
        at it; 0 never refuses.
    values
        The domain indices whose pairs are tested (default all, or 64 spread over a larger domain).

    Returns
    -------
    AuditReport
        ``report.exceeded`` is True when the code is, at that confidence, less private than declared.
    """
    paths = [SAMPLER]
    notes = []
    if counted([mech], int(draws) if isinstance(draws, int | np.integer) else 0):
        paths.append(COUNTS)
    else:
        notes.append("counts: not a separate path here, the simulation samples this mechanism per user")
    return audit_paths(
        mech,
        paths,
        draws=draws,
        seed=seed,
        confidence=confidence,
        prior=prior,
        min_reach=min_reach,
        values=values,
        notes=notes,
    )
