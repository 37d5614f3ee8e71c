"""Executors and checkpoints: the same numbers whatever runs the tasks, and interrupted runs that resume exactly."""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import re
import sys

import numpy as np
import pytest
from helpers import HALF_L1, assert_same_numbers
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim_plugins.executors.serial import Serial
from typer.testing import CliRunner

import ldpsim
from ldpsim import Executor, LdpsimError, Param, Registry, hookimpl
from ldpsim.output.cli import app, executor_help
from ldpsim.results.io import open_results
from ldpsim.running import provenance
from ldpsim.running.checkpoint import Checkpoint, checkpoint_dir, finished_tasks
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


@pytest.fixture(scope="module")
def serial():
    return execute(load_scenario(SWEEP), executor="serial")


def test_a_process_pool_gives_the_same_numbers(serial):
    assert_same_numbers(serial, execute(load_scenario(SWEEP), executor="processes", workers=2))


def test_batches_sized_from_a_task_timed_first_give_the_same_numbers(serial, monkeypatch):
    """A sweep of many tasks on several workers runs one here first, timed, and sizes the batches from it."""
    from ldpsim.running import runner

    sizes = []
    monkeypatch.setattr(runner, "PROBE_TASKS", 2)  # the sweep's 4 tasks are "many"
    monkeypatch.setattr(runner, "batch_size", lambda seconds: sizes.append(seconds) or 3)
    assert_same_numbers(serial, execute(load_scenario(SWEEP), executor="processes", workers=2))
    assert len(sizes) == 1 and sizes[0] > 0


def test_a_batch_size_grows_only_for_fast_tasks():
    from ldpsim.running.runner import BATCH_SECONDS, MAX_BATCH, MAX_BATCH_GROWTH, batch_size

    assert batch_size(1.0) == batch_size(0.0) == batch_size(float("nan")) == MAX_BATCH
    assert batch_size(BATCH_SECONDS / (2 * MAX_BATCH)) == 2 * MAX_BATCH
    assert batch_size(1e-9) == MAX_BATCH_GROWTH * MAX_BATCH


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")
@pytest.mark.parametrize("method", [None, "spawn"], ids=["default", "spawn"])
def test_a_dask_local_cluster_gives_the_same_numbers(serial, method):
    """Forked workers (the default where there is fork) and spawned ones (fresh interpreters, which build the
    plugins themselves) give the serial run's numbers."""
    from ldpsim_plugins.executors.dask_cluster import Dask

    runner = Dask(workers=2, start_method=method)
    if method is not None or sys.platform.startswith("linux"):
        assert runner._start_method() == (method or "fork")
    assert_same_numbers(serial, execute(load_scenario(SWEEP), executor=runner))


def test_a_start_method_is_refused_beside_a_running_scheduler():
    from ldpsim_plugins.executors.dask_cluster import Dask

    with pytest.raises(LdpsimError, match=r"^start_method: a running cluster has the workers it was started with"):
        Dask(scheduler="tcp://h:8786", start_method="fork")


def test_a_missing_dask_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    with pytest.raises(LdpsimError, match=r"^the dask executor needs dask.distributed: pip install 'ldpsim\[dask\]'$"):
        execute(load_scenario(SWEEP), executor="dask", workers=2)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"executor": "threads"}, r"^executor: unknown executor 'threads'; choose one of: dask, processes, serial$"),
        ({"executor": "processes", "workers": 0}, r"^workers: must be >= 1, got 0(\.0)?; choose workers >= 1$"),
        ({"workers": 2}, r"^workers: only applies to the dask or processes executor, not serial; use the dask or"),
        (
            {"scheduler": "tcp://h:8786"},
            r"^scheduler: only applies to the dask executor, not serial; use the dask executor, or leave the scheduler out$",
        ),
        (
            {"executor": "dask", "scheduler": "tcp://h:8786", "workers": 2},
            r"^workers: a running cluster has the workers",
        ),
        ({"executor": Serial(), "workers": 2}, r"^workers: is given beside an executor instance"),
    ],
)
def test_bad_executor_options_are_refused_before_running(kw, message):
    with pytest.raises(LdpsimError, match=message):
        execute(load_scenario(SWEEP), **kw)


class Boom(Exception):
    pass


def test_an_interrupted_run_resumes_to_the_same_numbers(serial, tmp_path, monkeypatch):
    out = tmp_path / "sweep.nc"
    real = ldpsim.running.runner.task_row
    calls = []

    def failing(task, builder=None):
        calls.append(task.key)
        if task.key == (1, 0):  # the third task of four
            raise Boom
        return real(task, builder)

    monkeypatch.setattr(ldpsim.running.runner, "task_row", failing)
    with pytest.raises(Boom):
        execute(load_scenario(SWEEP), checkpoint=Checkpoint(out, load_scenario(SWEEP)))
    kept = Checkpoint(out, load_scenario(SWEEP), resume=True)
    assert len(kept.load()) == 2  # the two finished tasks, kept when the third failed ...
    assert len(kept) == 1  # ... in one file: written as the run stopped, not per batch
    assert not out.exists()

    calls.clear()
    monkeypatch.setattr(
        ldpsim.running.runner, "task_row", lambda task, builder=None: (calls.append(task.key), real(task, builder))[1]
    )
    resumed = execute(load_scenario(SWEEP), checkpoint=Checkpoint(out, load_scenario(SWEEP), resume=True))
    assert sorted(calls) == [(1, 0), (1, 1)]  # only the unfinished tasks ran again
    assert_same_numbers(serial, resumed)


def test_task_results_round_trip_through_a_checkpoint_variable_by_variable(tmp_path):
    loaded = load_scenario(SWEEP)
    ckpt = Checkpoint(tmp_path / "x.nc", loaded)
    result = run_task(tasks(loaded)[3], loaded.builder)
    assert {"scores", "estimate", "truth", "iterations", "gap", "kkt", "users"} <= set(result.values)
    ckpt.save(result)
    (back,) = ckpt.load().values()
    assert back.key == result.key and type(back.key[0]) is int
    assert set(back.values) == set(result.values)
    for name, mine in result.values.items():
        theirs = back.values[name]
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, name
        np.testing.assert_array_equal(mine, theirs)


def test_a_checkpoint_of_another_scenario_is_refused(tmp_path):
    loaded = load_scenario(SWEEP)
    Checkpoint(tmp_path / "x.nc", loaded).save(run_task(tasks(loaded)[0], loaded.builder))
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
    checkpoint_dir(out).mkdir()
    (checkpoint_dir(out) / "task-0-0.npz").write_bytes(b"PK")  # a finished task, as far as a listing tells
    refused = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q"])
    assert refused.exit_code == 2 and "holds the finished runs of an interrupted run" in refused.output
    assert not out.exists()
    (checkpoint_dir(out) / "task-0-0.npz").unlink()
    # the leftover of a crash before any task finished holds nothing: it does not block a run
    empty = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q"])
    assert empty.exit_code == 0, empty.output
    out.unlink()
    # --resume without a checkpoint runs everything; success removes the checkpoint
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q", "--resume"])
    assert done.exit_code == 0, done.output
    assert out.exists() and not checkpoint_dir(out).exists()
    assert re.search(
        r"\(2 runs in [\d.]+ s, [\d.e-]+ s of it running them = wall_seconds; seed 3\)$", done.output.strip()
    ), done.output  # none resumed


def test_cli_option_errors_are_one_line_naming_the_flag(tmp_path):
    done = cli.invoke(app, ["run", "nowhere.toml", "--scheduler", "tcp://h:1", "-e", "processes"])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "error: nowhere.toml: --scheduler: only applies to the dask executor, not processes;"
        " use the dask executor, or leave the scheduler out"
    ]
    done = cli.invoke(app, ["run", "nowhere.toml", "-e", "thread"])
    assert done.output.strip() == (
        "error: nowhere.toml: --executor: unknown executor 'thread'; choose one of: dask, processes, serial"
    )


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
    import dask

    assert dask.config.get("scheduler", None) != "dask.distributed"  # the failed client was not left as dask's default


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


def test_a_run_enters_the_blas_limit_once_and_restores_it(monkeypatch, tmp_path):
    """Entering the limit costs milliseconds, more than a small task: a run enters it once, not per task,
    and holds it from its setups to its results' file (the matrices its tasks use are built under it)."""
    from threadpoolctl import threadpool_info

    from ldpsim.base import threads
    from ldpsim.running import build, runner

    def blas_threads():
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    before = blas_threads()
    entered = []
    real = threads._limit
    monkeypatch.setattr(threads, "_limit", lambda: (entered.append({"limits": 1, "user_api": "blas"}), real())[1])
    held = []
    for owner, name in [(build.Builder, "_setup"), (runner, "assemble"), (runner, "save_results")]:
        original = getattr(owner, name)
        monkeypatch.setattr(
            owner, name, lambda *a, _f=original, **k: (held.append(max(blas_threads())), _f(*a, **k))[1]
        )
    ldpsim.run_scenario({**SWEEP, "repetitions": 5}, output=tmp_path / "r.nc")
    assert entered == [{"limits": 1, "user_api": "blas"}]  # 2 setups, 10 tasks, the assembly, the file: one limit
    assert held and set(held) == {1}
    assert blas_threads() == before
    scenario = load_scenario(SWEEP)  # loaded on its own: its setups under a limit of their own
    assert len(entered) == 2
    execute(scenario)
    assert len(entered) == 3
    run_task(tasks(scenario)[0])  # a task on its own still runs limited
    assert len(entered) == 4
    assert blas_threads() == before


@pytest.mark.parametrize("how", ["held = one_blas_thread(); held.__enter__()", "one_blas_thread_for_good()"])
def test_the_limit_covers_scipys_blas_loaded_later(how):
    """scipy carries its own BLAS, loaded on first use (often inside a task): a limit entered before that
    would leave it threaded; entering the limit loads it first. In a fresh interpreter, as a spawned worker."""
    import subprocess

    code = f"""
import sys
from threadpoolctl import threadpool_info
from ldpsim.base.threads import one_blas_thread, one_blas_thread_for_good
assert "scipy.linalg" not in sys.modules
{how}
import scipy.linalg
blas = [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
print(len(blas), sorted({{n for _, n in blas}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, threads = done.stdout.split(maxsplit=1)
    assert int(count) >= 2  # numpy's and scipy's
    assert threads.strip() == "[1]"


class Reversed(Executor):
    """Last task first, each sent through pickle as to another machine: a third party's executor."""

    name = "reversed"
    workers = Param("int", None, ge=1, doc="accepted, as a pool's would be; tasks still run one at a time")
    ran: list[tuple[int, ...]] = []

    def run(self, function, tasks):
        function = pickle.loads(pickle.dumps(function))  # what a remote worker receives: no plugin instances
        for batch in reversed(tasks):  # the core sends batches of tasks: opaque, picklable
            Reversed.ran.extend(task.key for task in batch)
            yield function(pickle.loads(pickle.dumps(batch)))


@hookimpl
def register_executors(register):
    register(Reversed)


@pytest.fixture
def third_party_executor(monkeypatch):
    """This module, added to the registry as a plugin providing the ``reversed`` executor."""
    registry = Registry.from_entry_points()
    registry.add(sys.modules[__name__], name="reversed", distribution="ldpsim-reversed", version="0.1")
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", registry)
    Reversed.ran.clear()
    return registry


def test_a_third_party_executor_runs_a_scenario_to_the_same_numbers(serial, third_party_executor):
    ds = ldpsim.run_scenario(SWEEP, executor="reversed", workers=3)
    assert Reversed.ran == [(1, 1), (1, 0), (0, 1), (0, 0)]
    assert_same_numbers(serial, ds)
    # Errors and the command line's help name the executors the registry holds, the new one too.
    with pytest.raises(
        LdpsimError, match=r"^executor: unknown executor 'nope'; choose one of: dask, processes, reversed, serial$"
    ):
        ldpsim.run_scenario(SWEEP, executor="nope")
    with pytest.raises(LdpsimError, match=r"^scheduler: only applies to the dask executor, not reversed"):
        ldpsim.run_scenario(SWEEP, executor="reversed", scheduler="tcp://h:1")
    assert "reversed: Last task first" in executor_help()
    shown = " ".join(cli.invoke(app, ["run", "--help"]).output.replace("│", " ").split())
    assert "reversed: Last task first" in shown and "serial: One task after the other" in shown


def test_an_executor_instance_runs_as_given(serial):
    Reversed.ran.clear()
    assert_same_numbers(serial, execute(load_scenario(SWEEP), executor=Reversed()))
    assert len(Reversed.ran) == 4


def test_the_builtin_executors_are_plugins_using_only_the_public_api(registry):
    for name in ("serial", "processes", "dask"):
        entry = registry.get("executor", name)
        assert entry.distribution == "ldpsim" and entry.cls.__module__.startswith("ldpsim_plugins.executors.")
    assert set(registry.get("executor", "dask").cls.parameters()) == {"workers", "scheduler", "start_method"}
    assert set(registry.get("executor", "serial").cls.parameters()) == set()


def test_run_scenario_checkpoints_resumes_and_cleans_up_like_the_cli(serial, tmp_path, monkeypatch):
    out = tmp_path / "sweep.nc"
    real = ldpsim.running.runner.task_row

    def failing_at(key):
        def run(task, builder=None):
            if task.key == key:
                raise Boom
            return real(task, builder)

        return run

    monkeypatch.setattr(ldpsim.running.runner, "task_row", failing_at((0, 0)))  # the first task: nothing to keep
    with pytest.raises(Boom):
        ldpsim.run_scenario(SWEEP, output=out)
    assert not checkpoint_dir(out).exists() and not out.exists()

    monkeypatch.setattr(ldpsim.running.runner, "task_row", failing_at((1, 0)))  # the third: two are kept
    with pytest.raises(Boom):
        ldpsim.run_scenario(SWEEP, output=out)
    assert finished_tasks(out) == 2 and not out.exists()
    monkeypatch.setattr(ldpsim.running.runner, "task_row", real)
    with pytest.raises(LdpsimError, match="holds the finished runs of an interrupted run"):
        ldpsim.run_scenario(SWEEP, output=out)
    with pytest.raises(LdpsimError, match="^resume: needs an output to resume"):
        ldpsim.run_scenario(SWEEP, resume=True)

    resumed = ldpsim.run_scenario(SWEEP, output=out, resume=True, executor="processes", workers=2)
    assert not checkpoint_dir(out).exists()
    assert_same_numbers(serial, resumed)
    assert_same_numbers(serial, open_results(out))
    again = ldpsim.run_scenario(SWEEP, output=out)  # a finished run leaves nothing to resume: it runs again
    assert_same_numbers(serial, again)


def test_a_checkpoint_made_by_another_ldpsim_version_is_refused(tmp_path, monkeypatch):
    loaded = load_scenario(SWEEP)
    Checkpoint(tmp_path / "x.nc", loaded).save(run_task(tasks(loaded)[0], loaded.builder))
    installed = provenance._version
    monkeypatch.setattr(provenance, "_version", lambda name: "9.9.9" if name == "ldpsim" else installed(name))
    with pytest.raises(
        LdpsimError,
        match=r"^--resume: the checkpoint '.*x\.nc\.partial' was made by other code \(ldpsim .+ -> 9\.9\.9\);",
    ):
        Checkpoint(tmp_path / "x.nc", load_scenario(SWEEP), resume=True)


@pytest.fixture
def edited_plugin(tmp_path, monkeypatch):
    """A metric plugin from a module on disk; the fixture's value appends a comment to that file."""
    site = tmp_path / "site"
    site.mkdir()
    source = site / "ldpsim_half_l1.py"
    source.write_text(HALF_L1)
    monkeypatch.syspath_prepend(str(site))
    registry = Registry.from_entry_points()
    registry.add(importlib.import_module("ldpsim_half_l1"), name="half-l1")
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", registry)
    yield lambda: source.write_text(HALF_L1 + "# an uncommitted edit\n")
    sys.modules.pop("ldpsim_half_l1", None)


def test_an_edit_to_a_plugin_s_source_changes_the_fingerprint(tmp_path, edited_plugin):
    doc = {**SWEEP, "metrics": ["half-l1"]}
    loaded = load_scenario(doc)
    Checkpoint(tmp_path / "x.nc", loaded).save(run_task(tasks(loaded)[0], loaded.builder))
    assert len(Checkpoint(tmp_path / "x.nc", load_scenario(doc), resume=True)) == 1  # the same code resumes
    edited_plugin()
    with pytest.raises(LdpsimError, match=r"was made by other code \(source files edited\); remove that folder"):
        Checkpoint(tmp_path / "x.nc", load_scenario(doc), resume=True)


def test_the_cli_keeps_the_finished_runs_of_an_interrupted_run(tmp_path, monkeypatch):
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'seed = 3\nusers = 500\nrepetitions = 2\nestimators = ["inv-p"]\nmetrics = ["tv"]\n'
        '[domain]\nkind = "integers"\nlow = 0\nhigh = 4\n[dataset]\nname = "uniform"\n'
        '[cohorts.all]\nreports = [{ mechanism = "krr", eps = 1 }]\n'
    )
    out = tmp_path / "s.nc"
    real = ldpsim.running.runner.task_row

    def interrupted_at(rep):
        def run(task, builder=None):
            if task.rep == rep:
                raise KeyboardInterrupt
            return real(task, builder)

        return run

    monkeypatch.setattr(ldpsim.running.runner, "task_row", interrupted_at(0))
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q"])
    assert done.exit_code == 130 and done.output.strip() == "interrupted; nothing was written"
    assert not checkpoint_dir(out).exists()

    monkeypatch.setattr(ldpsim.running.runner, "task_row", interrupted_at(1))
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q"])
    assert done.exit_code == 130
    assert (
        done.output.strip() == f"interrupted; 1 finished run is kept in {checkpoint_dir(out)}: add --resume to continue"
    )
    assert finished_tasks(out) == 1 and not out.exists()

    monkeypatch.setattr(ldpsim.running.runner, "task_row", real)
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-e", "serial", "-q", "--resume"])
    assert done.exit_code == 0, done.output
    assert out.exists() and not checkpoint_dir(out).exists()
    # 2 repetitions of one sweep point: the finished run is resumed, not run again nor counted as run now
    assert re.search(
        r"\(1 run in [\d.]+ s \+ 1 resumed, [\d.e-]+ s of it running them = wall_seconds; seed 3\)$",
        done.output.strip(),
    ), done.output


# --- batches: a sweep of small runs costs a few dispatches and checkpoint files -------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3000), st.integers(1, 64))
def test_batches_cover_the_tasks_in_order_in_bounded_batches(count, workers):
    from ldpsim.running.runner import BATCHES_PER_WORKER, MAX_BATCH, batches

    todo = list(range(count))
    parts = batches(todo, workers)  # type: ignore[arg-type]
    assert [t for part in parts for t in part] == todo
    assert all(0 < len(part) <= MAX_BATCH for part in parts)
    assert len(parts) >= min(count, BATCHES_PER_WORKER * workers)  # every worker has work to the end
    sizes = [len(part) for part in parts]
    if workers == 1 and parts:
        assert max(sizes) - min(sizes) <= 1  # balanced
    elif count > workers:  # balanced, but for the last ones, which shrink so that the workers finish together
        assert max(sizes) <= sizes[0] + 1
        assert max(sizes[-workers:]) <= sizes[0] / 8 + 1


def test_a_batch_sent_back_gives_every_run_its_own_values_and_columns_only_when_uniform():
    """A worker's batch holds its runs' values stacked, each variable converted once: unpickled, each run has
    its key, its variables in its own order, and the values its own conversion gives (type, dtype and bits);
    values that cannot be stacked faithfully (missing from a run, another dtype or shape) are kept run by run,
    and then the batch offers no columns."""
    from ldpsim.results.assemble import Batches
    from ldpsim.running.runner import _Stacked
    from ldpsim.running.tasks import TaskRow

    dtypes = {"a": "float64", "n": "int64", "x": "float64", "b": "bool"}

    def row(i, **extra):
        return TaskRow((0, i), {"a": [i / 3, i / 7, 1e-300 * i], "n": i, "b": [i % 2 == 0], **extra}, dtypes)

    uniform = [row(i) for i in range(4)]
    mixed = [
        row(4, x=np.ones(2)),  # x missing from the next run
        row(5),
        TaskRow((0, 6), {"n": 6, "a": np.zeros(3), "b": [True]}, {**dtypes, "n": "int32"}),  # another dtype, order
        TaskRow((0, 7), {"a": [0.5, 0.25], "n": 7, "b": np.array([False])}, dtypes),  # another shape
    ]
    for rows in (uniform, mixed):
        batch = _Stacked.of(rows)
        for back in (batch, pickle.loads(pickle.dumps(batch))):
            assert len(back) == len(rows) and [r.key for r in back] == [r.key for r in rows]
            for mine, theirs in zip(rows, back):
                assert type(theirs.key[0]) is int
                assert list(theirs.values) == list(mine.values)
                for name, value in mine.result().values.items():
                    got = theirs.values[name]
                    assert type(got) is np.ndarray and got.dtype == value.dtype and got.shape == value.shape
                    assert got.tobytes() == value.tobytes()
    assert _Stacked.of(mixed).columns() is None
    assert set(_Stacked.of(mixed).stacked) == {"b"}  # the one variable every run has alike
    both = Batches([pickle.loads(pickle.dumps(_Stacked.of(uniform))), _Stacked.of([row(i) for i in range(4, 6)])])
    columns = both.columns()
    assert columns is not None and columns.keys.tolist() == [[0, i] for i in range(6)]
    assert np.array_equal(columns.values["a"], np.stack([r.values["a"] for r in both]))
    assert Batches([_Stacked.of(uniform), _Stacked.of(mixed)]).columns() is None  # one without: run by run
    loaded = _Stacked.of_results([r.result() for r in uniform])  # a checkpoint's results, held alike
    assert loaded.columns() is not None and loaded.stacked["a"].tobytes() == _Stacked.of(uniform).stacked["a"].tobytes()


@pytest.mark.parametrize(("seconds", "writes"), [(3600.0, 0), (0.0, None)])
def test_finished_runs_are_written_by_the_clock_not_per_batch(tmp_path, monkeypatch, seconds, writes):
    """One write per CHECKPOINT_SECONDS of work, whatever the number of batches; the runs finished since the
    last write are deferred, and a flush writes them: then every finished run is in the checkpoint, and the
    results are the same."""
    from ldpsim.running.checkpoint import Checkpoint
    from ldpsim.running.runner import batches

    scenario = {**SWEEP, "repetitions": 40}  # tens of runs, at least 4 batches
    loaded = load_scenario(scenario)
    runs = len(tasks(loaded))
    saved: list[int] = []
    real_save = Checkpoint.save
    monkeypatch.setattr(
        Checkpoint, "save", lambda self, results: (saved.append(len(results)), real_save(self, results))[1]
    )
    monkeypatch.setattr(ldpsim.running.runner, "CHECKPOINT_SECONDS", seconds)
    ckpt = Checkpoint(tmp_path / "r.nc", loaded)
    result = execute(loaded, checkpoint=ckpt)
    assert len(saved) == (writes if writes is not None else len(batches(tasks(loaded), 1)))
    assert sum(saved) == len(ckpt.load()) == (0 if writes == 0 else runs)
    ckpt.flush()  # what run_scenario does should the results not be written
    assert sum(saved) == runs and len(ckpt.load()) == runs
    assert_same_numbers(result, ldpsim.run_scenario(scenario))


def test_a_run_shorter_than_the_checkpoint_interval_writes_no_task_file(tmp_path, monkeypatch):
    """The runs finished since the last write are deferred: written only if the results are not (a failed assembly
    here), and then every one of them is kept for a resume to the same numbers."""
    from ldpsim.running.checkpoint import Checkpoint

    scenario = {**SWEEP, "repetitions": 10}
    saves: list[int] = []
    real_save = Checkpoint.save
    monkeypatch.setattr(
        Checkpoint, "save", lambda self, results: (saves.append(len(results)), real_save(self, results))[1]
    )
    seen = []  # whether the checkpoint's folder exists, as each batch finishes
    progress = lambda done, total: seen.append(checkpoint_dir(tmp_path / "a.nc").exists())  # noqa: E731
    whole = ldpsim.run_scenario(scenario, output=tmp_path / "a.nc", progress=progress)
    assert saves == []  # no file written
    assert len(seen) > 2 and not any(seen)  # nor the folder, at any time
    assert not checkpoint_dir(tmp_path / "a.nc").exists()

    def broken(*args, **kwargs):
        raise RuntimeError("assembly failed")

    out = tmp_path / "b.nc"
    with monkeypatch.context() as patch:
        patch.setattr(ldpsim.running.runner, "assemble", broken)
        with pytest.raises(RuntimeError, match="assembly failed"):
            ldpsim.run_scenario(scenario, output=out)
    assert finished_tasks(out) == len(tasks(load_scenario(scenario))) and not out.exists()
    calls = []
    real_run = ldpsim.running.runner._BatchRunner.__call__
    monkeypatch.setattr(
        ldpsim.running.runner._BatchRunner, "__call__", lambda self, b: (calls.append(b), real_run(self, b))[1]
    )
    assert_same_numbers(whole, ldpsim.run_scenario(scenario, output=out, resume=True))
    assert calls == [] and not checkpoint_dir(out).exists()


def test_a_batched_checkpoint_holds_many_runs_per_file_and_resumes_to_the_same_numbers(tmp_path):
    from ldpsim.running.checkpoint import Checkpoint

    scenario = {**SWEEP, "repetitions": 40}  # 160 runs
    whole = ldpsim.run_scenario(scenario)
    loaded = load_scenario(scenario)
    out = tmp_path / "r.nc"
    ckpt = Checkpoint(out, loaded)
    todo = tasks(loaded)
    ckpt.save([run_task(t, loaded.builder) for t in todo[:70]])  # one batch, as the runner saves it
    ckpt.save(run_task(todo[70], loaded.builder))  # and a single run, as earlier versions did
    assert len(ckpt) == 2 and finished_tasks(out) == 71
    assert sorted(Checkpoint(out, loaded, resume=True).load()) == sorted(t.key for t in todo[:71])
    resumed = ldpsim.run_scenario(scenario, output=out, resume=True)
    assert_same_numbers(whole, resumed)


def test_a_truncated_batch_file_runs_its_tasks_again(tmp_path):
    from ldpsim.running.checkpoint import Checkpoint

    loaded = load_scenario(SWEEP)
    out = tmp_path / "r.nc"
    todo = tasks(loaded)
    Checkpoint(out, loaded).save([run_task(t, loaded.builder) for t in todo[:3]])
    (victim,) = checkpoint_dir(out).glob("task-*.npz")
    victim.write_bytes(victim.read_bytes()[:200])
    assert Checkpoint(out, loaded, resume=True).load() == {} and finished_tasks(out) == 0
