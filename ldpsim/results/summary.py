"""Summaries of results: the mean and spread of each metric, and of each summary variable, per sweep point."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import xarray as xr

from .scores import score_names, sweep_dims

#: the attribute marking a per-estimate variable whose mean over repetitions the summary shows
SUMMARY_ATTR = "summary"


class ScoreWarning(UserWarning):
    """A metric scored some runs inf: their means and spreads are not finite numbers.

    Public so that an analysis expecting such scores can filter it by class
    (``warnings.filterwarnings("ignore", category=ldpsim.ScoreWarning)``).
    """


def summary_variables(ds: xr.Dataset) -> list[str]:
    """Per-estimate variables declared with ``summary=True`` (marked in the file), in file order."""
    return [
        str(name)
        for name, var in ds.data_vars.items()
        if var.attrs.get(SUMMARY_ATTR) == "mean" and var.dims[:1] == ("estimator",) and "rep" in var.dims
    ]


def summarize(ds: xr.Dataset) -> list[dict[str, Any]]:
    """Per sweep point and estimator: mean and sd of each metric over repetitions, and the mean of each summary variable."""
    sweeps = sweep_dims(ds)
    metrics = score_names(ds)
    for m in metrics:  # one line naming the metric, not numpy's bare "invalid value encountered in subtract"
        bad = int(np.isinf(ds[m].values).sum())  # nan is by design (an estimate without what a metric reads)
        if bad:
            warnings.warn(
                f"metric '{m}' is infinite in {bad} of {ds[m].size} scores; their rows show inf (mean) and nan (sd)",
                ScoreWarning,
                stacklevel=2,
            )
    mean = {m: ds[m].mean("rep") for m in metrics}
    several = ds.sizes["rep"] > 1
    with np.errstate(invalid="ignore"):  # inf - inf in the sd of an infinite score: nan, already warned about
        spread = {m: ds[m].std("rep", ddof=1) if several else xr.full_like(mean[m], np.nan) for m in metrics}
    extra = summary_variables(ds)
    means = {name: ds[name].mean("rep") for name in extra}
    rows = []
    dims = sweeps + (["round"] if "round" in ds.dims else [])  # a row per round of a run estimating after each

    def at(var: xr.DataArray, sel: dict[str, int], est: Any) -> float:
        return float(var.isel({d: i for d, i in sel.items() if d in var.dims}).sel(estimator=est))

    for idx in np.ndindex(*(ds.sizes[d] for d in dims)):
        sel = dict(zip(dims, idx))
        for est in ds["estimator"].values:
            row: dict[str, Any] = {d: ds[d].values[i] for d, i in sel.items()}
            row["estimator"] = str(est)
            for met in metrics:
                row[met] = (at(mean[met], sel, est), at(spread[met], sel, est))
            for name, avg in means.items():
                row[name] = at(avg, sel, est)
            rows.append(row)
    return rows
