"""``ldpsim show``, ``merge`` and ``plot``: what a results file holds, combined, drawn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ..base.untrusted import printable
from .cli_console import err, out, plural, user_errors
from .summary import FormatOption, SummaryFormat, print_summary, print_table, summary_table


def show(
    results: Annotated[Path, typer.Argument(help="results file written by `ldpsim run`")],
    format_: FormatOption = SummaryFormat.table,
) -> None:
    """Describe a results file: provenance and a summary of the errors (only the summary with --format other than table)."""
    from ..base.errors import LdpsimError
    from ..results.combine import repetition_seeds
    from ..results.io import open_results

    with user_errors():
        ds = open_results(results)
    if format_ is not SummaryFormat.table:
        print_summary(ds, format_)
        return
    # a results file is data: what it holds is shown, never interpreted (no markup, no control characters)
    a = ds.attrs
    out.print(
        f"[bold]{escape(printable(str(a.get('title', '?'))))}[/bold]  {escape(printable(str(a.get('description', ''))))}"
    )
    try:
        seeds: list[Any] = sorted({int(s) for s in repetition_seeds(ds)[0]})
    except LdpsimError:  # shown as it is: show describes a file, it does not judge it
        seeds = ["?"]
    seed = f"seed{plural(len(seeds))} {', '.join(map(str, seeds))}"
    out.print(printable(f"created {a['created']}, {seed}" if "created" in a else seed), markup=False)
    for line in str(a.get("history", "")).splitlines():
        out.print(printable(line), markup=False, soft_wrap=True)
    scenario = str(a.get("scenario_source", "?"))
    if "scenario_sha256" in a:
        scenario += f" (sha256 {str(a['scenario_sha256'])[:12]})"
    out.print(printable(f"scenario: {scenario}"), markup=False)
    code = f"ldpsim {a.get('ldpsim_version', '?')}"
    if "code_sha256" in a:
        code += f" (source sha256 {str(a['code_sha256'])[:12]})"
    libraries = [f"{name} {a[name]}" for name in ("python", "numpy", "scipy", "xarray") if name in a]
    out.print(printable("code: " + ", ".join([code, *libraries])), markup=False)
    dims = ", ".join(f"{d}={n}" for d, n in ds.sizes.items())
    out.print(printable(f"dimensions: {dims}"), markup=False)
    overrides = _json_attr(a, "overrides", list)
    if overrides:
        out.print(printable("overrides: " + " ".join(map(str, overrides))), markup=False)
    by_distribution: dict[str, list[str]] = {}
    for key, plugin in _json_attr(a, "plugins", dict).items():
        if isinstance(plugin, dict):  # the provenance of a file is data: what is not as ldpsim writes it is left out
            distribution = f"{plugin.get('distribution', '?')} {plugin.get('version', '?')}"
            by_distribution.setdefault(distribution, []).append(str(key))
    for distribution, keys in by_distribution.items():
        out.print(printable(f"plugins of {distribution}: {', '.join(keys)}"), markup=False)
    print_table(summary_table(ds))


def _json_attr(attrs: dict, name: str, kind: type) -> Any:
    """The JSON attribute ``name`` of a results file as a ``kind`` (list or dict); empty if absent or malformed."""
    try:
        value = json.loads(attrs.get(name, "null"))
    except (TypeError, ValueError, RecursionError):
        return kind()
    return value if isinstance(value, kind) else kind()


def merge(
    results: Annotated[list[Path], typer.Argument(help="results files of one scenario run with different seeds")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the combined results file (netCDF4)")],
    force: Annotated[bool, typer.Option(help="replace an existing file that is not an ldpsim results file")] = False,
) -> None:
    """Combine the repetitions of results files of one scenario (run with different seeds) into one file."""
    from ..results.combine import merge_results
    from ..results.io import check_output, check_overwrite, open_results, require_readable, save_results

    with user_errors():
        target = check_output(output)
        check_overwrite(target, results, force=force)
        require_readable(results, copies=2)  # every input is held, and their concatenation
        merged = merge_results([open_results(path) for path in results], [path.name for path in results])
        save_results(merged, target)
    reps = merged.sizes["rep"]
    err.print(
        f"wrote {target} ({reps} repetition{plural(reps)} from {len(results)} files)", markup=False, soft_wrap=True
    )


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
        bool | None,
        typer.Option(
            "--robust/--no-robust",
            help="heatmap: colour scale from the 2nd to 98th percentiles (default the scenario's plot table)",
        ),
    ] = None,
    xscale: Annotated[
        str | None,
        typer.Option(help="line: linear, log or symlog (default log when a numeric axis spans 2 decades)"),
    ] = None,
    yscale: Annotated[str | None, typer.Option(help="summary/box/line: linear, log or symlog")] = None,
    style: Annotated[str, typer.Option(help="default, or paper: a two-column paper's fonts")] = "default",
    width: Annotated[
        str | None, typer.Option(metavar="WIDTH", help="column (3.5 in), page (7 in) or inches; with -o x.pdf: vector")
    ] = None,
) -> None:
    """Plot errors (summary, box, line) or distributions (heatmap, bar) from a results file.

    Without --kind the figure is the one the scenario's plot table describes (the summary if it
    has none); options given here override the table's. For a paper: --style paper --width column
    -o figure.pdf.
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
            "robust": robust,  # None (not given): the plot table's
            "xscale": xscale,
            "yscale": yscale,
            "style": style,
            "width": width,
        }
        save_figure(figure(ds, **plot_options(ds, given)), target)
    err.print(f"wrote {target}", markup=False, soft_wrap=True)
