"""Provenance of a run: what was run, with which code, stored as the results' attributes."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..plugin.registry import get_registry
from .build import Builder
from .scenario import Scenario


def provenance(scenario: Scenario, *, wall_seconds: float = float("nan")) -> dict[str, Any]:
    """The results' attributes: the scenario and its overrides, the seed, every plugin used with its version."""
    from .. import __version__

    builder = scenario.builder or Builder(scenario.base_dir)
    setups = [builder.setup(point) for point in scenario.points()]
    domain = setups[0].domain
    plugins: dict[str, dict[str, Any]] = {}
    datasets: dict[str, None] = {}  # descriptions in order of first use, once each
    registry = get_registry()
    for setup in setups:
        for data in (setup.dataset, *(c.dataset for c in setup.cohorts if c.dataset is not None)):
            datasets[data.description] = None
        used = [setup.dataset, *setup.estimators.values(), *setup.metrics.values()]
        used += [m for c in setup.cohorts for m in c.plan]
        for obj in used:
            entry = registry.get(obj.kind, obj.name)
            plugins[f"{entry.kind}:{entry.name}"] = {
                "plugin": entry.plugin,
                "distribution": entry.distribution,
                "version": entry.version,
            }
    return {
        "title": scenario.name,
        "description": scenario.description,
        "ldpsim_version": __version__,
        "seed": np.int64(scenario.seed),
        "repetitions": np.int64(scenario.repetitions),
        "sweeps": json.dumps({a.name: list(a.paths) for a in scenario.axes}),
        "domain": json.dumps(domain.spec()),
        "plugins": json.dumps(plugins, sort_keys=True),
        "datasets": json.dumps(list(datasets)),
        "scenario": scenario.text if scenario.text is not None else json.dumps(scenario.document, default=str),
        "scenario_source": str(scenario.source) if scenario.source else "mapping",
        "scenario_dir": str(scenario.base_dir),
        "overrides": json.dumps(list(scenario.overrides)),
        "resolved_scenario": scenario.resolved_json(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "wall_seconds": float(wall_seconds),
    }
