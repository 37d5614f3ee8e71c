"""Self-describing results: ``long_name`` and ``units`` on coordinates, as xarray and netCDF readers expect.

Plots take their axis labels from these, and so does ``DataArray.plot()`` for any xarray user.

A metric's long name is its class attribute ``long_name`` if it has one, else the first clause of its
docstring without paper references; its unit is its class attribute ``units``, where ``"distance"`` means
the domain's unit of distance (a grid's ``unit``; integers carry none).
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
    units = type(metric).units
    return distance_unit(domain) if units == "distance" else units


def distance_unit(domain: Domain) -> str:
    return str(getattr(domain, "unit", "") or "")


def axis_long_name(axis: SweepAxis) -> str:
    """What a sweep sets: the field's name ("eps" for cohorts.all.reports.0.eps, "users"), or its whole path
    when the last part names nothing by itself (an index such as "0", a letter such as the "p" of dataset.p),
    or the axis's name when it sets several fields."""
    last = {path.rsplit(".", 1)[-1] for path in axis.paths}
    if len(last) == 1:
        name = next(iter(last))
        if len(name) > 1 and not name.isdigit():
            return name
    return axis.paths[0] if len(axis.paths) == 1 else axis.name


def describe(ds: xr.Dataset, axes: Iterable[SweepAxis], domain: Domain) -> xr.Dataset:
    """Add long names and units to the coordinates of an assembled results dataset (in place); return it."""
    for axis in axes:
        long_name = axis_long_name(axis)
        attrs = {"long_name": long_name, "sweep_paths": ", ".join(axis.paths)}
        if long_name == "cell" and distance_unit(domain):
            attrs["units"] = distance_unit(domain)
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
        ds["value"].attrs.update(long_name="value")
    return ds
