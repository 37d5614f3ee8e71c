"""Figures from a results dataset; each function returns the matplotlib Figure (the CLI saves it).

* ``summary``: error boxplots per sweep point and estimates of repetition 0 beside the truth;
* ``box``: a metric's spread over repetitions against one sweep axis, a box per estimator (001 Figs. 10-12);
* ``line``: its mean against the sweep axis with the interquartile range as a band;
* ``heatmap``: truth, noisy reports and each estimate on a grid, one colour scale (001 Fig. 9);
* ``bar``: truth and noisy reports as bars on a 1-D domain with the estimates over them (004 Fig. 1).

Sweep axes not on the x axis are fixed at their first label or at ``at``'s (``{"data": "uniform"}``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from ..base.atomic import atomic_path
from ..base.errors import LdpsimError, did_you_mean
from ..results.io import check_output, write_error
from ..results.scores import with_error
from .plot_options import (
    choose_axis,
    choose_rep,
    coord_label,
    domain_kind,
    fixed_point,
    metric_label,
    point_text,
    subset,
    sweep_axes,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_ESTIMATE_PANELS = 4
KINDS = ("summary", "box", "line", "heatmap", "bar")
#: heat map panels per row before wrapping (001 Fig. 9 has five)
HEATMAP_COLUMNS = 5


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _colour(e: int) -> str:
    colours = _pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    return colours[e % len(colours)]


def _boxes(ax, data: list[np.ndarray], e: int, n_estimators: int) -> None:
    """Estimator ``e``'s boxes, one per x position, side by side with the other estimators' (the papers' style)."""
    width = 0.8 / n_estimators
    box = ax.boxplot(
        data,
        positions=np.arange(len(data)) + (e - (n_estimators - 1) / 2) * width,
        widths=width * 0.9,
        patch_artist=True,
        manage_ticks=False,
        medianprops={"color": "black"},
    )
    for patch in box["boxes"]:
        patch.set_facecolor(_colour(e))


def summary_figure(ds: xr.Dataset):
    """One row of error boxplots (a panel per metric), one row of estimates vs truth (repetition 0).

    Boxes are grouped by sweep point and coloured by estimator, as in the
    papers' figures. For grids, the second row shows the truth and each
    estimator's estimate as heat maps for the first sweep point.
    """
    plt = _pyplot()
    sweeps = sweep_axes(ds)
    points = list(itertools.product(*(range(ds.sizes[d]) for d in sweeps)))
    metrics = [str(m) for m in ds["metric"].values]
    estimators = [str(e) for e in ds["estimator"].values]
    grid = "row" in ds["estimate"].dims
    bottom = (1 + len(estimators)) if grid else min(len(points), MAX_ESTIMATE_PANELS)
    cols = max(len(metrics), bottom)
    fig, axes = plt.subplots(2, cols, figsize=(4.2 * cols, 7.5), squeeze=False, constrained_layout=True)

    for m, metric in enumerate(metrics):
        ax = axes[0, m]
        for e, est in enumerate(estimators):
            data = [ds["error"].sel(metric=metric, estimator=est).isel(dict(zip(sweeps, p))).values for p in points]
            _boxes(ax, data, e, len(estimators))
            ax.plot([], [], "s", color=_colour(e), label=est)
        ax.set_xticks(
            np.arange(len(points)), [_label(ds, sweeps, p) for p in points], rotation=30 if len(points) > 4 else 0
        )
        ax.set_title(metric)
        ax.set_ylabel(metric_label(ds, metric))
        ax.legend(fontsize="small")
    for ax in axes[0, len(metrics) :]:
        ax.set_visible(False)

    if grid:
        first = dict(zip(sweeps, points[0]))
        panels = [("truth", ds["truth"].isel({**first, "rep": 0}, missing_dims="ignore"))]  # no round
        panels += [(est, ds["estimate"].sel(estimator=est).isel({**first, "rep": 0})) for est in estimators]
        vmax = max(float(p.max()) for _, p in panels)
        for ax, (title, values) in zip(axes[1], panels):
            ax.imshow(values.values, origin="lower", vmin=0, vmax=vmax, cmap="viridis")
            ax.set_title(title)
            ax.set_xlabel("col")
            ax.set_ylabel("row")
    else:
        dim = ds["truth"].dims[-1]
        labels = ds[dim].values
        numeric = np.issubdtype(np.asarray(labels).dtype, np.number)
        x = labels if numeric else np.arange(len(labels))
        for ax, p in zip(axes[1], points[:MAX_ESTIMATE_PANELS]):
            sel = {**dict(zip(sweeps, p)), "rep": 0}
            ax.bar(
                x,
                ds["truth"].isel(sel, missing_dims="ignore").values,  # the truth has no round
                color="lightgray",
                label="truth",
                width=np.min(np.diff(x)) if len(x) > 1 else 1,
            )
            for e, est in enumerate(estimators):
                ax.plot(x, ds["estimate"].sel(estimator=est).isel(sel).values, color=_colour(e), label=est)
            if not numeric:
                ax.set_xticks(x, [str(v) for v in labels], rotation=90 if len(labels) > 8 else 0)
            ax.set_xlabel(dim)
            ax.set_ylabel("probability")
            ax.set_title(f"rep 0, {_label(ds, sweeps, p)}" if sweeps else "rep 0")
            ax.legend(fontsize="small")
    for ax in axes[1, bottom:]:
        ax.set_visible(False)
    fig.suptitle(ds.attrs.get("title", ""))
    return fig


def _label(ds: xr.Dataset, sweeps: list[str], point: tuple[int, ...]) -> str:
    return ", ".join(f"{d}={ds[d].values[i]}" for d, i in zip(sweeps, point)) or "all"


def figure(
    ds: xr.Dataset,
    kind: str = "summary",
    *,
    metrics: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    sweep: str | None = None,
    at: Mapping[str, str] | None = None,
    rep: int | None = None,
) -> Figure:
    """The figure of ``kind`` for the chosen metrics and estimators (all of them by default)."""
    if kind not in KINDS:
        raise LdpsimError(f"unknown kind '{kind}'", field="--kind", hint=did_you_mean(kind, KINDS))
    ds = subset(with_error(ds), metrics, estimators)  # the scores stacked as error(metric, ...)
    if kind == "summary":
        if sweep is not None or at or rep is not None:
            raise LdpsimError(
                "the summary shows every sweep point and repetition 0",
                field="--kind",
                hint="use --sweep, --at and --rep with --kind box, line, heatmap or bar",
            )
        return summary_figure(ds)
    if kind in ("box", "line"):
        if rep is not None:
            raise LdpsimError(f"a {kind} plot shows every repetition", field="--rep", hint="drop --rep")
        return (box_figure if kind == "box" else line_figure)(ds, sweep=sweep, at=at)
    if sweep is not None:
        raise LdpsimError(f"a {kind} shows one sweep point", field="--sweep", hint="choose it with --at AXIS=LABEL")
    return (heatmap_figure if kind == "heatmap" else bar_figure)(ds, at=at, rep=rep)


def box_figure(ds: xr.Dataset, *, sweep: str | None = None, at: Mapping[str, str] | None = None) -> Figure:
    """A panel per metric: boxes of the error over repetitions per value of ``sweep``, one per estimator.

    Without a sweep axis each panel has one box per estimator.
    """
    from matplotlib.patches import Patch

    plt = _pyplot()
    axis = choose_axis(ds, sweep)
    point = fixed_point(ds, at, free=[axis] if axis else [])
    error = ds["error"].isel(point)
    metrics, estimators = _names(ds, "metric"), _names(ds, "estimator")
    labels = [str(v) for v in ds[axis].values] if axis else [""]
    fig, axes = plt.subplots(
        1,
        len(metrics),
        figsize=(max(4.5, 0.5 * len(labels) * len(estimators) + 2), 4.5),
        squeeze=False,
        constrained_layout=True,
    )
    for ax, metric in zip(axes[0], metrics):
        for e, est in enumerate(estimators):
            values = error.sel(metric=metric, estimator=est).transpose(*([axis] if axis else []), "rep").values
            data = [row[np.isfinite(row)] for row in values.reshape(len(labels), -1)]
            _boxes(ax, data, e, len(estimators))
        if axis:
            ax.set_xticks(np.arange(len(labels)), labels, rotation=30 if len(labels) > 6 else 0)
            ax.set_xlabel(coord_label(ds, axis))
        else:
            ax.set_xticks([])
        ax.set_title(metric)
        ax.set_ylabel(metric_label(ds, metric))
        handles = [Patch(facecolor=_colour(e), edgecolor="black", label=est) for e, est in enumerate(estimators)]
        ax.legend(handles=handles, fontsize="small")
    fig.suptitle(_title(ds, point, f"{ds.sizes['rep']} repetitions per box"))
    return fig


def line_figure(ds: xr.Dataset, *, sweep: str | None = None, at: Mapping[str, str] | None = None) -> Figure:
    """A panel per metric: the mean error over repetitions against ``sweep``, a line per estimator,
    with the interquartile range over repetitions as a band."""
    plt = _pyplot()
    axis = choose_axis(ds, sweep)
    if axis is None:
        raise LdpsimError(
            "a line plot needs a sweep axis; this results file has none", field="--kind", hint="use --kind box"
        )
    point = fixed_point(ds, at, free=[axis])
    error = ds["error"].isel(point)
    mean = error.mean("rep")
    low, high = error.quantile(0.25, dim="rep"), error.quantile(0.75, dim="rep")
    values = ds[axis].values
    numeric = np.issubdtype(values.dtype, np.number)
    x = values.astype(float) if numeric else np.arange(len(values))
    metrics, estimators = _names(ds, "metric"), _names(ds, "estimator")
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.8 * len(metrics), 4.2), squeeze=False, constrained_layout=True)
    for ax, metric in zip(axes[0], metrics):
        for e, est in enumerate(estimators):
            at_est = {"metric": metric, "estimator": est}
            ax.plot(x, mean.sel(at_est).values, marker="o", color=_colour(e), label=est)
            ax.fill_between(
                x, low.sel(at_est).values, high.sel(at_est).values, color=_colour(e), alpha=0.2, linewidth=0
            )
        if not numeric:
            ax.set_xticks(x, [str(v) for v in values])
        ax.set_xlabel(coord_label(ds, axis))
        ax.set_ylabel(metric_label(ds, metric))
        ax.set_title(metric)
        ax.legend(title="mean; band: 25-75 % quantiles", fontsize="small", title_fontsize="small")
    fig.suptitle(_title(ds, point, f"over {ds.sizes['rep']} repetitions"))
    return fig


def heatmap_figure(ds: xr.Dataset, *, at: Mapping[str, str] | None = None, rep: int | None = None) -> Figure:
    """Truth, noisy reports (when the file has them) and each estimate as heat maps on one colour scale."""
    plt = _pyplot()
    if "row" not in ds["estimate"].dims:
        raise LdpsimError(
            f"a heatmap needs a grid domain; this results file's domain is {domain_kind(ds)}",
            field="--kind",
            hint="use --kind bar for 1-D domains",
        )
    point, r = fixed_point(ds, at), choose_rep(ds, rep)
    where = {**point, "rep": r}
    panels = [("truth", ds["truth"].isel(where, missing_dims="ignore").values)]
    noisy = _noisy(ds, where)
    if noisy is not None:
        panels.append(("noisy", noisy))
    panels += [(est, ds["estimate"].sel(estimator=est).isel(where).values) for est in _names(ds, "estimator")]
    cols = min(len(panels), HEATMAP_COLUMNS)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.0 * cols + 1.2, 2.8 * rows + 0.8), squeeze=False, constrained_layout=True
    )
    vmax = max(float(np.nanmax(values)) for _, values in panels) or 1.0
    extent = _extent(ds)
    used = axes.ravel()[: len(panels)]
    for ax, (title, values) in zip(used, panels):
        image = ax.imshow(values, origin="lower", extent=extent, vmin=0, vmax=vmax, cmap="viridis")
        ax.set_title(title)
        ax.set_xlabel(coord_label(ds, "x") if extent else "column")
        ax.set_ylabel(coord_label(ds, "y") if extent else "row")
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    fig.colorbar(image, ax=list(used), label="probability", shrink=0.85)
    fig.suptitle(_title(ds, point, f"repetition {r}"))
    return fig


def bar_figure(ds: xr.Dataset, *, at: Mapping[str, str] | None = None, rep: int | None = None) -> Figure:
    """Truth (and noisy reports, when the file has them) as bars on a 1-D domain, the estimates as lines."""
    plt = _pyplot()
    if "row" in ds["estimate"].dims:
        raise LdpsimError(
            "a bar chart needs a 1-D domain (integers or categorical); this results file's domain is a grid",
            field="--kind",
            hint="use --kind heatmap for grids",
        )
    point, r = fixed_point(ds, at), choose_rep(ds, rep)
    where = {**point, "rep": r}
    dim = str(ds["truth"].dims[-1])
    labels = ds[dim].values
    numeric = np.issubdtype(np.asarray(labels).dtype, np.number)
    x = labels.astype(float) if numeric else np.arange(len(labels))
    width = float(np.min(np.diff(x))) if len(x) > 1 else 1.0
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.12 * len(x) + 3)), 4.2), constrained_layout=True)
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
    ax.set_title(_title(ds, point, f"repetition {r}"))
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
        _pyplot().close(fig)
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
