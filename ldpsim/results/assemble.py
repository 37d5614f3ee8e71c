"""Assembling task results into one self-describing xarray Dataset.

Every variable is one :class:`ldpsim.Variable` declaration (:mod:`ldpsim.results.variables`
for the core's, ``outputs`` on estimators and metrics for theirs), laid out by its dims
with ``<sweeps>`` one dimension per sweep axis in scenario order and ``<domain>`` the
domain's (``value``, or ``row, col`` for grids). The core's:

* one variable per metric, named by its label (``tv(estimator, <sweeps>, rep)``, ...), with the
  metric's ``long_name`` and ``units`` (:mod:`ldpsim.results.scores`); the declaration
  ``scores(metric, estimator, TASK)`` of :mod:`ldpsim.results.variables` is split this way
* ``estimate(estimator, <sweeps>, rep, <domain>)``
* ``truth(<sweeps>, rep, <domain>)``: the empirical distribution of the users' true values
* ``noisy(<sweeps>, rep, <domain>)``: the reports read as domain values (:mod:`ldpsim.results.noisy`),
  NaN where that means nothing; absent when it means nothing anywhere
* ``iterations``, ``loglik``, ``seconds``, ``converged``, ``gap``, ``kkt`` ``(estimator, <sweeps>, rep)``;
  coordinate ``stop_rule(estimator)`` names each estimator's stopping rule
* ``distinct_reports(<sweeps>, rep)``, ``users(<sweeps>)``

A run estimating after every round (``rounds = "every"``) adds ``round`` after ``rep`` to the
variables declared with ``ROUND`` (the scores, ``estimate``, ``iterations``, ...), coordinate 1..T.

Coordinates carry ``long_name`` and ``units`` (:mod:`ldpsim.results.labels`); ``seed(rep)`` names the
root seed each repetition drew from, so results of several seeds can be combined
(:func:`ldpsim.results.combine.merge_results`). The attributes (provenance) come from the caller.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload

import numpy as np
import xarray as xr

from ..estimation.estimator import Estimator
from ..model.domains import Domain, Grid, Product
from ..model.metric import Metric
from ..model.variables import DOMAIN, POINT, ROUND, TASK, Variable
from .labels import describe, metric_long_name, metric_units
from .scores import SCORE_ATTR
from .variables import PRIVACY_LEVELS


class SweepAxis(Protocol):
    """What the results need of a sweep axis."""

    @property
    def name(self) -> str: ...
    @property
    def paths(self) -> tuple[str, ...]: ...
    @property
    def labels(self) -> tuple[Any, ...]: ...


class TaskValues(Protocol):
    """What the results need of a task's result: its grid key and a value per variable."""

    @property
    def key(self) -> tuple[int, ...]: ...
    @property
    def values(self) -> Mapping[str, np.ndarray]: ...


@dataclass(frozen=True)
class Columns:
    """Task results column by column: every task has every variable in ``values``, of one shape and dtype."""

    #: (tasks, key length) the tasks' grid keys, in the results' order
    keys: np.ndarray
    #: each variable's values stacked on a first axis over the tasks
    values: Mapping[str, np.ndarray]


def columns(results: Sequence[TaskValues]) -> Columns | None:
    """The results column by column if they hold them so (a ``columns()`` method, as :class:`Batches` has),
    else None: then they are read result by result."""
    get = getattr(results, "columns", None)
    return get() if callable(get) else None


R = TypeVar("R", bound=TaskValues)


class LazyResults(Sequence[R]):
    """Task results made only when read: subclasses give their length and :meth:`_item` (one result, from an
    index in range), this gives indexing by ints (negative from the end) and slices."""

    def _item(self, i: int) -> R:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> R: ...
    @overload
    def __getitem__(self, index: slice) -> list[R]: ...
    def __getitem__(self, index: int | slice) -> R | list[R]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        return self._item(range(len(self))[index])  # IndexError out of range


class Batches(LazyResults[R]):
    """Task results kept in the batches they finished in: a sequence of the results, in that order.

    A batch a worker sent back holds one array per variable stacked over its tasks; :meth:`columns`
    concatenates those instead of stacking thousands of per-run values again, once for the
    checkpoint and once more for the assembly, and no per-run result is made unless one is read.
    """

    def __init__(self, batches: Iterable[Sequence[R]] = ()) -> None:
        self._batches: list[Sequence[R]] = []
        self._ends: list[int] = []  # the index after each batch's last result
        for batch in batches:
            self.add(batch)

    def add(self, batch: Sequence[R]) -> None:
        """Append a batch's results (not copied: a batch is not changed once finished)."""
        if len(batch):
            self._ends.append(len(self) + len(batch))
            self._batches.append(batch)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _item(self, i: int) -> R:
        b = bisect.bisect_right(self._ends, i)
        return self._batches[b][i - (self._ends[b - 1] if b else 0)]

    def __iter__(self) -> Iterator[R]:
        return itertools.chain.from_iterable(self._batches)

    def columns(self) -> Columns | None:
        """Every batch's columns concatenated, or None unless every batch has them, with the same variables
        of the same shapes and dtypes (then the values are what stacking the runs' own would give, bit for bit)."""
        parts = [columns(batch) for batch in self._batches]
        first = parts[0] if parts else None
        if first is None or any(
            part is None or part.keys.shape[1:] != first.keys.shape[1:] or part.values.keys() != first.values.keys()
            for part in parts
        ):
            return None
        found = [p for p in parts if p is not None]  # all of them (for the type checker)
        values = {}
        for name in first.values:
            arrays = [part.values[name] for part in found]
            if len({(a.shape[1:], a.dtype) for a in arrays}) != 1:
                return None
            values[name] = np.concatenate(arrays)
        return Columns(np.concatenate([part.keys for part in found]), values)


@dataclass(frozen=True)
class Layout:
    """The shape of a run's results: sweep axes, repetitions, domain, estimators, metrics, variables."""

    axes: Sequence[SweepAxis]
    repetitions: int
    domain: Domain
    estimators: Mapping[str, Estimator]
    metrics: Mapping[str, Metric]
    variables: Sequence[Variable]
    #: rounds after each of which tasks estimated (``round`` dimension); 0: no such dimension
    rounds: int = 0
    cohorts: Sequence[str] = ()  # the cohorts' names, the coordinates of a per-cohort variable

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(len(a.labels) for a in self.axes)

    def dims(self, var: Variable) -> tuple[str, ...]:
        """The variable's dimension names, placeholders expanded."""
        sweeps = [a.name for a in self.axes]
        expand = {
            TASK: [*sweeps, "rep"],
            POINT: sweeps,
            ROUND: ["round"] if self.rounds else [],
            DOMAIN: list(self.domain.dims),
        }
        return tuple(d for dim in var.dims for d in expand.get(dim, [dim]))

    def lead(self, var: Variable) -> tuple[int, ...]:
        """Sizes of the dimensions before the run's (metric, estimator)."""
        sizes = {"metric": len(self.metrics), "estimator": len(self.estimators)}
        out = []
        for dim in var.dims:
            if dim not in sizes:
                break
            out.append(sizes[dim])
        return tuple(out)


def assemble(
    layout: Layout, results: Sequence[TaskValues], *, attrs: Mapping[str, Any] | None = None, seed: int | None = None
) -> xr.Dataset:
    """Stack task results into one labelled dataset, each variable as it is declared.

    A variable whose dims start with ``metric`` becomes one variable per metric, named by the
    metric's label and carrying its long name and units. ``seed`` (the run's root seed) becomes
    the coordinate ``seed(rep)``.
    """
    domain = layout.domain
    data: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, str]]] = {}
    cols = columns(results)
    places = _places(results, cols)
    for var in layout.variables:
        array = _stack(layout, var, results, places, cols)
        if array is None:
            continue
        if DOMAIN in var.dims:
            array = domain.reshape(array)
        dims = layout.dims(var)
        if dims[:1] == ("metric",):
            for label, metric, score in zip(layout.metrics, layout.metrics.values(), array):
                data[label] = (dims[1:], score, _score_attrs(var, metric, domain))
        else:
            data[var.name] = (dims, array, var.attrs())

    first_estimators = layout.estimators.values()
    coords: dict[str, Any] = {a.name: np.asarray(a.labels) for a in layout.axes}
    coords.update(
        rep=np.arange(layout.repetitions),
        estimator=list(layout.estimators),
        estimator_name=("estimator", [type(e).name for e in first_estimators]),
        stop_rule=("estimator", [e.stopping_rule for e in first_estimators]),
        **domain.coords(),
    )
    if seed is not None:
        coords["seed"] = ("rep", np.full(layout.repetitions, seed, dtype=np.int64))
    if layout.rounds:
        coords["round"] = np.arange(1, layout.rounds + 1)
    if isinstance(domain, Product) and any("attribute" in dims for dims, _, _ in data.values()):
        coords["attribute"] = list(domain.names)  # a per-attribute output (a mean vector) on a product domain
    if any("cohort" in dims for dims, _, _ in data.values()):
        coords.update(cohort=list(layout.cohorts), privacy_level=list(PRIVACY_LEVELS))
    if isinstance(domain, Grid):
        coords["y"] = ("row", (np.arange(domain.rows) + 0.5) * domain.cell)
        coords["x"] = ("col", (np.arange(domain.cols) + 0.5) * domain.cell)
    ds = xr.Dataset(data, coords=coords)
    describe(ds, layout.axes, domain)
    ds.attrs = dict(attrs or {})
    return ds


def _score_attrs(var: Variable, metric: Metric, domain: Domain) -> dict[str, str]:
    """CF attributes of one metric's score: its long name, its units ("1": dimensionless), its plugin."""
    attrs = {k: v for k, v in var.attrs().items() if k not in ("long_name", "units")}
    units = metric_units(metric, domain) or ("1" if not metric.value_units() else "")
    return {
        "long_name": metric_long_name(metric),
        **({"units": units} if units else {}),
        **attrs,
        SCORE_ATTR: type(metric).name,
    }


def _places(results: Sequence[TaskValues], cols: Columns | None = None) -> np.ndarray | None:
    """The results' keys as index arrays, one row per key position (for :func:`_put_all`), or None if two
    results share a key or the keys differ in length (then each value is put in turn, the last one kept)."""
    if cols is not None:
        index = cols.keys.astype(np.intp)
        if not len(index):
            return None
        try:  # one integer per key (they are grid indices): sorting those is far cheaper than sorting rows
            distinct = len(np.unique(np.ravel_multi_index(tuple(index.T), tuple(index.max(axis=0) + 1))))
        except ValueError:  # a negative key, no key columns, or too many keys to number: compare the rows
            distinct = len(np.unique(index, axis=0))
        return index.T if distinct == len(index) else None
    keys = [res.key for res in results]
    if not keys or len(set(keys)) != len(keys) or len({len(key) for key in keys}) != 1:
        return None
    return np.array(keys, dtype=np.intp).T


def _stack(
    layout: Layout,
    var: Variable,
    results: Sequence[TaskValues],
    places: np.ndarray | None = None,
    cols: Columns | None = None,
) -> np.ndarray | None:
    """The variable over the whole grid, the fill value where no task gave it (None: optional and never given)."""
    lead = layout.lead(var)
    per_point = POINT in var.dims
    run = layout.grid if per_point else (*layout.grid, layout.repetitions)
    if layout.rounds and var.per_round:
        run = (*run, layout.rounds)
    item = _item_shape(layout, var, results, len(lead) + (1 if layout.rounds and var.per_round else 0), cols)
    if item is None:
        return None
    array = var.empty((*lead, *run, *item))
    if cols is not None and var.name not in cols.values:
        return array  # no task gave it (columns hold every variable any task has)
    front = (slice(None),) * len(lead)
    if places is not None and _put_all(array, len(lead), var.name, results, places, cols, per_point):
        return array
    for res in results:
        if var.name in res.values:
            key = res.key[:-1] if per_point else res.key
            index: tuple[slice | int, ...] = (*front, *key)
            array[index] = res.values[var.name]
    return array


def stack_values(results: Sequence[TaskValues], name: str) -> np.ndarray | None:
    """The values of ``name`` of every result stacked on a new first axis, or None unless every result has one
    and all have one shape (what ``np.stack`` would give then, bit for bit).

    Checkpoints, batches sent back by workers and the assembled results store a batch's values this
    way, one array per variable instead of one per run: ``np.stack`` over thousands of small arrays spends its time
    in Python (converting, shaping and expanding each), a tenth of a sweep of sub-millisecond
    runs. ``np.array`` makes the same array in C; its shape and dtype say whether it is the stack. (Results
    held column by column need none of this: :func:`columns`.)
    """
    return stack_arrays([result.values.get(name) for result in results])


def stack_arrays(values: Sequence[Any]) -> np.ndarray | None:
    """:func:`stack_values` of the values themselves."""
    first = values[0] if values else None
    if not isinstance(first, np.ndarray) or first.dtype.kind == "O":
        return None
    try:
        out = np.array(values)
    except (ValueError, TypeError):  # ragged, or something that is not an array
        return None
    # a value of another shape (or None) gives another shape, or object entries
    return out if out.shape == (len(values), *first.shape) and out.dtype.kind != "O" else None


def _put_all(
    array: np.ndarray,
    lead: int,
    name: str,
    results: Sequence[TaskValues],
    places: np.ndarray,
    cols: Columns | None = None,
    per_point: bool = False,
) -> bool:
    """Every result's value of ``name`` put at its place (:func:`_places`) in one fancy assignment; False (nothing
    put) unless each result gives one, of the shape its place has and of one dtype. A ``per_point`` variable
    takes each sweep point's last run's value.

    What the loop over the results does then, value for value (the same casts into ``array``'s dtype),
    without a Python assignment per run and variable: a twentieth of a sweep of 7,200 sub-millisecond
    runs. Values to broadcast, or of several dtypes (cast twice through ``np.array``), keep the loop.
    """
    column = cols.values.get(name) if cols is not None else None  # of one dtype: every value's own
    stacked = column if column is not None else stack_values(results, name)
    if stacked is not None and per_point:  # a value per sweep point: its last run's, as the loop leaves it
        if places.shape[0] < 2:
            return False  # no sweep axes: one value, the loop's
        places = places[:-1]
        _, last = np.unique(places[:, ::-1], axis=1, return_index=True)
        rows = places.shape[1] - 1 - last
        places, stacked = places[:, rows], stacked[rows]
    place = array.shape[:lead] + array.shape[lead + places.shape[0] :]
    if stacked is None or stacked.shape[1:] != place:
        return False
    dtype = stacked.dtype
    if column is None and any(getattr(res.values[name], "dtype", None) != dtype for res in results):
        return False  # promoted: cast twice, not once
    array[(*(slice(None),) * lead, *places)] = np.moveaxis(stacked, 0, lead)
    return True


def _item_shape(
    layout: Layout, var: Variable, results: Sequence[TaskValues], lead: int, cols: Columns | None = None
) -> tuple[int, ...] | None:
    if cols is not None and var.name in cols.values:
        return tuple(cols.values[var.name].shape[1 + lead :])
    for res in results if cols is None else ():  # columns hold every variable any task has
        if var.name in res.values:
            return tuple(np.shape(res.values[var.name])[lead:])
    if var.optional:
        return None
    if var.item_dims == (DOMAIN,):
        return (layout.domain.size,)
    if not var.item_dims:
        return ()
    raise ValueError(f"no task gave '{var.name}', so the size of its dims {var.item_dims} is unknown")
