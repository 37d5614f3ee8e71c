"""Summaries of results: the mean and spread of each metric, and of each summary variable, per sweep point."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

#: the attribute marking a per-estimate variable whose mean over repetitions the summary shows
SUMMARY_ATTR = "summary"


def summary_variables(ds: xr.Dataset) -> list[str]:
    """Per-estimate variables declared with ``summary=True`` (marked in the file), in file order."""
    return [
        str(name)
        for name, var in ds.data_vars.items()
        if var.attrs.get(SUMMARY_ATTR) == "mean" and var.dims[:1] == ("estimator",) and "rep" in var.dims
    ]


def summarize(ds: xr.Dataset) -> list[dict[str, Any]]:
    """Per sweep point and estimator: mean and sd of each metric over repetitions, and the mean of each summary variable."""
    sweeps = [str(d) for d in ds["error"].dims if d not in ("metric", "estimator", "rep")]
    mean = ds["error"].mean("rep")
    spread = ds["error"].std("rep", ddof=1) if ds.sizes["rep"] > 1 else xr.zeros_like(mean) * np.nan
    extra = summary_variables(ds)
    means = {name: ds[name].mean("rep") for name in extra}
    rows = []
    for idx in np.ndindex(*(ds.sizes[d] for d in sweeps)):
        sel = dict(zip(sweeps, idx))
        for est in ds["estimator"].values:
            row: dict[str, Any] = {d: ds[d].values[i] for d, i in sel.items()}
            row["estimator"] = str(est)
            for met in ds["metric"].values:
                at = {"estimator": est, "metric": met}
                row[str(met)] = (float(mean.isel(sel).sel(at)), float(spread.isel(sel).sel(at)))
            for name, avg in means.items():
                row[name] = float(avg.isel(sel).sel(estimator=est))
            rows.append(row)
    return rows
