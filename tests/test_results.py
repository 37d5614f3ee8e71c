"""Result files: schema for grids and categories, netCDF round trip, atomic writes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr

import ldpsim
from ldpsim.results.io import open_results, save_results

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
    with pytest.raises(OSError, match="disk full"):
        save_results(ds, target)
    assert target.read_text() == "previous results"
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]


def test_open_results_rejects_other_netcdf_files(tmp_path):
    xr.Dataset({"x": ("t", [1, 2])}).to_netcdf(tmp_path / "other.nc")
    with pytest.raises(ldpsim.LdpsimError, match="is not an ldpsim results file"):
        open_results(tmp_path / "other.nc")
