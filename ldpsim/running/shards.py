"""Sharded runs: one run's users split into shards, each simulated on its own, then merged (issue 31).

A scenario with ``shards = S`` (or ``"auto"``) simulates each run as ``S`` shards of its users. The run
draws its value counts and cohort shares exactly as an unsharded run does (streams 0, 1 and ``(3, c)``
of :mod:`.tasks`), then splits each cohort's value counts among the shards from stream ``(4, c)``
(sequential multivariate hypergeometric draws in shard order, into sizes as equal as they go: the
first ``users % S`` shards one user more). Shard ``s`` draws the reports of its users of cohort
``c`` from stream ``(5, c, s, j)`` (report ``j``) and groups them (distinct reports with counts, or
per-bit counts where the run draws those). Attacker cohorts and ``observe = "expected"`` cohorts are
drawn whole by shard 0, from their usual streams. The shards' groups are merged in shard order
(counts summed, equal reports merged: :class:`ldpsim.Observations`) and estimated as today.

A shard's result is therefore a function of the scenario, the run and the shard's index alone: the
same bit for bit whatever executor runs the shards, in whatever order, on however many workers. It
is *not* the unsharded run's result: the reports come from other streams (and a hypergeometric split
comes first), so a sharded run is another draw from the same law. Making the two equal would mean
drawing every run through shards (an unsharded run as one shard of a sharded layout would change
today's results, which are kept bit for bit with ``shards`` unset).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..estimation.observations import BitTally, Observations, ReportGroup
from ..theory.sampling import cohort_group, counted, per_user_bytes, split_counts, tallied
from .build import Setup
from .expected import expected_group
from .simulation import cohort_values, stream, takes_bit_counts

#: ``shards = "auto"``: as many shards as put each one's per-user grouping under this many bytes. A
#: constant, not the machine's free memory, so that the shard count (and so the numbers) depend on the
#: scenario alone; 2 GB keeps a shard of per-user OUE at k = 1024 (458 bytes a user) to 4.4 million users
SHARD_BYTES = 2 * 10**9
#: streams of a sharded run, after the task's key: the split of cohort c among the shards ``(SPLIT, c)``,
#: report j of shard s's users of cohort c ``(SHARD_REPORTS, c, s, j)``
SPLIT, SHARD_REPORTS = 4, 5

#: one shard's value counts, by cohort (None: the cohort has no users in this shard, or is drawn elsewhere)
Shares = tuple[np.ndarray | None, ...]


def shard_count(setup: Setup) -> int:
    """How many shards a run of ``setup`` is split into: 1 when unsharded, ``"auto"`` resolved.

    ``"auto"`` takes the largest per-user cohort's grouping peak (:func:`ldpsim.theory.sampling.per_user_bytes`)
    over :data:`SHARD_BYTES`; cohorts drawn as counts need one shard.
    """
    if setup.shards is None:
        return 1
    if setup.shards != "auto":
        return int(setup.shards)
    peak = max(
        (
            per_user_bytes(c.plan, c.users)
            for c in setup.cohorts
            if c.users and c.attack is None and c.observe != "expected" and not counted(c.plan, c.users)
        ),
        default=0,
    )
    return max(1, math.ceil(peak / SHARD_BYTES))


def shard_sizes(users: int, shards: int) -> list[int]:
    """``users`` split into ``shards`` sizes as equal as they go, the larger first."""
    base, extra = divmod(users, shards)
    return [base + (s < extra) for s in range(shards)]


def split_run(setup: Setup, seed: int, key: Sequence[int]) -> tuple[np.ndarray, list[Shares]]:
    """The run-level draws of a sharded run: the honest users' distribution, and each shard's value counts.

    Parameters
    ----------
    setup
        The run's setup (its ``shards`` set).
    seed, key
        The scenario's seed and the task's key (:attr:`ldpsim.running.tasks.Task.key`).

    Returns
    -------
    tuple
        The truth (as an unsharded run's, from the same streams) and, for each shard in order, its
        :data:`Shares`; shard 0 also carries the attacker and expected cohorts (their whole share).
    """
    shards = shard_count(setup)
    shares, held, honest = cohort_values(setup, seed, tuple(key))
    parts: list[list[np.ndarray | None]] = [[None] * len(setup.cohorts) for _ in range(shards)]
    for c, (cohort, share) in enumerate(zip(setup.cohorts, shares)):
        if not cohort.users:
            continue
        if cohort.attack is not None or cohort.observe == "expected":  # drawn whole, by shard 0
            parts[0][c] = share
            continue
        for s, part in enumerate(
            split_counts(share, shard_sizes(cohort.users, shards), stream(seed, *key, SPLIT, c), "shards")
        ):
            parts[s][c] = part if part.any() else None
    return held / honest, [tuple(p) for p in parts]


def draw_shard(setup: Setup, seed: int, key: Sequence[int], index: int, shares: Shares) -> list[ReportGroup | BitTally]:
    """The grouped reports of shard ``index`` of a run: one group per cohort with users in the shard.

    Parameters
    ----------
    setup, seed, key
        As for :func:`split_run`.
    index
        The shard's position (its streams' key).
    shares
        The shard's value counts by cohort, from :func:`split_run`.

    Returns
    -------
    list
        Distinct reports with counts (:class:`ldpsim.ReportGroup`), or per-bit counts
        (:class:`ldpsim.BitTally`) for a cohort the whole run would draw as such.
    """
    bits = takes_bit_counts(setup)
    groups: list[ReportGroup | BitTally] = []
    for c, (cohort, share) in enumerate(zip(setup.cohorts, shares)):
        if share is None:
            continue
        prior = cohort.dataset.distribution() if cohort.dataset is not None else None
        if cohort.attack is not None:  # as an unsharded run draws them
            fakes = cohort.attack.sample(cohort.plan[0], cohort.users, stream(seed, *key, 2, c, 0))
            groups.append(ReportGroup(cohort.plan, *fakes, prior))
            continue
        if cohort.observe == "expected":
            expected = expected_group(cohort.plan, share, prior)
            if expected is not None:
                groups.append(expected)
            continue
        rngs = [stream(seed, *key, SHARD_REPORTS, c, index, j) for j in range(len(cohort.plan))]
        # per-bit counts or reports as the whole cohort would be drawn, not as this shard's size alone says
        group = cohort_group(cohort.plan, share, rngs, prior, bit_counts=bits and tallied(cohort.plan, cohort.users))
        if group is not None:
            groups.append(group)
    return groups


def merge_shards(setup: Setup, parts: Sequence[Sequence[ReportGroup | BitTally]]) -> Observations:
    """The run's observations from its shards' groups, given in shard order: counts summed, reports merged."""
    return Observations(setup.domain, [group for part in parts for group in part])


def simulate_sharded(setup: Setup, seed: int, key: Sequence[int]) -> tuple[np.ndarray, Observations]:
    """A sharded run simulated here, shard after shard: the truth and the merged observations.

    The same numbers as the shards run anywhere else (:func:`ldpsim.running.shard_runs.sharded_rows`).
    """
    truth, shares = split_run(setup, seed, key)
    return truth, merge_shards(setup, [draw_shard(setup, seed, key, s, part) for s, part in enumerate(shares)])
