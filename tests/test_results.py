"""Result files: schema for grids and categories, netCDF round trip, atomic writes, provenance."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import scipy
import xarray as xr
from helpers import HALF_L1

import ldpsim
from ldpsim.results.io import open_results, save_results
from ldpsim.running.provenance import code_sha256

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"

GRID = {
    "name": "grid",
    "seed": 5,
    "users": 2000,
    "repetitions": 2,
    "domain": {"kind": "grid", "rows": 3, "cols": 4, "cell": 0.5},
    "dataset": {"name": "zipf", "s": 1.0},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 2.0}]}},
    "estimators": {"ibu": {}, "slow": {"name": "ibu", "max_iter": 3}},
    "metrics": ["tv", "emd"],
    "sweep": {"n": {"path": "users", "values": [500, 2000]}},
}


def test_grid_results_have_row_and_col(tmp_path):
    ds = ldpsim.run_scenario(GRID)
    assert ds["estimate"].dims == ("estimator", "n", "rep", "row", "col")
    assert ds["truth"].dims == ("n", "rep", "row", "col")
    np.testing.assert_allclose(ds["y"].values, [0.25, 0.75, 1.25])
    assert list(ds["estimator_name"].values) == ["ibu", "ibu"]
    assert list(ds["users"].values) == [500, 2000]
    assert bool(ds["converged"].sel(estimator="slow").any()) is False
    assert (ds["iterations"].sel(estimator="slow") == 3).all()
    path = save_results(ds, tmp_path / "g.nc")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask  # like any new file, not mkstemp's private 0600
    back = open_results(path)
    xr.testing.assert_identical(back.drop_attrs(), ds.drop_attrs())
    assert back.attrs["domain"] == '{"kind": "grid", "rows": 3, "cols": 4, "cell": 0.5}'
    assert json.loads(back.attrs["datasets"]) == ["zipf(s=1.0)"]  # where the values came from


def test_categorical_results_use_labels(tmp_path):
    doc = {**GRID, "domain": {"kind": "categorical", "values": ["red", "green", "blue"]}, "sweep": {}}
    ds = ldpsim.run_scenario(doc)
    assert list(ds["value"].values) == ["red", "green", "blue"]
    back = open_results(save_results(ds, tmp_path / "c.nc"))
    assert list(back["value"].values) == ["red", "green", "blue"]
    np.testing.assert_array_equal(back["estimate"].values, ds["estimate"].values)


def test_a_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    ds = ldpsim.run_scenario({**GRID, "sweep": {}, "repetitions": 1})
    target = tmp_path / "r.nc"
    target.write_text("previous results")

    def explode(self, path, **kwargs):
        with open(path, "wb") as fh:
            fh.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", explode)
    with pytest.raises(ldpsim.LdpsimError, match=r"^output: could not write .*r\.nc. \(disk full\)"):
        save_results(ds, target)
    assert target.read_text() == "previous results"
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]


def test_open_results_rejects_other_netcdf_files(tmp_path):
    xr.Dataset({"x": ("t", [1, 2])}).to_netcdf(tmp_path / "other.nc")
    with pytest.raises(ldpsim.LdpsimError, match="is not an ldpsim results file"):
        open_results(tmp_path / "other.nc")


def test_results_record_the_versions_of_the_code_that_made_them():
    attrs = ldpsim.run_scenario({**GRID, "sweep": {}, "repetitions": 1}).attrs
    assert attrs["ldpsim_version"] == ldpsim.__version__
    assert (attrs["numpy"], attrs["scipy"], attrs["xarray"]) == (np.__version__, scipy.__version__, xr.__version__)
    assert json.loads(attrs["distributions"]) == {"ldpsim": ldpsim.__version__}
    assert len(attrs["code_sha256"]) == 64 and int(attrs["code_sha256"], 16) >= 0
    assert attrs["code_sha256"] == code_sha256(["ldpsim", "ldpsim_plugins"])  # the built-ins' package and the core


def test_the_version_comes_from_git_with_a_fallback_outside_it():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert any(r.startswith("setuptools-scm") for r in meta["build-system"]["requires"])
    assert meta["tool"]["setuptools_scm"]["fallback_version"]


def test_an_uncommitted_edit_to_a_plugin_changes_the_recorded_code_digest(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    source = site / "ldpsim_half_l1_results.py"
    source.write_text(HALF_L1)
    monkeypatch.syspath_prepend(str(site))
    registry = ldpsim.Registry.from_entry_points()
    registry.add(__import__("ldpsim_half_l1_results"), name="half-l1")
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", registry)
    doc = {**GRID, "sweep": {}, "repetitions": 1, "metrics": ["half-l1"]}
    try:
        before = ldpsim.run_scenario(doc).attrs["code_sha256"]
        assert ldpsim.run_scenario(doc).attrs["code_sha256"] == before
        source.write_text(HALF_L1.replace("0.5 *", "0.5 * 1.0 *"))  # same numbers, other code
        after = ldpsim.run_scenario(doc).attrs["code_sha256"]
    finally:
        sys.modules.pop("ldpsim_half_l1_results", None)
    assert after != before
    assert before != code_sha256(["ldpsim", "ldpsim_plugins"])  # the plugin's own file counts


def test_no_attribute_holds_an_absolute_path(tmp_path):
    where = tmp_path / "study"
    (where / "data").mkdir(parents=True)
    shutil.copy(DATA / "people.csv", where / "data" / "people.csv")
    text = """
users = 50
domain = { kind = "integers", low = 0, high = 99 }
dataset = { name = "csv", path = "data/people.csv", column = "age", replace = true }
cohorts.all.reports = [{ mechanism = "krr", eps = 1.0 }]
estimators = ["ibu"]
metrics = ["tv"]
"""
    (where / "s.toml").write_text(text)
    attrs = open_results(save_results(ldpsim.run_scenario(where / "s.toml"), tmp_path / "r.nc")).attrs
    assert attrs["scenario_source"] == "s.toml" and "scenario_dir" not in attrs
    assert attrs["scenario_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert "data/people.csv" in attrs["datasets"]
    for name, value in attrs.items():
        assert str(tmp_path) not in str(value) and not str(value).startswith("/"), name
    mapping = ldpsim.run_scenario({**GRID, "sweep": {}, "repetitions": 1}).attrs
    assert mapping["scenario_source"] == "mapping"
    assert mapping["scenario_sha256"] == hashlib.sha256(mapping["scenario"].encode()).hexdigest()
