"""examples/plugin, the complete plugin package of the plugin guide (docs/plugins.md), installed as its pyproject.toml says.

The package is laid out on a temporary site folder as pip installs it (the module and a dist-info
holding the entry points of its pyproject.toml), found through its entry point like any
third-party plugin, checked by its own tests and run in its scenario.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from helpers import forget_modules_from

import ldpsim
from ldpsim import Registry
from ldpsim.plugin.hookspecs import DISABLE_VARIABLE, disabled_plugins

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugin"


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The example package installed on a fresh site folder; the default registry loads it."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    site = tmp_path / "site"
    site.mkdir()
    for module in tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["setuptools"]["py-modules"]:
        (site / f"{module}.py").write_text((EXAMPLE / f"{module}.py").read_text())
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    points = project["entry-points"]["ldpsim"]
    (info / "entry_points.txt").write_text("[ldpsim]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    # loaded even where the venv holds the example too (conftest.py keeps the venv's plugins out of the tests)
    monkeypatch.setenv(DISABLE_VARIABLE, ",".join(sorted(disabled_plugins() - set(points))))
    monkeypatch.syspath_prepend(str(site))
    before = set(sys.modules)
    registry = Registry.from_entry_points()
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", registry)
    yield registry
    forget_modules_from(site, before)


def test_the_entry_point_registers_one_plugin_of_each_kind(installed):
    found = {
        kind: installed.get(kind, name)
        for kind, name in (
            ("mechanism", "uniform-noise"),
            ("estimator", "floor"),
            ("dataset", "triangle"),
            ("metric", "max-error"),
        )
    }
    for entry in found.values():
        assert (entry.plugin, entry.distribution, entry.version) == ("example", "ldpsim-example", "0.1.0")


def test_the_examples_own_contract_tests_pass(installed):
    spec = importlib.util.spec_from_file_location("example_tests", EXAMPLE / "tests" / "test_ldpsim_example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [getattr(module, name) for name in dir(module) if name.startswith("test_")]
    assert len(tests) == 4
    for test in tests:
        test()


def test_the_examples_scenario_runs(installed):
    ds = ldpsim.run_scenario(EXAMPLE / "scenario.toml", users=20_000, repetitions=2)
    assert ds["max-error"].attrs["long_name"] == "largest frequency error"
    assert list(ds["estimator"].values) == ["floor", "ibu"] and list(ds["q"].values) == [0.3, 0.6]
    assert float(ds["tv"].max()) < 0.15  # 20 values, 20 000 users: both estimators are close
    assert np.all(ds["max-error"] <= ds["tv"] + 1e-15)  # the errors above and below the truth each sum to TV
    assert '"distribution": "ldpsim-example"' in ds.attrs["plugins"]
