"""Sharded runs (issue 31): the unsharded run's numbers, bit for bit, whatever the shard count or executor."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from helpers import assert_same_numbers, make
from scipy import stats

from ldpsim import Executor, Integers, MemoryLimitError, ScenarioError
from ldpsim.running import shards as shards_module
from ldpsim.running.build import Builder
from ldpsim.running.runner import execute, run_task, tasks
from ldpsim.running.scenario import load_scenario
from ldpsim.running.shards import draw_shard, merge_shards, shard_chunks, shard_count, split_run
from ldpsim.running.tasks import simulate
from ldpsim.theory import sampling

SHARDED = {
    "name": "sharded",
    "seed": 7,
    "users": 3000,
    "repetitions": 2,
    "shards": 3,
    "domain": {"kind": "integers", "low": 0, "high": 31},
    "dataset": {"name": "binomial", "p": 0.4},
    "cohorts": {
        "unary": {"share": "1/2", "reports": [{"mechanism": "oue", "eps": 1.0}]},  # per user: distinct reports
        "krr": {"share": "1/2", "reports": [{"mechanism": "krr", "eps": 1.0}]},  # report counts
    },
    "estimators": ["inv-p", "mle"],
    "metrics": ["tv"],
}


def setup_of(doc):
    scenario = load_scenario(doc)
    return Builder(scenario.base_dir).setup(next(iter(scenario.points())))


@pytest.fixture(scope="module")
def serial():
    return execute(load_scenario(SHARDED), executor="serial")


class Reversed(Executor):
    """Hands the results back last first: a merge that followed completion order would show it."""

    name = "reversed"

    def run(self, function, tasks):
        yield from reversed([function(task) for task in tasks])


def test_the_shards_run_here_give_the_executors_numbers(serial):
    """run_task draws the shards in this process, one after the other; execute sends them to the executor."""
    scenario = load_scenario(SHARDED)
    for r, task in enumerate(tasks(scenario)):
        mine = run_task(task)
        np.testing.assert_array_equal(mine["estimate"], serial["estimate"].sel(rep=r).values)
        np.testing.assert_array_equal(mine["truth"], serial["truth"].sel(rep=r).values)
        assert int(mine["distinct_reports"]) == int(serial["distinct_reports"].values[r])


def test_shards_merge_in_shard_order_whatever_order_they_finish(serial):
    assert_same_numbers(serial, execute(load_scenario(SHARDED), executor=Reversed()))


def test_a_process_pool_gives_the_serial_numbers(serial):
    assert_same_numbers(serial, execute(load_scenario(SHARDED), executor="processes", workers=2))


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_dask_cluster_gives_the_serial_numbers(serial, workers):
    from ldpsim_plugins.executors.dask_cluster import Dask

    assert_same_numbers(serial, execute(load_scenario(SHARDED), executor=Dask(workers=workers)))


def test_shards_take_consecutive_chunk_ranges_as_equal_as_they_go():
    assert shard_chunks(7, 3) == [range(0, 3), range(3, 5), range(5, 7)]
    assert shard_chunks(2, 3) == [range(0, 1), range(1, 2), range(2, 2)]  # the first never empty
    assert shard_chunks(1, 4)[0] == range(0, 1) and all(not r for r in shard_chunks(1, 4)[1:])
    for chunks in range(0, 40):
        for shards in range(1, 9):
            ranges = shard_chunks(chunks, shards)
            assert [i for r in ranges for i in r] == list(range(chunks))
            assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


def observations_of(doc, rep=0):
    scenario = load_scenario(doc)
    task = [t for t in tasks(scenario) if t.key[-1] == rep][0]
    return simulate(task, scenario.builder)


@pytest.mark.parametrize("shards", [1, 2, 3, 5, 11])
def test_a_sharded_run_draws_the_unsharded_runs_reports_bit_for_bit(monkeypatch, shards):
    """Chunks of 60 OUE users (32 bits: one word a report): 1500 users in 25 chunks, cut among the shards;
    k-RR is drawn whole by shard 0. Each cohort's groups, and so the estimates, equal the unsharded run's."""
    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    unsharded = {k: v for k, v in SHARDED.items() if k != "shards"}
    setup, truth, whole = observations_of(unsharded)
    assert sampling.chunk_count(setup.cohorts[0].plan, setup.cohorts[0].users) == 25
    _, truth_s, parts = observations_of({**SHARDED, "shards": shards})
    np.testing.assert_array_equal(truth, truth_s)
    assert len(whole.groups) == len(parts.groups) == 2
    for g, h in zip(whole.groups, parts.groups):
        assert g.plan == h.plan
        np.testing.assert_array_equal(g.reports, h.reports)
        np.testing.assert_array_equal(g.counts, h.counts)
    if shards > 1:
        truth_3, split = split_run(setup_of({**SHARDED, "shards": shards}), 7, (0,))
        assert sum(part[0] is not None for part in split) == min(shards, 25)  # the OUE chunks in every shard
        assert all(part[1] is None for part in split[1:])  # k-RR whole, in shard 0


def test_a_sharded_execute_equals_the_unsharded_one(monkeypatch):
    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    unsharded = execute(load_scenario({k: v for k, v in SHARDED.items() if k != "shards"}), executor="serial")
    sharded = execute(load_scenario({**SHARDED, "shards": 4}), executor=Reversed())
    for name in ("estimate", "truth", "distinct_reports", "tv"):
        np.testing.assert_array_equal(unsharded[name].values, sharded[name].values)


def test_chunks_drawn_from_their_own_streams_keep_the_law(monkeypatch):
    """Chunks of 60 users, each from its own stream: given the run's value counts n_x, bit x of OUE is set by
    Binomial(n_x, 1/2) + Binomial(n - n_x, q) users, as when one stream drew them all (a sum of independent
    binomials of one p is one binomial). sum z^2 over 32 bits x 40 runs is about chi2(1280) (normal
    approximation of binomials of hundreds of users); each tail is tested at 1e-4, so a correct sampler fails
    about 2 in 10^4 seeds. Chunks given the same stream, or a stream shared between them, would fail it."""
    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    doc = {**SHARDED, "shards": 5, "users": 4000, "cohorts": {"unary": {**SHARDED["cohorts"]["unary"], "share": 1}}}
    setup = setup_of(doc)
    (cohort,) = setup.cohorts
    mech, n = cohort.plan[0], cohort.users
    assert sampling.chunk_count(cohort.plan, n) == 67
    p, q = 0.5, 1 / (math.e + 1)
    runs, z2 = 40, 0.0
    for rep in range(runs):
        truth, shares = split_run(setup, 11, (rep,))
        obs = merge_shards(setup, [draw_shard(setup, 11, (rep,), share) for share in shares])
        (group,) = obs.groups
        bits = mech.bit_counts(group.reports, group.counts)
        held = np.round(truth * n)
        mean = held * p + (n - held) * q
        var = held * p * (1 - p) + (n - held) * q * (1 - q)
        z2 += float((((bits - mean) ** 2) / var).sum())
    dof = runs * mech.domain.size
    assert stats.chi2.ppf(1e-4, dof) < z2 < stats.chi2.ppf(1 - 1e-4, dof)


def test_one_generator_for_several_reports_gives_each_chunk_independent_reports(monkeypatch):
    """A plan's reports sharing one generator (as a benchmark may pass it) get children apart by report: two
    k-RR reports of an identity-like channel would otherwise coincide in every chunk after the first."""
    monkeypatch.setattr(sampling, "CHUNK_INTS", 8)
    mech = make("mechanism", "krr", Integers(low=0, high=9), eps=0.1)
    rng = np.random.default_rng(3)
    a = sampling.chunk_stream(rng, 2, 0).integers(0, 2**62, 4)
    b = sampling.chunk_stream(rng, 2, 1).integers(0, 2**62, 4)
    assert not np.array_equal(a, b)
    assert sampling.chunk_stream(rng, 0, 1) is rng
    c = sampling.chunk_stream(np.random.default_rng(3), 2, 0).integers(0, 2**62, 4)
    np.testing.assert_array_equal(a, c)  # a function of the seed and position, not of the draws before
    counts = np.array([4000] + [0] * 9)
    reports, n = sampling.per_user_part((mech, mech), counts, [rng, rng])
    same = int(n[reports[:, 0] == reports[:, 1]].sum())
    keep = mech.matrix[0, 0]
    p_same = float((mech.matrix[0] ** 2).sum())
    assert keep < 0.2 and stats.binomtest(same, 4000, p_same).pvalue > 1e-4  # not 4000 (copies)


def test_auto_takes_as_many_shards_as_the_per_user_bytes_need(monkeypatch):
    from ldpsim.theory.sampling import per_user_bytes

    setup = setup_of({**SHARDED, "shards": "auto"})
    assert shard_count(setup) == 1  # 1500 OUE users fit one shard
    unary = setup.cohorts[0]
    monkeypatch.setattr(shards_module, "SHARD_BYTES", per_user_bytes(unary.plan, unary.users) / 4.5)
    assert shard_count(setup) == 5  # k-RR is drawn as counts: only the OUE cohort counts


def test_unsharded_runs_take_the_usual_path():
    setup = setup_of({k: v for k, v in SHARDED.items() if k != "shards"})
    assert setup.shards is None and shard_count(setup) == 1


@pytest.mark.parametrize("value", [0, -2, 1.5, "many", True])
def test_a_bad_shard_count_is_one_line(value):
    with pytest.raises(ScenarioError, match=r'^shards: must be an integer from 1 to 65536 or "auto"'):
        load_scenario({**SHARDED, "shards": value})


def test_a_sweep_over_the_shard_count_runs_each_point_as_its_tasks_do():
    doc = {**SHARDED, "repetitions": 1, "estimators": ["inv-p"], "sweep": {"s": {"path": "shards", "values": [1, 4]}}}
    scenario = load_scenario(doc)
    ds = execute(scenario, executor=Reversed())
    for task in tasks(scenario):
        mine = run_task(task)
        np.testing.assert_array_equal(mine["estimate"], ds["estimate"].isel(s=task.point.index[0], rep=0).values)


# passes = "shards": the reports stay in the shards, each likelihood pass a map-reduce over them

HELD = {
    **SHARDED,
    "shards": 4,
    "passes": "shards",
    "estimators": {
        "ibu": {"name": "ibu"},
        "mle": {"name": "mle"},
        "squarem": {"name": "ibu", "stop": "kkt", "accelerate": "squarem"},
    },
}


@pytest.fixture(scope="module")
def held_serial():
    import ldpsim.theory.sampling as sim

    saved, sim.CHUNK_INTS = sim.CHUNK_INTS, 60  # 25 chunks of the OUE cohort, cut among the 4 shards
    try:
        found = execute(load_scenario(HELD), executor="serial")
    finally:
        sim.CHUNK_INTS = saved  # here, not after the module: the tests in between draw with the usual chunks
    return found


def test_held_shards_give_the_merged_runs_estimates_to_their_certificates(held_serial, monkeypatch):
    """The held likelihood is the merged one summed in another order: GIBU's iterates agree to round-off, the
    certified MLEs (SQUAREM on the shards, Newton merged) to the certificate: L within n log(1 + tol)."""
    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    merged = execute(load_scenario({**HELD, "passes": "merged"}), executor="serial")
    np.testing.assert_array_equal(held_serial["truth"].values, merged["truth"].values)
    ibu = {"estimator": "ibu"}
    np.testing.assert_allclose(held_serial["estimate"].sel(ibu).values, merged["estimate"].sel(ibu).values, atol=1e-9)
    for name in ("mle", "squarem"):
        at = {"estimator": name}
        assert (held_serial["kkt"].sel(at) < 1e-6).all() and (merged["kkt"].sel(at) < 1e-6).all()
        gap = 3000 * math.log1p(1e-6)
        diff = held_serial["loglik"].sel(at).values - merged["loglik"].sel(at).values
        assert np.all(np.abs(diff) <= gap), diff
        np.testing.assert_allclose(held_serial["estimate"].sel(at).values, merged["estimate"].sel(at).values, atol=0.02)
    assert int(held_serial["distinct_reports"].values[0]) >= int(merged["distinct_reports"].values[0])  # summed


def test_held_shards_give_the_same_numbers_here_and_on_a_pool(held_serial, monkeypatch):
    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    scenario = load_scenario(HELD)
    for r, task in enumerate(tasks(scenario)):
        mine = run_task(task)
        np.testing.assert_array_equal(mine["estimate"], held_serial["estimate"].sel(rep=r).values)
    assert_same_numbers(held_serial, execute(load_scenario(HELD), executor="processes", workers=2))


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")
def test_held_shards_on_dask_workers_give_the_serial_numbers(monkeypatch):
    """On Dask the shards stay on the workers (futures); every pass maps over them there: the same sums. (One
    repetition of `mle`, SQUAREM on the shards: a Dask pass costs ~10 ms of dispatch, GIBU's 700 passes 8 s.)"""
    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    from ldpsim_plugins.executors.dask_cluster import Dask

    doc = {**HELD, "repetitions": 1, "estimators": {"mle": {"name": "mle"}}}
    serial = execute(load_scenario(doc), executor="serial")
    assert_same_numbers(serial, execute(load_scenario(doc), executor=Dask(workers=2, start_method="fork")))


def test_observations_pickle_without_their_likelihood_and_say_their_size():
    """A Dask worker may copy a held shard to another: the weakly referring likelihood stays behind, and the
    shard's size (what Dask weighs a copy by) is its arrays', not an empty object's."""
    import pickle
    import sys

    from ldpsim import Likelihood

    _, _, obs = observations_of({k: v for k, v in SHARDED.items() if k != "shards"})
    Likelihood.of(obs)
    copy = pickle.loads(pickle.dumps(obs))
    assert copy.n == obs.n and copy.n_distinct == obs.n_distinct and not copy._derived
    arrays = sum(g.reports.nbytes + g.counts.nbytes for g in obs.groups)
    assert arrays <= sys.getsizeof(obs) <= arrays + 1000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shards": None}, r'^passes: passes = "shards" needs a sharded run; add shards'),
        ({"passes": "workers"}, r"^passes: must be one of 'merged', 'shards', got 'workers'"),
        ({"estimators": ["inv-p"]}, r"^estimators\.inv-p: inv-p.* cannot estimate from reports held in shards"),
        (
            {"estimators": {"m": {"name": "mle", "intervals": True}}},
            r"^estimators\.m: .*held in shards; use ibu or mle",
        ),
        ({"estimators": {"m": {"name": "ibu", "per_plan": True}}}, r"^estimators\.m: "),
        ({"rounds": "every"}, r'^passes: passes = "shards" runs on numpy, after the last round: not with rounds'),
    ],
)
def test_held_shards_refuse_what_needs_the_reports_in_one_line(change, message):
    doc = {k: v for k, v in {**HELD, **change}.items() if v is not None}
    with pytest.raises(ScenarioError, match=message):
        load_scenario(doc)


def test_held_shards_check_one_shards_memory_not_the_runs(monkeypatch):
    """Merged, a run's reports must fit one process; held in 4 shards, its largest shard's."""
    from ldpsim.running.runner import preflight
    from ldpsim.theory.sampling import per_user_bytes

    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    setup = setup_of(HELD)
    unary = setup.cohorts[0]
    whole = per_user_bytes(unary.plan, unary.users)
    monkeypatch.setattr("ldpsim.base.memory.available_memory", lambda: int(whole * 0.7))
    preflight(load_scenario(HELD))  # 7 chunks of 60 users (of 25) in the largest shard
    with pytest.raises(MemoryLimitError, match="distinct reports of 1500 users of oue"):
        preflight(load_scenario({**HELD, "passes": "merged"}))


def test_held_shards_without_reports_add_nothing_to_a_pass():
    """1500 OUE users are one chunk: shards 1 and 2 draw nothing, and their passes add (0, 0)."""
    doc = {**HELD, "repetitions": 1, "estimators": {"ibu": {"name": "ibu"}}}
    setup = setup_of(doc)
    _, shares = split_run(setup, 7, (0,))
    assert [part[0] is not None for part in shares] == [True, False, False, False]
    held = execute(load_scenario(doc), executor="serial")
    merged = execute(load_scenario({**doc, "passes": "merged"}), executor="serial")
    np.testing.assert_allclose(held["estimate"].values, merged["estimate"].values, atol=1e-9)


def test_a_dry_run_counts_a_held_runs_largest_shard_and_says_so(monkeypatch):
    from ldpsim.running.dry_run import dry_run

    monkeypatch.setattr(sampling, "CHUNK_INTS", 60)
    held = dry_run(load_scenario(HELD), calibrate=False)
    merged = dry_run(load_scenario({**HELD, "passes": "merged"}), calibrate=False)
    assert held.held and not merged.held and held.shards == merged.shards == 4
    assert held.run_bytes < merged.run_bytes  # 7 chunks of 60 users against the run's 1500
