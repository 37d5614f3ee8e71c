"""Sharded runs (issue 31): the same numbers whatever runs the shards, and the unsharded run's law."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from helpers import assert_same_numbers
from scipy import stats

from ldpsim import Executor, ScenarioError
from ldpsim.running import shards as shards_module
from ldpsim.running.build import Builder
from ldpsim.running.runner import execute, run_task, tasks
from ldpsim.running.scenario import load_scenario
from ldpsim.running.shards import draw_shard, merge_shards, shard_count, shard_sizes, split_run

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


def test_a_run_splits_its_users_into_shards_of_equal_size():
    setup = setup_of(SHARDED)
    truth, shares = split_run(setup, 7, (0,))
    assert len(shares) == 3
    for c, cohort in enumerate(setup.cohorts):
        parts = [share[c] for share in shares]
        assert [int(p.sum()) for p in parts] == shard_sizes(cohort.users, 3) == [500, 500, 500]
    whole = sum(share[c] for share in shares for c in range(len(setup.cohorts)))
    np.testing.assert_array_equal(whole, np.round(truth * setup.users).astype(np.int64))
    assert shard_sizes(7, 3) == [3, 2, 2] and shard_sizes(2, 3) == [1, 1, 0]


def test_sharded_unary_bit_counts_follow_the_unsharded_law():
    """Given the run's value counts n_x, bit x of OUE is set by Binomial(n_x, 1/2) + Binomial(n - n_x, q) users
    however the users are split into shards (a sum of independent binomials of one p is one binomial), as in an
    unsharded run. sum z^2 over 32 bits x 40 runs is about chi2(1280) (normal approximation of binomials of
    hundreds of users); each tail is tested at 1e-4, so a correct sampler fails about 2 in 10^4 seeds."""
    doc = {**SHARDED, "shards": 5, "users": 4000, "cohorts": {"unary": {**SHARDED["cohorts"]["unary"], "share": 1}}}
    setup = setup_of(doc)
    (cohort,) = setup.cohorts
    mech, n = cohort.plan[0], cohort.users
    p, q = 0.5, 1 / (math.e + 1)
    runs, z2 = 40, 0.0
    for rep in range(runs):
        truth, shares = split_run(setup, 11, (rep,))
        obs = merge_shards(setup, [draw_shard(setup, 11, (rep,), s, share) for s, share in enumerate(shares)])
        (group,) = obs.groups
        bits = mech.bit_counts(group.reports, group.counts)
        held = np.round(truth * n)
        mean = held * p + (n - held) * q
        var = held * p * (1 - p) + (n - held) * q * (1 - q)
        z2 += float((((bits - mean) ** 2) / var).sum())
    dof = runs * mech.domain.size
    assert stats.chi2.ppf(1e-4, dof) < z2 < stats.chi2.ppf(1 - 1e-4, dof)


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
    assert not np.array_equal(ds["estimate"].isel(s=0).values, ds["estimate"].isel(s=1).values)  # other streams


def test_a_split_too_large_to_draw_names_the_shards_not_cohorts():
    """numpy's hypergeometric sampler stops below 10^9 users: a shard split that large says shards."""
    from ldpsim import ParameterError
    from ldpsim.theory.sampling import MAX_HYPERGEOMETRIC, split_counts

    counts = np.array([MAX_HYPERGEOMETRIC // 2, MAX_HYPERGEOMETRIC - MAX_HYPERGEOMETRIC // 2])
    halves = [MAX_HYPERGEOMETRIC // 2, MAX_HYPERGEOMETRIC - MAX_HYPERGEOMETRIC // 2]
    with pytest.raises(ParameterError, match="too many to split among shards") as refused:
        split_counts(counts, halves, np.random.default_rng(0), "shards")
    assert "cohort" not in str(refused.value)
    with pytest.raises(ParameterError, match="among cohorts.*single cohort"):
        split_counts(counts, halves, np.random.default_rng(0))
