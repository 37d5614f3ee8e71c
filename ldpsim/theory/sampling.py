"""Simulating a population from its value counts, at a cost independent of the number of users where possible.

Users are exchangeable and the collector only sees aggregated reports, so a
cohort is fully described by how many of its users hold each value. Splitting
the value counts among cohorts with sequential multivariate hypergeometric
draws has the law of assigning users to cohorts by a uniformly random
permutation. A cohort whose users send one report through a mechanism with a
finite matrix M gets its report counts as ``sum_x Multinomial(c_x, M[x])``:
O(|X| |Z|) work whatever the number of users, or less when the mechanism draws
that law itself (:meth:`Mechanism.sample_counts`; k-RR in O(|X|)). Other cohorts (several reports,
no matrix, or a matrix too large to use) expand their values in bounded chunks
and use the mechanisms' vectorized samplers; or, where the run's estimators read nothing but per-bit
counts and the reports would be too many to draw one by one (:data:`BIT_COUNT_MIN_INTS`), draw those
counts directly (:meth:`Mechanism.sample_bit_counts`: a binomial per value and bit), which cost the same
for 10^9 users as for 10^3.

Nothing here depends on a run: the seed streams of a run and the memory preflight of its setup are
:mod:`ldpsim.running.simulation`, and the audit (:mod:`ldpsim.theory.audit`) tests the count path
drawn here as it tests a mechanism's own sampler.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..base.errors import ParameterError
from ..base.memory import MemoryLimitError, require_memory
from ..estimation.observations import BitTally, ReportGroup, plan_width, sum_equal_parts, unique_rows
from ..model.mechanism import Mechanism

#: the count path is considered for domains up to this size (the matrix is built to find |Z|)
MAX_COUNT_DOMAIN = 4096
#: and used when the matrix has at most this many cells (128 MB of float64)
MAX_COUNT_CELLS = 1 << 24
#: integers per temporary block (report chunk, multinomial draws): 32 MB of int64
CHUNK_INTS = 1 << 22
#: the most reports a run draws one user at a time (cohorts that are not simulated by counts); a run
#: beyond it would take hours, so it is refused before anything is drawn
MAX_PER_USER_DRAWS = 10**10
#: numpy's hypergeometric sampler needs populations below this size
MAX_HYPERGEOMETRIC = 10**9
#: a cohort whose per-user reports would hold more integers than this (2 GB of int64; OUE at k = 1,024:
#: 15.8 M users) is drawn as per-bit counts when every estimator of the run reads only those and its
#: mechanism draws them (:func:`tallied`). Smaller cohorts keep their per-user reports, so every result
#: that fit before is drawn as before, bit for bit; a fixed number, not the machine's memory, decides,
#: so a run's numbers do not depend on the machine it ran on
BIT_COUNT_MIN_INTS = 1 << 28


def split_counts(counts: np.ndarray, sizes: Sequence[int], rng: np.random.Generator) -> list[np.ndarray]:
    """Value counts of groups of the given sizes, drawn without replacement from ``counts``.

    Same law as cutting a uniformly random permutation of the users into
    consecutive groups; ``sum(sizes)`` must equal ``counts.sum()``.
    """
    left = np.array(counts, dtype=np.int64)
    if sum(sizes) != int(left.sum()):
        raise ValueError(f"group sizes sum to {sum(sizes)}, the counts to {int(left.sum())}")
    parts = []
    for size in sizes[:-1]:
        if size == 0 or size == int(left.sum()):
            part = np.zeros_like(left) if size == 0 else left.copy()
        else:
            if int(left.sum()) >= MAX_HYPERGEOMETRIC:
                raise ParameterError(
                    f"{int(left.sum())} users are too many to split among cohorts (numpy's hypergeometric sampler"
                    f" stops below {MAX_HYPERGEOMETRIC})",
                    field="users",
                    hint="use fewer users or a single cohort",
                )
            part = rng.multivariate_hypergeometric(left, size, method="marginals")
        left = left - part
        parts.append(part)
    parts.append(left)
    return parts


def count_matrix(mech: Mechanism) -> np.ndarray | None:
    """The matrix the count path samples from, or None when a single report must be sampled per user.

    Decided from the mechanism alone, never from what happens to be cached, so
    a task's random streams do not depend on which tasks a worker ran before.
    """
    if mech.report_width != 1 or mech.domain.size > MAX_COUNT_DOMAIN:
        return None
    try:
        m = mech.matrix
    except MemoryLimitError:
        return None
    if m is None or m.size > MAX_COUNT_CELLS:
        return None
    return m


def sample_cohort(
    plan: Sequence[Mechanism], counts: np.ndarray, rngs: Sequence[np.random.Generator]
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct report tuples and their counts for users holding each value ``counts[x]`` times.

    ``rngs`` has one generator per report of the plan.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counted(plan, int(counts.sum())):
        total = plan[0].sample_counts(counts, rngs[0])  # the mechanism's own count sampler, if it has one
        if total is not None:
            z = np.flatnonzero(total)
            return z[:, None], total[z]
        matrix = count_matrix(plan[0])
        if matrix is not None:
            return _count_reports(matrix, counts, rngs[0])
    return per_user_part(plan, counts, rngs)


def _count_reports(m: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rows = np.flatnonzero(counts)
    p = m[rows] / m[rows].sum(axis=1, keepdims=True)  # numpy wants rows summing to 1 within 1e-12
    total = np.zeros(m.shape[1], dtype=np.int64)
    step = max(1, CHUNK_INTS // m.shape[1])
    for start in range(0, rows.shape[0], step):
        block = slice(start, start + step)
        total += rng.multinomial(counts[rows[block]], p[block]).sum(axis=0)
    z = np.flatnonzero(total)
    return z[:, None], total[z]


def distinct_bound(plan: Sequence[Mechanism], users: int) -> int:
    """Most distinct report tuples ``users`` users of the plan can send (every report distinct if unknown)."""
    bound = 1
    for mech in plan:
        m = count_matrix(mech)
        if m is None:
            return users
        bound *= m.shape[1]
        if bound >= users:
            return users
    return bound


def chunk_users(plan: Sequence[Mechanism]) -> int:
    """Users per chunk of a cohort drawn one user at a time: :data:`CHUNK_INTS` integers of reports (at least one)."""
    return max(1, CHUNK_INTS // plan_width(plan))


def chunk_count(plan: Sequence[Mechanism], users: int) -> int:
    """How many chunks ``users`` users of ``plan`` are drawn in (see :func:`per_user_part`)."""
    return -(-users // chunk_users(plan))


def chunk_stream(rng: np.random.Generator, chunk: int, report: int) -> np.random.Generator:
    """The generator of report ``report`` of chunk ``chunk``: ``rng`` itself for chunk 0, else a child of its
    seed sequence (spawn key extended by ``(chunk, report)``), a function of the chunk's position alone.

    So any chunk can be drawn without drawing the ones before it (a shard draws its own chunks), and a
    cohort of one chunk draws from ``rng`` exactly as before chunks had streams of their own. ``report``
    keeps the children apart when one generator serves several reports of a plan.
    """
    if chunk == 0:
        return rng
    seq = rng.bit_generator.seed_seq
    if not isinstance(seq, np.random.SeedSequence):  # a generator restored from a state: no seed to derive from
        raise ValueError("chunked draws need generators seeded through numpy.random.SeedSequence")
    child = np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, chunk, report), pool_size=seq.pool_size)
    return np.random.Generator(type(rng.bit_generator)(child))


def per_user_part(
    plan: Sequence[Mechanism], counts: np.ndarray, rngs: Sequence[np.random.Generator], chunks: range | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct report tuples and counts of the cohort's users in ``chunks`` (all of them when None), drawn one
    user at a time.

    The users, ordered by true value, are cut into chunks of :func:`chunk_users`; chunk ``i`` draws from
    :func:`chunk_stream` of ``rngs`` and is grouped where it was drawn, then the chunks are grouped in place.
    The distinct tuples come out in lexicographic order with their counts summed, so grouping the parts of
    any split of the chunks again gives the whole cohort's groups, bit for bit (a sharded run's).
    """
    users = int(counts.sum())
    step = chunk_users(plan)
    chunks = range(chunk_count(plan, users)) if chunks is None else chunks
    drawn = min(chunks.stop * step, users) - chunks.start * step
    require_per_user(plan, drawn)
    ends = np.cumsum(counts)
    parts = []
    for chunk in chunks:
        start = chunk * step
        # the users start..stop-1, grouped by true value: user i holds the first x with ends[x] > i
        values = np.searchsorted(ends, np.arange(start, min(start + step, users)), side="right")
        samples = [mech.sample(values, chunk_stream(rng, chunk, j)) for j, (mech, rng) in enumerate(zip(plan, rngs))]
        reports = samples[0] if len(samples) == 1 else np.concatenate(samples, axis=1)
        parts.append(unique_rows(reports))
    if len(parts) == 1:
        return parts[0]
    return sum_equal_parts(parts)  # in place: the parts are consumed as the buffer grows


def counted(plan: Sequence[Mechanism], users: int) -> bool:
    """Whether a cohort's reports are drawn as counts (else one per user): one report per user, at least
    as many users as values, and a mechanism that draws its counts itself or has a usable matrix.

    A mechanism declaring ``sample_counts`` whose hook then returns None, and has no usable matrix, is
    simulated per user after all (that path checks its own memory).
    """
    if len(plan) != 1 or users < plan[0].domain.size:
        return False
    return plan[0].capabilities.sample_counts or count_matrix(plan[0]) is not None


def per_user_bytes(plan: Sequence[Mechanism], users: int) -> int:
    """Bytes at the peak of grouping the reports of ``users`` users of ``plan`` sampled one by one.

    One chunk is grouped where it was drawn: its rows and their distinct copy, four int64 arrays beside
    them (keys, order, run starts, counts) and the draws. Several: each chunk's distinct reports are
    kept and grouped in place (``ldpsim.estimation.observations.sum_equal_parts``): the
    (distinct, width) int64 reports once, a quarter of their columns permuted at a time, and five int64
    arrays beside them, plus one chunk's draws. Measured at 10^6 OUE users at k = 1024 (17 words): 187
    bytes per user (this gives 200 + the chunk's), where the concatenated copy and its sorted copy took
    458 (issue 31).
    """
    width = plan_width(plan)
    if users * width <= CHUNK_INTS:
        return 8 * (2 * width + 4) * distinct_bound(plan, users) + 8 * width * users
    return 8 * (width + max(1, width // 4) + 5) * distinct_bound(plan, users) + 8 * CHUNK_INTS


def require_per_user(plan: Sequence[Mechanism], users: int, held: int | None = None) -> None:
    """Refuse a cohort of ``users`` users of ``plan`` sampled one by one when its draws are too many
    (:data:`MAX_PER_USER_DRAWS`) or the distinct reports of ``held`` of them (default: all), those one process
    holds, would not fit in memory (:func:`per_user_bytes`).
    """
    held = users if held is None else held
    width = plan_width(plan)
    draws = users * len(plan)
    if draws > MAX_PER_USER_DRAWS:
        raise ParameterError(
            f"{users:,} users x {len(plan)} reports each would be drawn one user at a time ({draws:.3g} reports),"
            f" more than the {MAX_PER_USER_DRAWS:.0e} ldpsim simulates per run",
            field="users",
            hint="use fewer users, or one report per user through a mechanism with finitely many outputs (counted)",
        )
    require_memory(
        per_user_bytes(plan, held),
        f"the distinct reports of {held} users of {'+'.join(m.name for m in plan)}"
        f" (at worst one per user, {width} integers each)",
        hint="use fewer users, or a single report through a mechanism with finitely many outputs (simulated by counts)",
    )


def tallied(plan: Sequence[Mechanism], users: int) -> bool:
    """Whether a cohort whose estimators read only per-bit counts draws those instead of its reports.

    One single-round report through a mechanism that draws per-bit counts, not simulated by report
    counts (:func:`counted`), whose per-user reports would exceed :data:`BIT_COUNT_MIN_INTS` integers.
    """
    if len(plan) != 1 or plan[0].rounds != 1 or not plan[0].capabilities.sample_bit_counts:
        return False
    return users * plan_width(plan) > BIT_COUNT_MIN_INTS and not counted(plan, users)


def cohort_group(
    plan: Sequence[Mechanism],
    counts: np.ndarray,
    rngs: Sequence[np.random.Generator],
    prior: np.ndarray | None = None,
    *,
    bit_counts: bool = False,
    chunks: range | None = None,
) -> ReportGroup | BitTally | None:
    """The aggregated reports of one cohort (None if it has no users), tagged with its known ``prior``.

    With ``bit_counts`` (the caller's decision: every estimator of the run reads only per-bit counts and
    :func:`tallied` says so of the cohort) the users are drawn as their per-bit counts
    (:class:`ldpsim.BitTally`) where the mechanism draws them, not as reports. With ``chunks`` (a cohort drawn
    one user at a time, :func:`counted` false) only the users of those chunks are drawn (:func:`per_user_part`).
    """
    users = int(np.sum(counts))
    if not users:
        return None
    if chunks is not None:
        if not len(chunks):
            return None
        reports, report_counts = per_user_part(plan, np.asarray(counts, dtype=np.int64), rngs, chunks)
    else:
        if bit_counts:
            tally = plan[0].sample_bit_counts(np.asarray(counts, dtype=np.int64), rngs[0])
            if tally is not None:
                return BitTally(tuple(plan), tally, users, prior)
        reports, report_counts = sample_cohort(plan, counts, rngs)
    return ReportGroup(tuple(plan), reports.astype(np.int64), report_counts.astype(np.int64), prior)
