"""The summary figure: each metric over every sweep point, then estimates beside the truth.

Up to :data:`MAX_BOX_POINTS` sweep points a metric is a box per point and estimator (the papers'
style); past it, its mean over repetitions as a line with a band of ± 2 standard errors, which stays
readable at 50 points. A rate with a nominal level (coverage) is always points with binomial
intervals and the level drawn. Several sweep axes are shown as groups: the last axis's labels as
ticks, the others' labels once per group beneath, never as a crowd of rotated "krr, 0.5, 300".
The estimate panels show the first, the middle and the last sweep point (of those ``at`` allows),
and the figure says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from .plot_options import coord_label, figure_title, fixed_point, metric_scores, point_text, score_label, sweep_axes
from .plot_panels import (
    boxes,
    distribution_bars,
    domain_values,
    extent,
    is_rate,
    marginal_panels,
    mean_band,
    names,
    nominal_level,
    nominal_line,
    product_attributes,
    rate_points,
    value_scale,
)
from .plot_style import colour, figure_size, pyplot, set_ylabel, title_points, wrap_title
from .plot_style import points as points_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: sweep points up to which a summary draws boxes; past it, the mean with a band (boxes crowd)
MAX_BOX_POINTS = 12
#: tick labels of one sweep axis shown at most; past it every k-th label
MAX_TICKS = 24


def estimate_points(ds: xr.Dataset, at: Mapping[str, str] | None) -> tuple[list[tuple[int, ...]], str]:
    """The sweep points whose estimates the summary shows, and the rule that chose them, in words.

    The first, the middle and the last of the sweep points (in scenario order) that ``at`` allows.
    """
    sweeps = sweep_axes(ds)
    fixed = fixed_point(ds, at, free=[a for a in sweeps if a not in (at or {})]) if at else {}
    points = [
        p
        for p in itertools.product(*(range(ds.sizes[d]) for d in sweeps))
        if all(p[sweeps.index(a)] == i for a, i in fixed.items())
    ]
    chosen = sorted({0, (len(points) - 1) // 2, len(points) - 1})
    where = f" with {point_text(ds, fixed)}" if fixed else ""
    if len(points) <= len(chosen):
        rule = f"every sweep point{where}" if len(points) > 1 else point_text(ds, fixed)
    else:
        rule = f"the first, middle and last of {len(points)} sweep points{where} (--at chooses others)"
    return [points[i] for i in chosen], rule


def compact(value: Any) -> str:
    """A tick's number, short: 300, 3k, 30k, 1.5M (whole thousands and millions), else as written."""
    number = float(value)
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(number) >= scale and (number / scale * 10).is_integer():
            return f"{number / scale:g}{suffix}"
    return str(value)


def point_axis(ax: Any, ds: xr.Dataset, sweeps: Sequence[str], points: Sequence[tuple[int, ...]], label: bool) -> None:
    """Ticks of the sweep points: the last axis's labels, and the other axes' labels once per group below them."""
    positions = np.arange(len(points))
    ax.set_xlim(-0.5, len(points) - 0.5)
    if not sweeps:
        ax.set_xticks(positions, ["all"] * len(points))
        return
    inner = sweeps[-1]
    ticks = [str(ds[inner].values[p[-1]]) for p in points]
    if len(sweeps) > 1 and np.issubdtype(ds[inner].dtype, np.number):
        ticks = [compact(ds[inner].values[p[-1]]) for p in points]  # 30k: the groups' ticks stay level
    outer = sweeps[:-1]
    step = -(-len(points) // MAX_TICKS) if not outer else 1
    # room per tick against the widest label (an average character ~0.6 em of the tick font)
    root = ax.figure
    while getattr(root, "figure", root) is not root:  # a subfigure's parents, up to the figure
        root = root.figure
    room = root.get_figwidth() * 0.8 / len(points) * step
    size = points_of("xtick.labelsize") * (0.83 if outer else 1.0)  # "small" when grouped
    needed = max(map(len, ticks)) * 0.6 * size / 72
    turn = 90 if outer and needed > room else 30 if needed > room else 0
    ax.set_xticks(
        positions[::step],
        ticks[::step],
        rotation=turn,
        ha="right" if turn == 30 else "center",
        fontsize="small" if outer else None,
    )
    text = coord_label(ds, inner)
    drop = (needed * 72 * 1.15 if turn == 90 else size) + 8  # points below the axis: under the tick labels
    if outer:
        groups = [(key, list(run)) for key, run in itertools.groupby(range(len(points)), key=lambda i: points[i][:-1])]
        for start, (key, members) in enumerate(groups):
            if start:
                ax.axvline(members[0] - 0.5, color="0.8", lw=0.8, zorder=0)
            words = ", ".join(str(ds[a].values[i]) for a, i in zip(outer, key))
            if len(words) * 0.6 * size / 72 > room * len(members) and len(outer) > 1:
                words = words.replace(", ", "\n")  # one label per line where the group is narrow
            ax.annotate(
                words,
                (float(np.mean(members)), 0.0),
                xycoords=("data", "axes fraction"),
                xytext=(0, -drop),
                textcoords="offset points",
                ha="center",
                va="top",
                fontsize="small",
                fontweight="bold",
            )
        ax.xaxis.labelpad = drop + 2 + size * (len(outer) - 1) * 1.2
        text += ", in groups by " + " and ".join(coord_label(ds, a) for a in outer)
    if label:
        ax.set_xlabel(text)


def summary_figure(
    ds: xr.Dataset,
    scores: Mapping[str, xr.DataArray] | None = None,
    *,
    at: Mapping[str, str] | None = None,
    yscale: str = "linear",
) -> Figure:
    """Each metric over every sweep point (a panel per metric), then estimates vs truth (repetition 0).

    Boxes are grouped by sweep point and coloured by estimator, as in the papers' figures; past
    :data:`MAX_BOX_POINTS` points the mean with a ± 2 standard error band. With many sweep points
    the metric panels are stacked, each as wide as the figure. For grids the second row shows the
    truth and each estimate as heat maps of the first sweep point on one colour scale; for 1-D
    domains the estimates at the first, middle and last sweep point (of those ``at`` allows).
    """
    plt = pyplot()
    scores = metric_scores(ds) if scores is None else scores
    sweeps = sweep_axes(ds)
    points = list(itertools.product(*(range(ds.sizes[d]) for d in sweeps)))
    metrics, estimators = list(scores), names(ds, "estimator")
    attributes = product_attributes(ds)
    grid = attributes is None and "row" in ds["estimate"].dims
    shown, rule = estimate_points(ds, at)
    if attributes is not None:  # a product of attributes: each attribute's marginal at the first sweep point
        bottom = len(attributes)
    else:
        bottom = (1 + len(estimators)) if grid else len(shown)
    many = len(points) > MAX_BOX_POINTS
    slots = len(points) * (1 if many else len(estimators))
    stacked = len(metrics) > 1 and slots > 12
    width = max(4.2 * bottom, 4.2 * len(metrics) if not stacked else 0, min(18.0, 3.5 + 0.16 * slots))
    top_height = 3.6 * (len(metrics) if stacked else 1) + (0.4 if len(sweeps) > 1 else 0)
    fig = plt.figure(figsize=figure_size(width, top_height + 3.6), layout="constrained")
    width = float(fig.get_size_inches()[0])
    upper, lower = fig.subfigures(2, 1, height_ratios=[top_height, 3.6])
    top = upper.subplots(len(metrics) if stacked else 1, 1 if stacked else len(metrics), squeeze=False).ravel()
    title = figure_title(ds)
    positions = np.arange(len(points))
    groups = [list(run) for _, run in itertools.groupby(range(len(points)), key=lambda i: points[i][:-1])]
    for ax, (metric, values) in zip(top, scores.items()):
        rate = is_rate(values)
        for e, est in enumerate(estimators):
            series = values.sel(estimator=est).transpose(*sweeps, "rep").values.reshape(len(points), -1)
            if rate:
                rate_points(ax, series, domain_values(ds), positions.astype(float), e, len(estimators))
            elif many:
                mean, low, high = mean_band(series)
                for members in groups:  # a line within each group, none across groups
                    ax.plot(members, mean[members], color=colour(e), marker="o" if len(members) <= 6 else None, ms=3)
                    ax.fill_between(members, low[members], high[members], color=colour(e), alpha=0.2, linewidth=0)
            else:
                boxes(ax, list(series), e, len(estimators))
            ax.plot([], [], "o" if rate or many else "s", color=colour(e), label=est)
        if rate:
            nominal_line(ax, nominal_level(ds))
        else:
            ax.set_yscale(yscale)
        point_axis(ax, ds, sweeps, points, label=not stacked or ax is top[-1])
        if metric.lower() not in str(ds.attrs.get("title", "")).lower().split():
            ax.set_title(metric)  # the metric's label; not when the figure's title says it already ("coverage")
        set_ylabel(ax, score_label(values))
    how = "pooled rate with its 95 % binomial interval" if any(map(is_rate, scores.values())) else ""
    how = ", ".join(filter(None, (how, "mean ± 2 standard errors" if many else "")))
    if len(estimators) > 1 or how:
        handles, labels = top[0].get_legend_handles_labels()
        top[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=None, borderaxespad=0)
    reps = ds.sizes["rep"]
    upper.suptitle(wrap_title(" | ".join(filter(None, (title, f"{reps} repetitions", how))), width, title_points()))

    panels = lower.subplots(1, bottom, squeeze=False)[0]
    first = dict(zip(sweeps, shown[0]))
    if attributes is not None:
        marginal_panels(ds, panels, attributes, {**first, "rep": 0})
        text = " | ".join(filter(None, ("marginals of repetition 0", point_text(ds, first))))
        lower.suptitle(wrap_title(text, width, title_points()))
    elif grid:
        maps = [("truth", ds["truth"].isel({**first, "rep": 0}, missing_dims="ignore").values)]
        maps += [(est, ds["estimate"].sel(estimator=est).isel({**first, "rep": 0}).values) for est in estimators]
        vmin, vmax = value_scale([values for _, values in maps], False, (2.0, 98.0))
        box = extent(ds)
        for ax, (name, cells) in zip(panels, maps):
            image = ax.imshow(cells, origin="lower", extent=box, vmin=vmin, vmax=vmax, cmap="viridis")
            ax.set_title(name)
            ax.set_xlabel(coord_label(ds, "x") if box else "column")
            ax.set_ylabel(coord_label(ds, "y") if box else "row")
        lower.colorbar(image, ax=list(panels), label="probability", fraction=0.02, pad=0.01, aspect=15)
        text = " | ".join(filter(None, ("repetition 0", point_text(ds, first))))
        lower.suptitle(wrap_title(text, width, title_points()))
    else:
        estimate_panels(ds, panels, shown, estimators, width)
        lower.suptitle(wrap_title(f"estimates of repetition 0 at {rule}", width, title_points()))
    return fig


def estimate_panels(
    ds: xr.Dataset, panels: Sequence[Any], shown: Sequence[tuple[int, ...]], estimators: list[str], width: float
) -> None:
    """The truth as bars and each estimator's estimate as a line, a panel per sweep point in ``shown``."""
    sweeps = sweep_axes(ds)
    panel_width = width / max(len(panels), 1)
    dim = str(ds["truth"].dims[-1])
    labels = ds[dim].values
    numeric = np.issubdtype(np.asarray(labels).dtype, np.number)
    x = labels.astype(float) if numeric else np.arange(len(labels))
    for n, (ax, p) in enumerate(zip(panels, shown)):
        sel = {**dict(zip(sweeps, p)), "rep": 0}
        truth = ds["truth"].isel(sel, missing_dims="ignore").values
        distribution_bars(ax, x, truth, "truth")
        for e, est in enumerate(estimators):
            ax.plot(x, ds["estimate"].sel(estimator=est).isel(sel).values, color=colour(e), label=est)
        if not numeric:
            ax.set_xticks(x, [str(v) for v in labels], rotation=90 if len(labels) > 8 else 0)
        ax.set_xlabel(coord_label(ds, dim))
        if n == 0:
            ax.set_ylabel("probability")
        text = point_text(ds, dict(zip(sweeps, p))).replace(", ", " | ") or "all"
        ax.set_title(wrap_title(text, 0.9 * panel_width, points_of("axes.titlesize")).replace(" | ", ", "))
    if len(panels):
        panels[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
