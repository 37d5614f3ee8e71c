"""``ldpsim run``: run a scenario, or with ``--dry-run`` size it and time one run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
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
            help="check the scenario; print it, its runs, memory and time from one timed run; write nothing",
        ),
    ] = False,
) -> None:
    """Run a scenario and write its results as netCDF4."""
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
    took = f"{ran} run{plural(ran)} in {time.perf_counter() - started:.1f} s" + (
        f" + {resumed} resumed" if resumed else ""
    )
    err.print(
        f"wrote {target} ({took}, seed {int(ds.attrs['seed'])})",
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

    runner = make_executor(executor, workers=workers, scheduler=scheduler)
    loaded = load_scenario(scenario, dict(parse_override(text) for text in overrides))
    out.print("# the resolved scenario (defaults filled in, overrides applied)", markup=False)
    out.print(json.dumps(loaded.document, indent=2, default=str), markup=False, soft_wrap=True)
    err.print("timing one run of the first sweep point...", markup=False)
    size = dry_run(loaded)
    parallel = 1 if runner.name == "serial" else (getattr(runner, "workers", None) or runner.cpus())
    axes = ", ".join(f"{a.name}: {len(a.values)}" for a in loaded.axes)
    points = f"{size.points} sweep point{plural(size.points)}" + (f" ({axes})" if axes else "")
    out.print(f"runs: {size.runs} = {points} x {size.repetitions} repetition{plural(size.repetitions)}", markup=False)
    side = f"; {parallel} side by side: {format_bytes(parallel * size.run_bytes)}" if parallel > 1 else ""
    out.print(
        f"memory: {format_bytes(size.run_bytes)} per run at most (simulation and matrix inversion{side}),"
        f" {format_bytes(size.results_bytes)} of results; {format_bytes(size.available_bytes)} available now",
        markup=False,
        soft_wrap=True,
    )
    total = size.seconds(parallel)
    assert size.seconds_per_run is not None and total is not None
    out.print(
        f"time: about {_duration(total)} with the {runner.name} executor, {parallel} worker{plural(parallel)}"
        f" ({_duration(size.seconds_per_run)} for one run of the first point, timed now)",
        markup=False,
        soft_wrap=True,
    )
    err.print("dry run: nothing was written", markup=False)


def _duration(seconds: float) -> str:
    """3.2 s, 4.5 min, 2.1 h."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _grid_size(ds) -> int:
    """Sweep points (a run estimating after every round is one run, not one per round)."""
    from ..results.scores import sweep_dims

    size = 1
    for d in sweep_dims(ds):
        size *= ds.sizes[d]
    return size
