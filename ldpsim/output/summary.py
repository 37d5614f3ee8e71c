"""The summary of a results file that ``run`` and ``show`` print: a table, csv, json or markdown."""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ..base.untrusted import printable
from .cli_console import out


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


def summary_table(ds) -> Table:
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
        cells = [format_label(row[d]) for d in sweeps] + [row["estimator"]]
        for m in metrics:
            mean, sd = row[m]
            cells.append(f"{mean:.3g}" + ("" if sd != sd else f" ± {sd:.2g}"))
        cells += [_fmt_mean(row[name], ds[name].dtype) for name in extra]
        lines.append(cells)
    labels = len(sweeps) + 1  # the sweep points and the estimator name what a row is: never cut them
    for i, col in enumerate([*map(str, sweeps), "estimator", *metrics, *extra]):
        widest = max([len(col), *(len(cells[i]) for cells in lines)]) if i < labels else None
        header = Text(printable(col))  # labels come from the file: shown, never read as markup
        table.add_column(header, justify="left" if col == "estimator" else "right", min_width=widest)
    for cells in lines:
        table.add_row(*(Text(printable(cell)) for cell in cells))
    return table


def summary_records(ds) -> list[dict[str, Any]]:
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


#: the width a table may take when stdout is not a terminal: its own, never squeezed to 80 columns
PIPED_WIDTH = 10_000


def print_table(table: Table) -> None:
    """``table`` on stdout: at the terminal's width there, at its own width in a pipe or a log.

    Rich squeezes a table to 80 columns when the output is not a terminal: cells wrap and the right-hand
    columns are cut ("iterati…"), which is what a log keeps.
    """
    if out.is_terminal:
        out.print(table)
        return
    width = out.width
    out.width = PIPED_WIDTH
    try:
        out.print(table)
    finally:
        out.width = width


def print_summary(ds, fmt: SummaryFormat) -> None:
    """The summary on stdout in the chosen format (only the summary, so a program can read it whole)."""
    if fmt is SummaryFormat.table:
        print_table(summary_table(ds))
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


def format_label(value) -> str:
    """A sweep label as a table cell: floats without trailing zeros (0.5, 1e+06), anything else as text."""
    return f"{value:g}" if isinstance(value, float) else str(value)
