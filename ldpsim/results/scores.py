"""The metrics' scores in a results dataset: one variable per metric, and the idiom to stack them.

Each metric's score is its own variable, named by the metric's label in the scenario
(``tv``, ``emd``, ...), with the CF attributes ``long_name`` and ``units`` (EMD on a grid in
``km``, TV dimensionless): one variable cannot carry units that differ between metrics. The
attribute :data:`SCORE_ATTR` marks a score and names the metric plugin that computed it.

:func:`scores` stacks them back along a ``metric`` dimension for analyses that compare metrics
(``ldpsim.scores(ds).sel(metric="tv")``); :func:`sweep_dims` names the sweep axes.
"""

from __future__ import annotations

import xarray as xr

from ..base.errors import LdpsimError

#: the attribute marking a metric's score variable; its value is the metric plugin's registered name
SCORE_ATTR = "ldpsim_metric"

#: the dimensions of a score besides the sweep axes
PER_SCORE = ("estimator", "rep", "round")  # a run that estimates after every round is still one run


def score_names(ds: xr.Dataset) -> list[str]:
    """The score variables of ``ds`` (one per metric), in the order the scenario lists the metrics."""
    return [str(name) for name, var in ds.data_vars.items() if SCORE_ATTR in var.attrs]


def scores(ds: xr.Dataset) -> xr.DataArray:
    """Every metric's score in one array ``(metric, estimator, <sweeps>, rep)``.

    Parameters
    ----------
    ds
        Results of :func:`ldpsim.run_scenario` or ``ldpsim run``.

    Returns
    -------
    xarray.DataArray
        Named ``score``, with the coordinate ``metric`` (the metrics' labels); the units differ
        between metrics, so the array has none: read them from ``ds[label].attrs["units"]``.

    Notes
    -----
    Scores are recognised by their :data:`SCORE_ATTR` attribute, which xarray's reductions drop
    (``ds.mean("rep")``): stack first, then reduce (``ldpsim.scores(ds).mean("rep")``).

    Raises
    ------
    LdpsimError
        If ``ds`` holds no metric score.

    Examples
    --------
    >>> ldpsim.scores(ds).sel(metric="tv").mean("rep").to_pandas()  # doctest: +SKIP
    """
    names = score_names(ds)
    if not names:
        raise LdpsimError("the dataset holds no metric score", hint="give results written by `ldpsim run`")
    array = ds[names].to_array("metric", name="score")
    array["metric"].attrs.update(long_name="metric")
    return array.assign_attrs(long_name="score")


def sweep_dims(ds: xr.Dataset) -> list[str]:
    """The sweep axes of a results dataset, in scenario order."""
    names = score_names(ds)
    if not names:
        raise LdpsimError("the dataset holds no metric score", hint="give results written by `ldpsim run`")
    return [str(d) for d in ds[names[0]].dims if d not in PER_SCORE]


def with_error(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the scores also stacked as ``error(metric, ...)``, each metric's ``metric_long_name``
    and ``metric_units`` as coordinates: the layout that figure code written for it reads."""
    if "error" in ds:
        return ds
    names = score_names(ds)
    out = ds.assign(error=scores(ds))
    return out.assign_coords(
        metric_long_name=("metric", [str(ds[n].attrs.get("long_name", n)) for n in names]),
        metric_units=("metric", [_shown_units(ds[n].attrs.get("units", "")) for n in names]),
    )


def _shown_units(units: object) -> str:
    """Units as a label shows them: none for the dimensionless ("1")."""
    return "" if units in ("1", None) else str(units)


def from_error_layout(ds: xr.Dataset) -> xr.Dataset:
    """Results written before scores had a variable each (one ``error(metric, ...)``), in today's layout.

    Each metric's slice becomes its variable with the ``metric_long_name`` and ``metric_units`` it had;
    files already in today's layout are returned as they are.
    """
    if "error" not in ds or "metric" not in ds["error"].dims:
        return ds
    error = ds["error"]
    out = ds.drop_vars(["error", "metric", *(c for c in ds.coords if str(c).startswith("metric_"))])
    for label in error["metric"].values:
        row = ds.sel(metric=label)
        units = str(row["metric_units"].values) if "metric_units" in ds.coords else ""
        attrs = {
            "long_name": str(row["metric_long_name"].values) if "metric_long_name" in ds.coords else str(label),
            **({"units": units or "1"} if units or "metric_units" in ds.coords else {}),
            SCORE_ATTR: str(row["metric_name"].values) if "metric_name" in ds.coords else str(label),
        }
        score = error.sel(metric=label, drop=True).drop_vars(
            [c for c in error.coords if str(c).startswith("metric_")], errors="ignore"
        )
        out[str(label)] = score.assign_attrs(attrs)
    return out
