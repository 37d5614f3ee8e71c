"""Results files as xarray users handle them: a variable per metric with CF units, plain settings, merging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ldpsim
from ldpsim.results.io import open_results, save_results
from ldpsim.running.recheck import check_results

GRID = {
    "name": "grid",
    "seed": 3,
    "users": 3000,
    "repetitions": 2,
    "estimators": ["ibu", "inv-p"],
    "metrics": ["tv", "emd"],
    "domain": {"kind": "grid", "rows": 3, "cols": 4, "cell": 0.5, "unit": "km"},
    "dataset": {"name": "uniform"},
    "cohorts": {"all": {"share": 1, "reports": [{"mechanism": "planar-geometric", "eps": 2.0}]}},
    "sweep": {"eps": {"path": "cohorts.all.reports.0.eps", "values": [1.0, 2.0]}},
}


def cli(*args: object) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ldpsim")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def grid_ds() -> xr.Dataset:
    return ldpsim.run_scenario(GRID)


def test_each_metric_is_a_variable_with_its_cf_units(grid_ds):
    assert grid_ds["emd"].attrs["units"] == "km" and grid_ds["tv"].attrs["units"] == "1"
    assert grid_ds["emd"].attrs["long_name"].startswith("Earth mover's distance")
    assert grid_ds["emd"].dims == ("estimator", "eps", "rep")
    table = grid_ds["tv"].to_dataframe()  # no leftover metric coordinates among the columns
    assert list(table.columns) == ["estimator_name", "stop_rule", "seed", "tv"]


def test_scores_stack_the_metrics_for_sel_by_metric(grid_ds):
    stacked = ldpsim.scores(grid_ds)
    assert stacked.dims == ("metric", "estimator", "eps", "rep") and stacked.name == "score"
    xr.testing.assert_equal(stacked.sel(metric="emd", drop=True), grid_ds["emd"])
    recomputed = 0.5 * np.abs(grid_ds["estimate"] - grid_ds["truth"]).sum(["row", "col"])
    np.testing.assert_allclose(stacked.sel(metric="tv"), recomputed.transpose(*grid_ds["tv"].dims), atol=1e-12)


def test_unswept_settings_are_plain_attributes_and_swept_ones_are_not(grid_ds):
    attrs = grid_ds.attrs
    assert attrs["cohorts.all.reports.0.mechanism"] == "planar-geometric"
    assert attrs["users"] == 3000 and attrs["domain.unit"] == "km" and attrs["dataset.name"] == "uniform"
    assert "cohorts.all.reports.0.eps" not in attrs  # swept: the coordinate eps holds it


def test_settings_survive_netcdf(grid_ds, tmp_path):
    back = open_results(save_results(grid_ds, tmp_path / "g.nc"))
    assert back.attrs["domain.cell"] == 0.5 and back["emd"].attrs["units"] == "km"
    assert list(back["seed"].values) == [3, 3]


def test_a_metric_label_that_names_another_variable_is_refused():
    doc = {**GRID, "metrics": {"users": {"name": "tv"}}, "sweep": {}}
    with pytest.raises(ldpsim.ScenarioError, match="metric label 'users' is the name of a result variable"):
        ldpsim.load_scenario(doc)


def test_files_of_the_error_layout_are_read_in_todays(grid_ds, tmp_path):
    names = ["tv", "emd"]
    old = grid_ds.drop_vars([*names, "seed"])
    old["error"] = ldpsim.scores(grid_ds).drop_attrs()
    old = old.assign_coords(
        metric_name=("metric", names),
        metric_long_name=("metric", [grid_ds[n].attrs["long_name"] for n in names]),
        metric_units=("metric", ["", "km"]),
    )
    back = open_results(save_results(old, tmp_path / "old.nc"))
    assert back["emd"].attrs["units"] == "km" and back["tv"].attrs["units"] == "1"
    xr.testing.assert_equal(back["emd"], grid_ds["emd"])
    assert "metric" not in back.dims and "error" not in back


def test_merge_concatenates_repetitions_of_two_seeds_and_rechecks_all(tmp_path):
    doc = {**GRID, "sweep": {}}
    a, b = ldpsim.run_scenario(doc), ldpsim.run_scenario({**doc, "seed": 4, "repetitions": 1})
    merged = ldpsim.merge_results([a, b], ["a.nc", "b.nc"])
    assert list(merged["rep"].values) == [0, 1, 2]
    assert list(merged["seed"].values) == [3, 3, 4] and list(merged["seed_rep"].values) == [0, 1, 0]
    xr.testing.assert_equal(merged["tv"].isel(rep=[0, 1]).drop_vars("seed_rep"), a["tv"])
    xr.testing.assert_equal(
        merged["estimate"].isel(rep=[2]).drop_vars(["seed_rep", "rep"]), b["estimate"].drop_vars("rep")
    )
    assert merged.attrs["repetitions"] == 3 and "seed" not in merged.attrs
    assert "seed" not in json.loads(merged.attrs["resolved_scenario"])
    assert "ldpsim merge a.nc b.nc (seeds 3, 4)" in merged.attrs["history"]
    rows = check_results(merged)  # every repetition regenerated from its own seed: none refused
    assert sorted({int(r["rep"]) for r in rows}) == [0, 1, 2]


def test_merge_refuses_incompatible_files_on_one_line(tmp_path):
    doc = {**GRID, "sweep": {}, "repetitions": 1}
    a = ldpsim.run_scenario(doc)
    for other, message in (
        (ldpsim.run_scenario({**doc, "users": 2000}), "b.nc ran another scenario than a.nc: 'users' differs"),
        (a, "b.nc repeats repetition 0 of seed 3, which an earlier file holds"),
    ):
        with pytest.raises(ldpsim.LdpsimError, match=message):
            ldpsim.merge_results([a, other], ["a.nc", "b.nc"])


def test_the_merge_command(tmp_path):
    doc = {**GRID, "sweep": {}, "repetitions": 1}
    for seed in (1, 2):
        save_results(ldpsim.run_scenario({**doc, "seed": seed}), tmp_path / f"s{seed}.nc")
    done = cli("merge", tmp_path / "s1.nc", tmp_path / "s2.nc", "-o", tmp_path / "all.nc")
    assert done.returncode == 0, done.stderr
    assert list(open_results(tmp_path / "all.nc")["seed"].values) == [1, 2]
    shown = cli("show", tmp_path / "all.nc")
    assert shown.returncode == 0 and "seeds 1, 2" in shown.stdout
    again = cli("merge", tmp_path / "s1.nc", tmp_path / "s1.nc", "-o", tmp_path / "twice.nc")
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert again.stderr.startswith("error: s1.nc repeats repetition 0 of seed 1")
    assert not (tmp_path / "twice.nc").exists()
