"""Executors and checkpoints: the same numbers whatever runs the tasks, and interrupted runs that resume exactly."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import ldpsim
from ldpsim import LdpsimError
from ldpsim.output.cli import app
from ldpsim.running.checkpoint import Checkpoint, checkpoint_dir
from ldpsim.running.runner import execute, run_task, tasks
from ldpsim.running.scenario import load_scenario

SWEEP = {
    "name": "sweep",
    "seed": 21,
    "users": 2000,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 9},
    "dataset": {"name": "binomial", "p": 0.4},
    "cohorts": {
        "one": {"share": "1/2", "reports": [{"mechanism": "krr", "eps": 1.0}]},
        "twice": {"share": "1/2", "reports": [{"mechanism": "geometric", "eps": 0.5, "repeat": 2}]},
    },
    "estimators": ["ibu", "inv-p"],
    "metrics": ["tv"],
    "sweep": {"eps": {"path": "cohorts.one.reports.0.eps", "values": [0.5, 2.0]}},
}
TIMING = {"seconds"}


def assert_same_numbers(a: xr.Dataset, b: xr.Dataset) -> None:
    assert set(a.data_vars) == set(b.data_vars)
    for name in set(a.data_vars) - TIMING:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


@pytest.fixture(scope="module")
def serial():
    return execute(load_scenario(SWEEP), executor="serial")


def test_a_process_pool_gives_the_same_numbers(serial):
    assert_same_numbers(serial, execute(load_scenario(SWEEP), executor="processes", workers=2))


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")
def test_a_dask_local_cluster_gives_the_same_numbers(serial):
    assert_same_numbers(serial, execute(load_scenario(SWEEP), executor="dask", workers=2))


def test_a_missing_dask_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    with pytest.raises(LdpsimError, match=r"^the dask executor needs dask.distributed: pip install 'ldpsim\[dask\]'$"):
        execute(load_scenario(SWEEP), executor="dask", workers=2)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"executor": "threads"}, r"^--executor: unknown executor 'threads'; choose one of serial, processes, dask$"),
        ({"workers": 0}, r"^--workers: must be at least 1, got 0; give the number of worker processes$"),
        (
            {"scheduler": "tcp://h:8786"},
            r"^--scheduler: only applies to the dask executor, not serial; add --executor dask",
        ),
        (
            {"executor": "dask", "scheduler": "tcp://h:8786", "workers": 2},
            r"^--workers: a running cluster has the workers",
        ),
    ],
)
def test_bad_executor_options_are_refused_before_running(kw, message):
    with pytest.raises(LdpsimError, match=message):
        execute(load_scenario(SWEEP), **kw)


class Boom(Exception):
    pass


def test_an_interrupted_run_resumes_to_the_same_numbers(serial, tmp_path, monkeypatch):
    out = tmp_path / "sweep.nc"
    real = ldpsim.running.runner.run_task
    calls = []

    def failing(task, builder=None):
        calls.append(task.key)
        if task.key == (1, 0):  # the third task of four
            raise Boom
        return real(task, builder)

    monkeypatch.setattr(ldpsim.running.runner, "run_task", failing)
    with pytest.raises(Boom):
        execute(load_scenario(SWEEP), checkpoint=Checkpoint(out, load_scenario(SWEEP)))
    assert len(Checkpoint(out, load_scenario(SWEEP), resume=True)) == 2
    assert not out.exists()

    calls.clear()
    monkeypatch.setattr(
        ldpsim.running.runner, "run_task", lambda task, builder=None: (calls.append(task.key), real(task, builder))[1]
    )
    resumed = execute(load_scenario(SWEEP), checkpoint=Checkpoint(out, load_scenario(SWEEP), resume=True))
    assert sorted(calls) == [(1, 0), (1, 1)]  # only the unfinished tasks ran again
    assert_same_numbers(serial, resumed)


def test_task_results_round_trip_through_a_checkpoint_variable_by_variable(tmp_path):
    loaded = load_scenario(SWEEP)
    ckpt = Checkpoint(tmp_path / "x.nc", loaded)
    result = run_task(tasks(loaded)[3], loaded.builder)
    assert {"error", "estimate", "truth", "iterations", "gap", "kkt", "users"} <= set(result.values)
    ckpt.save(result)
    (back,) = ckpt.load().values()
    assert back.key == result.key and type(back.key[0]) is int
    assert set(back.values) == set(result.values)
    for name, mine in result.values.items():
        theirs = back.values[name]
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, name
        np.testing.assert_array_equal(mine, theirs)


def test_a_checkpoint_of_another_scenario_is_refused(tmp_path):
    Checkpoint(tmp_path / "x.nc", load_scenario(SWEEP))
    other = load_scenario({**SWEEP, "users": 3000})
    with pytest.raises(
        LdpsimError,
        match=r"^--resume: the checkpoint '.*x\.nc\.partial' belongs to a different scenario .*; remove that folder",
    ):
        Checkpoint(tmp_path / "x.nc", other, resume=True)
    with pytest.raises(
        LdpsimError, match=r"^--resume: '.*x\.nc\.partial' holds the finished runs of an interrupted run; add --resume"
    ):
        Checkpoint(tmp_path / "x.nc", load_scenario(SWEEP))


cli = CliRunner()


def test_the_cli_resumes_and_cleans_up(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'seed = 3\nusers = 500\nrepetitions = 2\nestimators = ["inv-p"]\nmetrics = ["tv"]\n'
        '[domain]\nkind = "integers"\nlow = 0\nhigh = 4\n[dataset]\nname = "uniform"\n'
        '[cohorts.all]\nreports = [{ mechanism = "krr", eps = 1 }]\n'
    )
    out = tmp_path / "s.nc"
    checkpoint_dir(out).mkdir()  # the leftover of a crash before the fingerprint was written
    refused = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q"])
    assert refused.exit_code == 2 and "holds the finished runs of an interrupted run" in refused.output
    assert not out.exists()
    checkpoint_dir(out).rmdir()
    # --resume without a checkpoint runs everything; success removes the checkpoint
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q", "--resume"])
    assert done.exit_code == 0, done.output
    assert out.exists() and not checkpoint_dir(out).exists()


def test_cli_option_errors_are_one_line(tmp_path):
    done = cli.invoke(app, ["run", "nowhere.toml", "--scheduler", "tcp://h:1", "-e", "processes"])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "error: nowhere.toml: --scheduler: only applies to the dask executor, not processes;"
        " add --executor dask or drop --scheduler"
    ]


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")
@pytest.mark.parametrize("address", ["foo", "tcp://127.0.0.1:9"])  # malformed; nothing listens on port 9
def test_an_unreachable_scheduler_is_one_line(tmp_path, address):
    scenario = tmp_path / "s.toml"
    scenario.write_text("""
name = "s"
users = 200
domain = { kind = "integers", low = 0, high = 3 }
dataset = { name = "uniform", low = 0, high = 3 }
cohorts.all.reports = [{ mechanism = "krr", eps = 1.0 }]
estimators = ["ibu"]
metrics = ["tv"]
""")
    out = tmp_path / "r.nc"
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "--scheduler", address, "-q"])
    assert done.exit_code == 2, done.output
    [line] = done.output.strip().splitlines()
    assert line.startswith(f"error: {scenario}: --scheduler: cannot reach the dask scheduler at {address}")
    assert not out.exists()


def test_tasks_run_with_one_blas_thread(monkeypatch):
    """A threaded BLAS reduction may sum in another order with another thread count: tasks use one."""
    from threadpoolctl import threadpool_info

    from ldpsim.running import tasks as task_module

    seen = []
    original = task_module.simulate

    def spy(task, builder=None):
        seen.append(max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1))
        return original(task, builder)

    monkeypatch.setattr(task_module, "simulate", spy)
    execute(load_scenario(SWEEP))
    assert seen == [1] * 4
