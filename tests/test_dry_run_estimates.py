"""``run --dry-run``'s estimates: sweep points grouped by what changes their cost, one point of each group
timed (on fewer users where the cost grows with them), the others borrowed, every figure a range.

The clock is never read here: a fake timer says what each run costs (from its mechanism and users), so
these tests check the grouping and the arithmetic, not the machine.
"""

from __future__ import annotations

import textwrap

import pytest

from ldpsim.running import dry_run as dry
from ldpsim.running.build import Builder
from ldpsim.running.dry_run import CostGroup, DryRun, Measured, Range, cost_key, dry_run
from ldpsim.running.scenario import load_scenario
from ldpsim.running.tasks import Task

#: seconds of a first run, by mechanism: a cheap and an expensive one
COST = {"krr": 0.01, "oue": 1.0}


def scenario(tmp_path, *, users=1000, repetitions=3, mechanisms=("krr", "oue"), eps=(0.5, 1.0, 2.0), extra=""):
    path = tmp_path / "s.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "costs"
            seed = 1
            users = {users}
            repetitions = {repetitions}
            estimators = ["inv-p"]
            metrics = ["tv"]
            [domain]
            kind = "integers"
            low = 0
            high = 7
            [dataset]
            name = "zipf"
            s = 1.1
            [cohorts.all]
            share = 1
            reports = [{{ mechanism = "krr", eps = 1.0 }}]
            [sweep.mechanism]
            path = "cohorts.all.reports.0.mechanism"
            values = {list(mechanisms)!r}
            [sweep.eps]
            path = "cohorts.all.reports.0.eps"
            values = {list(eps)!r}
            """
        )
        + extra
    )
    return load_scenario(path)


class FakeTimer:
    """A timer that runs nothing: a first run of a point costs ``first(mechanism, users)``, later ones half."""

    def __init__(self, first):
        self.first = first
        self.calls: list[tuple[str, int]] = []
        self.seen: set[tuple] = set()

    def __call__(self, task: Task, builder: Builder) -> Measured:
        setup = builder.setup(task.point)
        name = setup.cohorts[0].plan[0].name
        self.calls.append((name, setup.users))
        seconds = self.first(name, setup.users)
        key = (task.point.index, setup.users)
        if key in self.seen:
            seconds /= 2
        self.seen.add(key)
        return Measured(seconds, peak_bytes=1e6 * seconds)


def test_points_of_a_cheap_and_an_expensive_mechanism_are_two_groups_and_the_range_covers_both(tmp_path):
    loaded = scenario(tmp_path)
    timer = FakeTimer(lambda name, users: COST[name])
    size = dry_run(loaded, timer=timer)
    assert [(g.label, g.points, g.how) for g in size.groups] == [("krr", 3, "timed"), ("oue", 3, "timed")]
    # one point of each group timed, its first run and its further ones; the cheap first point is not the model
    assert {name for name, _ in timer.calls} == {"krr", "oue"}
    actual = sum(3 * (COST[m] + 2 * COST[m] / 2) for m in ("krr", "oue"))  # 3 points x (a first run + 2 more)
    work = size.work()
    assert work is not None and actual in work
    assert 0.5 * actual < work.mid < 2 * actual
    first_point_only = size.runs * COST["krr"]  # what timing the first sweep point alone gave
    assert first_point_only < work.low / 10
    seconds = size.seconds(2)
    assert seconds is not None and seconds.low >= work.low / 2


def test_a_group_left_untimed_borrows_from_its_mechanism_and_widens_the_range(tmp_path, monkeypatch):
    monkeypatch.setattr(dry, "DRY_RUN_SECONDS", 0.5)  # room for the first group only
    loaded = scenario(tmp_path, mechanisms=("oue", "krr"))
    timer = FakeTimer(lambda name, users: COST[name])
    size = dry_run(loaded, timer=timer)
    by = {g.label: g for g in size.groups}
    assert by["oue"].how == "timed" and by["krr"].how == "not timed, like oue"
    assert [name for name, _ in timer.calls] == ["oue"]
    # krr borrows oue's figures: an overestimate, never the cheap one standing for the dear one
    assert by["krr"].first.low >= COST["oue"] / 2
    work = size.work()
    assert work is not None and work.high >= 6 * COST["oue"]


def test_a_point_whose_cost_grows_with_its_users_is_timed_on_fewer_and_extrapolated(tmp_path):
    # olh reports are simulated user by user: its cost grows with the users, timed on a share of them
    loaded = scenario(tmp_path, users=1_000_000, repetitions=1, mechanisms=("olh",), eps=(1.0,))
    linear = lambda name, users: 0.05 + 2e-5 * users  # noqa: E731  (20 s at a million users)
    timer = FakeTimer(linear)
    size = dry_run(loaded, timer=timer)
    (group,) = size.groups
    assert group.how.startswith("timed on 1/")
    assert all(users < 1_000_000 for _, users in timer.calls)
    assert linear("olh", 1_000_000) in group.first
    assert size.spent_seconds <= dry.DRY_RUN_SECONDS  # the budget, not a run of 20 s


def test_privacy_levels_alone_do_not_split_a_group_but_a_hash_range_does(tmp_path):
    loaded = scenario(tmp_path, mechanisms=("krr", "flh"), eps=(0.5, 4.0))
    builder = loaded.builder or Builder(loaded.base_dir)
    keys = [cost_key(builder.setup(point)) for point in loaded.points()]
    assert keys[0] == keys[1]  # krr at eps 0.5 and 4: the same work
    assert keys[2] != keys[3]  # flh's hash range grows with eps
    assert keys[0] != keys[2]


def test_memory_is_the_built_process_plus_the_dearest_run_and_what_the_timed_runs_left(tmp_path, monkeypatch):
    readings = iter([(100e6, 100e6), (200e6, 200e6)])  # once the points are built; after the timed runs
    monkeypatch.setattr(dry, "_resident", lambda: next(readings))
    loaded = scenario(tmp_path)
    size = dry_run(loaded, timer=FakeTimer(lambda name, users: COST[name]))
    peak = size.process_bytes()
    assert size.base_bytes == 100e6 and size.grown_bytes == 100e6 and peak is not None
    rise = 1e6 * COST["oue"]  # the dearest run's rise
    # the writing process: its results and backends, more than the runs' rise here
    assert peak.low == pytest.approx(100e6 + 2 * size.results_bytes + dry.FINISH_BYTES)
    assert peak.high == pytest.approx(100e6 + rise * dry.GROUP_SPREAD + 100e6)


def test_without_calibration_nothing_is_timed(tmp_path):
    size = dry_run(scenario(tmp_path), calibrate=False, timer=FakeTimer(lambda name, users: 1 / 0))
    assert size.groups == () and size.work() is None and size.seconds(4) is None


def test_time_on_workers_is_the_work_shared_but_never_less_than_one_run():
    group = CostGroup("x", 3, Range(2.0, 2.0), Range(1.0, 1.0), None, "timed")
    size = DryRun(3, 3, 9, 0.0, 0.0, 1, groups=(group,), setup_seconds=0.5)
    assert size.work() == Range(12.0, 12.0)  # 3 points x (2 + 2 x 1)
    finish = Range(*dry.FINISH_SECONDS)  # starting workers, writing the results
    assert size.seconds(1) == finish + 12.5 and size.seconds(4) == finish + 3.5
    assert size.seconds(100) == finish + 2.5  # 9 runs on 9 workers at most, each at least a first run


def test_workers_share_the_cpus_with_the_load_the_timed_runs_saw():
    group = CostGroup("x", 3, Range(2.0, 2.0), Range(1.0, 1.0), None, "timed")
    finish = Range(*dry.FINISH_SECONDS)
    idle = DryRun(3, 3, 9, 0.0, 0.0, 1, groups=(group,), cpus=2, load=0.0)
    assert idle.seconds(2) == finish + 6.0  # 12 s of runs on 2 free CPUs
    assert idle.seconds(4) == finish + 6.0  # 4 workers on 2 CPUs: no faster
    busy = DryRun(3, 3, 9, 0.0, 0.0, 1, groups=(group,), cpus=2, load=2.0)
    # timed as 1 process among 2 others on 2 CPUs (2/3 of a CPU); 2 workers among them get 1/2 each
    expected = finish * 1.5 + 12.0 * (2 / 3) / 0.5 / 2
    assert busy.seconds(2) == Range(pytest.approx(expected.low), pytest.approx(expected.high))


def test_a_smaller_population_that_fails_is_not_the_runs_failure(tmp_path):
    loaded = scenario(tmp_path, users=1_000_000, repetitions=1, mechanisms=("olh",), eps=(1.0,))

    def first(name, users):
        if users < 1_000_000:
            raise ValueError("too few users for this estimator")  # a failure of the dry run's own making
        return 0.5

    size = dry_run(loaded, timer=FakeTimer(first))
    (group,) = size.groups
    assert group.how == "timed" and 0.5 in group.first
