"""Faults: corrupt checkpoints, late failures, killed parents, full disks, outputs that would overwrite inputs.

Each test reproduces one fault and asserts the run resumes, cleans up, or stops with one line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from helpers import assert_same_numbers, make

import ldpsim
from ldpsim.base.atomic import atomic_path
from ldpsim.results.io import open_results
from ldpsim.running.checkpoint import Checkpoint, checkpoint_dir, finished_tasks
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


@pytest.fixture(scope="module")
def expected() -> xr.Dataset:
    return ldpsim.run_scenario(SMALL)


def counting_run_task(monkeypatch) -> list[tuple[int, ...]]:
    """Record the keys of the tasks that run (in this process: the serial executor)."""
    calls: list[tuple[int, ...]] = []
    real = ldpsim.running.runner.task_row

    def counted(task, builder=None):
        calls.append(task.key)
        return real(task, builder)

    monkeypatch.setattr(ldpsim.running.runner, "task_row", counted)
    return calls


# --- 1. corrupt checkpoints; fsync ------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(lambda data: data[:30] + bytes(len(data) - 30), id="zeroed"),
        pytest.param(lambda data: data[:-200] + bytes(200), id="bad-crc"),
    ],
)
def test_an_unreadable_checkpoint_file_is_run_again_on_resume(damage, expected, tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    checkpoint = Checkpoint(out, loaded)
    for task in tasks(loaded)[:3]:
        checkpoint.save(run_task(task, loaded.builder))
    victim = checkpoint_dir(out) / "task-0-1.npz"
    victim.write_bytes(damage(victim.read_bytes()))
    calls = counting_run_task(monkeypatch)
    resumed = ldpsim.run_scenario(SMALL, output=out, resume=True)
    assert sorted(calls) == [(0, 1), (1, 1)]  # the damaged task and the one never run
    assert_same_numbers(expected, resumed)
    assert not checkpoint_dir(out).exists()


def test_a_checkpoint_file_holding_another_tasks_key_is_not_trusted(tmp_path, monkeypatch):
    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    checkpoint = Checkpoint(out, loaded)
    checkpoint.save(run_task(tasks(loaded)[0], loaded.builder))
    (checkpoint_dir(out) / "task-0-0.npz").rename(checkpoint_dir(out) / "task-1-1.npz")
    assert Checkpoint(out, loaded, resume=True).load() == {}


def test_an_empty_checkpoint_left_by_a_killed_run_does_not_block_the_next_run(expected, tmp_path):
    out = tmp_path / "out.nc"
    Checkpoint(out, load_scenario(SMALL))  # killed before any task finished: nothing written yet
    assert not checkpoint_dir(out).exists()
    checkpoint_dir(out).mkdir()  # what a run killed then by an earlier ldpsim left: a manifest, no task
    (checkpoint_dir(out) / "fingerprint.json").write_text("{}")
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out))
    assert out.exists() and not checkpoint_dir(out).exists()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name flushed files")
def test_results_and_checkpoints_are_flushed_file_then_folder_around_the_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(Path(dst).resolve())))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(ldpsim.running.runner, "CHECKPOINT_SECONDS", 0.0)  # the task is written as it finishes
    out = tmp_path / "out.nc"
    ldpsim.run_scenario({**SMALL, "sweep": {}, "repetitions": 1}, output=out)
    folder, partial = str(tmp_path.resolve()), str(checkpoint_dir(out).resolve())
    task = str((checkpoint_dir(out) / "task-0.npz").resolve())
    # the task file: data flushed under its temporary name, renamed, then the folder flushed
    at = events.index(("replace", task))
    assert events[at - 1][0] == "fsync" and events[at - 1][1].startswith(partial + "/.task-0.npz.")
    assert events[at + 1] == ("fsync", partial)
    at = events.index(("replace", str(out.resolve())))
    assert events[at - 1][0] == "fsync" and events[at - 1][1].startswith(folder + "/.out.nc.")
    assert events[at + 1] == ("fsync", folder)


def test_a_killed_writers_temporary_files_are_removed_at_the_next_write(tmp_path):
    target = tmp_path / "out.nc"
    dead = tmp_path / ".out.nc.999999999.x1y2.tmp"  # a pid above any pid_max: no such process
    legacy = tmp_path / ".out.nc.k3j_9q.tmp"  # written before temporary names held the pid
    alive = tmp_path / f".out.nc.{os.getppid()}.a1b2.tmp"  # a write in progress elsewhere
    other = tmp_path / ".other.nc.999999999.x1y2.tmp"
    for path in (dead, legacy, alive, other):
        path.write_text("half")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.nc", alive.name, other.name])


def test_resuming_removes_the_task_files_a_killed_run_was_writing(expected, tmp_path):
    out = tmp_path / "out.nc"
    loaded = load_scenario(SMALL)
    Checkpoint(out, loaded).save(run_task(tasks(loaded)[0], loaded.builder))
    dead = checkpoint_dir(out) / ".task-0-1.npz.999999999.k2x_a9zz.npz"
    dead.write_bytes(b"PK half")
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))
    assert not checkpoint_dir(out).exists()
    Checkpoint(out, loaded).save(run_task(tasks(loaded)[0], loaded.builder))
    dead.write_bytes(b"PK half")
    Checkpoint(out, loaded, resume=True)
    assert sorted(p.name for p in checkpoint_dir(out).iterdir()) == ["fingerprint.json", "task-0-0.npz"]


# --- 2. late failures are found before the first run ------------------------------------------

SCENARIO_TOML = """\
name = "late"
seed = 1
users = 300
repetitions = 1
estimators = {estimators}
metrics = ["tv"]
[domain]
kind = "integers"
low = 0
high = 4
[dataset]
name = "uniform"
[cohorts.all]
reports = [{{ mechanism = "krr", eps = 1 }}]
[sweep.{axis}]
path = "{path}"
values = {values}
"""


def run_cli(tmp_path: Path, text: str, *args: str) -> tuple[int, list[str], Path]:
    """Run ``ldpsim run`` on a scenario with ``text`` in a fresh interpreter: (exit code, stderr lines, output)."""

    scenario = tmp_path / "late.toml"
    scenario.write_text(text)
    out = tmp_path / "late.nc"
    done = subprocess.run(
        [sys.executable, "-m", "ldpsim.output.cli", "run", str(scenario), "-o", str(out), "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr.strip().splitlines(), out


@pytest.mark.parametrize(
    ("estimators", "axis", "path", "values", "message"),
    [
        (
            '["krr-mle"]',
            "mech",
            "cohorts.all.reports.0",
            '[{ mechanism = "krr", eps = 1 }, { mechanism = "geometric", eps = 1 }]\nlabels = ["krr", "geometric"]',
            r"estimators\.krr-mle: krr-mle needs every user to send one report through the same k-RR mechanism "
            r"\(at sweep point mech=geometric\); use ibu",
        ),
        (
            "{ ibu = { start = [0.2, 0.3, 0.5] } }",
            "eps",
            "cohorts.all.reports.0.eps",
            "[1, 2]",
            r"estimators\.ibu\.start: has 3 entries, the domain has 5 \(at sweep point eps=1\)",
        ),
    ],
    ids=["krr-mle-on-geometric", "ibu-start-of-another-size"],
)
def test_a_sweep_point_that_would_fail_late_is_refused_before_the_first_run(
    estimators, axis, path, values, message, tmp_path
):
    text = SCENARIO_TOML.format(estimators=estimators, axis=axis, path=path, values=values)
    code, lines, out = run_cli(tmp_path, text, "-e", "serial")
    assert code == 2 and len(lines) == 1, lines
    assert re.search(message, lines[0]), lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.toml"]  # no output, no .partial


def test_run_scenario_refuses_a_late_failure_before_any_task_runs(tmp_path, monkeypatch):
    calls = counting_run_task(monkeypatch)
    mixed = {
        **SMALL,
        "estimators": ["ibu", "krr-mle"],
        "sweep": {"rounds": {"path": "cohorts.all.reports.0.repeat", "values": [1, 2]}},
    }
    with pytest.raises(ldpsim.LdpsimError, match=r"^estimators\.krr-mle: .* \(at sweep point rounds=2\)"):
        ldpsim.run_scenario(mixed, output=tmp_path / "out.nc")
    assert calls == [] and list(tmp_path.iterdir()) == []


# --- 3. the process pool: workers die with their parent; Ctrl-C twice -------------------------

SLOW = """\
name = "slow"
seed = 1
users = 1_000_000
repetitions = 60
metrics = ["tv"]
[estimators.ibu]              # plain EM for 20,000 updates: each run takes a second or more, whatever the machine
name = "ibu"
delta = 1e-12
max_iter = 20_000
[domain]
kind = "integers"
low = 0
high = 199
[dataset]
name = "uniform"
[cohorts.all]
reports = [{ mechanism = "geometric", eps = 0.05 }]
"""
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc to find the workers")


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (zombies count as gone)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


def start_slow_run(tmp_path: Path, executor: str = "processes") -> tuple[subprocess.Popen, set[int]]:
    """``ldpsim run`` of a slow scenario on two worker processes, in its own session; (process, workers)."""
    import time

    scenario = tmp_path / "slow.toml"
    scenario.write_text(SLOW)
    run = subprocess.Popen(
        [sys.executable, "-m", "ldpsim.output.cli", "run", str(scenario), "-o", str(tmp_path / "slow.nc"), "-q"]
        + (["-e", "processes", "-j", "2"] if executor == "processes" else ["-e", "dask", "--workers", "2"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.2)
        workers = alive(children(run.pid))
        assert run.poll() is None, run.communicate()
    assert len(workers) >= 2, "the pool did not start"
    time.sleep(1.0)  # the workers are in their first tasks
    return run, workers


@needs_proc
def test_ctrl_c_with_dask_is_one_line_without_worker_tracebacks(tmp_path):
    """The workers ignore SIGINT (the terminal sends it to the whole group); the run stops them."""
    import time

    pytest.importorskip("distributed")
    run, workers = start_slow_run(tmp_path, "dask")
    deadline = time.monotonic() + 120  # the cluster has started when the first run is checkpointed
    while not list(checkpoint_dir(tmp_path / "slow.nc").glob("task-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert_interrupted_in_one_line(run, workers, presses=1, timeout=60, grace=10)


@needs_proc
def test_workers_die_when_the_main_process_is_killed(tmp_path):
    import signal
    import time

    run, workers = start_slow_run(tmp_path)
    try:
        os.kill(run.pid, signal.SIGKILL)  # what the out-of-memory killer does: no clean-up at all
        deadline = time.monotonic() + 5
        while alive(workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(workers), "workers outlived their parent"
    finally:
        for pid in alive(workers):
            os.kill(pid, signal.SIGKILL)
        run.communicate()


@needs_proc
def test_ctrl_c_twice_stops_promptly_with_one_line_and_no_worker_left(tmp_path):
    run, workers = start_slow_run(tmp_path)
    assert_interrupted_in_one_line(run, workers, presses=2, timeout=15, grace=5)
    assert not list(tmp_path.glob(".slow.nc*"))  # no temporary file of a cut write


def assert_interrupted_in_one_line(
    run: subprocess.Popen, workers: set[int], *, presses: int, timeout: float, grace: float
) -> None:
    """Ctrl-C ``presses`` times (the terminal sends it to the whole foreground group): exit 130, one line
    on stderr, and no worker left ``grace`` seconds later."""
    import signal
    import time

    try:
        for press in range(presses):
            if press:
                time.sleep(0.3)
            os.killpg(run.pid, signal.SIGINT)
        _, stderr = run.communicate(timeout=timeout)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    lines = stderr.strip().splitlines()
    assert run.returncode == 130 and len(lines) == 1 and lines[0].startswith("interrupted"), stderr
    deadline = time.monotonic() + grace
    while alive(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(workers)


# --- 4. a full disk ---------------------------------------------------------------------------


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*"))


def test_a_full_disk_at_the_final_write_is_one_line_and_keeps_the_finished_runs(expected, tmp_path, monkeypatch):
    import errno

    out = tmp_path / "out.nc"

    def full(self, path, *args, **kwargs):
        Path(path).write_bytes(b"CDF half")  # the write got this far
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(xr.Dataset, "to_netcdf", full)
        with pytest.raises(ldpsim.LdpsimError) as caught:
            ldpsim.run_scenario(SMALL, output=out)
    assert str(caught.value) == (
        f"output: could not write '{out}' (No space left on device); its 4 finished runs are kept in "
        f"'{checkpoint_dir(out)}'; make room, then run again with --resume (nothing is recomputed)"
    )
    assert not out.exists() and hidden(tmp_path) == []
    calls = counting_run_task(monkeypatch)
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))
    assert calls == [] and not checkpoint_dir(out).exists()


def test_a_full_disk_for_the_results_and_the_deferred_runs_says_they_run_again(expected, tmp_path, monkeypatch):
    """The runs finished since the last checkpoint write are written when the results cannot be; if they cannot
    be either and none was written before, the error is the results' own and nothing is left behind."""
    import errno

    out = tmp_path / "out.nc"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(xr.Dataset, "to_netcdf", full)
        patch.setattr(np, "savez", full)
        with pytest.raises(ldpsim.LdpsimError) as caught:
            ldpsim.run_scenario(SMALL, output=out)
    assert str(caught.value) == (
        f"output: could not write '{out}' (No space left on device); free some disk space (or raise the file size"
        " limit), or write elsewhere"
    )
    assert not out.exists() and not checkpoint_dir(out).exists() and hidden(tmp_path) == []
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out))


def test_a_failed_flush_of_the_deferred_runs_says_the_runs_not_kept_run_again(expected, tmp_path, monkeypatch):
    import errno

    from ldpsim.running.checkpoint import Checkpoint

    out = tmp_path / "out.nc"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def failed_flush(self):
        raise ldpsim.LdpsimError("could not write the deferred runs", field="output")

    with monkeypatch.context() as patch:
        patch.setattr(ldpsim.running.runner, "CHECKPOINT_SECONDS", 0.0)  # earlier runs written as they finish
        patch.setattr(xr.Dataset, "to_netcdf", full)
        patch.setattr(Checkpoint, "flush", failed_flush)
        with pytest.raises(ldpsim.LdpsimError) as caught:
            ldpsim.run_scenario(SMALL, output=out)
    assert str(caught.value).endswith("make room, then run again with --resume (the runs not kept are run again)")
    assert_same_numbers(expected, ldpsim.run_scenario(SMALL, output=out, resume=True))
    assert not checkpoint_dir(out).exists()


def test_a_full_disk_while_checkpointing_stops_the_run_with_one_line(tmp_path, monkeypatch):
    import errno

    out = tmp_path / "out.nc"

    def full(file, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", full)
    monkeypatch.setattr(ldpsim.running.runner, "CHECKPOINT_SECONDS", 0.0)  # a write as the first batch finishes
    with pytest.raises(ldpsim.LdpsimError, match=r"^output: could not write '.*task-0-0\.npz' \(No space left"):
        ldpsim.run_scenario(SMALL, output=out)
    assert list(tmp_path.iterdir()) == []  # no task finished: no checkpoint either


def limited(megabytes: float):
    """A ``preexec_fn`` capping the size of files the child writes (a disk that fills up)."""
    import resource
    import signal

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
        size = int(megabytes * 2**20)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return apply


@pytest.mark.skipif(sys.platform == "win32", reason="needs resource limits")
def test_the_cli_under_a_file_size_limit_says_so_in_one_line_and_leaves_no_temporary_file(tmp_path):
    scenario = tmp_path / "small.toml"
    scenario.write_text(SCENARIO_TOML.split("[sweep")[0].format(estimators='["ibu", "inv-p"]'))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "ldpsim.output.cli"]
    # 16 KiB: the checkpoint's task files fit, the results file does not
    done = subprocess.run(
        [*command, "run", str(scenario), "-o", str(tmp_path / "small.nc"), "-q", "-e", "serial"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        preexec_fn=limited(1 / 64),
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "could not write" in lines[0] and "finished run" in lines[0]
    assert not (tmp_path / "small.nc").exists() and hidden(tmp_path) == []
    done = subprocess.run(
        [*command, "run", str(scenario), "-o", str(tmp_path / "small.nc"), "-q", "-e", "serial", "--resume"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    # a figure: 1 KiB is too little for any image
    done = subprocess.run(
        [*command, "plot", str(tmp_path / "small.nc"), "-o", str(tmp_path / "small.png")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        preexec_fn=limited(1 / 1024),
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: output: could not write '{tmp_path / 'small.png'}' (")
    assert not (tmp_path / "small.png").exists() and hidden(tmp_path) == []


# --- 5. the output never replaces an input, nor a file that is not results ---------------------

CSV_SCENARIO = """\
name = "people"
seed = 2
users = 200
repetitions = 1
estimators = ["ibu"]
metrics = ["tv"]
[domain]
kind = "integers"
low = 0
high = 3
[dataset]
name = "csv"
path = "ages.csv"
column = "age"
replace = true
[cohorts.all]
reports = [{ mechanism = "krr", eps = 1 }]
"""


def cli_run(*args: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "ldpsim.output.cli", "run", *args, "-q", "-e", "serial"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr.strip().splitlines()


@pytest.fixture
def csv_scenario(tmp_path: Path) -> Path:
    (tmp_path / "ages.csv").write_text("age\n" + "\n".join(str(i % 4) for i in range(50)) + "\n")
    scenario = tmp_path / "people.toml"
    scenario.write_text(CSV_SCENARIO)
    return scenario


@pytest.mark.parametrize("victim", ["people.toml", "ages.csv"])
@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "forced"])
def test_the_output_never_replaces_an_input_of_the_run(victim, force, csv_scenario, tmp_path):
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, lines = cli_run(str(csv_scenario), "-o", str(tmp_path / victim), *force)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].endswith(
        f"output: '{tmp_path / victim}' is an input of this run; choose another file name for the output"
    )
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, no .partial


def test_the_output_replaces_results_but_other_files_only_when_forced(csv_scenario, tmp_path):
    other = tmp_path / "notes.nc"
    other.write_text("my notes")
    code, lines = cli_run(str(csv_scenario), "-o", str(other))
    assert code == 2 and lines == [
        f"error: {csv_scenario}: output: '{other}' exists and is not an ldpsim results file; "
        "choose another file name, or add --force to replace it"
    ]
    assert other.read_text() == "my notes" and not checkpoint_dir(other).exists()
    assert cli_run(str(csv_scenario), "-o", str(other), "--force")[0] == 0
    assert open_results(other)["tv"].size > 0
    assert cli_run(str(csv_scenario), "-o", str(other))[0] == 0  # results replace results


def test_a_plot_never_replaces_the_results_it_draws(csv_scenario, tmp_path):
    results = tmp_path / "people.nc"
    assert cli_run(str(csv_scenario), "-o", str(results))[0] == 0
    done = subprocess.run(
        [sys.executable, "-m", "ldpsim.output.cli", "plot", str(results), "-o", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "is an input of this run" in done.stderr
    assert open_results(results)["tv"].size > 0


# --- 6. a catalogue of bad values: one line, exit 2, nothing written ---------------------------

BASE = """\
name = "base"
seed = 1
users = 300
repetitions = 1
estimators = ["ibu", "inv-p"]
metrics = ["tv"]
[domain]
kind = "integers"
low = 0
high = 4
[dataset]
name = "binomial"
p = 0.5
[cohorts.all]
reports = [{ mechanism = "krr", eps = 1 }]
"""
EPS = "cohorts.all.reports.0.eps"
BAD_VALUES = [
    (f"{EPS}=0", r"cohorts\.all\.reports\[0\]\.eps: must be > 0"),
    (f"{EPS}=-1", r"cohorts\.all\.reports\[0\]\.eps: must be > 0"),
    (f"{EPS}=nan", r"cohorts\.all\.reports\[0\]\.eps: must be finite"),
    (f"{EPS}=inf", r"cohorts\.all\.reports\[0\]\.eps: must be finite"),
    (f"{EPS}='a'", r"cohorts\.all\.reports\[0\]\.eps: expected a number"),
    (f"{EPS}=[1]", r"cohorts\.all\.reports\[0\]\.eps: expected a number"),
    ("cohorts.all.reports.0={ mechanism = 'geometric', eps = nan }", r"reports\[0\]\.eps: must be finite"),
    ("cohorts.all.reports.0={ mechanism = 'oue', eps = -inf }", r"reports\[0\]\.eps: must be"),
    ("cohorts.all.reports.0.repeat=0", r"repeat: must be a positive integer"),
    ("cohorts.all.share=inf", r"cohorts\.all\.share: 'inf' is not a number"),
    ("cohorts.all.share=1.5", r"cohorts\.all\.share: must be in \[0, 1\]"),
    ("users=0", r"users: must be a positive integer"),
    ("users=1.5", r"users: must be a positive integer"),
    ("users=nan", r"users: must be a positive integer"),
    ("users=inf", r"users: must be a positive integer"),
    ("users='x'", r"users: must be a positive integer"),
    ("users=9223372036854775808", r"users: must be at most 9223372036854775807"),
    ("repetitions=0", r"repetitions: must be an integer in 1\.\."),
    ("repetitions=1e9", r"repetitions: must be an integer in 1\.\."),
    ("seed=-1", r"seed: must be an integer in 0\.\."),
    ("seed=1.5", r"seed: must be an integer in 0\.\."),
    ("dataset.p=1.5", r"dataset\.p: must be <= 1"),
    ("dataset.p=nan", r"dataset\.p: must be finite"),
    ("dataset={ name = 'uniform', low = 3, high = 1 }", r"dataset"),
    ("dataset={ name = 'csv', path = 'missing.csv', column = 'x' }", r"dataset\.path"),
    ("domain.kind=[1]", r"domain\.kind: unknown kind"),
    ("domain.high=-1", r"domain\.high: high \(-1\) must exceed low"),
    ("estimators=['nope']", r"estimators\.nope\.name: unknown estimator 'nope'"),
    ("estimators={ ibu = { delta = 0 } }", r"estimators\.ibu\.delta: must be > 0"),
    ("estimators={ ibu = { delta = nan } }", r"estimators\.ibu\.delta: must be finite"),
    ("estimators={ ibu = { max_iter = -1 } }", r"estimators\.ibu\.max_iter: must be >= 0"),
    ("estimators={ ibu = { stop = 'x' } }", r"estimators\.ibu\.stop: unknown value 'x'"),
    ("estimators={ ibu = { confidence = 1 } }", r"estimators\.ibu\.confidence: must be < 1"),
    ("estimators={ ibu = { start = [0.5, 0.5] } }", r"estimators\.ibu\.start: has 2 entries, the domain has 5"),
    ("estimators={ ibu = { start = [1, 0, 0, 0, 0] } }", r"estimators\.ibu\.start: is zero"),
    ("estimators=['krr-mle'] ; cohorts.all.reports.0.repeat=2", r"estimators\.krr-mle: krr-mle needs every user"),
    # sizes refused from the parameters, before anything is allocated
    ("domain.high=1000000000000", r"domain\.high: the domain would have 1,000,000,000,001 values, more than"),
    ("domain.high=9223372036854775808", r"domain\.high: 9223372036854775808 does not fit a 64-bit integer"),
    ("domain={ kind = 'grid', rows = 100000, cols = 100000 }", r"domain\.rows: the domain would have 10,000,000,000"),
    ("cohorts.all.reports.0.repeat=1000000000", r"repeat: 1,000,000,000 reports per user, more than the 10,000"),
    ("users=1000000000000000 ; cohorts.all.reports.0.repeat=2", r"users: 1,000,000,000,000,000 users x 2 reports"),
    ("users=1e300", r"users: must be at most 9223372036854775807"),
    # names are printed as they are, not as rich markup (':x:' was an emoji)
    ("cohorts.a:x:b.share=1", r"'cohorts\.a:x:b\.share' does not exist"),
]


@pytest.mark.parametrize(("override", "message"), BAD_VALUES, ids=[case[0] for case in BAD_VALUES])
def test_a_bad_value_is_one_line_with_exit_2_and_nothing_written(override, message, tmp_path):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    scenario = tmp_path / "base.toml"
    scenario.write_text(BASE)
    sets = [arg for text in override.split(" ; ") for arg in ("--set", text)]
    done = CliRunner().invoke(app, ["run", str(scenario), "-o", str(tmp_path / "x.nc"), "-q", "-e", "serial", *sets])
    lines = done.output.strip().splitlines()
    assert done.exit_code == 2 and len(lines) == 1 and "Traceback" not in done.output, done.output
    assert lines[0].startswith(f"error: {scenario}: ") and re.search(message, lines[0]), lines[0]
    assert [p.name for p in tmp_path.iterdir()] == ["base.toml"]


def test_the_catalogues_base_scenario_runs(tmp_path):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    scenario = tmp_path / "base.toml"
    scenario.write_text(BASE)
    done = CliRunner().invoke(
        app,
        ["run", str(scenario), "-o", str(tmp_path / "x.nc"), "-q", "-e", "serial", "--set", "estimators=['krr-mle']"],
    )
    assert done.exit_code == 0, done.output  # so each refusal above is the bad value's doing


# --- 7. extreme privacy levels: exact in log space, never a traceback ------------------------------


@pytest.mark.parametrize(
    ("mechanism", "eps"),
    [("krr", 746.0), ("krr", 1e308), ("geometric", 1e308), ("laplace", 1e308), ("exponential", 1e308)],
)
def test_an_extreme_eps_runs_and_reports_the_true_value(mechanism, eps):
    """Where e^-eps underflows, every mechanism reports the true value: the estimate is the truth."""
    doc = load_scenario_doc()
    doc["cohorts"]["all"]["reports"] = [{"mechanism": mechanism, "eps": eps}]
    ds = ldpsim.run_scenario(doc, executor="serial")
    np.testing.assert_allclose(ds["estimate"].sel(estimator="ibu").values, ds["truth"].values, atol=1e-9)


def test_planar_laplace_at_an_extreme_eps_is_the_identity():
    mech = make("mechanism", "planar-laplace", ldpsim.Grid(rows=3, cols=4), eps=1e308)
    np.testing.assert_array_equal(mech.matrix, np.eye(12))


@pytest.mark.parametrize(("name", "eps"), [("geometric", 5.0), ("laplace", 5.0), ("krr", 800.0)])
def test_underflowed_probabilities_do_not_make_a_private_mechanism_look_violated(name, eps):
    """Entries below 1e-308 are 0 in the matrix; the report computes the levels from closed-form logs."""
    mech = make("mechanism", name, ldpsim.Integers(low=0, high=199), eps=eps)
    assert (mech.matrix == 0).any()  # the case at hand: underflow
    report = ldpsim.mechanism_report(mech, repetitions=0)
    assert report.privacy_holds is True
    assert report.declared_notion_eps == pytest.approx(eps, rel=1e-9)


def test_underflow_without_closed_form_logs_is_stated_not_called_a_violation():
    mech = make("mechanism", "planar-geometric", ldpsim.Grid(rows=12, cols=12), eps=80.0)
    report = ldpsim.mechanism_report(mech, repetitions=0)
    assert report.underflow > 0 and report.privacy_holds is None
    assert "double-precision floor" in report.lines()[1] and "VIOLATED" not in report.lines()[1]


def load_scenario_doc() -> dict:
    import tomllib

    return tomllib.loads(BASE)


# --- 8. a results file is data: no path it names is read, no size it asks for is run ---------------


@pytest.fixture(scope="module")
def small_results(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    (folder / "ages.csv").write_text("x\n1\n2\n3\n0\n4\n")
    (folder / "s.toml").write_text(BASE)
    out = folder / "r.nc"
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    scenario = folder / "s.toml"
    sets = ["--set", "users=5", "--set", "dataset={ name = 'csv', path = 'ages.csv', column = 'x' }"]
    done = CliRunner().invoke(app, ["run", str(scenario), "-o", str(out), "-q", "-e", "serial", *sets])
    assert done.exit_code == 0, done.output
    return out


def _tampered(results: Path, target: Path, change) -> Path:
    import json

    ds = open_results(results)
    doc = json.loads(ds.attrs["resolved_scenario"])
    change(doc)
    ds.attrs["resolved_scenario"] = json.dumps(doc)
    ds.to_netcdf(target)
    return target


@pytest.mark.parametrize("path", ["/etc/passwd", "../ages.csv", "sub/../../ages.csv"])
def test_check_estimate_never_reads_a_file_outside_the_results_folder(path, small_results, tmp_path):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    secret = tmp_path / "secret.csv"
    secret.write_text("password,x\nhunter2,1\n")
    (tmp_path / "inner").mkdir()
    evil = _tampered(
        small_results, tmp_path / "inner" / "evil.nc", lambda d: d["dataset"].update(path=path, column="zz")
    )
    done = CliRunner().invoke(app, ["check", "estimate", str(evil)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert "outside the results file's folder" in done.output and "hunter2" not in done.output
    assert "password" not in done.output and "root" not in done.output


def test_check_estimate_applies_the_runs_size_checks(small_results, tmp_path):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    def huge(doc: dict) -> None:
        doc["users"] = 10**15
        doc["cohorts"]["all"]["reports"][0]["repeat"] = 2
        doc["dataset"] = {"name": "binomial", "p": 0.5}

    done = CliRunner().invoke(app, ["check", "estimate", str(_tampered(small_results, tmp_path / "h.nc", huge))])
    assert done.exit_code == 2 and "users: 1,000,000,000,000,000 users x 2 reports" in done.output, done.output


def test_check_estimate_of_a_genuine_file_reads_its_data_beside_it(small_results):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    done = CliRunner().invoke(app, ["check", "estimate", str(small_results)])
    assert done.exit_code == 0, done.output


# --- 9. files that are not what they claim ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x\n12345678901234567890123\n1\n", r"line 2: '12345678901234567890123' in column 'x' has more than 18 digits"),
        ("x\n1\n2,3\n", r"Expected 1 fields in line 3, saw 2"),
        ("x\n1,2\n3,4\n", r"more fields in its rows than names in its header"),
    ],
    ids=["23-digit integer", "one long row", "every row long"],
)
def test_a_malformed_csv_is_one_line(text, message, tmp_path):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    (tmp_path / "d.csv").write_text(text)
    scenario = tmp_path / "base.toml"
    scenario.write_text(BASE)
    sets = ["--set", "users=2", "--set", "dataset={ name = 'csv', path = 'd.csv', column = 'x' }"]
    done = CliRunner().invoke(app, ["run", str(scenario), "-o", str(tmp_path / "x.nc"), "-q", "-e", "serial", *sets])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert re.search(message, done.output), done.output


@pytest.mark.parametrize("command", ["show", "plot"])
def test_a_netcdf_file_that_only_looks_like_results_is_refused(command, tmp_path):
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    fake = tmp_path / "fake.nc"
    xr.Dataset({"error": ("a", np.arange(3.0)), "estimate": ("b", np.ones(2))}).to_netcdf(fake)
    args = [command, str(fake)] + (["-o", str(tmp_path / "f.png")] if command == "plot" else [])
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2 and "is not an ldpsim results file" in done.output, done.output
    assert len(done.output.strip().splitlines()) == 1


def test_a_flag_without_equals_names_that_flag():
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    done = CliRunner().invoke(app, ["check", "mechanism", "krr", "-d", "integers:0..4", "--param", "eps"])
    assert done.exit_code == 2 and "--param: 'eps' is not KEY=VALUE; write e.g. --param eps=1" in done.output


# --- 10. a broken third-party mechanism: one line naming it -------------------------------------


class _NotStochastic(ldpsim.Mechanism):
    """Rows that do not sum to 1."""

    name = "not-stochastic"

    @property
    def privacy(self) -> ldpsim.Privacy:
        return ldpsim.Privacy("ldp", 1.0)

    def _matrix(self) -> np.ndarray:
        return np.full((self.domain.size, self.domain.size), 0.9 / self.domain.size)


class _RaisingSampler(ldpsim.Mechanism):
    """A sampler that raises."""

    name = "raising-sampler"

    @property
    def privacy(self) -> ldpsim.Privacy:
        return ldpsim.Privacy("ldp", 1.0)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise ZeroDivisionError("oops")

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        return np.full((reports.shape[0], self.domain.size), -np.log(self.domain.size))


@pytest.mark.parametrize(
    ("cls", "message"),
    [(_NotStochastic, r"not-stochastic\(\): matrix row 0 sums to 0.9, not 1"), (_RaisingSampler, r"_sample raised")],
)
def test_a_broken_mechanism_is_a_plugin_error_naming_it(cls, message):
    from ldpsim.base.errors import PluginError

    mech = cls(ldpsim.Integers(low=0, high=4))
    with pytest.raises(PluginError, match=message) as caught:
        mech.sample(np.arange(5), np.random.default_rng(0))
    assert "\n" not in str(caught.value) and "fix the plugin" in str(caught.value)


# --- 11. fuzzing: whatever a scenario mapping holds, only ldpsim's own errors come out ------------

_ODD_VALUES = [
    0, 1, 2, 3, -1, 7, 2**31, 2**63, -(2**63) - 1, 10**20, 0.5, 1.5, -0.0, 1e-300, 1e300,
    float("nan"), float("inf"), float("-inf"), True, False, "", "x", "krr", "ibu", "tv", "integers", "grid",
    "uniform", "1/2", "nan", [], [1], [0.5, 0.5], ["ibu"], ["x", 1], {}, {"a": 1}, {"name": "krr"},
    {"mechanism": "krr", "eps": 1}, {"name": "uniform"}, {"kind": "integers", "low": 0, "high": 3},
]  # fmt: skip


def _leaf_paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(doc, dict):
        return [prefix] + [p for k, v in doc.items() for p in _leaf_paths(v, (*prefix, k))]
    if isinstance(doc, list):
        return [prefix] + [p for i, v in enumerate(doc) for p in _leaf_paths(v, (*prefix, i))]
    return [prefix]


_PATHS = [p for p in _leaf_paths(load_scenario_doc()) if p] + [
    ("sweep",), ("cohorts", "b"), ("domain", "rows"), ("dataset", "path"), ("estimators", 1), ("nope",),
    ("cohorts", "all", "reports", 0, "repeat"), ("cohorts", "all", "share"), ("dataset", "replace"),
]  # fmt: skip


def _set(doc: Any, path: tuple, value: Any) -> None:
    for part in path[:-1]:
        if isinstance(doc, dict):
            doc = doc.setdefault(part, {})
        elif isinstance(doc, list) and isinstance(part, int) and part < len(doc):
            doc = doc[part]
        else:
            return
    last = path[-1]
    if isinstance(doc, dict):
        doc[last] = value
    elif isinstance(doc, list) and isinstance(last, int) and last < len(doc):
        doc[last] = value


def test_fuzzed_scenarios_give_only_ldpsims_own_errors():
    """2,000 scenario mappings with one to three fields replaced by odd values (wrong types, bounds, NaN,
    huge numbers, nested tables): each runs, or fails with an LdpsimError; nothing else escapes."""
    import copy

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    mutation = st.tuples(st.sampled_from(_PATHS), st.sampled_from(_ODD_VALUES))

    @settings(max_examples=2000, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.lists(mutation, min_size=1, max_size=3))
    def check(mutations: list[tuple[tuple, Any]]) -> None:
        doc = load_scenario_doc()
        doc["users"] = 50
        for path, value in mutations:
            _set(doc, path, copy.deepcopy(value))
        try:
            ldpsim.run_scenario(doc, executor="serial")
        except ldpsim.LdpsimError as exc:
            assert "\n" not in str(exc)

    check()


# --- 12. every parameter of every built-in plugin at odd values: an LdpsimError naming it, or a run ---

_PARAM_VALUES = [float("nan"), float("inf"), float("-inf"), -1, 0, 1e300, 2**63, "x", [1], {"a": 1}, True]


def _plugin_params() -> list[tuple[str, str, str]]:
    from ldpsim.plugin.registry import get_registry

    registry = get_registry()
    return [
        (kind, name, param)
        for kind in ("mechanism", "estimator", "dataset", "metric")
        for name in registry.names(kind)
        for param in registry.get(kind, name).cls.parameters()
    ]


@pytest.mark.parametrize(("kind", "name", "param"), _plugin_params(), ids="-".join)
def test_every_plugin_parameter_at_odd_values_is_refused_by_name_or_runs(kind, name, param):
    doc = load_scenario_doc()
    doc["users"] = 50
    if kind == "mechanism":
        doc["cohorts"]["all"]["reports"] = [{"mechanism": name, "eps": 1.0}]
        where = ("cohorts", "all", "reports", 0, param)
    elif kind == "dataset":
        doc["dataset"] = {"name": name}
        where = ("dataset", param)
    else:
        key = "estimators" if kind == "estimator" else "metrics"
        doc[key] = {name: {}}
        where = (key, name, param)
    import copy

    try:
        ldpsim.load_scenario(doc)  # the plugin's defaults, on this small domain
        baseline = True
    except ldpsim.LdpsimError:
        baseline = False  # e.g. a grid mechanism on integers: odd values must still give only LdpsimErrors
    for value in _PARAM_VALUES:
        case = copy.deepcopy(doc)
        _set(case, where, value)
        try:
            ldpsim.load_scenario(case)
        except ldpsim.LdpsimError as exc:
            assert "\n" not in str(exc)
            if baseline:
                assert param in str(exc), (value, str(exc))  # the error names the parameter at fault


# SLOW, shorter: 32 runs of 4,000 plain EM updates on 100 values, a tenth of a second or more each
KILLED = (
    SLOW.replace('name = "slow"', 'name = "killed"')
    .replace("users = 1_000_000", "users = 100_000")
    .replace("repetitions = 60", "repetitions = 32")
    .replace("max_iter = 20_000", "max_iter = 4_000")
    .replace("high = 199", "high = 99")
)


@needs_proc
def test_a_sweep_killed_mid_run_resumes_to_the_same_numbers(tmp_path):
    """SIGKILL (no clean-up at all) after some runs were checkpointed: the resumed run skips them and its
    results equal an uninterrupted run's, bit for bit."""
    import signal
    import time

    scenario = tmp_path / "killed.toml"
    scenario.write_text(KILLED)
    out = tmp_path / "killed.nc"
    # checkpoint every finished batch, as a long sweep does every CHECKPOINT_SECONDS
    code = (
        "import sys, ldpsim.running.runner as r; r.CHECKPOINT_SECONDS = 0.0; from ldpsim.output.cli import main; main()"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", code, "run", str(scenario), "-o", str(out), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(checkpoint_dir(out).glob("task-*.npz"))) < 2 and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGKILL)
    finally:
        run.communicate()
    kept = finished_tasks(out)
    assert 0 < kept < 32 and not out.exists()
    resumed = ldpsim.run_scenario(str(scenario), output=out, resume=True)
    assert not checkpoint_dir(out).exists()
    assert_same_numbers(ldpsim.run_scenario(str(scenario)), resumed)
