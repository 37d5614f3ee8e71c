"""Figures from a results dataset; each function returns the matplotlib Figure (the CLI saves it).

* ``summary``: error boxplots per sweep point and estimates of repetition 0 beside the truth;
* ``box``: a metric's spread over repetitions against one sweep axis, a box per estimator (001 Figs. 10-12);
* ``line``: its mean against the sweep axis with the interquartile range as a band (points with bars when
  the axis is categorical, e.g. a mechanism's name);
* ``heatmap``: truth, noisy reports and each estimate on a grid, one colour scale (001 Fig. 9);
* ``bar``: truth and noisy reports as bars on a 1-D domain with the estimates over them (004 Fig. 1).

In ``box`` and ``line`` any of ``metric``, ``estimator`` and the sweep axes can be the hue (several: their
combinations), the columns or the rows of a grid of panels, as in xarray's and seaborn's faceted plots.
Sweep axes shown nowhere are fixed at their first label or at ``at``'s (``{"data": "uniform"}``).
A scenario's ``[plot]`` table gives its default figure (:func:`default_options`).
"""

from __future__ import annotations

import itertools
import json
import os
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..base.atomic import atomic_path
from ..base.errors import LdpsimError, did_you_mean
from ..results.io import check_output, write_error
from ..results.marginals import marginals, product_of
from ..running.schema import PLOT_FIELDS as PLOT_OPTIONS
from .plot_options import (
    Facets,
    choose_facets,
    choose_rep,
    coord_label,
    domain_kind,
    fixed_point,
    metric_scores,
    point_text,
    score_label,
    subset,
    sweep_axes,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_ESTIMATE_PANELS = 4
KINDS = ("summary", "box", "line", "heatmap", "bar")
#: percentiles that bound a robust colour scale (as xarray's ``robust=True``)
ROBUST_PERCENTILES = (2.0, 98.0)
#: heat map panels per row before wrapping (001 Fig. 9 has five)
HEATMAP_COLUMNS = 5


def pyplot():
    """``matplotlib.pyplot``, imported only when a figure is drawn; Agg unless a backend is chosen (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _colour(e: int) -> str:
    colours = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    return colours[e % len(colours)]


def _boxes(ax, data: list[np.ndarray], e: int, n_hues: int, colour: str | None = None) -> None:
    """Hue ``e``'s boxes, one per x position, side by side with the other hues' (the papers' style)."""
    width = 0.8 / n_hues
    box = ax.boxplot(
        [d[np.isfinite(d)] for d in data],
        positions=np.arange(len(data)) + (e - (n_hues - 1) / 2) * width,
        widths=width * 0.9,
        patch_artist=True,
        manage_ticks=False,
        medianprops={"color": "black"},
        flierprops={"markersize": 3},
    )
    for patch in box["boxes"]:
        patch.set_facecolor(colour or _colour(e))


def wrap_title(text: str, width_inches: float, fontsize: float = 14.4) -> str:
    """``text`` broken into lines that fit ``width_inches`` (a figure's title is never clipped).

    Lines break first between the `` | ``-separated parts, then between words.
    """
    chars = max(20, int(width_inches * 72 / (0.55 * fontsize)))  # an average character is ~0.55 em wide
    lines: list[str] = []
    for part in text.split(" | "):
        if lines and len(lines[-1]) + 3 + len(part) <= chars:
            lines[-1] += " | " + part
        else:
            lines.extend(textwrap.wrap(part, chars) or [part])
    return "\n".join(lines)


def _ylabel(ax, label: str) -> None:
    """A y label wrapped to the panel's height, so that a long metric name does not run into the title."""
    ax.set_ylabel("\n".join(textwrap.wrap(label, 32)) if len(label) > 32 else label)


def _point_labels(ds: xr.Dataset, sweeps: list[str], points: list[tuple[int, ...]]) -> list[str]:
    """Tick labels of sweep points: the labels alone (the axes' names go in the x label), e.g. "P1=0.5, krr, 2.0"."""
    return [", ".join(str(ds[d].values[i]) for d, i in zip(sweeps, p)) or "all" for p in points]


def _product_attributes(ds: xr.Dataset) -> list[tuple[str, list[str]]] | None:
    """Each attribute's name and value labels when the results are on a product domain, else None."""
    kind = json.loads(ds.attrs.get("domain", "{}")).get("kind") if isinstance(ds.attrs.get("domain"), str) else None
    if kind != "product":
        return None
    domain = product_of(ds)
    return [(name, part.labels()) for name, part in zip(domain.names, domain.parts)]


def _marginal_panels(
    ds: xr.Dataset, axes: Sequence[Any], attributes: list[tuple[str, list[str]]], where: Mapping[str, int]
) -> None:
    """One panel per attribute: the true marginal as bars, each estimate's marginal as a line."""
    for ax, (name, labels) in zip(axes, attributes):
        x = np.arange(len(labels))
        truth = marginals(ds, name, variable="truth").isel(where, missing_dims="ignore").values.ravel()
        ax.bar(x, truth, color="lightgray", label="truth", width=0.8)
        for e, est in enumerate(_names(ds, "estimator")):
            values = marginals(ds, name).sel(estimator=est).isel(where, missing_dims="ignore").values.ravel()
            ax.plot(x, values, color=_colour(e), marker="." if len(x) <= 40 else None, label=est)
        ax.set_xticks(x, labels, rotation=90 if len(labels) > 6 or max(map(len, labels)) > 8 else 0, fontsize="small")
        ax.set_xlabel(name)
        ax.set_ylabel("probability")
        ax.legend(fontsize="small")


def summary_figure(ds: xr.Dataset, scores: Mapping[str, xr.DataArray] | None = None) -> Figure:
    """Error boxplots per sweep point (a panel per metric), then estimates vs truth (repetition 0).

    Boxes are grouped by sweep point and coloured by estimator, as in the papers' figures. With
    many sweep points the metric panels are stacked, each as wide as the figure. For grids the
    second row shows the truth and each estimate as heat maps of the first sweep point on one
    colour scale with one colour bar; for 1-D domains the estimates of up to four sweep points
    (the first, the last and evenly between).
    """
    plt = pyplot()
    scores = metric_scores(ds) if scores is None else scores
    sweeps = sweep_axes(ds)
    points = list(itertools.product(*(range(ds.sizes[d]) for d in sweeps)))
    metrics, estimators = list(scores), _names(ds, "estimator")
    attributes = _product_attributes(ds)
    grid = attributes is None and "row" in ds["estimate"].dims
    if attributes is not None:  # a product of attributes: each attribute's marginal at the first sweep point
        bottom = len(attributes)
    else:
        bottom = (1 + len(estimators)) if grid else min(len(points), MAX_ESTIMATE_PANELS)
    boxes = len(points) * len(estimators)
    stacked = len(metrics) > 1 and boxes > 12
    width = max(4.2 * bottom, min(18.0, 2.5 + 0.16 * boxes) if stacked else 4.2 * max(len(metrics), 1))
    width = max(width, 4.2 * len(metrics) if not stacked else 0, min(18.0, 2.5 + 0.16 * boxes))
    top_height = 3.6 * (len(metrics) if stacked else 1) + (1.2 if len(points) > 4 else 0)
    fig = plt.figure(figsize=(width, top_height + 3.6), layout="constrained")
    upper, lower = fig.subfigures(2, 1, height_ratios=[top_height, 3.6])
    top = upper.subplots(len(metrics) if stacked else 1, 1 if stacked else len(metrics), squeeze=False).ravel()
    ticks = _point_labels(ds, sweeps, points)
    rotate = 90 if len(points) > 8 or max(map(len, ticks)) * len(points) > 12 * width else 0
    for ax, (metric, values) in zip(top, scores.items()):
        for e, est in enumerate(estimators):
            series = values.sel(estimator=est).transpose(*sweeps, "rep").values.reshape(len(points), -1)
            _boxes(ax, list(series), e, len(estimators))
            ax.plot([], [], "s", color=_colour(e), label=est)
        ax.set_xticks(np.arange(len(points)), ticks, rotation=rotate, fontsize="small" if rotate else None)
        ax.set_xlim(-0.5, len(points) - 0.5)
        ax.set_title(metric)
        _ylabel(ax, score_label(values))
        if sweeps and (not stacked or ax is top[-1]):
            ax.set_xlabel(", ".join(coord_label(ds, d) for d in sweeps))
        ax.legend(fontsize="small", loc="best" if len(points) <= 8 else "upper right")  # "best" is slow on many boxes
    upper.suptitle(wrap_title(str(ds.attrs.get("title", "")), width), fontsize="large")

    panels = lower.subplots(1, bottom, squeeze=False)[0]
    if attributes is not None:
        first = dict(zip(sweeps, points[0]))
        _marginal_panels(ds, panels, attributes, {**first, "rep": 0})
        lower.suptitle(
            wrap_title(" | ".join(filter(None, ("marginals of repetition 0", point_text(ds, first)))), width)
        )
    elif grid:
        first = dict(zip(sweeps, points[0]))
        maps = [("truth", ds["truth"].isel({**first, "rep": 0}, missing_dims="ignore").values)]
        maps += [(est, ds["estimate"].sel(estimator=est).isel({**first, "rep": 0}).values) for est in estimators]
        vmin, vmax = _scale([values for _, values in maps], robust=False)
        extent = _extent(ds)
        for ax, (title, cells) in zip(panels, maps):
            image = ax.imshow(cells, origin="lower", extent=extent, vmin=vmin, vmax=vmax, cmap="viridis")
            ax.set_title(title)
            ax.set_xlabel(coord_label(ds, "x") if extent else "column")
            ax.set_ylabel(coord_label(ds, "y") if extent else "row")
        lower.colorbar(image, ax=list(panels), label="probability", fraction=0.02, pad=0.01, aspect=15)
        lower.suptitle(wrap_title(" | ".join(filter(None, ("repetition 0", point_text(ds, first)))), width))
    else:
        dim = str(ds["truth"].dims[-1])
        labels = ds[dim].values
        numeric = np.issubdtype(np.asarray(labels).dtype, np.number)
        x = labels.astype(float) if numeric else np.arange(len(labels))
        spread = np.unique(np.linspace(0, len(points) - 1, len(panels)).round().astype(int))
        for ax, p in zip(panels, [points[i] for i in spread]):  # the first, the last and evenly between
            sel = {**dict(zip(sweeps, p)), "rep": 0}
            ax.bar(
                x,
                ds["truth"].isel(sel, missing_dims="ignore").values,
                color="lightgray",
                label="truth",
                width=float(np.min(np.diff(x))) if len(x) > 1 else 1.0,
            )
            for e, est in enumerate(estimators):
                ax.plot(x, ds["estimate"].sel(estimator=est).isel(sel).values, color=_colour(e), label=est)
            if not numeric:
                ax.set_xticks(x, [str(v) for v in labels], rotation=90 if len(labels) > 8 else 0)
            ax.set_xlabel(coord_label(ds, dim))
            ax.set_ylabel("probability")
            ax.set_title(wrap_title(point_text(ds, dict(zip(sweeps, p))) or "all", 4.0, 12), fontsize="medium")
            ax.legend(fontsize="small")
        shown = f"{len(panels)} of {len(points)} sweep points, evenly spaced" if len(points) > len(panels) else ""
        lower.suptitle(", ".join(filter(None, ("estimates of repetition 0", shown))))
    return fig


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
    expected = {"kind": str, "sweep": str, "col": str, "row": str, "yscale": str, "rep": int, "robust": bool}
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
    yscale: str = "linear",
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
        Labels fixing sweep axes shown nowhere else (default their first label).
    rep
        The repetition a ``heatmap`` or ``bar`` shows (default 0).
    hue, col, row
        Dimensions (``metric``, ``estimator`` or sweep axes) drawn as colours, panel columns and panel
        rows of ``box`` and ``line`` (default: estimators as colours, metrics as columns).
    robust
        Heat maps: bound the colour scale by the 2nd and 98th percentiles (outliers do not flatten it).
    yscale
        ``linear`` or ``log`` (``box`` and ``line``).

    Raises
    ------
    LdpsimError
        One line naming the option and the fix, for a choice the results do not allow.
    """
    if kind not in KINDS:
        raise LdpsimError(f"unknown kind '{kind}'", field="--kind", hint=did_you_mean(kind, KINDS))
    if yscale not in ("linear", "log"):
        raise LdpsimError(f"unknown y scale '{yscale}'", field="--yscale", hint="choose linear or log")
    ds, scores = subset(ds, metrics, estimators)
    faceted = bool(hue) or col is not None or row is not None
    if kind in ("summary", "heatmap", "bar") and faceted:
        raise LdpsimError(
            f"a {kind} has a fixed layout", field="--hue/--col/--row", hint="use them with --kind box or line"
        )
    if robust and kind not in ("heatmap",):
        raise LdpsimError("--robust scales the colours of heat maps", field="--robust", hint="use --kind heatmap")
    if kind == "summary":
        if sweep is not None or at or rep is not None:
            raise LdpsimError(
                "the summary shows every sweep point and repetition 0",
                field="--kind",
                hint="use --sweep, --at and --rep with --kind box, line, heatmap or bar",
            )
        return summary_figure(ds, scores)
    if kind in ("box", "line"):
        if rep is not None:
            raise LdpsimError(f"a {kind} plot shows every repetition", field="--rep", hint="drop --rep")
        facets = choose_facets(ds, scores, sweep=sweep, at=at, hue=hue, col=col, row=row)
        if kind == "line" and facets.x is None:
            raise LdpsimError(
                "a line plot needs a sweep axis; this results file has none", field="--kind", hint="use --kind box"
            )
        return _faceted(ds, scores, facets, kind, yscale)
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


def _faceted(ds: xr.Dataset, scores: Mapping[str, xr.DataArray], facets: Facets, kind: str, yscale: str) -> Figure:
    """Box or line panels: ``facets.x`` on x, a colour per hue combination, panels by row and column."""
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
        figsize=(width * len(cols), 3.6 * len(rows) + 0.9 + (0.3 * len(hues) / 2 + 0.4 if facets.hue else 0)),
        squeeze=False,
        sharex=True,
        sharey=sharey,
        layout="constrained",
    )
    reps = ds.sizes["rep"]
    for (i, r), (j, c) in itertools.product(enumerate(rows), enumerate(cols)):
        ax = axes[i, j]
        panel = data.isel({dim: n for dim, n in ((facets.row, i), (facets.col, j)) if dim is not None})
        for k, h in enumerate(hues):
            series = panel.isel(dict(zip(facets.hue, h)))
            values = series.transpose(*([x] if x else []), "rep").values.reshape(len(x_values), reps)
            if np.isnan(values).all():
                continue  # a combination the scenario never computes
            colour = _colour(k)
            if kind == "box":
                _boxes(ax, list(values), k, len(hues), colour)
                continue
            mean, low, high = _mean_band(values)
            if lines:
                ax.plot(positions, mean, marker="o", ms=4, color=colour)
                ax.fill_between(positions, low, high, color=colour, alpha=0.2, linewidth=0)
            else:
                at_x = positions + (k - (len(hues) - 1) / 2) * min(0.8 / len(hues), 0.25)
                ax.errorbar(at_x, mean, yerr=[mean - low, high - mean], fmt="o", ms=5, capsize=3, color=colour)
        if not lines:
            ax.set_xticks(positions, [str(v) for v in x_values], rotation=30 if len(x_values) > 6 else 0)
            ax.set_xlim(-0.5, len(x_values) - 0.5)
        ax.set_yscale(yscale)
        parts = [_facet_text(dim, label) for dim, label in ((facets.row, r), (facets.col, c)) if dim is not None]
        ax.set_title(", ".join(parts), fontsize="medium")
        metric = c if facets.col == "metric" else r if facets.row == "metric" else None
        if metric is None and "metric" not in facets.shown:
            metric = names[0] if len(names) == 1 else None
        if j == 0 or facets.col == "metric":
            _ylabel(ax, score_label(scores[metric]) if metric else "score")
        if i == len(rows) - 1:
            ax.set_xlabel(coord_label(ds, x) if x else "")
    if len(hues) > 1 or facets.hue:
        maker = (
            (lambda k: Line2D([], [], color=_colour(k), marker="o"))
            if kind == "line"
            else (lambda k: Patch(facecolor=_colour(k), edgecolor="black"))
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
    shown = f"{reps} repetitions per box" if kind == "box" else f"mean over {reps} repetitions"
    if kind == "line":
        shown += f"; {'band' if lines else 'bars'}: ± 2 standard errors"
    room = fig.get_size_inches()[0]
    title = " | ".join(filter(None, (str(ds.attrs.get("title", "")), point_text(ds, facets.point), shown)))
    fig.suptitle(wrap_title(title, room))
    return fig


def _facet_text(dim: str, label: str) -> str:
    """A panel's title part: the label alone if it names itself ("P1=0.5", an estimator), else "eps = 2.0"."""
    return label if dim in ("metric", "estimator") or "=" in label else f"{dim} = {label}"


def _mean_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over repetitions (the last axis) and mean -+ 2 standard errors (the mean's ~95 % interval).

    The band is about the plotted mean, so curves whose bands do not overlap differ beyond Monte-Carlo
    noise; on a log axis a lower end <= 0 is drawn at the axis's bottom.
    """
    count = np.isfinite(values).sum(axis=1)
    with warnings.catch_warnings():  # an x position without any finite score stays NaN: a gap in the curve
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=1)
        spread = np.nanstd(values, axis=1, ddof=1) if values.shape[1] > 1 else np.zeros(len(values))
    se = np.where(count > 1, spread / np.sqrt(np.maximum(count, 1)), 0.0)
    return mean, mean - 2 * se, mean + 2 * se


def _scale(panels: Sequence[np.ndarray], robust: bool) -> tuple[float, float]:
    """One colour scale for all panels: 0 to the largest value, or the 2nd to 98th percentile if ``robust``."""
    finite = np.concatenate([np.ravel(p)[np.isfinite(np.ravel(p))] for p in panels])
    if finite.size == 0:
        return 0.0, 1.0
    if robust:
        low, high = np.percentile(finite, ROBUST_PERCENTILES)
        return float(low), float(high) if high > low else float(low) + 1.0
    return 0.0, float(finite.max()) or 1.0


def heatmap_figure(
    ds: xr.Dataset, *, at: Mapping[str, str] | None = None, rep: int | None = None, robust: bool = False
) -> Figure:
    """Truth, noisy reports (when the file has them) and each estimate as heat maps on one colour scale.

    ``robust`` bounds the scale by the 2nd and 98th percentiles of all panels' cells, so that one
    outlying estimate does not flatten the others; cells beyond it take the end colours.
    """
    plt = pyplot()
    if _product_attributes(ds) is not None or "row" not in ds["estimate"].dims:
        raise LdpsimError(
            f"a heatmap needs a grid domain; this results file's domain is {domain_kind(ds)}",
            field="--kind",
            hint="use --kind bar for 1-D domains and products of attributes (a panel per attribute's marginal)",
        )
    point, r = fixed_point(ds, at), choose_rep(ds, rep)
    where = {**point, "rep": r}
    panels = [("truth", ds["truth"].isel(where, missing_dims="ignore").values)]
    noisy = _noisy(ds, where)
    if noisy is not None:
        panels.append(("noisy", noisy))
    panels += [(est, ds["estimate"].sel(estimator=est).isel(where).values) for est in _names(ds, "estimator")]
    rows = -(-len(panels) // HEATMAP_COLUMNS)
    cols = -(-len(panels) // rows)  # balanced rows: six panels are 2 x 3, not 5 + 1
    aspect = ds.sizes["row"] / ds.sizes["col"]
    width = 3.0 * cols + 1.2
    fig, axes = plt.subplots(
        rows, cols, figsize=(width, 3.0 * aspect * rows + 1.2), squeeze=False, layout="constrained"
    )
    vmin, vmax = _scale([values for _, values in panels], robust)
    extent = _extent(ds)
    used = axes.ravel()[: len(panels)]
    for ax, (title, values) in zip(used, panels):
        image = ax.imshow(values, origin="lower", extent=extent, vmin=vmin, vmax=vmax, cmap="viridis")
        ax.set_title(title)
        ax.set_xlabel(coord_label(ds, "x") if extent else "column")
        ax.set_ylabel(coord_label(ds, "y") if extent else "row")
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    label = "probability" + (" (2-98 % percentile scale)" if robust else "")
    fig.colorbar(
        image, ax=list(used), label=label, fraction=0.02, pad=0.01, aspect=15, extend="both" if robust else "neither"
    )
    fig.suptitle(wrap_title(_title(ds, point, f"repetition {r}"), width))
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
    attributes = _product_attributes(ds)
    if attributes is not None:  # a product of attributes: a panel per attribute's marginal
        fig, axes = plt.subplots(
            1, len(attributes), figsize=(min(18.0, 4.2 * len(attributes)), 4.2), layout="constrained"
        )
        _marginal_panels(ds, list(np.atleast_1d(axes)), attributes, where)
        fig.suptitle(wrap_title(_title(ds, point, f"marginals, repetition {r}"), min(18.0, 4.2 * len(attributes))))
        return fig
    dim = str(ds["truth"].dims[-1])
    labels = ds[dim].values
    numeric = np.issubdtype(np.asarray(labels).dtype, np.number)
    x = labels.astype(float) if numeric else np.arange(len(labels))
    width = float(np.min(np.diff(x))) if len(x) > 1 else 1.0
    size = min(14.0, max(6.0, 0.12 * len(x) + 3))
    fig, ax = plt.subplots(figsize=(size, 4.2), layout="constrained")
    ax.bar(x, ds["truth"].isel(where, missing_dims="ignore").values, width=width, color="lightgray", label="truth")
    noisy = _noisy(ds, where)
    if noisy is not None:
        ax.bar(x, noisy, width=width, fill=False, edgecolor="dimgray", linewidth=0.8, label="noisy")
    for e, est in enumerate(_names(ds, "estimator")):
        values = ds["estimate"].sel(estimator=est).isel(where).values
        ax.plot(x, values, color=_colour(e), marker="." if len(x) <= 40 else None, label=est)
    if not numeric:
        ax.set_xticks(x, [str(v) for v in labels], rotation=90 if len(labels) > 8 else 0)
    ax.set_xlabel(coord_label(ds, dim))
    ax.set_ylabel("probability")
    handles, names = ax.get_legend_handles_labels()
    bars = [i for i, name in enumerate(names) if name in ("truth", "noisy")]  # bars first, as drawn
    order = bars + [i for i in range(len(names)) if i not in bars]
    ax.legend([handles[i] for i in order], [names[i] for i in order], fontsize="small")
    ax.set_title(wrap_title(_title(ds, point, f"repetition {r}"), size))
    return fig


def save_figure(fig: Figure, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Write ``fig`` atomically (the format follows the suffix) and close it; a reader never sees half an image."""
    path = check_output(path)
    try:
        with atomic_path(path, suffix=path.suffix) as tmp:  # the suffix tells matplotlib the format
            fig.savefig(tmp, dpi=dpi)
    except ValueError as exc:  # e.g. an unknown image format
        raise LdpsimError(str(exc), field="output", hint="use a .png, .pdf or .svg file name") from None
    except (OSError, RuntimeError) as exc:  # a full disk, a file size limit
        raise write_error(path, exc) from None
    finally:
        pyplot().close(fig)
    return path


def _names(ds: xr.Dataset, dim: str) -> list[str]:
    return [str(v) for v in ds[dim].values]


def _noisy(ds: xr.Dataset, where: Mapping[str, int]) -> np.ndarray | None:
    """The noisy distribution at a point, if the file has one there (NaN where it means nothing)."""
    if "noisy" not in ds:
        return None
    values = ds["noisy"].isel(where, missing_dims="ignore").values
    return None if np.all(np.isnan(values)) else values


def _extent(ds: xr.Dataset) -> list[float] | None:
    """Image extent in the grid's distance units, from the cell-centre coordinates."""
    if "x" not in ds.coords or "y" not in ds.coords:
        return None
    cell = 2 * float(ds["x"].values[0])
    return [0.0, cell * ds.sizes["col"], 0.0, cell * ds.sizes["row"]]


def _title(ds: xr.Dataset, point: Mapping[str, int], extra: str) -> str:
    return " | ".join(part for part in (str(ds.attrs.get("title", "")), point_text(ds, point), extra) if part)
