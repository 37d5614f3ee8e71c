"""Result variables, each declared once.

A :class:`Variable` says everything about one variable of the results: its
name, its dimensions, dtype and fill value, its long name and units, and where
its value comes from. Task results, checkpoints, the assembled dataset, ``show``
and the summary all iterate over declarations, so a new variable is one
declaration: the core's are in :mod:`ldpsim.results.variables`, and an
estimator or a metric adds its own through its class attribute ``outputs``
(an interval's lower and upper bounds, a per-round estimate, ...).

Dimensions are written per task, with two placeholders expanded when the
results are assembled:

* :data:`TASK` stands for the sweep axes and ``rep`` (one value per run);
* :data:`DOMAIN` stands for the domain's dimensions (``value``, or ``row, col``);
* :data:`ROUND`, right after :data:`TASK`, marks a variable that a run estimating after
  every round (a scenario's ``rounds = "every"``) gives once per round: it stands for
  ``round`` there, and for nothing in other runs (whose results are unchanged). A
  per-estimate variable declared without it keeps the value after the last round.

``("estimator", TASK, DOMAIN)`` is thus ``estimate(estimator, <sweeps>, rep, value)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: placeholder for the sweep axes and the repetition, ``(<sweeps>, rep)``
TASK = "<task>"
#: placeholder for the sweep axes alone (a value per sweep point, the same for every repetition)
POINT = "<point>"
#: placeholder for the domain's dimensions (``value``, or ``row``, ``col`` for grids)
DOMAIN = "<domain>"
#: placeholder for the rounds after which a run estimates: ``round`` with ``rounds = "every"``, else nothing
ROUND = "<round>"

#: where a value comes from
SOURCES = ("estimate", "metric", "task")


@dataclass(frozen=True)
class Variable:
    """One variable of the results, declared once.

    Parameters
    ----------
    name : str
        The variable's name in the results dataset.
    dims : tuple of str
        Dimensions, with :data:`TASK`, :data:`POINT`, :data:`ROUND` and :data:`DOMAIN` as placeholders.
        A variable that comes from an estimate starts with ``"estimator"``; one that comes from
        a metric starts with ``"metric", "estimator"`` (the core's ``scores``, stored as one
        variable per metric named by its label, with the metric's long name and units) or with
        ``"estimator"`` (a metric's extra output).
    long_name : str
        What the variable is, for people and plots (the netCDF ``long_name``).
    units : str
        Its units ("" for none).
    dtype : str
        numpy dtype of the stored array.
    fill : Any
        The value where a run did not produce one (an estimator that does not declare the output).
    source : str
        ``"estimate"``: read from each :class:`ldpsim.Estimate` (its attribute ``attr``, or its
        ``extras[name]``); ``"metric"``: computed by each metric; ``"task"``: computed once per run
        by the runner (``attr`` names the run's value).
    attr : str
        The attribute holding the value (default: ``name``).
    optional : bool
        Leave the variable out of the results when no run produced it (``noisy`` on bit vectors).
    summary : bool
        Show the mean over repetitions in ``ldpsim show`` and ``run``'s summary table.
    description : str
        A longer note stored as the variable's ``description`` attribute.
    """

    name: str
    dims: tuple[str, ...]
    long_name: str
    units: str = ""
    dtype: str = "float64"
    fill: Any = math.nan
    source: str = "estimate"
    attr: str = ""
    optional: bool = False
    summary: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"variable '{self.name}': source must be one of {SOURCES}, got {self.source!r}")
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"variable name {self.name!r} is not an identifier without a leading underscore")
        if self.source == "estimate" and self.dims[:1] != ("estimator",):
            raise ValueError(f"variable '{self.name}' comes from estimates: its dims must start with 'estimator'")

    @property
    def key(self) -> str:
        """The attribute (or extras key) the value is read from."""
        return self.attr or self.name

    @property
    def item_dims(self) -> tuple[str, ...]:
        """The dimensions of one value, after the estimator/metric and run dimensions."""
        dims = list(self.dims)
        for lead in ("metric", "estimator", TASK, POINT, ROUND):
            if dims and dims[0] == lead:
                dims.pop(0)
        return tuple(dims)

    @property
    def per_round(self) -> bool:
        """Whether a run estimating after every round gives the variable once per round."""
        return ROUND in self.dims

    @property
    def lead(self) -> int:
        """How many of the dims come before the run's: ``metric`` and ``estimator``, when present."""
        count = 0
        for dim in self.dims:
            if dim not in ("metric", "estimator"):
                break
            count += 1
        return count

    def attrs(self) -> dict[str, str]:
        """The netCDF attributes of the assembled variable."""
        out = {"long_name": self.long_name}
        if self.units:
            out["units"] = self.units
        if self.description:
            out["description"] = self.description
        if self.summary:
            out["summary"] = "mean"  # read back by the summary (ldpsim.results.summary)
        return out

    def empty(self, shape: tuple[int, ...]) -> np.ndarray:
        """An array of ``shape`` holding the fill value."""
        return np.full(shape, self.fill, dtype=self.dtype)
