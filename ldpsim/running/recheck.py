"""Checking the estimates of a results file against the MLE conditions (``ldpsim check estimate``).

Results do not store the observations an estimate was made from; they are
regenerated here from the resolved scenario and its seed (every task is
reproducible), which takes the running layer, hence this module's place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..base.errors import LdpsimError
from ..results.combine import repetition_seeds
from ..theory.diagnostics import check_estimate
from .runner import preflight
from .scenario import load_scenario
from .tasks import Task, simulate


def check_results(
    ds: xr.Dataset,
    base_dir: str | os.PathLike | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """:func:`~ldpsim.theory.diagnostics.check_estimate` for every estimate of a results dataset.

    The regenerated true values are compared with the stored ones first, so
    results made with other plugins or versions are refused rather than
    checked against the wrong observations.

    Parameters
    ----------
    ds
        Results of :func:`ldpsim.run_scenario` (or ``ldpsim run``), with their
        ``resolved_scenario`` attribute.
    base_dir
        The folder the scenario's relative data paths start from, as when it ran; by default
        the results file's folder. Paths may not leave it: a results file is data, so it
        cannot make ldpsim read a file it names (absolute, through ``..`` or a link).
    progress
        Called as ``progress(done, total)`` after each regenerated (repetition, sweep point),
        as :func:`ldpsim.run_scenario` calls it after each run: a long file takes seconds.

    Returns
    -------
    list of dict
        One row per (sweep point, repetition, estimator): the sweep coordinates,
        ``rep``, ``estimator`` (its label) and ``report`` (an ``EstimateReport``).

    Raises
    ------
    LdpsimError
        If the file has no resolved scenario, or regenerating gives other true values.
    """
    try:
        doc = json.loads(ds.attrs["resolved_scenario"])
    except (KeyError, ValueError, TypeError, RecursionError):  # RecursionError: nested thousands deep
        raise LdpsimError(
            "the results file has no resolved scenario", hint="give a file written by `ldpsim run`"
        ) from None
    if not isinstance(doc, dict):
        raise LdpsimError(
            "the results file's resolved scenario is not a table", hint="give a file written by `ldpsim run`"
        )
    # The stored scenario is data: its paths stay inside the chosen folder, never one the file names itself.
    source = ds.encoding.get("source")
    folder = Path(base_dir) if base_dir is not None else (Path(source).parent if source else Path.cwd())
    scenario = load_scenario(doc, base_dir=folder, confine=True)
    preflight(scenario)  # the same size and memory checks as a run: a stored scenario may ask for anything
    sweeps = [a.name for a in scenario.axes]
    estimators = [str(e) for e in ds["estimator"].values]
    rows = []
    points = list(scenario.points())
    reps = repetitions(ds)
    for r, (rep, seed, seed_rep) in enumerate(reps):
        for p, point in enumerate(points):
            task = Task(point, seed_rep, seed, scenario.base_dir, "recheck")
            _, truth, observations = simulate(task, scenario.builder)
            at = {**dict(zip(sweeps, point.index)), "rep": rep}
            stored = ds["truth"].isel(at).values.ravel()
            if stored.shape != truth.shape or not np.allclose(stored, truth, rtol=0, atol=1e-12):
                raise LdpsimError(
                    f"regenerating the reports of {at} gives other true values than the file holds",
                    hint="the results were made with other plugins or versions; rerun the scenario",
                )
            for e, label in enumerate(estimators):
                report = check_estimate(observations, ds["estimate"].isel({**at, "estimator": e}).values.ravel())
                rows.append({**{d: ds[d].values[i] for d, i in at.items()}, "estimator": label, "report": report})
            if progress is not None:
                progress(r * len(points) + p + 1, len(reps) * len(points))
    return rows


def repetitions(ds: xr.Dataset) -> list[tuple[int, int, int]]:
    """``(rep, seed, seed_rep)`` of every repetition: its index in ``ds``, the root seed and the repetition
    index it was drawn with (they differ from the file's seed and ``rep`` in merged results)."""
    seeds, reps = repetition_seeds(ds)  # checked: a file's seeds are data
    return [(i, int(seed), int(rep)) for i, (seed, rep) in enumerate(zip(seeds, reps))]
