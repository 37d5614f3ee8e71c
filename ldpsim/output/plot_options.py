"""What a plot shows, checked against a results dataset: metrics, estimators, sweep axes, points, labels.

Every choice a user can get wrong (an unknown metric, estimator, axis or label, a repetition out of
range) is refused with a one-line :class:`~ldpsim.errors.LdpsimError` naming the option and the fix.
Labels come from the dataset's metadata (``long_name``, ``units``; see :mod:`ldpsim.labels`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from ..base.errors import LdpsimError, did_you_mean


def metric_scores(ds: xr.Dataset) -> dict[str, xr.DataArray]:
    """Each metric's scores by name (dimensions: the sweep axes, ``estimator``, ``rep``).

    The one place that knows how a results file stores the scores (one variable per metric, see
    :mod:`ldpsim.results.scores`). Each array's ``long_name`` and ``units`` attributes label it; the CF
    unit "1" of a dimensionless score is not printed.
    """
    from ..results.scores import SCORE_ATTR, score_names

    scores = {}
    for metric in score_names(ds):
        row = ds[metric].copy()
        units = str(row.attrs.get("units", ""))
        long_name = str(row.attrs.get("long_name", metric))
        row.attrs = {"long_name": long_name, "units": units} if units and units != "1" else {"long_name": long_name}
        row.attrs[SCORE_ATTR] = str(ds[metric].attrs.get(SCORE_ATTR, metric))  # the plugin: a rate is drawn as one
        scores[metric] = row
    return scores


def sweep_axes(ds: xr.Dataset) -> list[str]:
    """The sweep dimensions, in scenario order (a score's dims besides estimator and rep), then ``round``."""
    from ..results.scores import sweep_dims

    # a run that estimates after every round has the round as one more axis of its scores
    return sweep_dims(ds) + (["round"] if "round" in ds.dims else [])


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


def subset(
    ds: xr.Dataset, metrics: Sequence[str] | None, estimators: Sequence[str] | None
) -> tuple[xr.Dataset, dict[str, xr.DataArray]]:
    """The dataset restricted to the chosen estimators, and the chosen metrics' scores, in the order given."""
    chosen = choose(estimators, ds["estimator"].values, "--estimator")
    ds = ds.sel(estimator=chosen)
    scores = metric_scores(ds)
    return ds, {m: scores[m] for m in choose(metrics, scores, "--metric")}


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


@dataclass(frozen=True)
class Facets:
    """How a box or line figure lays out its dimensions (``metric``, ``estimator``, sweep axes)."""

    x: str | None
    hue: tuple[str, ...] = ()
    col: str | None = None
    row: str | None = None
    #: an index on every sweep axis shown nowhere
    point: dict[str, int] = field(default_factory=dict)

    @property
    def shown(self) -> tuple[str, ...]:
        return tuple(d for d in (self.x, *self.hue, self.col, self.row) if d is not None)


def choose_facets(
    ds: xr.Dataset,
    scores: Mapping[str, xr.DataArray],
    *,
    sweep: str | None = None,
    at: Mapping[str, str] | None = None,
    hue: Sequence[str] | None = None,
    col: str | None = None,
    row: str | None = None,
) -> Facets:
    """The layout of a box or line figure, checked against the results.

    By default the x axis is the first sweep axis placed nowhere else, estimators are the hue and
    metrics the columns. A metric or estimator dimension of
    more than one label that the options put nowhere goes to the rows, or else joins the hue, so
    that no panel mixes scores of different things.
    """
    placed = {*(hue or []), col, row}
    free = [d for d in sweep_axes(ds) if d not in placed]
    x = choose_axis(ds, sweep) if sweep is not None or not free else free[0]
    dims = ["metric", "estimator", *sweep_axes(ds)]
    sizes = {"metric": len(scores), "estimator": ds.sizes["estimator"], **{d: ds.sizes[d] for d in sweep_axes(ds)}}
    given = list(hue or [])
    used: list[str] = [x] if x else []
    for option, names in (("--hue", given), ("--col", [col] if col else []), ("--row", [row] if row else [])):
        for name in names:
            if name not in dims:
                raise LdpsimError(
                    f"'{name}' is not a dimension of this results file",
                    field=option,
                    hint=did_you_mean(name, dims) if did_you_mean(name, dims) else "choose " + ", ".join(dims),
                )
            if name in used:
                where = "the x axis" if name == x else "shown already"
                raise LdpsimError(f"'{name}' is {where}", field=option, hint="give each dimension one place")
            used.append(name)
    if not given and "estimator" not in used:
        given = ["estimator"]
        used.append("estimator")
    if col is None and "metric" not in used and row != "metric":
        col = "metric"
        used.append("metric")
    for dim in ("metric", "estimator"):
        if dim not in used and sizes[dim] > 1:
            if row is None:
                row = dim
            else:
                given.append(dim)
            used.append(dim)
    point = fixed_point(ds, at, free=[d for d in used if d not in ("metric", "estimator")])
    return Facets(x=x, hue=tuple(given), col=col, row=row, point=point)


def choose_rep(ds: xr.Dataset, rep: int | None) -> int:
    reps = ds.sizes["rep"]
    rep = 0 if rep is None else rep
    if not 0 <= rep < reps:
        raise LdpsimError(f"repetition {rep} does not exist", field="--rep", hint=f"choose 0..{reps - 1}")
    return rep


def with_units(name: str, units: object) -> str:
    return f"{name} ({units})" if units not in (None, "") else name


def coord_label(ds: xr.Dataset, name: str) -> str:
    """A coordinate's long name and unit, e.g. "number of users" or "cell (km)": what a figure's axis says.

    The scenario's ``label``/``units`` of a sweep axis, else the field's long name (:mod:`ldpsim.results.labels`);
    never a field path (results files written before labels existed stored one: their axis's name instead).
    """
    attrs = ds[name].attrs
    long_name = str(attrs.get("long_name") or name)
    if "." in long_name and long_name in str(attrs.get("sweep_paths", "")).split(", "):
        long_name = name  # an older file's field path
    return with_units(long_name, attrs.get("units"))


def score_label(scores: xr.DataArray) -> str:
    """A metric's long name and unit, e.g. "Earth mover's distance (km)" (see :func:`metric_scores`)."""
    return with_units(str(scores.attrs.get("long_name") or scores.name), scores.attrs.get("units"))


def point_text(ds: xr.Dataset, point: Mapping[str, int]) -> str:
    """``eps=0.5, data=binomial``: the sweep labels of a point."""
    return ", ".join(f"{axis}={ds[axis].values[i]}" for axis, i in point.items())


def fixed_settings(ds: xr.Dataset) -> str:
    """What the run held fixed, for a title: "geometric, ε = 0.1, n = 100000, values 0..99".

    Read from the results' flattened attributes, which hold the scenario's fields that no sweep sets:
    the mechanism and eps when every report shares them, the users, and the domain.
    """
    attrs = ds.attrs
    parts: list[str] = []
    mechanisms = {str(v) for k, v in attrs.items() if k.startswith("cohorts.") and k.endswith(".mechanism")}
    if len(mechanisms) == 1:
        parts.append(mechanisms.pop())
    eps = {f"{float(v):g}" for k, v in attrs.items() if k.startswith("cohorts.") and k.endswith(".eps")}
    if len(eps) == 1:
        parts.append(f"ε = {eps.pop()}")
    if "users" in attrs:
        parts.append(f"n = {int(attrs['users']):,}")
    kind = attrs.get("domain.kind")
    if kind == "integers":
        parts.append(f"values {attrs.get('domain.low')}..{attrs.get('domain.high')}")
    elif kind == "grid":
        unit = f" {attrs['domain.unit']}" if attrs.get("domain.unit") else ""
        parts.append(
            f"{attrs.get('domain.rows')} × {attrs.get('domain.cols')} cells of {attrs.get('domain.cell')}{unit}"
        )
    elif "value" in ds.dims:
        parts.append(f"{ds.sizes['value']} values")
    return ", ".join(parts)


def figure_title(ds: xr.Dataset, *parts: str) -> str:
    """The scenario's name, its fixed settings and ``parts``, joined by " | " (:func:`wrap_title` breaks there)."""
    return " | ".join(p for p in (str(ds.attrs.get("title", "")), fixed_settings(ds), *parts) if p)
