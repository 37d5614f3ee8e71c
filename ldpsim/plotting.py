"""Figures from a results dataset: error distributions, and estimates beside the truth."""

from __future__ import annotations

import itertools

import numpy as np
import xarray as xr

MAX_ESTIMATE_PANELS = 4


def summary_figure(ds: xr.Dataset):
    """One row of error boxplots (a panel per metric), one row of estimates vs truth (repetition 0).

    Boxes are grouped by sweep point and coloured by estimator, as in the
    papers' figures. For grids, the second row shows the truth and each
    estimator's estimate as heat maps for the first sweep point.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    sweeps = [d for d in ds["error"].dims if d not in ("metric", "estimator", "rep")]
    points = list(itertools.product(*(range(ds.sizes[d]) for d in sweeps)))
    metrics = [str(m) for m in ds["metric"].values]
    estimators = [str(e) for e in ds["estimator"].values]
    grid = "row" in ds["estimate"].dims
    bottom = (1 + len(estimators)) if grid else min(len(points), MAX_ESTIMATE_PANELS)
    cols = max(len(metrics), bottom)
    fig, axes = plt.subplots(2, cols, figsize=(4.2 * cols, 7.5), squeeze=False, constrained_layout=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    width = 0.8 / len(estimators)
    for m, metric in enumerate(metrics):
        ax = axes[0, m]
        for e, est in enumerate(estimators):
            data = [ds["error"].sel(metric=metric, estimator=est).isel(dict(zip(sweeps, p))).values for p in points]
            pos = np.arange(len(points)) + (e - (len(estimators) - 1) / 2) * width
            box = ax.boxplot(
                data, positions=pos, widths=width * 0.9, patch_artist=True, manage_ticks=False, medianprops={"color": "black"}
            )
            for patch in box["boxes"]:
                patch.set_facecolor(colours[e % len(colours)])
            ax.plot([], [], "s", color=colours[e % len(colours)], label=est)
        ax.set_xticks(np.arange(len(points)), [_label(ds, sweeps, p) for p in points], rotation=30 if len(points) > 4 else 0)
        ax.set_title(metric)
        ax.set_ylabel("error")
        ax.legend(fontsize="small")
    for ax in axes[0, len(metrics) :]:
        ax.set_visible(False)

    if grid:
        first = dict(zip(sweeps, points[0]))
        panels = [("truth", ds["truth"].isel({**first, "rep": 0}))]
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
            ax.bar(x, ds["truth"].isel(sel).values, color="lightgray", label="truth", width=np.min(np.diff(x)) if len(x) > 1 else 1)
            for e, est in enumerate(estimators):
                ax.plot(x, ds["estimate"].sel(estimator=est).isel(sel).values, color=colours[e % len(colours)], label=est)
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
