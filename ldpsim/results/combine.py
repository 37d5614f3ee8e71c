"""Combining results files: the repetitions of one scenario run with several seeds, as one dataset.

Every repetition carries the root seed it drew from (coordinate ``seed(rep)``), so repetitions
of several runs can sit side by side; after a merge ``seed_rep(rep)`` keeps the index each was
drawn with, so ``ldpsim check estimate`` regenerates every one of them. Files combine only when
they hold the same experiment: the same resolved scenario apart from its seed and number of
repetitions, the same code (``code_sha256``), the same sweep points, estimators and metrics, and
no repetition twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import xarray as xr

from ..base.errors import LdpsimError
from .scores import score_names

#: scenario fields that may differ between the files of a merge
_FREE = ("seed", "repetitions")

_HINT = "merge only results of one scenario run with different seeds (or repetitions) by the same code"


def merge_results(datasets: Sequence[xr.Dataset], names: Sequence[str] | None = None) -> xr.Dataset:
    """The repetitions of several results of one scenario, as one dataset along ``rep``.

    Parameters
    ----------
    datasets
        Results (:func:`ldpsim.run_scenario`, or files opened with :func:`ldpsim.open_results`).
    names
        What to call each in errors and in the ``history`` attribute (file names); default
        ``results 1``, ``results 2``, ...

    Returns
    -------
    xarray.Dataset
        ``rep`` renumbered from 0, ``seed(rep)`` and ``seed_rep(rep)`` naming each repetition's
        seed and index under it; the attributes the inputs share, ``repetitions`` (the total),
        ``wall_seconds`` (the sum) and a ``history`` line. The resolved scenario loses its seed.

    Raises
    ------
    LdpsimError
        On the first difference that makes the results incomparable, naming the file and the field.
    """
    if len(datasets) < 2:
        raise LdpsimError("give at least two results to merge", hint=_HINT)
    names = list(names) if names is not None else [f"results {i + 1}" for i in range(len(datasets))]
    first = datasets[0]
    for ds, name in zip(datasets[1:], names[1:]):
        _check_compatible(first, ds, names[0], name)
    parts = [_with_runs(ds, name) for ds, name in zip(datasets, names)]
    seen: set[tuple[int, int]] = set()
    for part, name in zip(parts, names):
        for seed, rep in zip(part["seed"].values, part["seed_rep"].values):
            if (int(seed), int(rep)) in seen:
                raise LdpsimError(
                    f"{name} repeats repetition {rep} of seed {seed}, which an earlier file holds",
                    hint="merge results of different seeds; the same run twice would count twice",
                )
            seen.add((int(seed), int(rep)))
    try:
        merged = xr.concat(parts, "rep", data_vars="minimal", coords="minimal", combine_attrs="drop_conflicts")
    except (ValueError, xr.MergeError) as exc:
        raise LdpsimError(f"the results cannot be combined ({exc})", hint=_HINT) from None
    merged = merged.assign_coords(rep=np.arange(merged.sizes["rep"]))
    merged["rep"].attrs.update(first["rep"].attrs)
    merged["seed_rep"].attrs.update(long_name="repetition index under its seed")
    merged.attrs.update(_merged_attrs(datasets, names))
    return merged


def repetition_seeds(ds: xr.Dataset, name: str = "the results file") -> tuple[np.ndarray, np.ndarray]:
    """``(seed, seed_rep)`` of every repetition of ``ds``, as int64 arrays: the root seed each was drawn
    from and its index under it (older single-seed files record one ``seed`` attribute and no ``seed_rep``).

    Raises
    ------
    LdpsimError
        If a seed or index is not an integer in 0..2^63 - 1, or ``ds`` has no ``rep`` dimension.
    """
    if "rep" not in ds.dims:
        raise LdpsimError(f"{name} has no repetitions (dimension rep)", hint="give files written by `ldpsim run`")
    n = ds.sizes["rep"]
    seeds = ds["seed"].values if "seed" in ds.coords else np.full(n, ds.attrs.get("seed", 0), dtype=object)
    reps = ds["seed_rep"].values if "seed_rep" in ds.coords else ds["rep"].values
    return _indices(seeds, n, name, "seed"), _indices(reps, n, name, "repetition index")


def _indices(values: Any, n: int, name: str, what: str) -> np.ndarray:
    """``values`` as n int64s in 0..2^63 - 1, or a one-line refusal: they are data, not to be trusted."""
    flat = np.asarray(values, dtype=object).ravel()
    ok = flat.size == n and all(
        isinstance(v, int | np.integer | float | np.floating) and not isinstance(v, bool) and float(v).is_integer()
        for v in flat
    )
    as_ints = [int(v) for v in flat] if ok else []
    if not ok or not all(0 <= v < 2**63 for v in as_ints):
        raise LdpsimError(
            f"{name} records a {what} that is not an integer in 0..2^63-1 for each repetition",
            hint="give files written by `ldpsim run`",
        )
    return np.array(as_ints, dtype=np.int64)


def _with_runs(ds: xr.Dataset, name: str) -> xr.Dataset:
    """``ds`` with ``seed(rep)`` and ``seed_rep(rep)`` (older single-seed files have neither)."""
    seeds, reps = repetition_seeds(ds, name)
    return ds.assign_coords(seed=("rep", seeds), seed_rep=("rep", reps))


def _scenario(ds: xr.Dataset, name: str) -> dict[str, Any]:
    try:
        doc = json.loads(ds.attrs["resolved_scenario"])
    except (KeyError, ValueError, TypeError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise LdpsimError(f"{name} records no resolved scenario", hint="give files written by `ldpsim run`") from None
    if not isinstance(doc, dict):
        raise LdpsimError(
            f"{name} records a resolved scenario that is not a table", hint="give files written by `ldpsim run`"
        )
    return {k: v for k, v in doc.items() if k not in _FREE}


def _check_compatible(a: xr.Dataset, b: xr.Dataset, name_a: str, name_b: str) -> None:
    """Refuse, on one line, the first difference between ``b`` and ``a`` besides seed and repetitions."""
    doc_a, doc_b = _scenario(a, name_a), _scenario(b, name_b)
    if doc_a != doc_b:
        field = next(k for k in sorted({*doc_a, *doc_b}) if doc_a.get(k) != doc_b.get(k))
        raise LdpsimError(f"{name_b} ran another scenario than {name_a}: '{field}' differs", hint=_HINT)
    if a.attrs.get("code_sha256") != b.attrs.get("code_sha256"):
        raise LdpsimError(
            f"{name_b} was made by other code than {name_a} (code_sha256 differs)",
            hint="rerun both with one version of ldpsim and its plugins",
        )
    if score_names(a) != score_names(b) or set(a.data_vars) != set(b.data_vars):
        raise LdpsimError(f"{name_b} holds other variables than {name_a}", hint=_HINT)
    for coord in a.coords:
        if "rep" in a[coord].dims or coord in ("seed", "seed_rep"):
            continue
        if coord not in b.coords or not a[coord].equals(b[coord]):
            raise LdpsimError(f"{name_b} has other '{coord}' values than {name_a}", hint=_HINT)


def _merged_attrs(datasets: Sequence[xr.Dataset], names: Sequence[str]) -> dict[str, Any]:
    doc = json.loads(datasets[0].attrs["resolved_scenario"])
    total = sum(ds.sizes["rep"] for ds in datasets)
    doc = {k: v for k, v in doc.items() if k != "seed"} | {"repetitions": total}
    seeds = sorted({int(s) for ds, name in zip(datasets, names) for s in repetition_seeds(ds, name)[0]})
    now = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [str(ds.attrs["history"]) for ds in datasets if "history" in ds.attrs]
    lines.append(f"{now} ldpsim merge {' '.join(names)} (seeds {', '.join(map(str, seeds))})")
    return {
        "repetitions": np.int64(total),
        "wall_seconds": float(sum(_seconds(ds.attrs.get("wall_seconds")) for ds in datasets)),
        "resolved_scenario": json.dumps(doc, sort_keys=True, default=str),
        "history": "\n".join(lines),
    }


def _seconds(value: Any) -> float:
    """A file's ``wall_seconds`` as a float; NaN (unknown) for anything else: it is only reported."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
