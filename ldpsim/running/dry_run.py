"""What a run would take, found without running it: ``ldpsim run --dry-run``.

Time is measured, not modelled, and not on the first sweep point alone: one sweep may hold runs of
3 ms and of 0.4 s (k-RR and SHE in frequency-oracles-k16). The points fall into groups that cost the
same as far as their setups tell (:func:`cost_key`: the mechanisms and their numbers of outputs, the
users and how they are simulated, the dataset, estimators and metrics), and one point of each group
is timed, as a worker runs it, within a budget (:data:`DRY_RUN_SHARE` of the run at the long end of
its estimate, at least :data:`DRY_RUN_SECONDS`): one group per plan of mechanisms first, then the
others. A point is timed twice: its first run fills the point's caches (likelihood structures),
which its further repetitions reuse. A point whose cost grows with its users (a cohort simulated
user by user, a dataset drawing a value per user) is timed on fewer users (1/256 of them, then the
largest share the budget allows) and its full size extrapolated on the line through the two largest
sizes timed. A group left untimed takes the figures of the timed groups of the same mechanisms (else
of all of them). Every figure is a range; the run's time shares the CPUs among its workers and the
machine's load.

Memory is measured on the same runs where the system tells (Linux: a process's resident memory and
its peak, the peak reset before each timed run): the process once every point's setup is built,
which a run holds from start to end (its workers start as copies of it), each run's rise above it
(extrapolated like the time, from growing as a power of the users to in proportion to them), and
what the timed runs left behind in caches and in the allocator's keeping. The memory checks' own
figures (:func:`ldpsim.running.simulation.simulation_bytes`,
:func:`ldpsim.estimation.unbiased.inversion_bytes`) are what the run refuses on: they count the
simulation's and the inversions' planned allocations, not the interpreter, the setups or the
estimators' working memory.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from ..base.errors import LdpsimError
from ..base.memory import available_memory
from ..base.threads import one_blas_thread
from ..estimation.observations import round_channels
from ..estimation.unbiased import inversion_bytes
from ..plugin.executor import Executor
from ..theory.sampling import count_matrix, counted
from .build import Builder, Setup
from .runner import preflight
from .scenario import Scenario
from .shards import held_users, shard_count
from .simulation import simulation_bytes
from .sweep import Point
from .tasks import Task, task_row

#: the timed runs take at most this share of the estimated run (with its workers, at the long end of its range:
#: a range still wide buys the runs that narrow it, and the budget shrinks with it; 5% of the middle of the range
#: that one size per group gave frequency-oracles-k1024 stopped at 10 s, short of the second sizes its estimate
#: needs, for a run of 460 s) ...
DRY_RUN_SHARE = 0.02
#: ... or this many seconds, whichever is more: a short run is worth a few seconds of estimate, and
#: frequency-oracles-k16's 11 distinct mechanisms take 2.5 s to time once each
DRY_RUN_SECONDS = 3.0
#: a point whose cost grows with its users is timed on 1/256 of them, then on the largest of 1/128, 1/64, ... that
#: the budget allows (never on fewer than MIN_SCALED_USERS), then extrapolated to all of them
SCALE_STEPS = (256, 128, 64, 32, 16, 8, 4, 2)
#: fewer users than this time Python's fixed costs, not the users
MIN_SCALED_USERS = 2000
#: the second size timed is at most this many times the first: a line needs two sizes, and every group one
SECOND_SIZE = 4
#: memory beyond the sizes timed grows at least as the users to this power (and at most in proportion): a solver
#: may take a leaner form past a size (L-GRR's MLE drops its dense likelihood past 2^24 entries, and 10^6 users
#: took half the memory the line through 16 and 31 thousand gave)
MEMORY_MIN_EXPONENT = 0.75
#: a timed point stands for the other points of its group within this factor either way: their privacy
#: levels differ (and with them an iterative estimator's iterations), and a busy machine's clock varies as much
GROUP_SPREAD = 1.3
#: ... and a size extrapolated from fewer users within this factor (a solver may change strategy with the size)
EXTRAPOLATED_SPREAD = 1.6
#: a point's second run (its caches filled) is repeated until this many seconds have passed (or AGAIN_RUNS runs):
#: one sub-millisecond run is shorter than the clock's jitter
AGAIN_SECONDS = 0.02
AGAIN_RUNS = 50
#: a group whose second run was not timed: further runs take this share of the first run, at least (at most 1)
AGAIN_LOW = 0.25
#: seconds a run takes beyond its setups and runs on a free CPU, at least and at most: starting the workers,
#: assembling the results and writing them (the first write imports xarray's netCDF and Dask backends: 0.3 s of
#: quickstart's 0.7 s on an idle 2-core machine, 1.3-2.5 s of its 2.2 s under a load of 8)
FINISH_SECONDS = (0.2, 1.0)
#: and the memory those backends take in the process that writes (45-50 MB there)
FINISH_BYTES = 50e6
#: where Linux tells how many processes are running or ready to (the fourth field: running/all)
PROC_LOADAVG = "/proc/loadavg"
#: where Linux tells a process's resident memory (VmRSS) and its peak since the last reset (VmHWM) ...
PROC_STATUS = "/proc/self/status"
#: ... and where writing "5" resets that peak to the present (Linux 4.0 and later)
PROC_CLEAR_REFS = "/proc/self/clear_refs"


@dataclass(frozen=True)
class Range:
    """A figure known to lie between ``low`` and ``high``."""

    low: float
    high: float

    @classmethod
    def around(cls, value: float, spread: float) -> Range:
        """``value`` divided and multiplied by ``spread``."""
        return cls(value / spread, value * spread)

    @classmethod
    def hull(cls, ranges: Iterable[Range]) -> Range:
        """The smallest range holding all of ``ranges`` (at least one)."""
        found = list(ranges)
        return cls(min(r.low for r in found), max(r.high for r in found))

    @property
    def mid(self) -> float:
        """The middle, geometric where both ends are positive (a range of factors)."""
        return math.sqrt(self.low * self.high) if self.low > 0 else (self.low + self.high) / 2

    def __add__(self, other: Range | float) -> Range:
        if isinstance(other, Range):
            return Range(self.low + other.low, self.high + other.high)
        return Range(self.low + other, self.high + other)

    def __mul__(self, factor: float) -> Range:
        return Range(self.low * factor, self.high * factor)

    def __contains__(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Measured:
    """One timed run: its seconds, and the memory it took where the system tells (else None).

    Attributes
    ----------
    seconds
        Wall-clock seconds of the run.
    peak_bytes
        The process's peak resident memory during the run, above what it held before.
    """

    seconds: float
    peak_bytes: float | None = None


#: what times one run: the task, and the builder whose setups it runs on
Timer = Callable[[Task, Builder], Measured]


@dataclass(frozen=True)
class CostGroup:
    """Sweep points that cost the same to run as far as their setups tell (:func:`cost_key`).

    Attributes
    ----------
    label
        The group in a few words: its mechanisms, and what sets it apart from groups of the same ones.
    points
        How many sweep points it holds.
    first, again
        Seconds of a point's first run (which fills the point's caches) and of each further one.
    peak_bytes
        A run's rise of the process's memory (None: not measured).
    how
        How the figures were found: ``timed``, ``timed on 1/N of the users``, or ``not timed, like ...``.
    """

    label: str
    points: int
    first: Range
    again: Range
    peak_bytes: Range | None
    how: str

    def seconds(self, repetitions: int) -> Range:
        """Seconds of every run of the group's points."""
        return (self.first + self.again * (repetitions - 1)) * self.points


@dataclass(frozen=True)
class DryRun:
    """The size of a run.

    Attributes
    ----------
    points, repetitions, runs
        Sweep points, repetitions per point, and runs (their product).
    run_bytes
        The largest memory one run allocates for its simulation and matrix inversions, over the points:
        the figure the memory checks refuse on.
    results_bytes
        The results' distributions (truth and each estimate, per run and value) held until they are written.
    available_bytes
        Memory available on this machine now.
    groups
        The points' cost groups, with their measured or borrowed figures (empty if not timed).
    setup_seconds
        Seconds to check the scenario and build every point's setup (a run does it too, before its runs).
    base_bytes
        This process's resident memory once every setup is built (None where not measurable).
    grown_bytes
        How much more it held after the timed runs: the caches they left, and memory its allocator kept.
    spent_seconds
        Seconds the timed runs took.
    cpus, load
        The CPUs this process may use, and the other processes running beside the timed runs (on average
        over them): a run's workers share the CPUs with that load (0 CPUs: not known, not shared).
    shards
        The most shards a run's users are split into (``shards``; 1: unsharded).
    held
        Whether some run is estimated where its shards are (``passes = "shards"``): ``run_bytes`` counts a
        shard's reports for it, not the run's.
    """

    points: int
    repetitions: int
    runs: int
    run_bytes: float
    results_bytes: float
    available_bytes: int
    groups: tuple[CostGroup, ...] = ()
    setup_seconds: float = 0.0
    base_bytes: float | None = None
    grown_bytes: float = 0.0
    spent_seconds: float = 0.0
    cpus: int = 0
    load: float = 0.0
    shards: int = 1
    held: bool = False

    def work(self) -> Range | None:
        """Seconds of all the runs one after the other (None if not timed)."""
        if not self.groups:
            return None
        total = Range(0.0, 0.0)
        for group in self.groups:
            total = total + group.seconds(self.repetitions)
        return total

    def seconds(self, workers: int = 1) -> Range | None:
        """The estimated time of the whole run on ``workers`` processes side by side, from its setup to its
        results written (:data:`FINISH_SECONDS`), the scenario's loading aside.

        The workers share the machine's CPUs with its load: a process running among ``n`` others gets
        ``min(1, cpus / n)`` of a CPU, and the timed runs ran as one process among the load.
        """
        work = self.work()
        if work is None:
            return None
        side = max(1, min(workers, self.runs))
        alone = together = 1.0  # the share of a CPU the timed runs had, and each worker will have
        if self.cpus > 0:
            alone, together = min(1.0, self.cpus / (self.load + 1)), min(1.0, self.cpus / (self.load + side))
        slowdown = alone / together
        slowest = Range.hull(g.first for g in self.groups) * slowdown  # one run is not split among workers
        shared = work * (slowdown / side)
        runs = Range(max(shared.low, slowest.low), max(shared.high, slowest.high))
        return runs + Range(*FINISH_SECONDS) * (1 / alone) + self.setup_seconds

    def process_bytes(self) -> Range | None:
        """The peak resident memory of a process that runs (each worker, or the only one), None if not measured.

        Every process holds the setups built before the runs (:attr:`base_bytes`) and rises by a run's peak,
        and at most by what the timed runs left behind (:attr:`grown_bytes`: a process reuses most of the memory
        earlier runs freed, so later points add little); the main process holds the results, and the backends
        that write them (:data:`FINISH_BYTES`).
        """
        if self.base_bytes is None:
            return None
        main = self.base_bytes + 2 * self.results_bytes + FINISH_BYTES  # the results held, then assembled
        rises = [g.peak_bytes for g in self.groups if g.peak_bytes is not None]
        if not rises:
            return Range(main, main)
        low = self.base_bytes + max(r.low for r in rises)
        high = self.base_bytes + max(r.high for r in rises) + self.grown_bytes
        return Range(max(low, main), max(high, main))


def cost_key(setup: Setup) -> tuple:
    """What sets a sweep point's cost, as far as its setup tells: points with equal keys cost about the same.

    The users (all, and each cohort's), how each cohort is simulated (by counts or user by user, or its
    expected counts), its mechanisms' names, report widths, rounds and numbers of outputs (an eps that
    changes a hash's range changes the cost), the datasets, the estimators and the metrics with their
    parameters. A privacy level alone does not split a group.
    """
    cohorts = tuple(
        (
            cohort.users,
            cohort.observe,
            bool(cohort.users) and counted(cohort.plan, cohort.users),
            tuple((mech.name, mech.report_width, mech.rounds, _outputs(mech)) for mech in cohort.plan),
            None if cohort.dataset is None else repr(cohort.dataset),
        )
        for cohort in setup.cohorts
    )
    return (
        setup.users,
        setup.domain.size,
        repr(setup.dataset),
        cohorts,
        tuple(repr(e) for e in setup.estimators.values()),
        tuple(repr(m) for m in setup.metrics.values()),
    )


def _outputs(mech) -> int | None:
    """The number of outputs of a mechanism if known without building a large matrix (else None)."""
    try:
        count = mech.output_count()
    except LdpsimError:
        count = None
    if count is None:
        matrix = count_matrix(mech)  # small domains only; None rather than an error
        count = None if matrix is None else int(matrix.shape[1])
    return count


def _names(setup: Setup) -> tuple[str, ...]:
    """The mechanisms' names of the cohorts with users: a group's kind, for borrowing figures."""
    return tuple("+".join(m.name for m in c.plan) for c in setup.cohorts if c.users)


def _scalable(setup: Setup) -> bool:
    """Whether the point's cost grows with its users: a dataset drawing a value per user, or a cohort
    simulated user by user."""
    datasets = [setup.dataset] + [c.dataset for c in setup.cohorts if c.dataset is not None]
    return any(d.draws_values for d in datasets) or any(
        c.users and c.observe == "sampled" and not counted(c.plan, c.users) for c in setup.cohorts
    )


def measure(task: Task, builder: Builder) -> Measured:
    """Run ``task`` here as a run's worker does (:func:`ldpsim.running.tasks.task_row`), timed, with the memory
    it took where the system tells (Linux)."""
    reset = _reset_peak()
    before = _resident()
    started = time.perf_counter()
    task_row(task, builder)
    seconds = time.perf_counter() - started
    after = _resident()
    if not reset or before is None or after is None:
        return Measured(seconds)
    return Measured(seconds, max(0.0, after[1] - before[0]))


def _resident() -> tuple[float, float] | None:
    """(resident bytes now, their peak since the last reset) of this process, or None where not told."""
    found = {}
    try:
        with open(PROC_STATUS, encoding="ascii") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    found[line[:5]] = 1024.0 * int(line.split()[1])
    except (OSError, ValueError):
        return None
    if len(found) != 2:
        return None
    return found["VmRSS"], found["VmHWM"]


def _reset_peak() -> bool:
    """Reset this process's peak resident memory to the present (Linux); False where it cannot be."""
    try:
        with open(PROC_CLEAR_REFS, "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


@dataclass(eq=False)
class _Group:
    """A cost group while it is timed."""

    key: tuple
    points: list[Point]
    setup: Setup
    #: (users, the first run there) for each size timed, smallest first
    rungs: list[tuple[int, Measured]] = field(default_factory=list)
    #: the sizes left to time, smallest first
    sizes: list[int] = field(default_factory=list)
    #: (users, the mean of the further runs there), at the largest size timed when it was timed
    again: tuple[int, Measured] | None = None

    @property
    def representative(self) -> Point:
        return self.points[len(self.points) // 2]

    @property
    def full(self) -> int:
        return self.setup.users

    def first_at(self, users: int) -> Range | None:
        """Seconds of a first run with ``users`` users (None if not timed)."""
        return self._at(users, [(n, m.seconds) for n, m in self.rungs])

    def rise_at(self, users: int) -> Range | None:
        """A run's rise of the process's memory with ``users`` users (None if not measured)."""
        found = [(n, m.peak_bytes) for n, m in self.rungs if m.peak_bytes is not None]
        if not found or len(found) < len(self.rungs):
            return None
        return self._at(users, found, sublinear=True)

    def _at(self, users: int, found: list[tuple[int, float]], *, sublinear: bool = False) -> Range | None:
        """A figure at ``users`` users from those measured at the sizes timed: the same if timed there (or
        not growing with the users), else extrapolated on the line through the two largest sizes (in proportion
        to the users from one); ``sublinear``: from growing as a power of the users up to that line."""
        if not found:
            return None
        n2, y2 = found[-1]
        if n2 == users or not _scalable(self.setup):
            return Range.around(y2, GROUP_SPREAD)
        if len(found) == 1:
            line = y2 * users / n2
        else:  # the two largest sizes; a first run on the fewest users may still pay the mechanism's caches
            slopes = [(y2 - y1) / (n2 - n1) for n1, y1 in (found[-2], found[0])]
            line = y2 + max(0.0, *slopes) * (users - n2)
        if sublinear:  # memory: a solver may change its form with the size (see MEMORY_MIN_EXPONENT)
            least = y2 * (users / n2) ** MEMORY_MIN_EXPONENT
            return Range(min(least, line), max(line, least))
        if len(found) == 1:  # one smaller size: between the same cost and one in proportion to the users
            return Range(y2 / GROUP_SPREAD, line * GROUP_SPREAD)
        return Range.around(max(line, y2 * min(1.0, users / n2)), EXTRAPOLATED_SPREAD)

    def predicted(self, users: int) -> float:
        """Seconds of a first run with ``users`` users, to decide whether to time it: in proportion to the
        users from the largest size timed (an overestimate where a run has fixed costs: a run that does not
        fit is never started on a guess too low)."""
        n, measured = self.rungs[-1]
        return measured.seconds * users / n

    def again_ratio(self) -> float | None:
        """Further runs' seconds over the first's, at the size timed (None if not timed)."""
        if self.again is None:
            return None
        users, further = self.again
        first = next(m for n, m in self.rungs if n == users)
        if first.seconds <= 0:
            return None
        return min(1.0, further.seconds / first.seconds)  # slower than the first run: the clock's noise

    def how(self) -> str:
        n = self.rungs[-1][0]
        return "timed" if n == self.full else f"timed on 1/{round(self.full / n)} of the users"


def dry_run(scenario: Scenario, *, calibrate: bool = True, workers: int = 1, timer: Timer | None = None) -> DryRun:
    """Size a loaded scenario's run: runs, memory, and (with ``calibrate``) time from timed runs.

    The preflight's refusals apply first: a scenario that would not fit raises the same
    :class:`ldpsim.LdpsimError` as the run. Nothing is written. ``workers`` (the run's processes side
    by side) sizes the time budget; ``timer`` times one run (default :func:`measure`).
    """
    started = time.perf_counter()
    preflight(scenario)
    builder = scenario.builder or Builder(scenario.base_dir)
    points = list(scenario.points())
    run_bytes = 0.0
    size = 0
    estimators = 0
    grouped: dict[tuple, _Group] = {}
    shards, held = 1, False
    for point in points:
        setup = builder.setup(point)
        shards = max(shards, shard_count(setup))
        held = held or setup.passes == "shards"
        nbytes = float(simulation_bytes(setup, held_users(setup)))
        inverting = {est.rounds for est in setup.estimators.values() if est.inverts_matrices}
        plans = [c.plan for c in setup.cohorts] if "all" in inverting else []
        if "each" in inverting:  # round by round: each round's one-report channel
            plans += [(channel,) for c in setup.cohorts for channel in round_channels(c.plan)]
        nbytes += max((inversion_bytes(plan) or 0.0 for plan in plans), default=0.0)
        run_bytes = max(run_bytes, nbytes)
        size, estimators = setup.domain.size, len(setup.estimators)
        key = cost_key(setup)
        if key in grouped:
            grouped[key].points.append(point)
        else:
            grouped[key] = _Group(key, [point], setup)
    setup_seconds = time.perf_counter() - started
    resident = _resident()
    runs = len(points) * scenario.repetitions
    groups: tuple[CostGroup, ...] = ()
    spent = 0.0
    grown = 0.0
    loads: list[float] = []
    if calibrate and points:
        found = list(grouped.values())
        with one_blas_thread():  # as a run holds it: entering it costs more than a small run
            spent = _time_groups(found, scenario, builder, timer or measure, workers, loads)
        groups = _finish(found, scenario.repetitions)
        after = _resident()
        if resident is not None and after is not None:
            grown = max(0.0, after[0] - resident[0])
    return DryRun(
        points=len(points),
        repetitions=scenario.repetitions,
        runs=runs,
        run_bytes=run_bytes,
        results_bytes=8.0 * runs * size * (estimators * max(scenario.rounds, 1) + 1),
        available_bytes=available_memory(),
        groups=groups,
        setup_seconds=setup_seconds,
        base_bytes=None if resident is None else resident[0],
        grown_bytes=grown,
        spent_seconds=spent,
        cpus=Executor.cpus() if loads else 0,
        load=sum(loads) / len(loads) if loads else 0.0,
        shards=shards,
        held=held,
    )


def _others() -> float | None:
    """Processes running or ready to, other than this one, now (Linux: /proc/loadavg), None where not told.

    Read beside each timed run: the load average of the last minute lags, and would still count the
    workers of a run that has just ended.
    """
    try:
        with open(PROC_LOADAVG, encoding="ascii") as fh:
            running = int(fh.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, running - 1.0)


def _time_groups(
    groups: list[_Group], scenario: Scenario, builder: Builder, timer: Timer, workers: int, loads: list[float]
) -> float:
    """Time the groups' representatives within the budget, most telling first; the seconds spent. The other
    processes running beside each run timed are appended to ``loads`` (where the system tells).

    In turn, while the budget lasts: the first size of one group per plan of mechanisms; a second size of those
    whose cost grows with the users (a line needs two); their further runs; their larger sizes; the other groups.
    """
    run = uuid.uuid4().hex
    by_plan: dict[tuple[str, ...], _Group] = {}

    def timed(task: Task) -> Measured:
        measured = timer(task, builder)
        if (others := _others()) is not None:
            loads.append(others)
        return measured

    for group in sorted(groups, key=lambda g: -len(g.points)):  # stable: the scenario's order among equals
        by_plan.setdefault(_names(group.setup), group)
    firsts = list(by_plan.values())
    rest = [g for g in sorted(groups, key=lambda g: -len(g.points)) if g not in firsts]
    spent = 0.0

    def budget() -> float:
        """A share of the run at its longest, as far as the runs timed tell: it shrinks as they tell more."""
        estimate = _finish(groups, scenario.repetitions, labelled=False) if any(g.rungs for g in groups) else ()
        work = sum((g.seconds(scenario.repetitions).high for g in estimate), 0.0)
        return max(DRY_RUN_SECONDS, DRY_RUN_SHARE * work / max(1, workers))

    def task(group: _Group, users: int) -> Task | None:
        point = group.representative
        if users != group.full:
            point = Point(point.index, point.coords, {**point.document, "users": users})
            try:  # the same simulation paths with fewer users, or not scaled
                setup = builder.setup(point)
            except LdpsimError:
                return None
            same = [bool(c.users) and counted(c.plan, c.users) for c in group.setup.cohorts]
            if [bool(c.users) and counted(c.plan, c.users) for c in setup.cohorts] != same:
                return None
        return Task(point, 0, scenario.seed, scenario.base_dir, run, scenario.rounds)

    def climb(group: _Group, steps: int, growth: float = math.inf) -> None:
        """Time the group on up to ``steps`` more sizes: its smallest first, then the largest that fits the budget
        (and is at most ``growth`` times the largest timed)."""
        nonlocal spent
        for _ in range(steps):
            if group.rungs:  # the largest size whose time, as far as the sizes timed tell, fits what is left
                left, most = budget() - spent, growth * group.rungs[-1][0]
                fits = [n for n in group.sizes if n <= most and group.predicted(n) <= left]
                if not fits:
                    return
                group.sizes = group.sizes[group.sizes.index(fits[-1]) :]
            while group.sizes:
                users = group.sizes.pop(0)
                made = task(group, users)
                if made is None:
                    continue
                try:
                    measured = timed(made)
                except (LdpsimError, ValueError):
                    if users == group.full:
                        raise  # the run would fail too: said now
                    continue  # a population of this dry run's own making: not the run's failure
                spent += measured.seconds
                group.rungs.append((users, measured))
                break
            else:
                return

    def again(group: _Group) -> None:
        """Time the group's further runs at its largest size timed (repeated: a sub-millisecond run is noise)."""
        nonlocal spent
        if scenario.repetitions < 2 or not group.rungs or group.again is not None:
            return
        users, first = group.rungs[-1]
        if spent + first.seconds > budget():
            return
        made = task(group, users)
        assert made is not None  # it was timed
        total, count = 0.0, 0
        while count < AGAIN_RUNS and (count == 0 or total < AGAIN_SECONDS):
            total += timed(made).seconds
            count += 1
        spent += total
        group.again = (users, Measured(total / count))

    for group in groups:
        sizes = [group.full // s for s in SCALE_STEPS if group.full // s >= MIN_SCALED_USERS]
        group.sizes = sizes + [group.full] if _scalable(group.setup) else [group.full]
    jobs: list[Callable[[], None]] = [
        *(partial(climb, g, 1) for g in firsts),
        *(partial(climb, g, 1, SECOND_SIZE) for g in firsts if _scalable(g.setup)),
        *(partial(again, g) for g in firsts),
        *(partial(climb, g, len(SCALE_STEPS)) for g in firsts),
        *(job for g in rest for job in (partial(climb, g, len(SCALE_STEPS) + 1), partial(again, g))),
    ]
    for job in jobs:
        if any(g.rungs for g in groups) and spent >= budget():
            break
        job()
    return spent


def _finish(groups: Sequence[_Group], repetitions: int, *, labelled: bool = True) -> tuple[CostGroup, ...]:
    """The groups' figures: measured or extrapolated where timed, borrowed from timed groups elsewhere
    (without ``labelled``, the figures alone: the budget reads them after every run timed)."""
    timed = [g for g in groups if g.rungs]
    if not timed:
        return ()
    ratios = [r for g in timed if (r := g.again_ratio()) is not None]
    again_ratio = Range.hull(Range(r, r) for r in ratios) if ratios else Range(AGAIN_LOW, 1.0)
    labels = _labels(groups) if labelled else {}
    found = []
    for group in groups:
        if group.rungs:
            first = group.first_at(group.full)
            assert first is not None
            ratio = group.again_ratio()
            again = (
                first * ratio
                if ratio is not None
                else Range(first.low * again_ratio.low, first.high * again_ratio.high)
            )
            peak = group.rise_at(group.full)
            how = group.how()
        else:
            donors = [g for g in timed if _names(g.setup) == _names(group.setup)] or timed
            firsts = [g.first_at(group.full) for g in donors]
            first = Range.hull(f for f in firsts if f is not None)
            again = Range(first.low * again_ratio.low, first.high * again_ratio.high)
            peaks = [p for g in donors if (p := g.rise_at(group.full)) is not None]
            peak = Range.hull(peaks) if peaks else None
            like = list(dict.fromkeys(labels.get(id(g), "") for g in donors))
            how = "not timed, like " + (", ".join(like) if len(like) <= 3 else f"the {len(like)} groups timed")
        found.append(CostGroup(labels.get(id(group), ""), len(group.points), first, again, peak, how))
    return tuple(found)


def _labels(groups: Sequence[_Group]) -> dict[int, str]:
    """Each group's label: its mechanisms, then what sets it apart from the groups of the same mechanisms."""
    labels = {}
    for group in groups:
        names = _names(group.setup)
        label = ", ".join(names) or "no reports"
        same = [g for g in groups if _names(g.setup) == names]
        if len(same) > 1:
            details = []
            if len({g.full for g in same}) > 1:
                details.append(f"{group.full:,} users")
            outputs = [c[3] for c in group.key[3]]
            if len({tuple(c[3] for c in g.key[3]) for g in same}) > 1:
                sizes = [o for plan in outputs for (_, _, _, o) in plan if o is not None]
                details.append(f"{'/'.join(map(str, sizes)) or 'unknown'} outputs")
            if not details:  # the sweep point timed, by its coordinates
                coords = group.representative.coords
                details.append(", ".join(f"{axis}={value}" for axis, value in coords.items()) or "a point")
            label += f" ({', '.join(details)})"
        labels[id(group)] = label
    return labels
