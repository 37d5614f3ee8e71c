"""What a plot shows, checked against a results dataset: metrics, estimators, sweep axes, points, labels.

Every choice a user can get wrong (an unknown metric, estimator, axis or label, a repetition out of
range) is refused with a one-line :class:`~ldpsim.errors.LdpsimError` naming the option and the fix.
Labels come from the dataset's metadata (``long_name``, ``units``; see :mod:`ldpsim.labels`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import xarray as xr

from ..base.errors import LdpsimError, did_you_mean

PER_TASK = ("metric", "estimator", "rep")


def sweep_axes(ds: xr.Dataset) -> list[str]:
    """The sweep dimensions, in scenario order."""
    return [str(d) for d in ds["error"].dims if d not in PER_TASK]


def domain_kind(ds: xr.Dataset) -> str:
    try:
        return str(json.loads(ds.attrs["domain"])["kind"])
    except (KeyError, ValueError, TypeError):
        return "grid" if "row" in ds["estimate"].dims else "integers"


def choose(names: Sequence[str] | None, available: Iterable[object], option: str) -> list[str]:
    """``names`` checked against ``available`` (all of them if None or empty)."""
    labels = [str(a) for a in available]
    if not names:
        return labels
    for name in names:
        if name not in labels:
            raise LdpsimError(f"'{name}' is not in this results file", field=option, hint=did_you_mean(name, labels))
    return list(dict.fromkeys(names))


def subset(ds: xr.Dataset, metrics: Sequence[str] | None, estimators: Sequence[str] | None) -> xr.Dataset:
    """The dataset restricted to the chosen metrics and estimators, in the order given."""
    return ds.sel(
        metric=choose(metrics, ds["metric"].values, "--metric"),
        estimator=choose(estimators, ds["estimator"].values, "--estimator"),
    )


def parse_at(texts: Iterable[str]) -> dict[str, str]:
    """``["eps=0.5", "data=binomial"]`` to ``{"eps": "0.5", "data": "binomial"}``."""
    at: dict[str, str] = {}
    for text in texts:
        axis, sep, label = text.partition("=")
        if not sep or not axis.strip() or not label.strip():
            raise LdpsimError(f"'{text}' is not AXIS=LABEL", field="--at", hint="write e.g. --at eps=0.5")
        at[axis.strip()] = label.strip()
    return at


def label_index(ds: xr.Dataset, axis: str, label: str) -> int:
    """Position of ``label`` on sweep ``axis``: equal as text, or as a number (``1`` finds 1.0)."""
    values = ds[axis].values
    texts = [str(v) for v in values]
    if label in texts:
        return texts.index(label)
    try:
        number = float(label)
    except ValueError:
        number = None
    if number is not None and np.issubdtype(values.dtype, np.number):
        close = np.flatnonzero(np.isclose(values.astype(float), number, rtol=1e-9, atol=0))
        if close.size:
            return int(close[0])
    raise LdpsimError(f"axis '{axis}' has no label '{label}'", field="--at", hint=did_you_mean(label, texts))


def fixed_point(ds: xr.Dataset, at: Mapping[str, str] | None, free: Sequence[str] = ()) -> dict[str, int]:
    """An index on every sweep axis except ``free``: the ``--at`` label, else the axis's first label."""
    sweeps = sweep_axes(ds)
    at = dict(at or {})
    for axis in at:
        if axis not in sweeps:
            raise LdpsimError(
                f"'{axis}' is not a sweep axis of this results file",
                field="--at",
                hint=did_you_mean(axis, sweeps) if sweeps else "this file has no sweep axes; drop --at",
            )
        if axis in free:
            raise LdpsimError(f"'{axis}' is the plot's x axis", field="--at", hint="fix only the other sweep axes")
    return {axis: label_index(ds, axis, at[axis]) if axis in at else 0 for axis in sweeps if axis not in free}


def choose_axis(ds: xr.Dataset, axis: str | None) -> str | None:
    """The sweep axis to put on x: ``axis`` if valid, else the first sweep axis (None if there is none)."""
    sweeps = sweep_axes(ds)
    if axis is None:
        return sweeps[0] if sweeps else None
    if axis not in sweeps:
        hint = did_you_mean(axis, sweeps) if sweeps else "this file has no sweep axes; drop --sweep"
        raise LdpsimError(f"'{axis}' is not a sweep axis of this results file", field="--sweep", hint=hint)
    return axis


def choose_rep(ds: xr.Dataset, rep: int | None) -> int:
    reps = ds.sizes["rep"]
    rep = 0 if rep is None else rep
    if not 0 <= rep < reps:
        raise LdpsimError(f"repetition {rep} does not exist", field="--rep", hint=f"choose 0..{reps - 1}")
    return rep


def with_units(name: str, units: object) -> str:
    return f"{name} ({units})" if units not in (None, "") else name


def coord_label(ds: xr.Dataset, name: str) -> str:
    """``long_name (units)`` of a coordinate, or its name."""
    attrs = ds[name].attrs
    return with_units(str(attrs.get("long_name") or name), attrs.get("units"))


def metric_label(ds: xr.Dataset, metric: str) -> str:
    """The metric's long name and unit, e.g. "Earth mover's distance (km)"; its name in older files."""
    if "metric_long_name" not in ds.coords:
        return metric
    row = ds.sel(metric=metric)
    units = str(row["metric_units"].values) if "metric_units" in ds.coords else ""
    return with_units(str(row["metric_long_name"].values), units)


def point_text(ds: xr.Dataset, point: Mapping[str, int]) -> str:
    """``eps=0.5, data=binomial``: the sweep labels of a point."""
    return ", ".join(f"{axis}={ds[axis].values[i]}" for axis, i in point.items())
