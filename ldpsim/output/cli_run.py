"""``ldpsim run``: run a scenario, or with ``--dry-run`` size it from a timed run of each group of its points."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperOption

from ..base.errors import LdpsimError
from .cli_console import err, interrupt_once, out, plural, progress_bar, user_errors
from .summary import FormatOption, SummaryFormat, print_summary

#: run options whose errors the library names by keyword; the command line names them by flag
RUN_FLAGS = {"executor": "--executor", "workers": "--workers", "scheduler": "--scheduler", "resume": "--resume"}


def executor_help() -> str:
    """The ``--executor`` help: every registered executor, with its one-line description."""
    from ..plugin.registry import get_registry

    entries = get_registry().entries("executor")
    described = " ".join(f"{e.name}: {e.cls.summary()}" for e in entries)
    return escape(f"where the runs go (default processes, or dask with --scheduler). {described}")


class RunCommand(TyperCommand):
    """``run``, whose ``--executor`` help lists the executors installed now (the registry loads only for help)."""

    def format_help(self, ctx, formatter) -> None:
        for param in self.params:
            if isinstance(param, TyperOption) and param.name == "executor":
                param.help = executor_help()
        super().format_help(ctx, formatter)


@contextmanager
def run_flags() -> Iterator[None]:
    """Errors about a run option, named by their flag (``--workers``) rather than their keyword."""
    try:
        yield
    except LdpsimError as exc:
        if exc.field not in RUN_FLAGS:
            raise
        raise type(exc)(exc.problem, field=RUN_FLAGS[exc.field], hint=exc.hint) from None


def run(
    scenario: Annotated[Path, typer.Argument(help="scenario TOML file")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="results file; default <scenario>.nc")] = None,
    set_: Annotated[
        list[str],
        typer.Option(
            "--set", "-s", metavar="KEY=VALUE", help="override a field, e.g. users=1000 or cohorts.all.reports.0.eps=2"
        ),
    ] = [],  # noqa: B006
    executor: Annotated[
        str | None,
        typer.Option("--executor", "-e", help="where the runs go; `ldpsim list executors` lists them"),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", "--jobs", "-j", help="worker processes (default: the CPUs); --jobs is an alias"),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            metavar="ADDRESS",
            help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (implies --executor dask)",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="skip the runs an interrupted run finished (kept in <output>.partial)")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar or summary")] = False,
    format_: FormatOption = SummaryFormat.table,
    force: Annotated[
        bool, typer.Option("--force", help="replace the output even if it is not an ldpsim results file")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="check the scenario; print it, its runs, and its time and memory from timed runs; write nothing",
        ),
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            metavar="NAME",
            help="where the estimators' passes run: numpy, cupy, torch or auto (the scenario's backend field)",
        ),
    ] = None,
) -> None:
    """Run a scenario and write its results as netCDF4."""
    if backend is not None:  # the scenario's top-level field, as --set backend=NAME sets it
        set_ = [*set_, f"backend={backend}"]
    from ..running.checkpoint import checkpoint_dir, finished_tasks
    from ..running.runner import run_scenario

    if dry_run:
        with user_errors(f"{scenario}: "), run_flags():
            _dry_run(scenario, set_, executor or ("dask" if scheduler else "processes"), workers, scheduler)
        return

    target = output if output is not None else Path(f"{scenario.stem}.nc")
    resumed = finished_tasks(target) if resume else 0  # runs the checkpoint holds: not run again
    started = time.perf_counter()
    with interrupt_once(), user_errors(f"{scenario}: "), run_flags():
        try:
            with progress_bar(scenario.stem, quiet) as progress:
                ds = run_scenario(
                    scenario,
                    set=set_,
                    output=target,
                    resume=resume,
                    force=force,
                    executor=executor or ("dask" if scheduler else "processes"),
                    workers=workers,
                    scheduler=scheduler,
                    progress=progress,
                )
        except KeyboardInterrupt:
            kept = finished_tasks(target)
            if not kept:
                raise
            err.print(
                f"interrupted; {kept} finished run{plural(kept)} {'is' if kept == 1 else 'are'} kept in"
                f" {checkpoint_dir(target)}: add --resume to continue",
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    if not quiet:
        print_summary(ds, format_)
    ran = ds.sizes["rep"] * int(_grid_size(ds)) - resumed
    took = f"{ran} run{plural(ran)} in {_seconds(time.perf_counter() - started)}" + (
        f" + {resumed} resumed" if resumed else ""
    )
    # two clocks, each named: the whole command after its imports (loading, checks, tasks, assembly, the file),
    # and the file's wall_seconds, the part spent running the tasks (see ldpsim.running.provenance)
    tasks = f", {_seconds(float(ds.attrs['wall_seconds']))} of it running them = wall_seconds"
    err.print(
        f"wrote {target} ({took}{tasks}; seed {int(ds.attrs['seed'])})",
        markup=False,
        soft_wrap=True,
    )


def _dry_run(scenario: Path, overrides: list[str], executor: str, workers: int | None, scheduler: str | None) -> None:
    """``run --dry-run``: the resolved scenario, its runs, memory and estimated time; nothing written."""
    from ..base.memory import format_bytes
    from ..running.dry_run import dry_run
    from ..running.paths import parse_override
    from ..running.runner import make_executor
    from ..running.scenario import load_scenario

    started = time.perf_counter()  # the run loads the scenario and its plugins as the dry run does, in as long
    runner = make_executor(executor, workers=workers, scheduler=scheduler)
    loaded = load_scenario(scenario, dict(parse_override(text) for text in overrides))
    out.print("# the resolved scenario (defaults filled in, overrides applied)", markup=False)
    out.print(json.dumps(loaded.document, indent=2, default=str), markup=False, soft_wrap=True)
    parallel = 1 if runner.name == "serial" else (getattr(runner, "workers", None) or runner.cpus())
    err.print("timing a run of each group of sweep points of like cost...", markup=False)
    loading = time.perf_counter() - started
    size = dry_run(loaded, workers=parallel)
    axes = ", ".join(f"{a.name}: {len(a.values)}" for a in loaded.axes)
    points = f"{size.points} sweep point{plural(size.points)}" + (f" ({axes})" if axes else "")
    out.print(f"runs: {size.runs} = {points} x {size.repetitions} repetition{plural(size.repetitions)}", markup=False)
    total, work = size.seconds(parallel), size.work()
    assert total is not None and work is not None
    total = total + loading
    timed = sum(1 for g in size.groups if g.how.startswith("timed"))
    groups = len(size.groups)
    out.print(
        f"time: about {_span(total.low, total.high, _duration)} with the {runner.name} executor, {parallel}"
        f" worker{plural(parallel)} ({_duration(loading + size.setup_seconds)} to load and build the points;"
        f" {groups} group{plural(groups)} of points of like cost, {timed} timed now in {_duration(size.spent_seconds)}"
        + (f"; {size.load:.1f} other processes running, on {size.cpus} CPUs)" if size.cpus else ")"),
        markup=False,
        soft_wrap=True,
    )
    ranked = sorted(size.groups, key=lambda g: -g.seconds(size.repetitions).mid)
    for group in ranked[:DRY_RUN_GROUPS_SHOWN]:
        share = group.seconds(size.repetitions).mid / max(work.mid, 1e-12)
        out.print(
            f"  {group.label}: {group.points} point{plural(group.points)}, {share:.0%} of the work, a first run"
            f" {_span(group.first.low, group.first.high, _duration)}, then {_span(group.again.low, group.again.high, _duration)}"
            f" ({group.how})",
            markup=False,
            soft_wrap=True,
        )
    if len(ranked) > DRY_RUN_GROUPS_SHOWN:
        left = len(ranked) - DRY_RUN_GROUPS_SHOWN
        out.print(f"  and {left} more group{plural(left)}", markup=False)
    peak = size.process_bytes()
    checks = (
        f"the memory checks count {format_bytes(size.run_bytes)} per run at most (simulation and matrix inversion),"
        f" {format_bytes(size.results_bytes)} of results"
    )
    if size.shards > 1:  # each run drawn in shards (the executor's tasks), merged in this process
        checks += f"; each run's users drawn in {size.shards} shards"
        if size.held:
            checks += ', estimated where they are (passes = "shards": a shard\'s reports in one process)'
    if peak is None or size.base_bytes is None:  # not measurable here: the checks' figures alone
        out.print(f"memory: {checks}; {format_bytes(size.available_bytes)} available now", markup=False, soft_wrap=True)
    else:
        rise = max((g.peak_bytes.high for g in size.groups if g.peak_bytes is not None), default=0.0)
        out.print(
            f"memory: about {_span(peak.low, peak.high, format_bytes)} at peak{' per process' if parallel > 1 else ''}"
            f" ({format_bytes(size.base_bytes)} once the points are built, up to {format_bytes(rise)} more during a"
            f" run, {format_bytes(size.grown_bytes)} left by the timed runs); {checks};"
            f" {format_bytes(size.available_bytes)} available now",
            markup=False,
            soft_wrap=True,
        )
    err.print("dry run: nothing was written", markup=False)


#: the dry run lists this many of its costliest groups of points
DRY_RUN_GROUPS_SHOWN = 5


def _span(low: float, high: float, show: Callable[[float], str]) -> str:
    """'15-25 s': a range in one unit, or one figure where both ends read alike."""
    a, b = show(low), show(high)
    if a == b:
        return a
    unit_a, unit_b = a.rsplit(" ", 1)[-1], b.rsplit(" ", 1)[-1]
    if unit_a == unit_b:
        return f"{a.rsplit(' ', 1)[0]}-{b}"
    return f"{a} to {b}"


def _duration(seconds: float) -> str:
    """3.2 s, 4.5 min, 2.1 h."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _seconds(seconds: float) -> str:
    """'5.9 s'; two significant digits below a second ('0.083 s'), where one decimal would say 0.1."""
    return f"{seconds:.2g} s" if seconds < 1 else f"{seconds:.1f} s"


def _grid_size(ds) -> int:
    """Sweep points (a run estimating after every round is one run, not one per round)."""
    from ..results.scores import sweep_dims

    size = 1
    for d in sweep_dims(ds):
        size *= ds.sizes[d]
    return size
