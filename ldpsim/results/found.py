"""Results of heavy-hitter runs: the found items on a ``rank`` dimension, the scores of the top-k, the truth.

A protocol finds as many items as its rule keeps, which differs between protocols and runs: the
results hold them on a ``rank`` dimension as long as the longest list, each run's own length in
``found`` and the ranks past it filled (NaN frequencies, id 0). Each variable is declared once below
(:data:`FOUND_VARIABLES`); the scores are metric variables as in every results file (named by the
score, with :data:`~ldpsim.results.scores.SCORE_ATTR`), so ``ldpsim.scores``, ``show`` and ``plot``
read them as they read a frequency run's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..model.heavy_hitters import FoundItems
from ..model.variables import POINT, TASK, Variable
from .scores import SCORE_ATTR

#: the plugin name the scores' SCORE_ATTR records: the core computes them (:func:`top_k_score`)
SCORER = "top-k"

#: the scores of a run's found items against its true top items
SCORES: tuple[Variable, ...] = (
    Variable("f1", ("estimator", TASK), "F1 score of the found top-k", "1", source="metric", summary=True),
    Variable("precision", ("estimator", TASK), "precision of the found top-k", "1", source="metric"),
    Variable("recall", ("estimator", TASK), "recall of the found top-k", "1", source="metric"),
    Variable(
        "frequency_error",
        ("estimator", TASK),
        "mean absolute frequency error of the found top-k",
        "1",
        source="metric",
        description="over the scored found items, |estimate - true share| (0 for an item no user holds)",
    ),
)
#: everything else a heavy-hitter run stores
FOUND_VARIABLES: tuple[Variable, ...] = (
    *SCORES,
    Variable("found", ("estimator", TASK), "number of items found", dtype="int64", fill=0, summary=True),
    Variable(
        "item",
        ("estimator", TASK, "rank"),
        "found item (uint64 id of the open domain)",
        dtype="uint64",
        fill=0,
        description="ranks at and past `found` are fill (id 0): read item.where(rank < found)",
    ),
    Variable(
        "item_name",
        ("estimator", TASK, "rank"),
        "found item's string",
        dtype="object",
        fill="",
        optional=True,
        description="for values hashed from strings (a CSV column): the string whose hash a found id is, '' where no"
        " user's string has that id (a false positive)",
    ),
    Variable("frequency", ("estimator", TASK, "rank"), "estimated frequency of the found item", "1"),
    Variable(
        "upper",
        ("estimator", TASK, "rank"),
        "upper confidence bound of the found item's frequency",
        "1",
        description="NaN where the pruning rule (top-k) computes no bound",
    ),
    Variable("item_truth", ("estimator", TASK, "rank"), "true frequency of the found item", "1"),
    Variable("seconds", ("estimator", TASK), "search time (the server's find)", "s", summary=True),
    Variable(
        "simulation_seconds",
        ("estimator", TASK),
        "report time (the users' collect)",
        "s",
        description="drawing the protocol's reports from the run's values",
    ),
    Variable("top_item", (TASK, "top_rank"), "true top item (uint64 id)", dtype="uint64", fill=0, source="task"),
    Variable("top_frequency", (TASK, "top_rank"), "true frequency of the top item", "1", source="task"),
    Variable(
        "top_name",
        (TASK, "top_rank"),
        "true top item's string",
        dtype="object",
        fill="",
        source="task",
        optional=True,
        description="for values hashed from strings (a CSV column)",
    ),
    Variable("distinct_values", (TASK,), "distinct values the run's users hold", dtype="int64", fill=0, source="task"),
    Variable("users", (POINT,), "number of users", dtype="int64", fill=0, source="task"),
)


@dataclass(frozen=True)
class TopKScore:
    """Precision, recall and F1 of found items against the true top-k, and the found items' frequency error."""

    precision: float
    recall: float
    f1: float
    frequency_error: float


def true_frequencies(items: np.ndarray, truth_items: np.ndarray, truth_frequency: np.ndarray) -> np.ndarray:
    """The true frequency of each of ``items`` (0 for an item not among ``truth_items``, which are sorted)."""
    items = np.asarray(items, dtype=np.uint64)
    if truth_items.size == 0:
        return np.zeros(items.size)
    pos = np.minimum(np.searchsorted(truth_items, items), truth_items.size - 1)
    return np.where(truth_items[pos] == items, truth_frequency[pos], 0.0)


def top_k_score(
    found: np.ndarray,
    found_frequency: np.ndarray,
    true_items: np.ndarray,
    true_frequency: np.ndarray,
    k: int,
) -> TopKScore:
    """Score the ``k`` most frequent found items against the ``k`` truly most frequent ones.

    Parameters
    ----------
    found, found_frequency : numpy.ndarray
        Found items (uint64) and their estimated frequencies; only the ``k`` largest estimates count.
    true_items, true_frequency : numpy.ndarray
        The truth: distinct items and their frequencies (any order).
    k : int
        The size of the top sets.

    Returns
    -------
    TopKScore
        ``precision = |F & T| / |F|`` (1 when nothing was found: no false alarm), ``recall = |F & T| / |T|``,
        ``f1`` their harmonic mean (0 when both are 0), and ``frequency_error`` the mean absolute difference
        between every scored found item's estimate and its true frequency (0 for an item not in the truth;
        NaN when nothing was found).
    """
    order = np.argsort(-np.asarray(found_frequency, dtype=float), kind="stable")[:k]
    f_items = np.asarray(found, dtype=np.uint64)[order]
    f_freq = np.asarray(found_frequency, dtype=float)[order]
    t_order = np.argsort(-np.asarray(true_frequency, dtype=float), kind="stable")[:k]
    t_items = np.asarray(true_items, dtype=np.uint64)[t_order]
    hits = np.isin(f_items, t_items).sum()
    precision = float(hits / f_items.size) if f_items.size else 1.0
    recall = float(hits / t_items.size) if t_items.size else 1.0
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    sorter = np.argsort(true_items, kind="stable")
    truth = true_frequencies(
        f_items, np.asarray(true_items, dtype=np.uint64)[sorter], np.asarray(true_frequency)[sorter]
    )
    error = float(np.mean(np.abs(f_freq - truth))) if f_items.size else float("nan")
    return TopKScore(precision, recall, f1, error)


@dataclass
class FoundRun:
    """One run's outcome: per protocol label what it found, its score and times; the run's truth."""

    found: dict[str, FoundItems]
    scores: dict[str, TopKScore]
    item_truth: dict[str, np.ndarray]
    seconds: dict[str, float]
    simulation_seconds: dict[str, float]
    top_item: np.ndarray
    top_frequency: np.ndarray
    distinct_values: int
    names: dict[int, str] | None = None


def found_dataset(
    axes: Sequence[tuple[str, Sequence[object], Mapping[str, str]]],
    labels: Sequence[str],
    seeds: Sequence[int],
    users: np.ndarray,
    runs: Sequence[FoundRun],
    top: int,
) -> xr.Dataset:
    """The results dataset of a heavy-hitter scenario.

    Parameters
    ----------
    axes : sequence of tuple
        Each sweep axis's ``(name, labels, attrs)`` (attrs: its ``long_name`` and ``units``).
    labels : sequence of str
        The protocols' labels (the ``estimator`` coordinate).
    seeds : sequence of int
        The seed of each repetition (the ``seed`` coordinate along ``rep``).
    users : numpy.ndarray
        Users per sweep point (the grid's shape).
    runs : sequence of FoundRun
        Every run, grid points in order (the last axis fastest), repetitions innermost.
    top : int
        The size of the top sets (the ``top_rank`` dimension).

    Returns
    -------
    xarray.Dataset
        Every variable of :data:`FOUND_VARIABLES`.
    """
    shape = (*(len(a[1]) for a in axes), len(seeds))
    sweeps = [a[0] for a in axes]
    ranks = max([1, *(f.items.size for run in runs for f in run.found.values())])
    sizes = {"estimator": len(labels), "rank": ranks, "top_rank": top}

    def dims_of(var: Variable) -> list[str]:
        out: list[str] = []
        for d in var.dims:
            out += [*sweeps, "rep"] if d == TASK else sweeps if d == POINT else [d]
        return out

    named = any(run.names for run in runs)

    def names(run: FoundRun, items: np.ndarray) -> list[str]:
        return [(run.names or {}).get(int(i), "") for i in items] if named else []

    def per_protocol(run: FoundRun, label: str) -> dict[str, object]:
        found, score = run.found[label], run.scores[label]
        return {
            **{var.name: getattr(score, var.name) for var in SCORES},
            "found": found.items.size,
            "item": found.items,
            "item_name": names(run, found.items),
            "frequency": found.frequency,
            "upper": found.upper,
            "item_truth": run.item_truth[label],
            "seconds": run.seconds[label],
            "simulation_seconds": run.simulation_seconds[label],
        }

    # each run's values once, by variable name: a protocol's (per_protocol), then the run's own
    tables = [[per_protocol(run, label) for label in labels] for run in runs]
    run_tables = [
        {
            "top_item": run.top_item,
            "top_frequency": run.top_frequency,
            "top_name": names(run, run.top_item),
            "distinct_values": run.distinct_values,
        }
        for run in runs
    ]
    data: dict[str, xr.Variable] = {}
    for var in FOUND_VARIABLES:
        if var.optional and not named:
            continue
        if var.name == "users":
            array = np.asarray(users, dtype=var.dtype).reshape(shape[:-1])
            data[var.name] = xr.Variable(sweeps, array, _attrs(var))
            continue
        per_estimator = var.dims[0] == "estimator"
        tail = [sizes[d] for d in var.item_dims]
        array = np.full((len(labels) if per_estimator else 1, len(runs), *tail), var.fill, dtype=var.dtype)
        for r in range(len(runs)):
            for e, table in enumerate(tables[r] if per_estimator else [run_tables[r]]):
                got = np.asarray(table[var.name])
                if tail:
                    got = got[: tail[0]]
                    array[e, r, : got.size] = got
                else:
                    array[e, r] = got
        array = array.reshape((len(labels), *shape, *tail) if per_estimator else (*shape, *tail))
        data[var.name] = xr.Variable(dims_of(var), array, _attrs(var))
    coords = {name: (name, list(values), dict(attrs)) for name, values, attrs in axes}
    ds = xr.Dataset(
        data,
        coords={
            "estimator": ("estimator", list(labels)),
            "rep": ("rep", np.arange(len(seeds))),
            "seed": ("rep", np.asarray(seeds, dtype=np.int64)),
            "rank": ("rank", np.arange(ranks)),
            "top_rank": ("top_rank", np.arange(top)),
            **coords,
        },
    )
    ds["rank"].attrs.update(long_name="rank of a found item (0: the most frequent)")
    ds["top_rank"].attrs.update(long_name="rank of a true top item (0: the most frequent)")
    return ds


def _attrs(var: Variable) -> dict[str, str]:
    attrs = {"long_name": var.long_name}
    if var.units:
        attrs["units"] = var.units
    if var.description:
        attrs["description"] = var.description
    if var.source == "metric":
        attrs[SCORE_ATTR] = SCORER
    return attrs
