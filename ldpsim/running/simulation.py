"""A run's random streams, and the memory its simulation needs, checked before anything is drawn.

The simulation itself (value counts split among cohorts, each cohort's reports drawn as counts where
its mechanism allows) is :mod:`ldpsim.theory.sampling`; what is here depends on a run: the seed
streams its draws come from, and the preflight of a setup's datasets and cohorts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..base.memory import require_memory
from ..estimation.observations import BitTally, ReportGroup
from ..theory.sampling import cohort_group, counted, per_user_bytes, require_per_user, split_counts, tallied
from .build import Setup
from .expected import expected_bytes, expected_group


def stream(seed: int, *key: int) -> np.random.Generator:
    """The generator of one stream of one run: ``SeedSequence(seed, spawn_key=key)`` through PCG64.

    Every draw of a run (a scenario's task, a planner's replicate) comes from a stream named by its
    position, never from a shared generator, so a result depends only on the seed and that position.
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def cohort_values(setup: Setup, seed: int, key: tuple[int, ...]) -> tuple[list[np.ndarray], np.ndarray, int]:
    """The run-level draws every run shares, sharded or not: each cohort's value counts, their sum, the honest users.

    The scenario's dataset gives the honest users' values (stream 0), split among the cohorts without
    replacement (stream 1); a cohort with its own dataset draws its own (stream (3, c)); an attacker cohort
    holds none (zeros). Returns the per-cohort counts, the honest users' counts summed, and their number.
    """
    fake = sum(cohort.users for cohort in setup.cohorts if cohort.attack is not None)  # they hold no value
    counts = setup.dataset.sample_counts(setup.users - fake, stream(seed, *key, 0))
    sizes = [0 if cohort.attack is not None else cohort.users for cohort in setup.cohorts]
    shares = split_counts(counts, sizes, stream(seed, *key, 1))
    held = np.zeros(setup.domain.size, dtype=np.int64)
    for c, cohort in enumerate(setup.cohorts):
        if not cohort.users or cohort.attack is not None:
            continue
        if cohort.dataset is not None:  # heterogeneous users: this cohort draws its own values
            shares[c] = cohort.dataset.sample_counts(cohort.users, stream(seed, *key, 3, c))
        held += shares[c]
    return shares, held, setup.users - fake


def draw_cohort(
    setup: Setup, seed: int, key: tuple[int, ...], c: int, share: np.ndarray, chunks: range | None = None
) -> ReportGroup | BitTally | None:
    """Cohort ``c``'s aggregated reports in a run (None: no users, or nothing observed), from its streams.

    ``share`` is the cohort's value counts (:func:`cohort_values`). An attacker cohort sends its attack's fake
    reports (stream ``(2, c, 0)``), tagged with the attacked users' prior; an ``observe = "expected"`` cohort its
    expected report counts; every other cohort its users' reports from streams ``(2, c, j)``, as counts, per-bit
    counts (:func:`takes_bit_counts` and :func:`ldpsim.theory.sampling.tallied`) or one user at a time, in which
    case ``chunks`` draws only those chunks of its users (:func:`split_per_user`: a shard's part of the run).
    """
    cohort = setup.cohorts[c]
    if not cohort.users:
        return None
    # users with their own dataset have a local prior the collector knows (002 Sec. V-A4)
    prior = cohort.dataset.distribution() if cohort.dataset is not None else None
    if cohort.attack is not None:  # fake users: the attack's reports, estimated as the attacked cohort's
        fakes = cohort.attack.sample(cohort.plan[0], cohort.users, stream(seed, *key, 2, c, 0))
        return ReportGroup(cohort.plan, *fakes, prior)
    if cohort.observe == "expected":  # the infinite-data limit: no report is drawn
        return expected_group(cohort.plan, share, prior)
    rngs = [stream(seed, *key, 2, c, j) for j in range(len(cohort.plan))]
    bits = takes_bit_counts(setup) and tallied(cohort.plan, cohort.users)
    return cohort_group(cohort.plan, share, rngs, prior, bit_counts=bits, chunks=chunks)


def split_per_user(setup: Setup, c: int) -> bool:
    """Whether cohort ``c`` of a run is drawn one user at a time, in chunks a sharded run splits among its shards.

    Not attackers, expected counts, per-bit counts or report counts: those are drawn whole, at a cost that
    does not grow with the users (or as the attack does).
    """
    cohort = setup.cohorts[c]
    if not cohort.users or cohort.attack is not None or cohort.observe == "expected":
        return False
    if takes_bit_counts(setup) and tallied(cohort.plan, cohort.users):
        return False
    return not counted(cohort.plan, cohort.users)


def takes_bit_counts(setup: Setup) -> bool:
    """Whether every estimator of ``setup`` reads only per-bit counts, so that its cohorts too large to draw
    one user at a time are drawn as those counts (:func:`ldpsim.theory.sampling.tallied`)."""
    return bool(setup.estimators) and all(est.takes_bit_counts() for est in setup.estimators.values())


def simulation_bytes(setup: Setup, held: Callable[[int], int] | None = None) -> int:
    """Bytes a simulation of ``setup`` allocates at most in one process: what :func:`check_simulation_memory`
    checks (with the same ``held``), added up."""
    total = 0
    datasets = [(setup.dataset, setup.users)] + [(c.dataset, c.users) for c in setup.cohorts if c.dataset is not None]
    for dataset, users in datasets:
        if dataset.draws_values:
            total += dataset.values_bytes(users)
    bits = takes_bit_counts(setup)
    for c, cohort in enumerate(setup.cohorts):
        if cohort.users and cohort.observe == "expected":
            total += int(expected_bytes(cohort.plan))
        elif bits and tallied(cohort.plan, cohort.users):
            continue  # per-bit counts: what the mechanism's own draw allocates, checked there
        elif cohort.users and not counted(cohort.plan, cohort.users):
            total += per_user_bytes(cohort.plan, cohort.users if held is None else held(c))
    return total


def check_simulation_memory(setup: Setup, held: Callable[[int], int] | None = None) -> None:
    """Refuse a population whose simulation would not fit in memory, before drawing anything.

    ``held(c)``: how many users of cohort ``c`` drawn one at a time one process holds the reports of (default:
    all of them; a run whose shards stay where they were drawn, its largest shard's).
    """
    datasets = [(setup.dataset, setup.users)] + [(c.dataset, c.users) for c in setup.cohorts if c.dataset is not None]
    for dataset, users in datasets:
        if dataset.draws_values:  # one value per user, then counted
            dataset.require_values(users)
    bits = takes_bit_counts(setup)
    for c, cohort in enumerate(setup.cohorts):
        if cohort.users and cohort.observe == "expected":
            require_memory(
                expected_bytes(cohort.plan),
                f"the expected counts of every report tuple of cohort '{cohort.name}'",
                hint='use observe = "sampled", or fewer reports per user',
            )
        elif bits and tallied(cohort.plan, cohort.users):
            continue  # drawn as per-bit counts, whatever the users (the mechanism checks what it allocates)
        elif cohort.users and not counted(cohort.plan, cohort.users):
            require_per_user(cohort.plan, cohort.users, None if held is None else held(c))
