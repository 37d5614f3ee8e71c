"""What the figures draw inside a panel: boxes, means with bands, rates with binomial intervals, marginals.

The coverage of intervals is a rate with few distinct values per repetition (a share of the domain's
values), so boxes of it say little: it is drawn as the pooled rate over repetitions with its binomial
(Wilson) interval, beside a line at the intervals' nominal level.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..results.marginals import marginals, product_of
from ..results.scores import SCORE_ATTR
from .plot_style import colour

#: metrics whose score is a rate to hold against a nominal level (by their plugin's name)
RATE_METRICS = ("coverage",)
#: z of the binomial interval drawn around a rate (95 %)
RATE_Z = 1.959963984540054


def is_rate(scores: xr.DataArray) -> bool:
    """Whether ``scores`` are a rate with a nominal level (the coverage of intervals)."""
    return str(scores.attrs.get(SCORE_ATTR, scores.name)) in RATE_METRICS


def domain_values(ds: xr.Dataset) -> int:
    """How many values the domain has (the trials of one repetition's coverage): the truth's dims after ``rep``
    (1 without a truth over a domain: a heavy-hitter run's scores are no rates)."""
    if "truth" not in ds:
        return 1
    dims = [str(d) for d in ds["truth"].dims]
    return int(np.prod([ds.sizes[d] for d in dims[dims.index("rep") + 1 :]]))


def nominal_level(ds: xr.Dataset) -> float | None:
    """The intervals' confidence level when every estimator in ``ds`` used the same one, else None."""
    if "confidence" not in ds:
        return None
    levels = np.unique(np.round(ds["confidence"].values[np.isfinite(ds["confidence"].values)], 9))
    return float(levels[0]) if levels.size == 1 else None


def boxes(ax: Any, data: Sequence[np.ndarray], e: int, n_hues: int, fill: str | None = None) -> None:
    """Hue ``e``'s boxes, one per x position, side by side with the other hues' (the papers' style)."""
    width = 0.8 / n_hues
    box = ax.boxplot(
        [d[np.isfinite(d)] for d in data],
        positions=np.arange(len(data)) + (e - (n_hues - 1) / 2) * width,
        widths=width * 0.9,
        patch_artist=True,
        manage_ticks=False,
        medianprops={"color": "black"},
    )
    for patch in box["boxes"]:
        patch.set_facecolor(fill or colour(e))


def mean_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def rate_interval(values: np.ndarray, trials: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pooled rate over repetitions (the last axis) and its Wilson 95 % interval.

    Each repetition's score is a share of ``trials`` values, so a position pools ``trials`` times its
    finite repetitions. The values of one repetition are not independent, so the interval is a floor
    on the rate's uncertainty, the same floor for every estimator.
    """
    finite = np.isfinite(values)
    n = finite.sum(axis=1) * trials
    hits = np.where(finite, values, 0.0).sum(axis=1) * trials
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = hits / n
        z2 = RATE_Z**2
        centre = (rate + z2 / (2 * n)) / (1 + z2 / n)
        half = RATE_Z * np.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return rate, np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def rate_points(ax: Any, values: np.ndarray, trials: int, positions: np.ndarray, k: int, n_hues: int) -> None:
    """Hue ``k``'s pooled rates as points with their binomial intervals, offset beside the other hues'."""
    rate, low, high = rate_interval(values, trials)
    at = positions + (k - (n_hues - 1) / 2) * min(0.8 / n_hues, 0.25)
    ax.errorbar(
        at,
        rate,
        yerr=[np.fmax(rate - low, 0), np.fmax(high - rate, 0)],
        fmt="o",
        ms=4,
        capsize=2,
        color=colour(k),
        lw=1,
    )


def nominal_line(ax: Any, level: float | None) -> None:
    """The intervals' nominal level as a labelled dashed line (the rate the points should sit on)."""
    if level is None:
        return
    ax.axhline(level, color="black", ls="--", lw=0.8, zorder=0)
    ax.annotate(
        f"nominal {100 * level:g} %",
        (0.0, level),
        xycoords=("axes fraction", "data"),
        xytext=(3, -2),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize="small",
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        zorder=5,
    )


def product_attributes(ds: xr.Dataset) -> list[tuple[str, list[str]]] | None:
    """Each attribute's name and value labels when the results are on a product domain, else None."""
    kind = json.loads(ds.attrs.get("domain", "{}")).get("kind") if isinstance(ds.attrs.get("domain"), str) else None
    if kind != "product":
        return None
    domain = product_of(ds)
    return [(name, part.labels()) for name, part in zip(domain.names, domain.parts)]


def names(ds: xr.Dataset, dim: str) -> list[str]:
    """The labels of ``dim`` as strings."""
    return [str(v) for v in ds[dim].values]


def marginal_panels(
    ds: xr.Dataset, axes: Sequence[Any], attributes: list[tuple[str, list[str]]], where: Mapping[str, int]
) -> None:
    """One panel per attribute: the true marginal as bars, each estimate's marginal as a line."""
    for ax, (name, labels) in zip(axes, attributes):
        x = np.arange(len(labels))
        truth = marginals(ds, name, variable="truth").isel(where, missing_dims="ignore").values.ravel()
        ax.bar(x, truth, color="lightgray", label="truth", width=0.8)
        for e, est in enumerate(names(ds, "estimator")):
            values = marginals(ds, name).sel(estimator=est).isel(where, missing_dims="ignore").values.ravel()
            ax.plot(x, values, color=colour(e), marker="." if len(x) <= 40 else None, label=est)
        ax.set_xticks(x, labels, rotation=90 if len(labels) > 6 or max(map(len, labels)) > 8 else 0, fontsize="small")
        ax.set_xlabel(name)
        ax.set_ylabel("probability")
        ax.legend(fontsize="small")


def value_scale(panels: Sequence[np.ndarray], robust: bool, percentiles: tuple[float, float]) -> tuple[float, float]:
    """One colour scale for all panels: 0 to the largest value, or between ``percentiles`` if ``robust``."""
    finite = np.concatenate([np.ravel(p)[np.isfinite(np.ravel(p))] for p in panels])
    if finite.size == 0:
        return 0.0, 1.0
    if robust:
        low, high = np.percentile(finite, percentiles)
        return float(low), float(high) if high > low else float(low) + 1.0
    return 0.0, float(finite.max()) or 1.0


def extent(ds: xr.Dataset) -> list[float] | None:
    """Image extent in the grid's distance units, from the cell-centre coordinates."""
    if "x" not in ds.coords or "y" not in ds.coords:
        return None
    cell = 2 * float(ds["x"].values[0])
    return [0.0, cell * ds.sizes["col"], 0.0, cell * ds.sizes["row"]]


def noisy_at(ds: xr.Dataset, where: Mapping[str, int]) -> np.ndarray | None:
    """The noisy distribution at a point, if the file has one there (NaN where it means nothing)."""
    if "noisy" not in ds:
        return None
    values = ds["noisy"].isel(where, missing_dims="ignore").values
    return None if np.all(np.isnan(values)) else values


#: domain values up to which a distribution is drawn as bars; past it as a filled step curve (a bar each is slow)
MAX_BARS = 256


def distribution_bars(ax: Any, x: np.ndarray, values: np.ndarray, label: str, *, outline: bool = False) -> None:
    """A distribution as bars (filled grey, or ``outline``-d for the noisy reports), as a step curve past :data:`MAX_BARS`."""
    if len(x) > MAX_BARS:
        if outline:
            ax.step(x, values, where="mid", color="dimgray", linewidth=0.8, label=label)
        else:
            ax.fill_between(x, values, step="mid", color="lightgray", linewidth=0, label=label)
        return
    width = float(np.min(np.diff(x))) if len(x) > 1 else 1.0
    if outline:
        ax.bar(x, values, width=width, fill=False, edgecolor="dimgray", linewidth=0.8, label=label)
    else:
        ax.bar(x, values, width=width, color="lightgray", label=label)
