"""Provenance of a run: what was run, with which code, as the results' attributes.

The code is identified twice over: by version (ldpsim's from git through
setuptools-scm, numpy's, scipy's, xarray's and each plugin distribution's) and
by ``code_sha256``, a digest of the files of ldpsim and of the packages of the
plugins the scenario uses, as they are on disk. The digest catches what a
version misses: an uncommitted edit, or an editable install whose recorded
version is that of the commit it was installed at. Checkpoints use the same
identity (:func:`code_identity`) to refuse resuming with other code.

No attribute holds an absolute path, so a results file can be shared: the
scenario is recorded by its file name and the sha256 of its text, and dataset
descriptions name data files relative to the scenario's folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..model.params import Configurable, short_repr
from ..plugin.registry import Entry, get_registry
from .build import Builder, Setup
from .paths import parse_path, related
from .scenario import Scenario
from .sweep import Axis

#: libraries whose version the results record (numpy and scipy also enter checkpoint fingerprints)
LIBRARIES = ("numpy", "scipy", "xarray")


def setups_of(scenario: Scenario) -> list[Setup]:
    """The concrete objects of every sweep point (built once by the scenario's builder)."""
    builder = scenario.builder or Builder(scenario.base_dir)
    return [builder.setup(point) for point in scenario.points()]


def used_plugins(setups: Sequence[Setup]) -> dict[str, Entry]:
    """The registry entries of every dataset, mechanism, estimator and metric used, by ``kind:name``."""
    registry = get_registry()
    used: dict[str, Entry] = {}
    for setup in setups:
        objects = [setup.dataset, *setup.estimators.values(), *setup.metrics.values()]
        for cohort in setup.cohorts:
            objects += [*cohort.plan, *([cohort.dataset] if cohort.dataset is not None else [])]
        for obj in objects:
            entry = registry.get(obj.kind, obj.name)
            used[f"{entry.kind}:{entry.name}"] = entry
    return used


def code_identity(plugins: Iterable[Entry]) -> dict[str, Any]:
    """Everything about the code a task's numbers depend on: versions and a digest of the source files.

    Parameters
    ----------
    plugins
        The plugins a scenario uses (:func:`used_plugins`); their packages are digested with ldpsim's.

    Returns
    -------
    dict
        ``ldpsim`` (version), ``python``, ``numpy``, ``scipy``, ``distributions`` (each plugin
        distribution's version, by name) and ``code_sha256``.
    """
    entries = list(plugins)
    distributions = {e.distribution: e.version for e in entries if e.distribution is not None}
    modules = ["ldpsim", *(e.cls.__module__ for e in entries)]
    return {
        "ldpsim": _version("ldpsim"),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "distributions": dict(sorted(distributions.items())),
        "code_sha256": code_sha256(modules),
    }


def code_sha256(modules: Iterable[str]) -> str:
    """A digest of the files of the top-level packages (or single-file modules) that hold ``modules``.

    Files are read as they are on disk now (``__pycache__`` aside), in a fixed order, each with
    its path inside its package, so an edit, an added or a removed file changes the digest.
    """
    digest = hashlib.sha256()
    for top in sorted({name.partition(".")[0] for name in modules}):
        for rel, path in _files(top):
            digest.update(f"{top}/{rel}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def _files(top: str) -> list[tuple[str, Path]]:
    module = sys.modules.get(top)
    roots = list(getattr(module, "__path__", None) or [])
    if not roots:
        file = getattr(module, "__file__", None)
        return [(Path(file).name, Path(file))] if file else []
    found = []
    for root in roots:  # os.walk, not Path.rglob: a run with an output digests ~120 files, and pathlib's
        # per-path objects were half of it (2.7 -> 1.9 ms); the same files, names and order, so the same digest
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [name for name in subfolders if name != "__pycache__"]
            inside = Path(os.path.relpath(folder, root)).as_posix()
            for name in names:
                path = os.path.join(folder, name)
                if not name.endswith(".pyc") and os.path.isfile(path):
                    found.append((name if inside == "." else f"{inside}/{name}", Path(path)))
    return sorted(found)


@functools.cache
def _version(distribution: str) -> str:
    """The installed version, read once per process: parsing a distribution's metadata takes 1-2 ms, and
    a run with an output asked for six (its checkpoint's fingerprint, then its provenance). The code
    this process runs is what it imported, so a version installed meanwhile would not describe it."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def provenance(
    scenario: Scenario,
    setups: Sequence[Setup] | None = None,
    *,
    wall_seconds: float = float("nan"),
    code: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The results' attributes: the scenario and its overrides, the seed, the code, every plugin used.

    Parameters
    ----------
    scenario
        The scenario that was run.
    setups
        Its sweep points' setups (built from ``scenario`` if not given).
    wall_seconds
        Elapsed (wall-clock) seconds spent running the tasks: simulating, estimating and scoring every
        run this call ran (not the resumed ones), from the first task started to the last finished, on
        all workers at once (not their sum), starting the executor's workers included. Loading the
        scenario and its plugins, the memory checks, assembling the results and writing the file are
        not in it: ``ldpsim run``'s "N runs in X s" counts them too.
    code
        :func:`code_identity` of the plugins it used, if known (a checkpoint's, taken when the run
        started: the code its tasks ran, and no second digest of every source file); else computed.

    Returns
    -------
    dict
        netCDF-ready attributes: strings, numbers, and JSON text for the structured ones.
    """
    setups = setups_of(scenario) if setups is None else setups
    datasets: dict[str, None] = {}  # descriptions in order of first use, once each
    for setup in setups:
        for data in (setup.dataset, *(c.dataset for c in setup.cohorts if c.dataset is not None)):
            datasets[relative_description(data.description, data, scenario.base_dir)] = None
    return record(
        scenario,
        domain=setups[0].domain.spec(),
        used=used_plugins(setups),
        datasets=list(datasets),
        wall_seconds=wall_seconds,
        code=code,
    )


class Recorded(Protocol):
    """What a results file records of the scenario that made it (:class:`~ldpsim.running.scenario.Scenario`,
    or an open-domain scenario)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def repetitions(self) -> int: ...
    @property
    def axes(self) -> tuple[Axis, ...]: ...
    @property
    def document(self) -> dict: ...
    @property
    def text(self) -> str | None: ...
    @property
    def source(self) -> Path | None: ...
    @property
    def overrides(self) -> tuple[str, ...]: ...

    def resolved_json(self) -> str: ...


def record(
    scenario: Recorded,
    *,
    domain: Mapping[str, Any],
    used: Mapping[str, Entry],
    datasets: Sequence[str],
    wall_seconds: float = float("nan"),
    code: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The results' attributes of any scenario kind, given its domain's spec, the plugins it used by
    ``kind:name`` and its datasets' descriptions (see :func:`provenance`)."""
    plugins = {
        key: {"plugin": e.plugin, "distribution": e.distribution, "version": e.version} for key, e in used.items()
    }
    if code is None:
        code = code_identity(used.values())
    text = scenario.text if scenario.text is not None else json.dumps(scenario.document, default=str)
    return {
        "title": scenario.name,
        "description": scenario.description,
        "ldpsim_version": code["ldpsim"],
        "code_sha256": code["code_sha256"],
        "seed": np.int64(scenario.seed),
        "repetitions": np.int64(scenario.repetitions),
        "sweeps": json.dumps({a.name: list(a.paths) for a in scenario.axes}),
        "domain": json.dumps(dict(domain)),
        "plugins": json.dumps(plugins, sort_keys=True),
        "distributions": json.dumps(code["distributions"]),
        "datasets": json.dumps(list(datasets)),
        "scenario": text,
        "scenario_source": scenario.source.name if scenario.source is not None else "mapping",
        "scenario_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "overrides": json.dumps(list(scenario.overrides)),
        "resolved_scenario": scenario.resolved_json(),
        **settings(scenario),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": code["python"],
        **{library: _version(library) for library in LIBRARIES},
        "wall_seconds": float(wall_seconds),
    }


#: top-level fields already recorded under their own attribute (title, description, seed, repetitions)
_RECORDED = ("name", "description", "seed", "repetitions", "sweep")


def settings(scenario: Recorded) -> dict[str, Any]:
    """Every setting of the resolved scenario that no sweep axis sets, as a plain attribute.

    The attribute is named by the field's path, as ``--set`` names it
    (``cohorts.everyone.reports.0.eps``), so no setting needs ``json.loads`` to be read; swept fields
    are the results' coordinates instead. netCDF attributes hold numbers, strings and flat lists of
    either: booleans become ``"true"``/``"false"``, nested tables and lists of tables one attribute
    per entry.
    """
    swept = [(path, len(parse_path(path))) for axis in scenario.axes for path in axis.paths]
    out: dict[str, Any] = {}

    def walk(path: str, value: Any) -> None:
        if path and any(related(path, s) and len(parse_path(path)) >= depth for s, depth in swept):
            return  # the field is swept, or inside a swept table
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(f"{path}.{key}" if path else str(key), item)
        elif isinstance(value, list) and value and all(_scalar(v) for v in value):
            numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            out[path] = np.asarray(value) if numbers else [_attr_value(v) for v in value]
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(f"{path}.{i}", item)
        elif value is not None:
            out[path] = _attr_value(value)

    walk("", {k: v for k, v in scenario.document.items() if k not in _RECORDED})
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _attr_value(value: Any) -> Any:
    """A netCDF attribute value: numbers as they are, booleans and anything else as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return value
    return str(value)


def relative_description(text: str, plugin: Configurable, base_dir: Path) -> str:
    """``text`` with the plugin's data files named relative to the scenario's folder, as the scenario names them.

    Both the full path and the shortened form a plugin's ``repr`` shows (the default description)
    are replaced, so no absolute path, not even the start of one, is left.
    """
    for key, param in plugin.parameters().items():
        value = getattr(plugin, key, None)
        if "path" in param.kinds and isinstance(value, Path) and value.is_relative_to(base_dir):
            text = text.replace(short_repr(value), short_repr(value.relative_to(base_dir)))
    return text.replace(f"{base_dir}{os.sep}", "")
