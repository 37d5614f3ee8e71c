"""Sharded runs: one run's users split into shards, each drawn on its own, then merged (issue 31).

A cohort whose users are drawn one at a time is drawn in chunks (:func:`ldpsim.theory.sampling.per_user_part`:
its users ordered by value, :data:`~ldpsim.theory.sampling.CHUNK_INTS` integers of reports a chunk), chunk
``i`` from a stream of its own (:func:`~ldpsim.theory.sampling.chunk_stream`: the cohort's stream for chunk 0,
its child ``(i, report)`` after), so any chunk can be drawn without the ones before it. A scenario with
``shards = S`` (or ``"auto"``) gives each shard a consecutive range of every such cohort's chunks, as equal as
they go; shard 0 also draws every other cohort whole (report counts, per-bit counts, attackers, expected
counts: a cost that does not grow with the users, or the attack's). Each shard groups its reports (distinct
report tuples with counts, in lexicographic order); back in the dispatching process, each cohort's parts are
grouped again (counts of equal tuples summed), which gives exactly the groups the unsharded run draws.

So a sharded run's observations, estimates and scores are **the unsharded run's, bit for bit**, for any
shard count, whatever executor runs the shards, in whatever order, on however many workers: the value
counts come from the run's streams 0, 1 and ``(3, c)``, the reports from the chunks' streams, and the
merge's result does not depend on how the chunks were split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..estimation.held import HeldObservations
from ..estimation.observations import BitTally, Observations, ReportGroup, sum_equal_parts
from ..plugin.executor import KeptHere
from ..theory.sampling import chunk_count, chunk_users, per_user_bytes
from .build import Setup
from .simulation import cohort_values, draw_cohort, split_per_user

#: ``shards = "auto"``: as many shards as put each one's per-user grouping under this many bytes. A
#: constant, not the machine's free memory, so that the shard count depends on the scenario alone (the
#: numbers do not depend on it at all); 2 GB keeps a shard of per-user OUE at k = 1024 to about 10^7 users
SHARD_BYTES = 2 * 10**9


@dataclass(frozen=True)
class Part:
    """A cohort's part of one shard: the cohort's value counts, and the chunks of its users the shard draws
    (None: the whole cohort, drawn as an unsharded run draws it)."""

    share: np.ndarray
    chunks: range | None


#: one shard's parts, by cohort (None: the shard draws nothing of that cohort)
Shares = tuple[Part | None, ...]
#: one shard's grouped reports, by cohort (None: nothing drawn)
Drawn = tuple[ReportGroup | BitTally | None, ...]


def shard_count(setup: Setup) -> int:
    """How many shards a run of ``setup`` is split into: 1 when unsharded, ``"auto"`` resolved.

    ``"auto"`` takes the largest per-user cohort's grouping peak (:func:`ldpsim.theory.sampling.per_user_bytes`)
    over :data:`SHARD_BYTES`; cohorts drawn whole need one shard.
    """
    if setup.shards is None:
        return 1
    if setup.shards != "auto":
        return int(setup.shards)
    peak = max(
        (per_user_bytes(c.plan, c.users) for i, c in enumerate(setup.cohorts) if split_per_user(setup, i)), default=0
    )
    return max(1, math.ceil(peak / SHARD_BYTES))


def shard_chunks(chunks: int, shards: int) -> list[range]:
    """``range(chunks)`` cut into ``shards`` consecutive ranges as equal as they go, the first never empty
    (when there is a chunk): shard ``s`` takes ``[ceil(s c / S), ceil((s + 1) c / S))``."""
    return [range(-(-s * chunks // shards), -(-(s + 1) * chunks // shards)) for s in range(shards)]


def held_users(setup: Setup) -> Callable[[int], int] | None:
    """For a run estimated where its shards are (``passes = "shards"``), the most users of each cohort one
    shard draws (``held(c)`` of :func:`ldpsim.running.simulation.check_simulation_memory`: its largest range of
    chunks' users); None for a run whose reports meet in one process."""
    if setup.passes != "shards":
        return None
    shards = shard_count(setup)

    def held(c: int) -> int:
        cohort = setup.cohorts[c]
        if not split_per_user(setup, c):
            return cohort.users
        step = chunk_users(cohort.plan)
        ranges = shard_chunks(chunk_count(cohort.plan, cohort.users), shards)
        return max(min(r.stop * step, cohort.users) - r.start * step for r in ranges if len(r))

    return held


def split_run(setup: Setup, seed: int, key: Sequence[int]) -> tuple[np.ndarray, list[Shares]]:
    """The run-level draws of a sharded run: the honest users' distribution, and each shard's parts.

    Parameters
    ----------
    setup
        The run's setup (its ``shards`` set).
    seed, key
        The scenario's seed and the task's key (:attr:`ldpsim.running.tasks.Task.key`).

    Returns
    -------
    tuple
        The truth (the unsharded run's, from the same streams) and, for each shard in order, its
        :data:`Shares`: a range of the chunks of each cohort drawn one user at a time; shard 0 also draws
        the other cohorts whole.
    """
    shards = shard_count(setup)
    shares, held, honest = cohort_values(setup, seed, tuple(key))
    parts: list[list[Part | None]] = [[None] * len(setup.cohorts) for _ in range(shards)]
    for c, (cohort, share) in enumerate(zip(setup.cohorts, shares)):
        if not cohort.users:
            continue
        if not split_per_user(setup, c):
            parts[0][c] = Part(share, None)
            continue
        for s, chunks in enumerate(shard_chunks(chunk_count(cohort.plan, cohort.users), shards)):
            parts[s][c] = Part(share, chunks) if len(chunks) else None
    return held / honest, [tuple(p) for p in parts]


def draw_shard(setup: Setup, seed: int, key: Sequence[int], shares: Shares) -> Drawn:
    """The grouped reports of one shard of a run, by cohort.

    Parameters
    ----------
    setup, seed, key
        As for :func:`split_run`.
    shares
        The shard's parts, from :func:`split_run`.

    Returns
    -------
    tuple
        For each cohort, distinct reports with counts (:class:`ldpsim.ReportGroup`), per-bit counts
        (:class:`ldpsim.BitTally`) or None (nothing of that cohort in this shard).
    """
    return tuple(
        None if part is None else draw_cohort(setup, seed, tuple(key), c, part.share, part.chunks)
        for c, part in enumerate(shares)
    )


def merge_shards(setup: Setup, drawn: Sequence[Drawn]) -> Observations:
    """The run's observations from its shards' groups: each cohort's parts grouped again, cohorts in order."""
    groups: list[ReportGroup | BitTally] = []
    for c in range(len(setup.cohorts)):
        pieces = [shard[c] for shard in drawn if shard[c] is not None]
        if len(pieces) > 1:  # the chunks of a cohort drawn one user at a time
            first = pieces[0]
            assert isinstance(first, ReportGroup)
            merged = sum_equal_parts([(p.reports, p.counts) for p in pieces if isinstance(p, ReportGroup)])
            groups.append(ReportGroup(first.plan, *merged, first.prior))
        elif pieces:
            piece = pieces[0]
            assert piece is not None
            groups.append(piece)
    return Observations(setup.domain, groups)


def simulate_sharded(setup: Setup, seed: int, key: Sequence[int]) -> tuple[np.ndarray, Observations]:
    """A sharded run simulated here, shard after shard: the truth and the merged observations.

    The same numbers as the shards run anywhere else (:func:`ldpsim.running.shard_runs.sharded_rows`), and as
    the unsharded run; with ``passes = "shards"``, observations held in the shards' parts
    (:class:`ldpsim.HeldObservations`), as :func:`~ldpsim.running.shard_runs.held_row` estimates them.
    """
    truth, shares = split_run(setup, seed, key)
    if setup.passes == "shards":  # estimated from its shards as they are, as on an executor that holds them
        drawn = [merge_shards(setup, [draw_shard(setup, seed, key, part)]) for part in shares]
        return truth, HeldObservations(setup.domain, KeptHere(drawn))
    return truth, merge_shards(setup, [draw_shard(setup, seed, key, part) for part in shares])
