"""Figures from a results dataset; each function returns the matplotlib Figure (the CLI saves it).

* ``summary``: error boxplots per sweep point (the mean with a band past :data:`MAX_BOX_POINTS`) and
  estimates of repetition 0 beside the truth (:mod:`.plot_summary`);
* ``box``: a metric's spread over repetitions against one sweep axis, a box per estimator (001 Figs. 10-12);
* ``line``: its mean against the sweep axis with the interquartile range as a band (points with bars when
  the axis is categorical, e.g. a mechanism's name);
* ``heatmap``: truth, noisy reports and each estimate on a grid, one colour scale (001 Fig. 9);
* ``bar``: truth and noisy reports as bars on a 1-D domain with the estimates over them (004 Fig. 1).

In ``box`` and ``line`` any of ``metric``, ``estimator`` and the sweep axes can be the hue (several: their
combinations), the columns or the rows of a grid of panels, as in xarray's and seaborn's faceted plots.
Sweep axes shown nowhere are fixed at their first label or at ``at``'s (``{"data": "uniform"}``).
A scenario's ``[plot]`` table gives its default figure (:func:`default_options`). Every kind draws in
one style (:mod:`.plot_style`: ``default`` or ``paper``, a column's or a page's width), and a rate with a
nominal level (coverage) as points with binomial intervals (:mod:`.plot_panels`).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..base.atomic import atomic_path
from ..base.errors import LdpsimError, did_you_mean
from ..results.io import check_output, write_error
from ..running.schema import PLOT_FIELDS as PLOT_OPTIONS
from .plot_options import (
    Facets,
    choose_facets,
    choose_rep,
    coord_label,
    domain_kind,
    figure_title,
    fixed_point,
    point_text,
    score_label,
    subset,
)
from .plot_panels import (
    boxes,
    distribution_bars,
    domain_values,
    extent,
    is_rate,
    marginal_panels,
    mean_band,
    names,
    noisy_at,
    nominal_level,
    nominal_line,
    product_attributes,
    rate_points,
    value_scale,
)
from .plot_style import (
    DPI,
    auto_xscale,
    check_scale,
    check_style,
    colour,
    figure_size,
    figure_width,
    points,
    pyplot,
    set_ylabel,
    styled,
    title_points,
    wrap_title,
)
from .plot_summary import MAX_BOX_POINTS, summary_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "KINDS",
    "figure",
    "plot_options",
    "default_options",
    "save_figure",
    "summary_figure",
    "pyplot",
    "wrap_title",
]

KINDS = ("summary", "box", "line", "heatmap", "bar")
#: percentiles that bound a robust colour scale (as xarray's ``robust=True``)
ROBUST_PERCENTILES = (2.0, 98.0)
#: heat map panels per row before wrapping (001 Fig. 9 has five)
HEATMAP_COLUMNS = 5


def default_options(ds: xr.Dataset) -> dict[str, Any]:
    """The ``[plot]`` table of the scenario that made ``ds`` (empty if it has none): its default figure."""
    try:
        table = json.loads(ds.attrs["resolved_scenario"]).get("plot", {})
    except (KeyError, ValueError, TypeError, AttributeError):
        return {}
    return dict(table) if isinstance(table, dict) else {}


def plot_options(ds: xr.Dataset, given: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`figure`'s keyword arguments: ``given`` (the command line's; None or empty: not given) over the
    scenario's ``[plot]`` table, which applies only when ``given`` asks for no other kind than its own.

    Raises
    ------
    LdpsimError
        If the table holds an unknown option or a value of the wrong type.
    """
    table = default_options(ds)
    for key in table:
        if key not in PLOT_OPTIONS:
            raise LdpsimError(f"unknown field '{key}'", field="plot", hint=did_you_mean(key, PLOT_OPTIONS))
    if given.get("kind") not in (None, table.get("kind", "summary")):
        table = {}
    expected = {
        "kind": str,
        "sweep": str,
        "col": str,
        "row": str,
        "xscale": str,
        "yscale": str,
        "rep": int,
        "robust": bool,
    }
    for key, kind in expected.items():
        if key in table and not isinstance(table[key], kind):
            raise LdpsimError(f"must be a {kind.__name__}, got {table[key]!r}", field=f"plot.{key}")
    for key in ("metric", "estimator", "hue"):
        if isinstance(table.get(key), str):
            table[key] = [table[key]]
        if key in table and not (isinstance(table[key], list) and all(isinstance(v, str) for v in table[key])):
            raise LdpsimError("must be a name or a list of names", field=f"plot.{key}")
    if "at" in table and not isinstance(table["at"], dict):
        raise LdpsimError("must be a table of AXIS = LABEL", field="plot.at", hint='write at = { eps = "1.0" }')
    renamed = {"metric": "metrics", "estimator": "estimators"}
    options: dict[str, Any] = {renamed.get(k, k): v for k, v in table.items()}
    if "at" in options:
        options["at"] = {str(k): str(v) for k, v in dict(options["at"]).items()}
    options.update({k: v for k, v in given.items() if v not in (None, [], {}, ())})
    options.setdefault("kind", "summary")
    return options


def figure(
    ds: xr.Dataset,
    kind: str = "summary",
    *,
    metrics: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    sweep: str | None = None,
    at: Mapping[str, str] | None = None,
    rep: int | None = None,
    hue: Sequence[str] | None = None,
    col: str | None = None,
    row: str | None = None,
    robust: bool = False,
    xscale: str | None = None,
    yscale: str | None = None,
    style: str = "default",
    width: str | float | None = None,
) -> Figure:
    """The figure of ``kind`` for the chosen metrics and estimators (all of them by default).

    Parameters
    ----------
    ds
        A results dataset (:func:`ldpsim.run_scenario`, :func:`ldpsim.open_results`).
    kind
        One of :data:`KINDS`.
    metrics, estimators
        What to show, in this order; all by default.
    sweep
        The sweep axis on the x axis of ``box`` and ``line`` (default the first).
    at
        Labels fixing sweep axes shown nowhere else (default their first label); in a summary, the
        sweep points whose estimates it shows.
    rep
        The repetition a ``heatmap`` or ``bar`` shows (default 0).
    hue, col, row
        Dimensions (``metric``, ``estimator`` or sweep axes) drawn as colours, panel columns and panel
        rows of ``box`` and ``line`` (default: estimators as colours, metrics as columns).
    robust
        Heat maps: bound the colour scale by the 2nd and 98th percentiles (outliers do not flatten it).
    xscale, yscale
        ``linear``, ``log`` or ``symlog``. The x scale is a line plot's over a numeric sweep axis;
        None: ``log`` when its positive values span two decades or more (``plot_style.auto_xscale``).
        The y scale is the scores' (``summary``, ``box``, ``line``); None: linear.
    style
        ``default`` or ``paper`` (``plot_style``: a two-column paper's fonts and lines).
    width
        ``column`` (3.5 in), ``page`` (7 in) or inches; None: the figure's own width.

    Raises
    ------
    LdpsimError
        One line naming the option and the fix, for a choice the results do not allow.
    """
    if kind not in KINDS:
        raise LdpsimError(f"unknown kind '{kind}'", field="--kind", hint=did_you_mean(kind, KINDS))
    check_scale(xscale, "--xscale")
    yscale = check_scale(yscale, "--yscale") or "linear"
    inches = figure_width(width)
    ds, scores = subset(ds, metrics, estimators)
    faceted = bool(hue) or col is not None or row is not None
    if kind in ("summary", "heatmap", "bar") and faceted:
        raise LdpsimError(
            f"a {kind} has a fixed layout", field="--hue/--col/--row", hint="use them with --kind box or line"
        )
    if robust and kind not in ("heatmap",):
        raise LdpsimError("--robust scales the colours of heat maps", field="--robust", hint="use --kind heatmap")
    if xscale is not None and kind != "line":
        hint = "use --kind line, whose x axis is a numeric sweep axis"
        raise LdpsimError(f"a {kind}'s x axis is not a numeric sweep axis", field="--xscale", hint=hint)
    with styled(check_style(style), inches):
        fig = _draw(
            ds,
            scores,
            kind,
            sweep=sweep,
            at=at,
            rep=rep,
            hue=hue,
            col=col,
            row=row,
            robust=robust,
            xscale=xscale,
            yscale=yscale,
        )
    fig.set_dpi(DPI[style])
    return fig


def _draw(
    ds: xr.Dataset,
    scores: Mapping[str, xr.DataArray],
    kind: str,
    *,
    sweep: str | None,
    at: Mapping[str, str] | None,
    rep: int | None,
    hue: Sequence[str] | None,
    col: str | None,
    row: str | None,
    robust: bool,
    xscale: str | None,
    yscale: str,
) -> Figure:
    if kind == "summary":
        if sweep is not None or rep is not None:
            raise LdpsimError(
                "the summary shows every sweep point and repetition 0",
                field="--kind",
                hint="use --sweep and --rep with --kind box, line, heatmap or bar",
            )
        return summary_figure(ds, scores, at=at, yscale=yscale)
    if kind in ("box", "line"):
        if rep is not None:
            raise LdpsimError(f"a {kind} plot shows every repetition", field="--rep", hint="drop --rep")
        facets = choose_facets(ds, scores, sweep=sweep, at=at, hue=hue, col=col, row=row)
        if kind == "line" and facets.x is None:
            raise LdpsimError(
                "a line plot needs a sweep axis; this results file has none", field="--kind", hint="use --kind box"
            )
        return _faceted(ds, scores, facets, kind, xscale, yscale)
    if sweep is not None:
        raise LdpsimError(f"a {kind} shows one sweep point", field="--sweep", hint="choose it with --at AXIS=LABEL")
    if kind == "heatmap":
        return heatmap_figure(ds, at=at, rep=rep, robust=robust)
    return bar_figure(ds, at=at, rep=rep)


def box_figure(ds: xr.Dataset, *, sweep: str | None = None, at: Mapping[str, str] | None = None) -> Figure:
    """A panel per metric: boxes of the error over repetitions per value of ``sweep``, one per estimator."""
    return figure(ds, "box", sweep=sweep, at=at)


def line_figure(ds: xr.Dataset, *, sweep: str | None = None, at: Mapping[str, str] | None = None) -> Figure:
    """A panel per metric: the mean error over repetitions against ``sweep``, a line per estimator."""
    return figure(ds, "line", sweep=sweep, at=at)


def _faceted(
    ds: xr.Dataset, scores: Mapping[str, xr.DataArray], facets: Facets, kind: str, xscale: str | None, yscale: str
) -> Figure:
    """Box or line panels: ``facets.x`` on x, a colour per hue combination, panels by row and column.

    Boxes give way to the mean with a ± 2 standard error band past :data:`MAX_BOX_POINTS` boxes per hue;
    a rate (coverage) is its pooled value with a binomial interval and the nominal level drawn."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    plt = pyplot()
    names = list(scores)
    data = xr.concat(list(scores.values()), dim="metric", coords="minimal", compat="override", combine_attrs="drop")
    data = data.assign_coords(metric=names).isel(facets.point)
    for dim in ("metric", "estimator"):  # a single metric or estimator shown nowhere: fixed
        if dim not in facets.shown:
            data = data.isel({dim: 0})

    def labels(dim: str | None) -> list[str]:
        return [""] if dim is None else [str(v) for v in data[dim].values]

    x = facets.x
    x_values = ds[x].values if x else np.array([""])
    numeric = x is not None and np.issubdtype(x_values.dtype, np.number)
    lines = kind == "line" and numeric
    crowded = kind == "box" and len(x_values) > MAX_BOX_POINTS  # boxes crowd: the mean with a band instead
    trials, level = domain_values(ds), nominal_level(ds)
    positions = x_values.astype(float) if lines else np.arange(len(x_values))
    hues = list(itertools.product(*(range(data.sizes[d]) for d in facets.hue)))
    hue_names = [" / ".join(str(data[d].values[i]) for d, i in zip(facets.hue, h)) for h in hues]
    rows, cols = labels(facets.row), labels(facets.col)
    sharey: bool | str = True
    if "metric" in facets.hue or (len(names) > 1 and "metric" not in facets.shown):
        sharey = False
    elif facets.col == "metric":
        sharey = "col"
    elif facets.row == "metric":
        sharey = "row"
    width = min(max(6.0 if len(cols) == 1 else 5.2, 0.22 * len(x_values) * (len(hues) if not lines else 1) + 1.8), 9.0)
    fig, axes = plt.subplots(
        len(rows),
        len(cols),
        figsize=figure_size(
            width * len(cols), 3.6 * len(rows) + 0.9 + (0.3 * len(hues) / 2 + 0.4 if facets.hue else 0)
        ),
        squeeze=False,
        sharex=True,
        sharey=sharey,
        layout="constrained",
    )
    reps = ds.sizes["rep"]
    rated: set[int] = set()
    for (i, r), (j, c) in itertools.product(enumerate(rows), enumerate(cols)):
        ax = axes[i, j]
        panel = data.isel({dim: n for dim, n in ((facets.row, i), (facets.col, j)) if dim is not None})
        for k, h in enumerate(hues):
            series = panel.isel(dict(zip(facets.hue, h)))
            values = series.transpose(*([x] if x else []), "rep").values.reshape(len(x_values), reps)
            if np.isnan(values).all():
                continue  # a combination the scenario never computes
            metric = _metric_of(facets, names, r, c, [str(data[d].values[n]) for d, n in zip(facets.hue, h)])
            if metric is not None and is_rate(scores[metric]):
                rate_points(ax, values, trials, positions, k, len(hues))
                rated.add(id(ax))
                continue
            if kind == "box" and not crowded:
                boxes(ax, list(values), k, len(hues), colour(k))
                continue
            mean, low, high = mean_band(values)
            if lines or crowded:
                ax.plot(positions, mean, marker="o" if len(positions) <= 12 else None, ms=4, color=colour(k))
                ax.fill_between(positions, low, high, color=colour(k), alpha=0.2, linewidth=0)
            else:
                at_x = positions + (k - (len(hues) - 1) / 2) * min(0.8 / len(hues), 0.25)
                ax.errorbar(at_x, mean, yerr=[mean - low, high - mean], fmt="o", ms=5, capsize=3, color=colour(k))
        if id(ax) in rated:
            nominal_line(ax, level)
        if lines:
            _numeric_x(ax, positions, xscale)
        else:
            _category_ticks(ax, [str(v) for v in x_values], 0.8 * fig.get_size_inches()[0] / len(cols))
        if id(ax) not in rated:
            ax.set_yscale(yscale)
        parts = [_facet_text(dim, label) for dim, label in ((facets.row, r), (facets.col, c)) if dim is not None]
        room = 0.9 * fig.get_size_inches()[0] / len(cols)
        ax.set_title(wrap_title(" | ".join(parts), room, points("axes.titlesize")).replace(" | ", ", "))
        metric = c if facets.col == "metric" else r if facets.row == "metric" else None
        if metric is None and "metric" not in facets.shown:
            metric = names[0] if len(names) == 1 else None
        if j == 0 or facets.col == "metric":
            set_ylabel(ax, score_label(scores[metric]) if metric else "score")
        if i == len(rows) - 1:
            ax.set_xlabel(coord_label(ds, x) if x else "")
    if len(hues) > 1 or facets.hue:
        maker = (
            (lambda k: Line2D([], [], color=colour(k), marker="o"))
            if kind == "line" or crowded or rated
            else (lambda k: Patch(facecolor=colour(k), edgecolor="black"))
        )
        title = " / ".join(facets.hue)
        entry = 0.6 + 0.1 * max(map(len, hue_names))  # inches: marker, gap and text at the legend's font
        fig.legend(
            [maker(k) for k in range(len(hues))],
            hue_names,
            title=title,
            loc="outside lower center",  # below the panels: never under the title, whatever their number
            ncols=max(1, min(len(hues), int(fig.get_size_inches()[0] / entry))),
        )
    shown = f"{reps} repetitions per box" if kind == "box" and not crowded else f"mean over {reps} repetitions"
    if kind == "line" or crowded:
        shown += f"; {'band' if lines or crowded else 'bars'}: ± 2 standard errors"
    if rated:
        shown += "; rates: pooled, with 95 % binomial intervals"
    title = figure_title(ds, point_text(ds, facets.point), shown)
    fig.suptitle(wrap_title(title, fig.get_size_inches()[0], title_points()))
    return fig


def _metric_of(facets: Facets, metrics: list[str], row: str, col: str, hue: list[str]) -> str | None:
    """The metric a series of a faceted figure shows (None when the panel mixes them)."""
    if facets.col == "metric":
        return col
    if facets.row == "metric":
        return row
    if "metric" in facets.hue:
        return hue[facets.hue.index("metric")]
    return metrics[0] if len(metrics) == 1 or "metric" not in facets.shown else None


def _numeric_x(ax: Any, values: np.ndarray, xscale: str | None) -> None:
    """A numeric sweep axis: its scale (automatic: log over two decades or more), ticks at its values when few."""
    scale = xscale or auto_xscale(values)
    ax.set_xscale(scale)
    if scale != "linear" and len(values) <= 8:
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.minorticks_off()


def _category_ticks(ax: Any, labels: list[str], room: float) -> None:
    """Labels of a categorical x axis ``room`` inches wide: level when they fit, else turned (upright when
    short, slanted when long); every k-th past ``MAX_TICKS``."""
    from .plot_summary import MAX_TICKS

    positions = np.arange(len(labels))
    step = -(-len(labels) // MAX_TICKS)
    needed = max(map(len, labels)) * 0.6 * points("xtick.labelsize") / 72
    turn = 0 if needed <= room / len(labels) * step * 0.9 else 90 if max(map(len, labels)) <= 5 else 30
    ax.set_xticks(positions[::step], labels[::step], rotation=turn, ha="right" if turn == 30 else "center")
    ax.set_xlim(-0.5, len(labels) - 0.5)


def _facet_text(dim: str, label: str) -> str:
    """A panel's title part: the label alone if it names itself ("P1=0.5", an estimator), else "eps = 2.0"."""
    return label if dim in ("metric", "estimator") or "=" in label else f"{dim} = {label}"


def heatmap_figure(
    ds: xr.Dataset, *, at: Mapping[str, str] | None = None, rep: int | None = None, robust: bool = False
) -> Figure:
    """Truth, noisy reports (when the file has them) and each estimate as heat maps on one colour scale.

    ``robust`` bounds the scale by the 2nd and 98th percentiles of all panels' cells, so that one
    outlying estimate does not flatten the others; cells beyond it take the end colours.
    """
    plt = pyplot()
    if product_attributes(ds) is not None or "row" not in ds["estimate"].dims:
        raise LdpsimError(
            f"a heatmap needs a grid domain; this results file's domain is {domain_kind(ds)}",
            field="--kind",
            hint="use --kind bar for 1-D domains and products of attributes (a panel per attribute's marginal)",
        )
    point, r = fixed_point(ds, at), choose_rep(ds, rep)
    where = {**point, "rep": r}
    panels = [("truth", ds["truth"].isel(where, missing_dims="ignore").values)]
    noisy = noisy_at(ds, where)
    if noisy is not None:
        panels.append(("noisy", noisy))
    panels += [(est, ds["estimate"].sel(estimator=est).isel(where).values) for est in names(ds, "estimator")]
    rows = -(-len(panels) // HEATMAP_COLUMNS)
    cols = -(-len(panels) // rows)  # balanced rows: six panels are 2 x 3, not 5 + 1
    aspect = ds.sizes["row"] / ds.sizes["col"]
    width = 3.0 * cols + 1.2
    fig, axes = plt.subplots(
        rows, cols, figsize=figure_size(width, 3.0 * aspect * rows + 1.2), squeeze=False, layout="constrained"
    )
    vmin, vmax = value_scale([values for _, values in panels], robust, ROBUST_PERCENTILES)
    box = extent(ds)
    used = axes.ravel()[: len(panels)]
    for ax, (title, values) in zip(used, panels):
        image = ax.imshow(values, origin="lower", extent=box, vmin=vmin, vmax=vmax, cmap="viridis")
        ax.set_title(title)
        ax.set_xlabel(coord_label(ds, "x") if box else "column")
        ax.set_ylabel(coord_label(ds, "y") if box else "row")
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    label = "probability" + (" (2-98 %)" if robust else "")  # robust: cells past the percentiles take the end colours
    fig.colorbar(
        image, ax=list(used), label=label, fraction=0.02, pad=0.01, aspect=15, extend="both" if robust else "neither"
    )
    fig.suptitle(wrap_title(_title(ds, point, f"repetition {r}"), fig.get_size_inches()[0], title_points()))
    return fig


def bar_figure(ds: xr.Dataset, *, at: Mapping[str, str] | None = None, rep: int | None = None) -> Figure:
    """Truth (and noisy reports, when the file has them) as bars on a 1-D domain, the estimates as lines."""
    plt = pyplot()
    if "row" in ds["estimate"].dims:
        raise LdpsimError(
            "a bar chart needs a 1-D domain (integers or categorical); this results file's domain is a grid",
            field="--kind",
            hint="use --kind heatmap for grids",
        )
    point, r = fixed_point(ds, at), choose_rep(ds, rep)
    where = {**point, "rep": r}
    attributes = product_attributes(ds)
    if attributes is not None:  # a product of attributes: a panel per attribute's marginal
        fig, axes = plt.subplots(
            1, len(attributes), figsize=figure_size(min(18.0, 4.2 * len(attributes)), 4.2), layout="constrained"
        )
        marginal_panels(ds, list(np.atleast_1d(axes)), attributes, where)
        fig.suptitle(
            wrap_title(
                _title(ds, point, f"marginals, repetition {r}"), min(18.0, 4.2 * len(attributes)), title_points()
            )
        )
        return fig
    dim = str(ds["truth"].dims[-1])
    labels = ds[dim].values
    numeric = np.issubdtype(np.asarray(labels).dtype, np.number)
    x = labels.astype(float) if numeric else np.arange(len(labels))
    size = min(14.0, max(6.0, 0.12 * len(x) + 3))
    fig, ax = plt.subplots(figsize=figure_size(size, 4.2), layout="constrained")
    size = float(fig.get_size_inches()[0])
    distribution_bars(ax, x, ds["truth"].isel(where, missing_dims="ignore").values, "truth")
    noisy = noisy_at(ds, where)
    if noisy is not None:
        distribution_bars(ax, x, noisy, "noisy", outline=True)
    for e, est in enumerate(names(ds, "estimator")):
        values = ds["estimate"].sel(estimator=est).isel(where).values
        ax.plot(x, values, color=colour(e), marker="." if len(x) <= 40 else None, label=est)
    if not numeric:
        ax.set_xticks(x, [str(v) for v in labels], rotation=90 if len(labels) > 8 else 0)
    ax.set_xlabel(coord_label(ds, dim))
    ax.set_ylabel("probability")
    handles, entries = ax.get_legend_handles_labels()
    bars = [i for i, name in enumerate(entries) if name in ("truth", "noisy")]  # bars first, as drawn
    order = bars + [i for i in range(len(entries)) if i not in bars]
    ax.legend([handles[i] for i in order], [entries[i] for i in order], fontsize="small")
    ax.set_title(wrap_title(_title(ds, point, f"repetition {r}"), size, title_points()))
    return fig


def save_figure(fig: Figure, path: str | os.PathLike, *, dpi: int | None = None) -> Path:
    """Write ``fig`` atomically (the format follows the suffix) and close it; a reader never sees half an image.

    ``dpi`` (raster formats) defaults to the figure's own, which :func:`figure` sets from its style."""
    path = check_output(path)
    try:
        with atomic_path(path, suffix=path.suffix) as tmp:  # the suffix tells matplotlib the format
            fig.savefig(tmp, dpi=dpi if dpi is not None else fig.get_dpi())
    except ValueError as exc:  # e.g. an unknown image format
        raise LdpsimError(str(exc), field="output", hint="use a .png, .pdf or .svg file name") from None
    except (OSError, RuntimeError) as exc:  # a full disk, a file size limit
        raise write_error(path, exc) from None
    finally:
        pyplot().close(fig)
    return path


def _title(ds: xr.Dataset, point: Mapping[str, int], extra: str) -> str:
    return figure_title(ds, point_text(ds, point), extra)
