"""Faults of executors, checkpoints and the final write (issue 34): each stops with one line, resumes, or cleans up.

Dead workers (a process pool's, a whole Dask cluster's), a scheduler address that is not one, a checkpoint
folder that is not ldpsim's (a file, a symbolic link, a FIFO inside), checkpoint files altered since written,
a full disk reported as something else, and the temporary file of a killed final write.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from helpers import assert_same_numbers
from ldpsim_plugins.executors import dask_cluster
from ldpsim_plugins.executors.dask_cluster import Dask
from typer.testing import CliRunner

import ldpsim
from ldpsim.base import atomic
from ldpsim.output.cli import app
from ldpsim.running import runner
from ldpsim.running.checkpoint import Checkpoint, CheckpointWarning, checkpoint_dir
from ldpsim.running.runner import run_task, tasks
from ldpsim.running.scenario import load_scenario

SMALL = {
    "name": "small",
    "seed": 5,
    "users": 500,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 4},
    "dataset": {"name": "uniform"},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
    "estimators": ["ibu", "inv-p"],
    "metrics": ["tv"],
    "sweep": {"eps": {"path": "cohorts.all.reports.0.eps", "values": [0.5, 2.0]}},
}
SMALL_TOML = """\
name = "small"
seed = 5
users = 500
repetitions = 2
estimators = ["ibu", "inv-p"]
metrics = ["tv"]
[domain]
kind = "integers"
low = 0
high = 4
[dataset]
name = "uniform"
[cohorts.all]
reports = [{ mechanism = "krr", eps = 1.0 }]
[sweep.eps]
path = "cohorts.all.reports.0.eps"
values = [0.5, 2.0]
"""
needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc to find the workers")
cli = CliRunner()


@pytest.fixture(scope="module")
def expected() -> xr.Dataset:
    return ldpsim.run_scenario(SMALL)


def counting_run_task(monkeypatch) -> list[tuple[int, ...]]:
    """Record the keys of the tasks that run (in this process: the serial executor)."""
    calls: list[tuple[int, ...]] = []
    real = runner.task_row

    def counted(task, builder=None):
        calls.append(task.key)
        return real(task, builder)

    monkeypatch.setattr(runner, "task_row", counted)
    return calls


def children(pid: int) -> set[int]:
    """The live processes (zombies count as gone) whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


# --- a dead worker of the process pool ------------------------------------------------------------


def _dies_at(key: tuple[int, ...]):
    """A ``task_row`` whose worker process is killed (as by the out-of-memory killer) when it runs task ``key``."""
    real = runner.task_row

    def task_row(task, builder=None):
        if task.key == key and os.getpid() != PARENT:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(task, builder)

    return task_row


PARENT = os.getpid()


@needs_proc
def test_a_killed_pool_worker_stops_the_cli_with_one_line_and_no_worker_left(tmp_path, monkeypatch):
    scenario = tmp_path / "small.toml"
    scenario.write_text(SMALL_TOML)
    out = tmp_path / "small.nc"
    before = children(os.getpid())
    monkeypatch.setattr(runner, "task_row", _dies_at((1, 1)))  # the workers are forked: they run it too
    monkeypatch.setattr(runner, "MAX_BATCH", 1)  # a batch per task: the others finish and are kept
    done = cli.invoke(app, ["run", str(scenario), "-o", str(out), "-q", "-e", "processes", "-j", "2"])
    assert done.exit_code == 2, done.output
    assert done.output.strip().splitlines() == [
        f"error: {scenario}: a worker process died (killed, or out of memory?); the runs finished so far are kept:"
        " --resume continues"
    ]
    deadline = time.monotonic() + 5
    while children(os.getpid()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not children(os.getpid()) - before, "workers outlived the run"
    assert not out.exists()


@needs_proc
def test_a_killed_pool_worker_keeps_the_finished_runs_and_a_resume_gives_the_same_numbers(
    expected, tmp_path, monkeypatch
):
    out = tmp_path / "out.nc"
    with monkeypatch.context() as patch:
        patch.setattr(runner, "task_row", _dies_at((1, 1)))
        patch.setattr(runner, "MAX_BATCH", 1)
        patch.setattr(runner, "CHECKPOINT_SECONDS", 0.0)
        with pytest.raises(ldpsim.LdpsimError, match=r"^a worker process died \(killed, or out of memory\?\)"):
            ldpsim.run_scenario(SMALL, output=out, executor="processes", workers=2)
    calls = counting_run_task(monkeypatch)
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))
    assert (1, 1) in calls and len(calls) < 4  # the runs finished before the worker died were kept


# --- a Dask cluster without workers; a scheduler address that is not one --------------------------


def _slow(task: int) -> int:
    time.sleep(0.05)
    return task


@needs_dask
def test_a_dask_cluster_whose_workers_are_all_closed_mid_run_stops_with_one_line(monkeypatch, no_hang):
    from distributed import LocalCluster

    monkeypatch.setattr(dask_cluster, "NO_WORKERS_SECONDS", 0.5)
    monkeypatch.setattr(dask_cluster, "WORKERS_POLL_SECONDS", 0.05)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        results = Dask(scheduler=cluster.scheduler_address).run(_slow, list(range(200)))
        got = [next(results)]
        cluster.scale(0)  # every worker gone: nothing would ever run the other tasks
        started = time.monotonic()
        with pytest.raises(ldpsim.LdpsimError) as caught:
            got.extend(results)
        assert time.monotonic() - started < 10
    assert str(caught.value) == (
        f"the Dask cluster at {cluster.scheduler_address} has had no workers left for 0.5 s; the runs finished so"
        " far are kept: start workers and run again with --resume"
    )
    assert len(got) < 200


def _double(kept: int, factor: int) -> int:
    return kept * factor


@needs_dask
def test_results_held_on_a_dask_cluster_that_loses_its_workers_stop_with_one_line(monkeypatch, no_hang):
    """A run estimating from shards held on the workers maps over them pass after pass: once every worker is
    gone, the next map stops with the cluster's one line instead of waiting for ever."""
    from distributed import LocalCluster

    monkeypatch.setattr(dask_cluster, "NO_WORKERS_SECONDS", 0.5)
    monkeypatch.setattr(dask_cluster, "WORKERS_POLL_SECONDS", 0.05)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Dask(scheduler=cluster.scheduler_address).hold(_slow, [1, 2, 3]) as held:
            assert held.map(_double, 10) == [10, 20, 30]  # each where it is kept, in task order
            cluster.scale(0)
            started = time.monotonic()
            with pytest.raises(ldpsim.LdpsimError, match="has had no workers left for 0.5 s"):
                held.map(_double, 10)
            assert time.monotonic() - started < 10


@needs_dask
def test_a_run_on_a_dask_cluster_without_workers_keeps_its_checkpoint_and_resumes(
    expected, tmp_path, monkeypatch, no_hang
):
    from distributed import LocalCluster

    out = tmp_path / "out.nc"
    monkeypatch.setattr(dask_cluster, "NO_WORKERS_SECONDS", 0.3)
    monkeypatch.setattr(dask_cluster, "WORKERS_POLL_SECONDS", 0.05)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(ldpsim.LdpsimError, match="has had no workers left for 0.3 s"):
            ldpsim.run_scenario(SMALL, output=out, executor="dask", scheduler=cluster.scheduler_address)
    assert not out.exists() and not checkpoint_dir(out).exists()  # nothing finished: nothing kept
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))


def _dies(task: int) -> int:
    if task == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker, as the out-of-memory killer would
    return task


@needs_dask
@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_workers_that_keep_dying_under_a_task_stop_the_run_with_one_line(no_hang):
    import dask
    from distributed import LocalCluster

    config = {"distributed.scheduler.allowed-failures": 0, "distributed.worker.multiprocessing-method": "fork"}
    with (
        dask.config.set(config),
        LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
    ):
        with pytest.raises(ldpsim.LdpsimError) as caught:
            list(Dask(scheduler=cluster.scheduler_address).run(_dies, list(range(6))))
    assert str(caught.value) == (
        f"the workers of the Dask cluster at {cluster.scheduler_address} kept dying running a task (killed, or out"
        " of memory?); the runs finished so far are kept: give the workers more memory, then run again with --resume"
    )


@needs_dask
def test_a_malformed_scheduler_address_prints_one_line_and_nothing_later(tmp_path):
    """A client that failed to connect used to print a traceback from its __del__ 20 s after the error."""
    scenario = tmp_path / "small.toml"
    scenario.write_text(SMALL_TOML)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ldpsim.output.cli", "run", str(scenario), "-q", "--scheduler", "not an address"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {scenario}: --scheduler: cannot reach the dask scheduler at not an address")
    assert time.monotonic() - started < 20  # the failed client's close no longer waits out its 20 s timeout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.toml"]


# --- a checkpoint folder that is not ldpsim's -----------------------------------------------------


def test_a_file_where_the_checkpoint_folder_goes_is_refused_and_kept(tmp_path):
    out = tmp_path / "out.nc"
    checkpoint_dir(out).write_text("mine")
    with pytest.raises(ldpsim.LdpsimError) as caught:
        ldpsim.run_scenario(SMALL, output=out)
    assert str(caught.value) == (
        f"output: '{checkpoint_dir(out)}' is not a folder: ldpsim keeps a run's finished tasks in a folder of that"
        " name; remove or rename that file, or write to another output"
    )
    assert checkpoint_dir(out).read_text() == "mine" and not out.exists()


@pytest.mark.parametrize("resume", [False, True])
def test_a_symbolic_link_where_the_checkpoint_folder_goes_is_refused_and_nothing_is_deleted(tmp_path, resume):
    out = tmp_path / "out.nc"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("mine")
    checkpoint_dir(out).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ldpsim.LdpsimError, match=r"^output: '.*out\.nc\.partial' is a symbolic link, not the folder"):
        ldpsim.run_scenario(SMALL, output=out, resume=resume)
    assert checkpoint_dir(out).is_symlink() and (elsewhere / "precious.txt").read_text() == "mine"


def test_a_checkpoint_folder_holding_other_files_keeps_them(tmp_path):
    out = tmp_path / "out.nc"
    checkpoint_dir(out).mkdir()
    (checkpoint_dir(out) / "fingerprint.json").write_text("{}")  # a killed run's, before any task finished
    (checkpoint_dir(out) / "notes.txt").write_text("mine")
    with pytest.raises(ldpsim.LdpsimError, match=r"^output: '.*out\.nc\.partial' holds files ldpsim did not write"):
        ldpsim.run_scenario(SMALL, output=out)
    assert sorted(p.name for p in checkpoint_dir(out).iterdir()) == ["notes.txt"]


@pytest.fixture
def no_hang():
    """Fail, rather than hang, a test whose code blocks for ever (opening a FIFO)."""

    def hung(signum, frame):
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_the_checkpoint_fingerprint_is_refused_without_blocking(tmp_path, no_hang):
    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    Checkpoint(out, loaded).save(run_task(tasks(loaded)[0], loaded.builder))
    (checkpoint_dir(out) / "fingerprint.json").unlink()
    os.mkfifo(checkpoint_dir(out) / "fingerprint.json")
    with pytest.raises(ldpsim.LdpsimError) as caught:
        ldpsim.run_scenario(SMALL, output=out, resume=True)
    assert str(caught.value) == (
        f"--resume: '{checkpoint_dir(out) / 'fingerprint.json'}' is not a regular file: not a checkpoint ldpsim"
        " wrote; remove that folder, or drop --resume and write to another output"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_a_checkpoint_task_file_is_run_again_without_blocking(expected, tmp_path, monkeypatch, no_hang):
    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    checkpoint = Checkpoint(out, loaded)
    for task in tasks(loaded)[:2]:
        checkpoint.save(run_task(task, loaded.builder))
    (checkpoint_dir(out) / "task-0-1.npz").unlink()
    os.mkfifo(checkpoint_dir(out) / "task-0-1.npz")
    calls = counting_run_task(monkeypatch)
    with pytest.warns(CheckpointWarning, match="1 file of the checkpoint .* could not be trusted"):
        assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))
    assert sorted(calls) == [(0, 1), (1, 0), (1, 1)]
    assert not checkpoint_dir(out).exists()


# --- checkpoint files that cannot be trusted ------------------------------------------------------


def _rewrite(file: Path, change) -> None:
    """Rewrite a checkpoint file's arrays as ``change`` makes them (a valid zip: only the digest can tell)."""
    with np.load(file) as data:
        arrays = {name: data[name] for name in data.files}
    change(arrays)
    with open(file, "wb") as fh:
        np.savez(fh, **arrays)


def _wrong_shape(arrays):
    arrays["estimate"] = np.zeros((7, 3))


def _wrong_dtype(arrays):
    arrays["iterations"] = arrays["iterations"].astype("U8")


def _nan(arrays):
    arrays["estimate"] = np.full_like(arrays["estimate"], np.nan)


@pytest.mark.parametrize(
    ("change", "digest"),
    [
        pytest.param(_nan, "kept", id="values-rewritten-with-nan"),
        pytest.param(_wrong_shape, "kept", id="wrong-shape"),
        pytest.param(_wrong_dtype, "kept", id="wrong-dtype"),
        # the arrays, not the digest, tell these ones
        pytest.param(_wrong_shape, "updated", id="wrong-shape-with-its-digest"),
        pytest.param(_wrong_dtype, "updated", id="wrong-dtype-with-its-digest"),
    ],
)
def test_an_altered_checkpoint_file_is_replaced_and_its_runs_run_again(expected, tmp_path, monkeypatch, change, digest):
    from ldpsim.running import checkpoint as module

    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    checkpoint = Checkpoint(out, loaded)
    for task in tasks(loaded)[:3]:
        checkpoint.save(run_task(task, loaded.builder))
    victim = checkpoint_dir(out) / "task-0-1.npz"

    def altered(arrays):
        change(arrays)
        if digest == "updated":  # the shapes, not the digest, tell this one
            arrays[module._DIGEST] = module._digest(arrays)

    _rewrite(victim, altered)
    calls = counting_run_task(monkeypatch)
    with monkeypatch.context() as patch:
        patch.setattr(xr.Dataset, "to_netcdf", _full_disk)  # the run stops at its final write: the file is seen
        with pytest.warns(CheckpointWarning) as caught, pytest.raises(ldpsim.LdpsimError):
            ldpsim.run_scenario(SMALL, output=out, resume=True)
    assert [str(w.message) for w in caught] == [
        f"1 file of the checkpoint '{checkpoint_dir(out)}' could not be trusted (damaged, or altered since"
        " written): the 1 finished run in it runs again"
    ]
    assert sorted(calls) == [(0, 1), (1, 1)]
    assert Checkpoint(out, loaded, resume=True).load(runner.layout(loaded)).keys() == {
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    }  # replaced by the runs' new files, all trusted
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))


def _full_disk(self, path, *args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_valid_checkpoint_resumes_without_a_warning_or_a_run(expected, tmp_path, monkeypatch):
    import warnings

    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    checkpoint = Checkpoint(out, loaded)
    checkpoint.save([run_task(task, loaded.builder) for task in tasks(loaded)[:3]])  # a batch file
    checkpoint.save(run_task(tasks(loaded)[3], loaded.builder))  # a one-run file
    calls = counting_run_task(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))
    assert calls == []


# --- a full disk that says "Permission denied" ----------------------------------------------------


def test_a_write_failing_on_a_full_device_says_no_space_whatever_the_library_said(expected, tmp_path, monkeypatch):
    out = tmp_path / "out.nc"

    room = {"free": 20_000}  # a device nearly full: a little more than the 13 kB the results need at least

    def denied(self, path, *args, **kwargs):  # what netCDF says once not a byte is left
        Path(path).write_bytes(b"CDF half")
        room["free"] = 0
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(atomic, "free_bytes", lambda folder: room["free"])
    monkeypatch.setattr(xr.Dataset, "to_netcdf", denied)
    with pytest.raises(ldpsim.LdpsimError) as caught:
        ldpsim.run_scenario(SMALL, output=out)
    assert str(caught.value) == (
        f"output: no space left on {atomic.device_of(out)} for '{out}' (it needs more than the 20.0 KB free); its 4"
        f" finished runs are kept in '{checkpoint_dir(out)}'; make room, then run again with --resume (nothing is"
        " recomputed)"
    )
    assert not out.exists() and not list(tmp_path.glob(".out.nc*"))


def test_a_write_failing_for_another_reason_on_a_roomy_device_keeps_its_own_error(tmp_path, monkeypatch):
    def denied(self, path, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(xr.Dataset, "to_netcdf", denied)
    with pytest.raises(ldpsim.LdpsimError, match=r"could not write '.*out\.nc' \(Permission denied\)"):
        ldpsim.run_scenario(SMALL, output=tmp_path / "out.nc")


def test_a_results_file_that_cannot_fit_is_refused_before_it_is_written(expected, tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    writes = []
    monkeypatch.setattr(atomic, "free_bytes", lambda folder: 1000)
    monkeypatch.setattr(xr.Dataset, "to_netcdf", lambda *args, **kwargs: writes.append(args))
    with pytest.raises(atomic.NoSpaceError) as caught:
        ldpsim.run_scenario(SMALL, output=out)
    assert writes == []
    assert str(caught.value).startswith(f"output: no space left on {atomic.device_of(out)} for '{out}' (need at least ")
    assert ", 1.0 KB free); its 4 finished runs are kept in" in str(caught.value)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_an_os_error_for_want_of_room_is_one_line_naming_the_device(expected, tmp_path, monkeypatch, code):
    out = tmp_path / "out.nc"
    monkeypatch.setattr(atomic, "free_bytes", lambda folder: 20_000)  # about what the file needs
    monkeypatch.setattr(xr.Dataset, "to_netcdf", lambda *args, **kwargs: _raise(OSError(code, os.strerror(code))))
    with pytest.raises(
        ldpsim.LdpsimError, match=r"^output: no space left on .* \(it needs more than the 20\.0 KB free\)"
    ):
        ldpsim.run_scenario(SMALL, output=out)


def _raise(exc: BaseException):
    raise exc


# --- the temporary file of a killed final write -------------------------------------------------


def test_the_temporary_files_of_a_killed_final_write_go_at_the_next_run(tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    dead = tmp_path / ".out.nc.999999999.k2x_a9zz.tmp"  # a writer that no longer runs
    reused = tmp_path / f".out.nc.{os.getpid()}.q8w_e1rt.tmp"  # a killed writer whose process id this one has now
    other = tmp_path / ".other.nc.999999999.k2x_a9zz.tmp"
    for path in (dead, reused, other):
        path.write_bytes(b"CDF half")
    monkeypatch.setattr(runner, "execute", lambda *args, **kwargs: _raise(ldpsim.LdpsimError("stopped early")))
    with pytest.raises(ldpsim.LdpsimError, match="stopped early"):  # before its own final write
        ldpsim.run_scenario(SMALL, output=out, resume=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]


def test_a_write_in_progress_in_this_process_is_not_taken_for_a_stale_one(tmp_path):
    target = tmp_path / "out.nc"
    with atomic.atomic_path(target) as tmp:
        tmp.write_text("half")
        assert atomic.remove_stale(target) == []  # another thread cleaning up meanwhile
        assert atomic.remove_stale_in(tmp_path) == []
        tmp.write_text("new")
    assert target.read_text() == "new"


def test_threads_writing_one_folder_keep_each_others_temporary_files(tmp_path):
    started, go = threading.Barrier(2), threading.Event()

    def write(name: str) -> None:
        with atomic.atomic_path(tmp_path / name) as tmp:
            tmp.write_text("half")
            started.wait()
            go.wait(5)
            tmp.write_text(name)

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    assert atomic.remove_stale_in(tmp_path) == []
    go.set()
    for thread in threads:
        thread.join()
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["a", "b"]
