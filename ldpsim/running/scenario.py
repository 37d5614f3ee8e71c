"""Scenario files: parsing, overrides, sweeps and validation.

A scenario is a TOML document (or the equivalent mapping)::

    name = "mixed"
    seed = 7
    users = 100_000
    repetitions = 10

    [domain]                       # integers | grid | categorical
    kind = "integers"
    low = 0
    high = 99

    [dataset]                      # a dataset plugin and its parameters
    name = "binomial"
    p = 0.5

    [cohorts.careful]              # who applies which report plan
    share = "1/3"                  # a number or an exact fraction
    reports = [{ mechanism = "krr", eps = 0.5, repeat = 2 }]

    estimators = ["ibu", "inv-p"]  # or [estimators.label] tables with name = ...
    metrics = ["tv", "emd"]

    [sweep.eps]                    # one axis of the results
    path = "cohorts.careful.reports.0.eps"
    values = [0.5, 1, 2]

Every field can be overridden with ``key.path=value`` strings (``--set`` on
the command line; the path language is :mod:`.paths`). Several sweep axes form
a grid (:mod:`.sweep`). Everything a run needs is validated before the first
user is simulated: the top-level fields (:mod:`.schema`), then every grid
point is built (:mod:`.build`): plugins exist, parameters are valid, data
files are readable.
"""

from __future__ import annotations

import copy
import json
import secrets
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import ScenarioError
from ..base.threads import one_blas_thread
from ..estimation.observations import plan_rounds
from ..plugin.registry import Registry, get_registry
from ..results.variables import declared
from .build import Builder, Setup, check_setups
from .paths import parse_override, parse_path, related, set_path
from .schema import (
    FIELDS,
    MAX_DEPTH,
    MAX_SEED,
    OPEN_KIND,
    ROUNDS,
    check_depth,
    check_fields,
    int_field,
    normalize,
    str_field,
)
from .sweep import RESERVED_AXES, Axis, Point, grid_points, parse_axes


@dataclass(frozen=True)
class Scenario:
    """A validated scenario, ready to run.

    Attributes
    ----------
    name, description, seed, repetitions
        The top-level fields (``seed`` drawn at load time if the document has none).
    axes
        The sweep axes, in the document's order.
    document
        The resolved document: shorthands expanded, overrides applied, seed set.
    rounds
        The number of rounds T after each of which a task estimates (``rounds = "every"``);
        0: once, after all rounds (no ``round`` dimension).
    estimator_labels, metric_labels
        The labels of the results' ``estimator`` and ``metric`` coordinates.
    text, source
        The scenario file's text and path (None for a mapping).
    base_dir
        The folder relative data paths are resolved against.
    overrides
        The overrides applied, as ``path=json`` strings for the results' provenance.
    builder
        The builder whose plugin instances validation made (data files read
        once); the run reuses them. None for a scenario made by hand.
    """

    name: str
    description: str
    seed: int
    repetitions: int
    axes: tuple[Axis, ...]
    document: dict
    estimator_labels: tuple[str, ...]
    metric_labels: tuple[str, ...]
    text: str | None = None
    source: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    overrides: tuple[str, ...] = ()
    builder: Builder | None = field(default=None, compare=False, repr=False)
    rounds: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        """The number of values along each axis."""
        return tuple(len(a.values) for a in self.axes)

    def points(self) -> Iterator[Point]:
        """Every grid point, the last axis varying fastest."""
        return grid_points(self.document, self.axes)

    def resolved_json(self) -> str:
        """The resolved document as canonical JSON (sorted keys), as the results record it."""
        return json.dumps(self.document, sort_keys=True, default=str)


def load_scenario(
    source: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] = (),
    *,
    registry: Registry | None = None,
    base_dir: str | Path | None = None,
    confine: bool = False,
) -> Scenario:
    """Read, override and validate a scenario.

    Parameters
    ----------
    source
        A TOML file, or the equivalent mapping (copied, never modified).
    overrides
        A mapping of field paths to values, or ``"path=value"`` strings as
        given to ``--set``.
    registry
        Where plugins are looked up (default: the installed plugins).
    base_dir
        The folder relative data paths are resolved against: by default the
        scenario file's folder (the current folder for a mapping).
    confine
        Refuse data paths outside ``base_dir`` (absolute, through ``..`` or a link): for a
        scenario read back from a results file, which is data and must not name any file.

    Returns
    -------
    Scenario
        With every grid point built once, its builder kept for the run.

    Raises
    ------
    LdpsimError
        A one-line message naming the field and the fix, on any problem.
    """
    text, doc, path = read_document(source)
    if doc.get("kind") == OPEN_KIND:
        raise ScenarioError(
            f'is "{OPEN_KIND}": a heavy-hitter scenario, which `ldpsim run` and ldpsim.run_scenario run',
            field="kind",
            hint="--dry-run and --resume are for frequency scenarios; try it with --set users=10000",
        )
    if base_dir is None:
        base_dir = path.parent if path is not None else Path.cwd()
    base_dir = Path(base_dir).resolve()
    doc = normalize(doc)
    applied = []
    items = overrides.items() if isinstance(overrides, Mapping) else (parse_override(o) for o in overrides)
    for key, value in items:
        set_path(doc, key, value)
        applied.append(f"{key}={json.dumps(value, default=str)}")
    check_depth(doc)  # an override's value may nest deep
    doc = normalize(doc)  # an override may have used the list shorthand
    check_fields(doc)
    axes = parse_axes(doc)
    for key in (o.split("=", 1)[0] for o in applied):
        for axis in axes:
            shadowing = [p for p in axis.paths if related(key, p)]
            if shadowing and parse_path(key)[0] != "sweep":
                raise ScenarioError(
                    f"override '{key}' has no effect: sweep '{axis.name}' sets '{shadowing[0]}' at every point",
                    field="--set",
                    hint=f"override sweep.{axis.name}.values instead",
                )
    if doc.get("seed") is None:
        doc["seed"] = secrets.randbits(63)  # recorded in the results, so the run can be repeated
    name = str_field(doc, "name", path.stem if path is not None else "scenario")
    description = str_field(doc, "description", "")
    seed = int_field(doc, "seed", 0, MAX_SEED)
    repetitions = int_field(doc, "repetitions", 1, 10**7, default=1)
    when = str_field(doc, "rounds", "last")
    if when not in ROUNDS:
        raise ScenarioError(f"must be one of {', '.join(ROUNDS)}, got {when!r}", field="rounds", hint=FIELDS["rounds"])
    with one_blas_thread():  # the mechanisms' matrices as every task will see them (see ldpsim.base.threads)
        builder = check_setups(grid_points(doc, axes), axes, base_dir, registry or get_registry(), confine=confine)
    _check_axis_names(axes, builder.setup(next(iter(grid_points(doc, axes)))))
    rounds = _round_count(axes, [builder.setup(p) for p in grid_points(doc, axes)]) if when == "every" else 0
    return Scenario(
        name=name,
        description=description,
        seed=seed,
        repetitions=repetitions,
        axes=axes,
        document=doc,
        estimator_labels=tuple(doc["estimators"]),
        metric_labels=tuple(doc["metrics"]),
        text=text,
        source=path,
        base_dir=base_dir,
        overrides=tuple(applied),
        builder=builder,
        rounds=rounds,
    )


def read_document(source: str | Path | Mapping[str, Any]) -> tuple[str | None, dict, Path | None]:
    """(text, document, path) of a scenario file, or (None, a deep copy, None) of a mapping, unchecked.

    Raises
    ------
    ScenarioError
        If the file is missing, unreadable, not TOML, or nested too deep.
    """
    if isinstance(source, Mapping):
        check_depth(dict(source))  # before copying: deepcopy recurses once per level
        return None, copy.deepcopy(dict(source)), None
    path = Path(source)
    if not path.is_file():
        raise ScenarioError(f"scenario file '{path}' not found", hint="check the path")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read '{path}' ({exc})", hint="give a UTF-8 TOML file") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"invalid TOML: {exc}", hint="fix the syntax at that line") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise ScenarioError(
            "lists or tables nested too deeply to read", hint=f"a scenario nests at most {MAX_DEPTH} levels"
        ) from None
    check_depth(doc)
    return text, doc, path


#: coordinates every results file has besides the sweep axes (see ldpsim.results.assemble, .combine)
RESULT_COORDS = ("estimator_name", "stop_rule", "seed", "seed_rep", "x", "y", "round")


def _check_axis_names(axes: Sequence[Axis], setup: Setup) -> None:
    """Sweep axes and metric labels name results' dimensions and variables: they may not clash.

    A metric's score is the variable named by the metric's label, so a label may not be the name of
    another result variable, a coordinate or a sweep axis either.
    """
    taken = {v.name for v in declared([*setup.estimators.values(), *setup.metrics.values()])}
    taken.update(RESULT_COORDS)
    for axis in axes:
        if axis.name in taken:
            raise ScenarioError(
                f"axis name '{axis.name}' is the name of a result variable",
                field=f"sweep.{axis.name}",
                hint=f"rename the axis, e.g. [sweep.n_{axis.name}]",
            )
    taken.update(a.name for a in axes)
    taken.update(RESERVED_AXES)
    for label, metric in setup.metrics.items():
        if label in taken:
            raise ScenarioError(
                f"metric label '{label}' is the name of a result variable, coordinate or dimension",
                field=f"metrics.{label}",
                hint=f'give the metric another label, e.g. [metrics.{label}_score] with name = "{metric.name}"',
            )


def _round_count(axes: Sequence[Axis], setups: Sequence[Setup]) -> int:
    """The rounds T of a run estimating after every round: its cohorts' longest plan, the same at every point."""
    counts = [max(plan_rounds(c.plan) for c in setup.cohorts if c.users) for setup in setups]
    if len(set(counts)) > 1:
        where = f" (sweep {', '.join(a.name for a in axes)})" if axes else ""
        raise ScenarioError(
            f'is "every" but the sweep points have {min(counts)} to {max(counts)} rounds{where}',
            field="rounds",
            hint="give every point the same number of rounds: the results have one round dimension",
        )
    return counts[0]
