"""Self-describing results: ``long_name`` and ``units`` on coordinates, as xarray and netCDF readers expect.

Plots take their axis labels from these, and so does ``DataArray.plot()`` for any xarray user.

A metric's long name is its class attribute ``long_name`` if it has one, else the first clause of its
docstring without paper references; its unit is its class attribute ``units``, where ``"distance"`` means
the domain's unit of distance (a grid's or integers' ``unit``, empty unless the scenario names one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

import xarray as xr

from ..model.domains import Domain
from ..model.metric import Metric

_REFERENCE = re.compile(r"\s*\([^()]*\d[^()]*\)")  # "(002 eq. 30)", "(1-D: ...)"


class SweepAxis(Protocol):
    """What labelling needs of a sweep axis: its name and the field paths it sets (a scenario's axes have both)."""

    @property
    def name(self) -> str: ...

    @property
    def paths(self) -> Sequence[str]: ...


def metric_long_name(metric: Metric) -> str:
    """A short human name: "Total variation distance" for tv."""
    explicit = getattr(type(metric), "long_name", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    text = type(metric).summary()
    while (shorter := _REFERENCE.sub("", text)) != text:
        text = shorter
    return text.split(":")[0].strip().rstrip(".") or metric.name


def metric_units(metric: Metric, domain: Domain) -> str:
    """The metric's unit on ``domain``: "distance" read as the domain's unit ("" where it has none)."""
    units = metric.value_units()
    if "distance" not in units:
        return units
    unit = distance_unit(domain)
    return units.replace("distance", unit) if unit else ""


def distance_unit(domain: Domain) -> str:
    return str(getattr(domain, "unit", "") or "")


#: long names of the fields sweeps set most, by the last part of their path: what a figure's axis says
FIELD_LONG_NAMES = {
    "eps": "privacy level ε",
    "users": "number of users",
    "mechanism": "mechanism",
    "dataset": "dataset",
    "rho": "correlation ρ",
    "rounds": "rounds",
    "window": "window",
    "prior": "prior",
}


def axis_long_name(axis: SweepAxis) -> str:
    """What a sweep axis shows, for a figure: the scenario's ``label``, else the long name of the field it sets
    (:data:`FIELD_LONG_NAMES`: "privacy level ε" for cohorts.all.reports.0.eps; "mechanism" for a whole
    report), else the axis's name. Never a field path: "cohorts.all.reports.0" says nothing on a figure."""
    explicit = str(getattr(axis, "label", "") or "")
    if explicit:
        return explicit
    parts = [path.split(".") for path in axis.paths]
    last = {p[-1] for p in parts}
    if len(last) == 1:
        name = next(iter(last))
        if name in FIELD_LONG_NAMES:
            return FIELD_LONG_NAMES[name]
        if name.isdigit() and all(len(p) > 1 and p[-2] == "reports" for p in parts):
            return "mechanism"  # a whole report: its mechanism and parameters
    return axis.name


def describe(ds: xr.Dataset, axes: Iterable[SweepAxis], domain: Domain) -> xr.Dataset:
    """Add long names and units to the coordinates of an assembled results dataset (in place); return it."""
    for axis in axes:
        long_name = axis_long_name(axis)
        attrs = {"long_name": long_name, "sweep_paths": ", ".join(axis.paths)}
        units = str(getattr(axis, "units", "") or "")
        if not units and {p.rsplit(".", 1)[-1] for p in axis.paths} == {"cell"}:
            units = distance_unit(domain)  # a grid's cell size, in the grid's unit
        if units:
            attrs["units"] = units
        ds[axis.name].attrs.update(attrs)
    ds["rep"].attrs.update(long_name="repetition")
    ds["estimator"].attrs.update(long_name="estimator")
    if "round" in ds.coords:
        ds["round"].attrs.update(long_name="rounds of reports so far")
    for name, long_name in (
        ("estimator_name", "registered name of the estimator plugin"),
        ("stop_rule", "stopping rule: delta (the paper's |L(t) - L(t-1)| < delta), kkt (certified MLE), none"),
    ):
        if name in ds.coords:
            ds[name].attrs.update(long_name=long_name)
    if "seed" in ds.coords:
        ds["seed"].attrs.update(long_name="root seed of the repetition's randomness")
    unit = distance_unit(domain)
    if domain.name == "grid":
        ds["row"].attrs.update(long_name="row")
        ds["col"].attrs.update(long_name="column")
        for name in ("y", "x"):
            if name in ds.coords:
                ds[name].attrs.update(long_name=name, description="cell centre", **({"units": unit} if unit else {}))
    elif "value" in ds.coords:
        ds["value"].attrs.update(long_name="value", **({"units": unit} if unit else {}))
    return ds
