"""The ``ldpsim`` command line: run, list, show, plot, check.

Problems the user can fix are printed as one line, ``error: ...``, and exit
with code 2; nothing is written in that case.
"""

from __future__ import annotations

import json
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from typer.core import TyperCommand, TyperOption

from ..base.errors import LdpsimError, did_you_mean

USER_ERROR = 2
app = typer.Typer(
    name="ldpsim",
    help="Simulate local privacy mechanisms and estimators. Start with: ldpsim run scenarios/quickstart.toml",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)


@contextmanager
def user_errors(prefix: str = "") -> Iterator[None]:
    """Turn LdpsimError into one line on stderr and exit code 2."""
    try:
        yield
    except LdpsimError as exc:
        err.print(f"error: {prefix}{exc}", markup=False, soft_wrap=True)
        raise typer.Exit(USER_ERROR) from None
    except KeyboardInterrupt:
        err.print("interrupted; nothing was written", markup=False)
        raise typer.Exit(130) from None


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    # ldpsim's own warnings (PluginWarning, ScoreWarning) read "warning: ..."; others keep their class name
    label = "warning" if category.__module__.startswith("ldpsim.") else category.__name__
    err.print(f"{label}: {message}", markup=False, soft_wrap=True)


def _print_version(value: bool) -> None:
    """``--version``: the installed distribution's version (setuptools-scm derives it from git)."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("ldpsim")
        except PackageNotFoundError:  # a source tree that is not installed
            text = "0+unknown"
        out.print(f"ldpsim {text}", markup=False)
        raise typer.Exit()


@app.callback()
def _setup(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    warnings.showwarning = _show_warning


#: run options whose errors the library names by keyword; the command line names them by flag
RUN_FLAGS = {"executor": "--executor", "workers": "--workers", "scheduler": "--scheduler", "resume": "--resume"}


def executor_help() -> str:
    """The ``--executor`` help: every registered executor, with its one-line description."""
    from ..plugin.registry import get_registry

    entries = get_registry().entries("executor")
    described = " ".join(f"{e.name}: {e.cls.summary()}" for e in entries)
    return escape(f"where the runs go (default processes, or dask with --scheduler). {described}")


class _RunCommand(TyperCommand):
    """``run``, whose ``--executor`` help lists the executors installed now (the registry loads only for help)."""

    def format_help(self, ctx, formatter) -> None:  # noqa: ANN001
        for param in self.params:
            if isinstance(param, TyperOption) and param.name == "executor":
                param.help = executor_help()
        super().format_help(ctx, formatter)


@contextmanager
def progress_bar(description: str, quiet: bool, delay: float = 0.0) -> Iterator[Callable[[int, int], None]]:
    """A progress callback drawing a bar on stderr from the first task on (not while the scenario is checked).

    With ``delay``, the bar appears only once that many seconds have passed, so a quick command prints nothing.
    """
    opened = time.perf_counter()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
        transient=True,
    )
    task: list[TaskID] = []

    def update(done: int, total: int) -> None:
        if not task:
            if time.perf_counter() - opened < delay:
                return
            bar.start()
            task.append(bar.add_task(description, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:  # a bar never started would still end with a newline on a non-terminal
            bar.stop()


@contextmanager
def interrupt_once() -> Iterator[None]:
    """Ctrl-C stops a run once: presses while it stops are ignored, so they cannot cut its clean-up short.

    A second press would otherwise raise inside the clean-up (killing the workers, removing an
    empty checkpoint) and end in a traceback with workers left running.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the process exits
        pressed.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        if not pressed:
            signal.signal(signal.SIGINT, previous)


@contextmanager
def run_flags() -> Iterator[None]:
    """Errors about a run option, named by their flag (``--workers``) rather than their keyword."""
    try:
        yield
    except LdpsimError as exc:
        if exc.field not in RUN_FLAGS:
            raise
        raise type(exc)(exc.problem, field=RUN_FLAGS[exc.field], hint=exc.hint) from None


class SummaryFormat(StrEnum):
    """How ``run`` and ``show`` print the summary: a table for people, the others for programs and documents."""

    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


FormatOption = Annotated[
    SummaryFormat,
    typer.Option(
        "--format",
        "-f",
        case_sensitive=False,
        help="summary as a table, csv, json (one record per row; means and sds in full precision) or markdown",
    ),
]


@app.command(cls=_RunCommand)
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
                f"interrupted; {kept} finished run{_s(kept)} {'is' if kept == 1 else 'are'} kept in"
                f" {checkpoint_dir(target)}: add --resume to continue",
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    if not quiet:
        print_summary(ds, format_)
    ran = ds.sizes["rep"] * int(_grid_size(ds)) - resumed
    took = f"{ran} run{_s(ran)} in {time.perf_counter() - started:.1f} s" + (f" + {resumed} resumed" if resumed else "")
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
    points = f"{size.points} sweep point{_s(size.points)}" + (f" ({axes})" if axes else "")
    out.print(f"runs: {size.runs} = {points} x {size.repetitions} repetition{_s(size.repetitions)}", markup=False)
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
        f"time: about {_duration(total)} with the {runner.name} executor, {parallel} worker{_s(parallel)}"
        f" ({_duration(size.seconds_per_run)} for one run of the first point, timed now)",
        markup=False,
        soft_wrap=True,
    )
    err.print("dry run: nothing was written", markup=False)


def _s(n: int) -> str:
    """The plural ending for ``n`` things."""
    return "" if n == 1 else "s"


def _duration(seconds: float) -> str:
    """3.2 s, 4.5 min, 2.1 h."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@app.command("list")
def list_plugins(
    kind: Annotated[
        str | None,
        typer.Argument(
            metavar="[KIND|NAME]", help="mechanisms, estimators, datasets, metrics or executors; or a plugin's name"
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Argument(help="a plugin of KIND, documented in full (e.g. `list mechanism krr`)")
    ] = None,
) -> None:
    """List the installed plugins, or document one: `ldpsim list krr`."""
    from ..plugin.catalogue import catalogue

    with user_errors():
        listing = catalogue()
        kinds = list(listing)
        if kind is not None:
            singular = kind[:-1] if kind.endswith("s") else kind
            if name is None and singular in listing:
                kinds = [singular]
            else:  # a plugin to document in full, or a mistake to explain: the classes themselves
                from ..plugin.registry import get_registry
                from .plugin_doc import find_entries

                found, documented = find_entries(get_registry(), kind, name)
                if documented:
                    _document_plugins(documented)
                    return
                kinds = [str(found)]
    for k in kinds:
        out.print(f"[bold]{k}s[/bold]")
        for entry in listing[k]:
            domains = entry["domains"]
            out.print(f"  [bold]{entry['name']}[/bold]  {escape(entry['summary'])}", soft_wrap=True)
            out.print(
                f"      plugin {entry['origin']}" + (f"; domains: {', '.join(domains)}" if domains else ""),
                markup=False,
                soft_wrap=True,
            )
            for describe, doc in entry["parameters"]:
                out.print(f"      {describe}" + (f"  -- {doc}" if doc else ""), markup=False, soft_wrap=True)
        out.print()


def _document_plugins(entries: list) -> None:
    """Print the full documentation of each entry (``ldpsim list NAME``)."""
    from .plugin_doc import describe

    for i, entry in enumerate(entries):
        if i:
            out.print()
        for line in describe(entry):
            out.print(line, markup=False, soft_wrap=True)


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="the scenario's name; writes NAME.toml")],
    from_: Annotated[
        str, typer.Option("--from", metavar="TEMPLATE", help="basic (k-RR at three levels) or quickstart (001 Fig. 2)")
    ] = "basic",
) -> None:
    """Write NAME.toml, a commented scenario to start from (never over an existing file)."""
    with user_errors():
        target = write_template(name, from_)
    err.print(
        f"wrote {target}: edit it, then `ldpsim run {target} --dry-run` and `ldpsim run {target}`",
        markup=False,
        soft_wrap=True,
    )


#: the scenarios ``ldpsim new --from`` starts from: files in ldpsim/output/templates
TEMPLATES = ("basic", "quickstart")


def write_template(name: str, template: str = "basic") -> Path:
    """Write the scenario ``template`` as ``NAME.toml`` (``name`` may be a path); refuse to overwrite a file."""
    from importlib.resources import files

    if template not in TEMPLATES:
        raise LdpsimError(f"unknown template '{template}'", field="--from", hint=did_you_mean(template, TEMPLATES))
    target = Path(name if name.endswith(".toml") else f"{name}.toml")
    if target.exists():
        raise LdpsimError(f"{target} already exists", hint="choose another name, or move the file away first")
    text = (files(__package__) / "templates" / f"{template}.toml").read_text(encoding="utf-8")
    text = text.replace("__FILE__", str(target)).replace("__NAME__", target.stem)
    try:
        with open(target, "x", encoding="utf-8") as fh:  # "x": a file created meanwhile is not overwritten
            fh.write(text)
    except FileExistsError:
        raise LdpsimError(f"{target} already exists", hint="choose another name, or move the file away first") from None
    except OSError as exc:
        raise LdpsimError(f"cannot write {target} ({exc.strerror})", hint="choose a folder you can write to") from None
    return target


@app.command()
def show(
    results: Annotated[Path, typer.Argument(help="results file written by `ldpsim run`")],
    format_: FormatOption = SummaryFormat.table,
) -> None:
    """Describe a results file: provenance and a summary of the errors (only the summary with --format other than table)."""
    from ..results.io import open_results

    with user_errors():
        ds = open_results(results)
    if format_ is not SummaryFormat.table:
        print_summary(ds, format_)
        return
    a = ds.attrs
    out.print(f"[bold]{escape(str(a.get('title', '?')))}[/bold]  {escape(str(a.get('description', '')))}")
    seeds = sorted({int(s) for s in ds["seed"].values}) if "seed" in ds.coords else [a.get("seed", "?")]
    seed = f"seed{_s(len(seeds))} {', '.join(map(str, seeds))}"
    out.print(f"created {a['created']}, {seed}" if "created" in a else seed, markup=False)
    for line in str(a.get("history", "")).splitlines():
        out.print(line, markup=False, soft_wrap=True)
    scenario = str(a.get("scenario_source", "?"))
    if "scenario_sha256" in a:
        scenario += f" (sha256 {a['scenario_sha256'][:12]})"
    out.print(f"scenario: {scenario}", markup=False)
    code = f"ldpsim {a.get('ldpsim_version', '?')}"
    if "code_sha256" in a:
        code += f" (source sha256 {a['code_sha256'][:12]})"
    libraries = [f"{name} {a[name]}" for name in ("python", "numpy", "scipy", "xarray") if name in a]
    out.print("code: " + ", ".join([code, *libraries]), markup=False)
    dims = ", ".join(f"{d}={n}" for d, n in ds.sizes.items())
    out.print(f"dimensions: {dims}", markup=False)
    overrides = json.loads(a.get("overrides", "[]"))
    if overrides:
        out.print("overrides: " + " ".join(overrides), markup=False)
    by_distribution: dict[str, list[str]] = {}
    for key, plugin in json.loads(a.get("plugins", "{}")).items():
        by_distribution.setdefault(f"{plugin['distribution']} {plugin['version']}", []).append(key)
    for distribution, keys in by_distribution.items():
        out.print(f"plugins of {distribution}: {', '.join(keys)}", markup=False)
    out.print(summary_table(ds))


@app.command()
def merge(
    results: Annotated[list[Path], typer.Argument(help="results files of one scenario run with different seeds")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the combined results file (netCDF4)")],
    force: Annotated[bool, typer.Option(help="replace an existing file that is not an ldpsim results file")] = False,
) -> None:
    """Combine the repetitions of results files of one scenario (run with different seeds) into one file."""
    from ..results.combine import merge_results
    from ..results.io import check_output, check_overwrite, open_results, save_results

    with user_errors():
        target = check_output(output)
        check_overwrite(target, results, force=force)
        merged = merge_results([open_results(path) for path in results], [path.name for path in results])
        save_results(merged, target)
    reps = merged.sizes["rep"]
    err.print(f"wrote {target} ({reps} repetition{_s(reps)} from {len(results)} files)", markup=False)


@app.command()
def plot(
    results: Annotated[Path, typer.Argument(help="results file written by `ldpsim run`")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="image file (png, pdf, svg); default <results>.png")
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind", "-k", help="summary, box, line, heatmap (grids) or bar (1-D); default the scenario's plot table"
        ),
    ] = None,
    metric: Annotated[list[str], typer.Option("--metric", "-m", help="metric to show (repeatable; default all)")] = [],  # noqa: B006
    estimator: Annotated[
        list[str], typer.Option("--estimator", "-e", help="estimator to show (repeatable; default all)")
    ] = [],  # noqa: B006
    sweep: Annotated[
        str | None, typer.Option(help="sweep axis on the x axis of box and line plots (default the first)")
    ] = None,
    at: Annotated[
        list[str], typer.Option(metavar="AXIS=LABEL", help="fix another sweep axis (default its first label)")
    ] = [],  # noqa: B006
    hue: Annotated[
        list[str],
        typer.Option(metavar="DIM", help="box/line: colour by metric, estimator or a sweep axis (repeatable)"),
    ] = [],  # noqa: B006
    col: Annotated[str | None, typer.Option(metavar="DIM", help="box/line: a column of panels per label")] = None,
    row: Annotated[str | None, typer.Option(metavar="DIM", help="box/line: a row of panels per label")] = None,
    rep: Annotated[int | None, typer.Option(help="repetition shown by heatmap and bar (default 0)")] = None,
    robust: Annotated[
        bool, typer.Option("--robust", help="heatmap: colour scale from the 2nd to 98th percentiles")
    ] = False,
    yscale: Annotated[str | None, typer.Option(help="box/line: linear or log")] = None,
) -> None:
    """Plot errors (summary, box, line) or distributions (heatmap, bar) from a results file.

    Without --kind the figure is the one the scenario's plot table describes (the summary if it
    has none); options given here override the table's.
    """
    from ..results.io import check_output, check_overwrite, open_results
    from .plot_options import parse_at
    from .plotting import figure, plot_options, save_figure

    with user_errors():
        ds = open_results(results)
        target = check_output(output if output is not None else results.with_suffix(".png"))
        check_overwrite(target, [results], force=True)  # an image replaces an image, never the results
        given = {
            "kind": kind,
            "metrics": metric,
            "estimators": estimator,
            "sweep": sweep,
            "at": parse_at(at),
            "hue": hue,
            "col": col,
            "row": row,
            "rep": rep,
            "robust": robust or None,  # not given: the plot table's
            "yscale": yscale,
        }
        save_figure(figure(ds, **plot_options(ds, given)), target)
    err.print(f"wrote {target}", markup=False)


check_app = typer.Typer(help="Check a mechanism or estimates against the theory of the papers.", no_args_is_help=True)
app.add_typer(check_app, name="check")

# the mechanism, its domain and its parameters, as `check mechanism` and `audit` take them
MechanismName = Annotated[str, typer.Argument(help="mechanism name (see `ldpsim list mechanisms`)")]
DomainOption = Annotated[
    str,
    typer.Option(
        "--domain",
        "-d",
        help="integers:0..99[:step], grid:24x16[:cell], categorical:a,b,c, or a product of those for tuple"
        " protocols: product:age=integers:0..4;sex=categorical:F,M",
    ),
]
ParamOption = Annotated[
    list[str], typer.Option("--param", "-p", metavar="KEY=VALUE", help="a mechanism parameter, e.g. eps=1")
]


@check_app.command("mechanism")
def check_mechanism_cmd(
    name: MechanismName,
    domain: DomainOption,
    param: ParamOption = [],  # noqa: B006
    prior: Annotated[
        str | None, typer.Option(help="prior for the LIP level: comma-separated probabilities, or 'uniform'")
    ] = None,
    users: Annotated[int, typer.Option(min=0, help="users for the simulated INV error (0: skip)")] = 10_000,
) -> None:
    """Privacy levels, identifiability and INV error bounds of a mechanism.

    For a tuple protocol (spl, smp, rsfd, rsrfd on a product domain) also what its whole-tuple channel
    identifies (the joint, which marginals) and its exact privacy levels: between any two tuples, and
    between tuples that differ in one attribute.
    """
    import numpy as np

    from ..base.errors import ParameterError
    from ..model.domains import parse_domain
    from ..plugin.registry import get_registry
    from ..running.paths import parse_override, parse_value
    from ..theory.diagnostics import mechanism_report

    with user_errors():
        dom = parse_domain(domain)
        params = dict(parse_override(p, "--param", "eps=1") for p in param)
        try:
            mech = get_registry().create("mechanism", name, dom, **params)
        except ParameterError as exc:
            field = "--domain" if exc.field == "domain" else f"--param {exc.field}"
            raise ParameterError(exc.problem, field=field, hint=exc.hint) from None
        vector = None
        if prior is not None:
            # the same value syntax as --param (a comma list or a TOML list), so --param prior=... reads alike
            value = parse_value(prior, "--prior")
            try:
                vector = (
                    np.full(dom.size, 1 / dom.size)
                    if value == "uniform"
                    else np.array(value if isinstance(value, list) else [value], dtype=float)
                )
            except (TypeError, ValueError):
                raise LdpsimError(
                    f"'{prior}' is not a list of numbers", field="--prior", hint="write e.g. 0.2,0.3,0.5"
                ) from None
            if vector.shape != (dom.size,) or np.any(vector < 0) or not np.isclose(vector.sum(), 1):
                raise LdpsimError(
                    f"needs {dom.size} non-negative numbers summing to 1", field="--prior", hint="or write uniform"
                )
        report = mechanism_report(mech, prior=vector, users=users or None)
    for line in report.lines():
        out.print(line, markup=False, soft_wrap=True)


@check_app.command("estimate")
def check_estimate_cmd(
    results: Annotated[Path, typer.Argument(help="results file written by `ldpsim run`")],
    scenario_dir: Annotated[
        Path | None,
        typer.Option(
            help="folder where the stored scenario's relative data paths start (default: the results file's);"
            " they may not leave it"
        ),
    ] = None,
) -> None:
    """For each estimate: is it an MLE (KKT), is L strictly concave, is the MLE unique."""
    from ..results.io import open_results
    from ..results.scores import sweep_dims
    from ..running.recheck import check_results

    with user_errors(), progress_bar(results.stem, quiet=False, delay=1.0) as progress:
        ds = open_results(results)
        rows = check_results(ds, scenario_dir, progress=progress)
    sweeps = sweep_dims(ds)
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault(tuple(row[d] for d in sweeps) + (row["estimator"],), []).append(row["report"])
    table = Table(title="estimates against the MLE conditions (over repetitions)", title_justify="left")
    for col in [*sweeps, "estimator", "max KKT violation", "is an MLE", "L strictly concave", "unique MLE"]:
        table.add_column(col, justify="left" if col == "estimator" else "right")
    for key, reports in groups.items():
        n = len(reports)
        uniq = [r.unique_mle for r in reports if r.unique_mle is not None]
        table.add_row(
            *[_fmt(v) for v in key[:-1]],
            key[-1],
            f"{max(r.kkt_violation for r in reports):.3g}",
            f"{sum(r.is_mle for r in reports)}/{n}",
            f"{sum(r.strictly_concave for r in reports)}/{n}",
            f"{sum(uniq)}/{len(uniq)}" if uniq else "-",
        )
    out.print(table)
    out.print(
        "KKT: theta is an MLE iff dL/dtheta_x <= n for all x, with equality where theta_x > 0; the violation is the "
        "largest deviation of dL/dtheta_x / n from those conditions (an MLE counts below 1e-3).",
        markup=False,
    )


#: the planner's errors by keyword, named on the command line by flag
PLAN_FLAGS = {
    "target": "--target",
    "users": "--users",
    "eps": "--eps",
    "error": "--error",
    "method": "--method",
    "repetitions": "--repetitions",
    "confidence": "--level",
    "mechanism": "MECHANISM",
    "estimator": "--estimator",
    "dataset": "--dataset",
    "domain": "--domain",
}


@contextmanager
def plan_flags() -> Iterator[None]:
    """The planner's errors named by their flag (``--param k``, ``--target``) rather than their keyword."""
    try:
        yield
    except LdpsimError as exc:
        field = exc.field or ""
        head, _, rest = field.partition(".")
        prefix = {"params": "--param", "dataset": "--dataset-param", "estimator": "--estimator-param"}
        if field in PLAN_FLAGS:
            field = PLAN_FLAGS[field]
        elif rest and head in prefix:
            field = f"{prefix[head]} {rest}"
        raise type(exc)(exc.problem, field=field or None, hint=exc.hint) from None


@app.command("plan")
def plan_cmd(
    mechanism: Annotated[str, typer.Argument(help="mechanism name (see `ldpsim list mechanisms`)")],
    domain: Annotated[
        str, typer.Option("--domain", "-d", help="integers:0..99[:step], grid:24x16[:cell] or categorical:a,b,c")
    ],
    eps: Annotated[float | None, typer.Option(help="privacy level (give two of --eps, --users, --target)")] = None,
    users: Annotated[int | None, typer.Option("--users", "-n", help="number of users")] = None,
    target: Annotated[float | None, typer.Option(help="target error")] = None,
    error: Annotated[
        str, typer.Option(help="tv, l2 (root mean square), max (absolute frequency error) or halfwidth (of intervals)")
    ] = "tv",
    estimator: Annotated[str, typer.Option("--estimator", "-e", help="estimator name")] = "inv-p",
    param: Annotated[
        list[str], typer.Option("--param", "-p", metavar="KEY=VALUE", help="a mechanism parameter other than eps")
    ] = [],  # noqa: B006
    dataset: Annotated[str, typer.Option(help="the guessed distribution: a dataset plugin")] = "uniform",
    dataset_param: Annotated[
        list[str], typer.Option("--dataset-param", metavar="KEY=VALUE", help="a dataset parameter, e.g. p=0.3")
    ] = [],  # noqa: B006
    estimator_param: Annotated[
        list[str], typer.Option("--estimator-param", metavar="KEY=VALUE", help="an estimator parameter")
    ] = [],  # noqa: B006
    level: Annotated[float, typer.Option(help="confidence level of the intervals (with --error halfwidth)")] = 0.95,
    method: Annotated[str, typer.Option(help="auto, analytic or simulation")] = "auto",
    repetitions: Annotated[int, typer.Option("--repetitions", "-r", help="simulation runs per point")] = 20,
    seed: Annotated[int, typer.Option(help="root of the simulations' randomness")] = 0,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write the searched curve (netCDF4)")] = None,
    figure: Annotated[Path | None, typer.Option(help="draw the searched curve (png, pdf, svg)")] = None,
) -> None:
    """The users needed for a target error, the eps needed, or the error expected, before a deployment."""
    from ..results.io import check_output, save_results
    from ..running.paths import parse_override
    from ..running.plan import plan as make_plan
    from .plan_figure import plan_figure
    from .plotting import save_figure

    with user_errors(), plan_flags():
        for path, flag in ((output, "--output"), (figure, "--figure")):
            if path is not None:
                try:
                    check_output(path)
                except LdpsimError as exc:
                    raise LdpsimError(exc.problem, field=flag, hint=exc.hint) from None
        answer = make_plan(
            mechanism,
            domain,
            eps=eps,
            users=users,
            target=target,
            error=error,
            estimator=estimator,
            params=dict(parse_override(p, "--param", "truncate=false") for p in param),
            dataset=dataset,
            dataset_params=dict(parse_override(p, "--dataset-param", "p=0.3") for p in dataset_param),
            estimator_params=dict(parse_override(p, "--estimator-param", "max_iter=500") for p in estimator_param),
            level=level,
            method=method,
            repetitions=repetitions,
            seed=seed,
        )
        ds = answer.to_dataset()
        if output is not None:
            save_results(ds, output)
        if figure is not None:
            save_figure(plan_figure(ds), figure)
    out.print(answer.line(), markup=False, soft_wrap=True)
    for path in (output, figure):
        if path is not None:
            err.print(f"wrote {path}", markup=False)


def summary_table(ds) -> Table:  # noqa: ANN001
    """Mean and spread (sd over repetitions) of each metric per sweep point and estimator."""
    from ..results.scores import score_names, sweep_dims
    from ..results.summary import summarize, summary_variables

    rows = summarize(ds)
    metrics = score_names(ds)
    sweeps = sweep_dims(ds) + (["round"] if "round" in ds.dims else [])  # a row per round estimated after
    reps = ds.sizes["rep"]
    # not "error: ...": log scanners take a line starting so for a failure
    table = Table(title=f"scores: mean ± sd over {reps} repetition{'s' * (reps != 1)}", title_justify="left")
    extra = summary_variables(ds)
    lines = []
    for row in rows:
        cells = [_fmt(row[d]) for d in sweeps] + [row["estimator"]]
        for m in metrics:
            mean, sd = row[m]
            cells.append(f"{mean:.3g}" + ("" if sd != sd else f" ± {sd:.2g}"))
        cells += [_fmt_mean(row[name], ds[name].dtype) for name in extra]
        lines.append(cells)
    labels = len(sweeps) + 1  # the sweep points and the estimator name what a row is: never cut them
    for i, col in enumerate([*map(str, sweeps), "estimator", *metrics, *extra]):
        widest = max([len(col), *(len(cells[i]) for cells in lines)]) if i < labels else None
        table.add_column(col, justify="left" if col == "estimator" else "right", min_width=widest)
    for cells in lines:
        table.add_row(*cells)
    return table


def summary_records(ds) -> list[dict[str, Any]]:  # noqa: ANN001
    """The summary rows as flat records: sweep labels, estimator, ``<metric>_mean``, ``<metric>_sd``, the extras.

    An sd that is undefined (one repetition) is None, so JSON stays valid and CSV leaves the cell empty.
    """
    from ..results.scores import score_names
    from ..results.summary import summarize

    metrics = set(score_names(ds))
    records = []
    for row in summarize(ds):
        record: dict[str, Any] = {}
        for key, value in row.items():
            if key in metrics:
                mean, sd = value
                record[f"{key}_mean"] = float(mean)
                record[f"{key}_sd"] = None if sd != sd else float(sd)
            else:
                record[key] = value.item() if hasattr(value, "item") else value
        records.append(record)
    return records


def print_summary(ds, fmt: SummaryFormat) -> None:  # noqa: ANN001
    """The summary on stdout in the chosen format (only the summary, so a program can read it whole)."""
    if fmt is SummaryFormat.table:
        out.print(summary_table(ds))
        return
    records = summary_records(ds)
    if fmt is SummaryFormat.json:
        # JSON has no inf or nan: null, as pandas' to_json writes them
        finite = [
            {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in r.items()} for r in records
        ]
        print(json.dumps(finite, indent=1, allow_nan=False))
        return
    columns = list(records[0]) if records else []
    if fmt is SummaryFormat.csv:
        import csv
        import sys

        writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        return
    # markdown: the rich table's rounding, labels aligned left and numbers right
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join(":---" if c == "estimator" else "---:" for c in columns) + "|")
    for record in records:
        print("| " + " | ".join("" if record[c] is None else _fmt_cell(record[c]) for c in columns) + " |")


def _fmt_cell(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value).replace("|", "\\|")


def _fmt_mean(value: float, dtype: Any) -> str:
    """A mean over repetitions: whole numbers for integer variables (iterations), 3 digits otherwise."""
    return f"{value:.0f}" if dtype.kind in "iu" else f"{value:.3g}"


def _fmt(value) -> str:  # noqa: ANN001
    return f"{value:g}" if isinstance(value, float) else str(value)


def _grid_size(ds) -> int:  # noqa: ANN001
    """Sweep points (a run estimating after every round is one run, not one per round)."""
    from ..results.scores import sweep_dims

    size = 1
    for d in sweep_dims(ds):
        size *= ds.sizes[d]
    return size


@app.command()
def audit(
    name: MechanismName,
    domain: DomainOption,
    param: ParamOption = [],  # noqa: B006
    draws: Annotated[int, typer.Option("--draws", "-n", help="draws per value (N)")] = 10**6,
    seed: Annotated[int, typer.Option(help="seed of all draws")] = 0,
    confidence: Annotated[float, typer.Option(help="confidence of the lower bound, over both code paths")] = 0.95,
    prior: Annotated[
        str | None,
        typer.Option(
            help="prior for the Bayes vulnerability: comma-separated probabilities or 'uniform'"
            " (default: a LIP mechanism's own prior, else uniform)"
        ),
    ] = None,
) -> None:
    """Audit a mechanism's privacy claim from its draws; exit 1 if they show it less private than declared.

    For pairs of values, N draws each, an event chosen by the likelihood ratio and Clopper-Pearson
    bounds give a lower bound on the eps the sampler and the simulation's count path really give.
    """
    import numpy as np

    from ..base.errors import ParameterError
    from ..model.domains import parse_domain
    from ..plugin.registry import get_registry
    from ..running.audit import audit_mechanism
    from ..running.scenario import parse_override

    with user_errors():
        dom = parse_domain(domain)
        try:
            mech = get_registry().create("mechanism", name, dom, **dict(parse_override(p) for p in param))
        except ParameterError as exc:
            field = "--domain" if exc.field == "domain" else f"--param {exc.field}"
            raise ParameterError(exc.problem, field=field, hint=exc.hint) from None
        vector = None
        if prior is not None and prior != "uniform":
            try:
                vector = np.array([float(v) for v in prior.split(",")])
            except ValueError:
                raise LdpsimError(
                    f"'{prior}' is not a list of numbers", field="--prior", hint="write e.g. 0.2,0.3,0.5"
                ) from None
        elif prior == "uniform":
            vector = np.full(dom.size, 1 / dom.size)
        try:
            report = audit_mechanism(mech, draws=draws, seed=seed, confidence=confidence, prior=vector)
        except ParameterError as exc:
            raise ParameterError(exc.problem, field=f"--{exc.field}", hint=exc.hint) from None
    for line in report.lines():
        out.print(line, markup=False, soft_wrap=True)
    worst = report.worst()
    if report.exceeded and worst is not None:
        x, y = (report.labels[i] for i in worst.pair)
        err.print(
            f"audit failed: the {worst.path} draws show eps >= {worst.bound:.4g} (values {x}, {y}) at"
            f" {confidence:.0%} confidence, above the declared {report.privacy}",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``ldpsim`` script."""
    app(prog_name="ldpsim")


if __name__ == "__main__":  # pragma: no cover
    main()
