"""The command line, end to end: results files, listings, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread
from typer.testing import CliRunner

import ldpsim
from ldpsim.output.cli import app

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
runner = CliRunner()


def ldpsim_cli(*args, cwd=None):
    """The installed console script, in a subprocess, as a user runs it."""
    exe = Path(sys.executable).with_name("ldpsim")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_run_writes_a_results_file_that_xarray_reads_back(tmp_path):
    out = tmp_path / "q.nc"
    done = ldpsim_cli("run", QUICKSTART, "-o", out, "--set", "users=4000", "--set", "repetitions=3", "-j", "2")
    assert done.returncode == 0, done.stderr
    assert "scores: mean ± sd over 3 repetitions" in done.stdout and "uniform20-39" in done.stdout
    assert not any(line.startswith("error:") for line in done.stdout.splitlines())  # log scanners flag those
    assert f"wrote {out}" in done.stderr
    with xr.open_dataset(out) as ds:
        assert dict(ds.sizes) == {"data": 2, "rep": 3, "estimator": 3, "value": 100}
        for metric in ("tv", "emd"):  # a variable each, with its CF long name and units
            assert ds[metric].dims == ("estimator", "data", "rep")
        assert ds["tv"].attrs["units"] == "1" and ds["tv"].attrs["long_name"] == "Total variation distance"
        assert "units" not in ds["emd"].attrs  # the integers have no unit of distance
        assert not [c for c in ds.coords if str(c).startswith("metric")]
        assert list(ds["seed"].values) == [20200907] * 3
        assert ds.attrs["cohorts.everyone.reports.0.eps"] == 0.1  # every unswept setting, without json.loads
        assert ds.attrs["cohorts.everyone.reports.0.mechanism"] == "geometric" and ds.attrs["users"] == 4000
        assert "dataset.name" not in ds.attrs  # swept: the coordinate 'data' holds it
        assert ds["estimate"].dims == ("estimator", "data", "rep", "value")
        assert ds["truth"].dims == ("data", "rep", "value")
        for var in ("iterations", "loglik", "seconds", "converged"):
            assert ds[var].dims == ("estimator", "data", "rep")
        assert list(ds["estimator"].values) == ["ibu", "inv-n", "inv-p"]
        assert list(ldpsim.scores(ds)["metric"].values) == ["tv", "emd"]
        assert list(ds["data"].values) == ["binomial", "uniform20-39"]
        np.testing.assert_array_equal(ds["value"].values, np.arange(100))
        np.testing.assert_allclose(ds["estimate"].sum("value"), 1, atol=1e-12)
        assert ds["converged"].dtype == bool
        assert ds.attrs["scenario"] == QUICKSTART.read_text()
        assert json.loads(ds.attrs["overrides"]) == ["users=4000", "repetitions=3"]
        assert ds.attrs["ldpsim_version"] == ldpsim.__version__ and int(ds.attrs["seed"]) == 20200907
        plugins = json.loads(ds.attrs["plugins"])
        assert plugins["mechanism:geometric"] == {
            "plugin": "geometric",
            "distribution": "ldpsim",
            "version": ldpsim.__version__,
        }
        assert set(plugins) == {
            "dataset:binomial",
            "dataset:uniform",
            "mechanism:geometric",
            "estimator:ibu",
            "estimator:inv-n",
            "estimator:inv-p",
            "metric:tv",
            "metric:emd",
        }
        # The file holds the same numbers as the Python API computes.
        again = ldpsim.run_scenario(QUICKSTART, users=4000, repetitions=3)
        xr.testing.assert_allclose(
            ds[["tv", "emd", "estimate", "truth", "loglik"]],
            again[["tv", "emd", "estimate", "truth", "loglik"]],
            rtol=0,
            atol=0,
        )
        tv = ldpsim.scores(ds).sel(metric="tv")
        recomputed = 0.5 * np.abs(ds["estimate"] - ds["truth"]).sum("value")
        np.testing.assert_allclose(tv.values, recomputed.transpose(*tv.dims).values, atol=1e-12)


def test_default_output_name_is_the_scenarios(tmp_path):
    done = ldpsim_cli("run", QUICKSTART, "--set", "users=500", "--set", "repetitions=1", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "quickstart.nc").is_file() and done.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--set", "cohorts.everyone.reports.0.eps=0"],
            "cohorts.everyone.reports[0].eps: must be > 0, got 0.0; choose eps > 0",
        ),
        (
            ["--set", "sweep.data.values.0.p=2"],
            "dataset.p: must be <= 1, got 2.0 (at sweep point data=binomial); choose p <= 1",
        ),
        (
            ["--set", "dataset.p=0.2"],
            "--set: override 'dataset.p' has no effect: sweep 'data' sets 'dataset' at every point",
        ),
        (["--set", "cohorts.everyone.reports.0.mechanism=geometrik"], "did you mean 'geometric'?"),
        (["--set", 'estimators=["ibu", "inverse"]'], "estimators.inverse.name: unknown estimator 'inverse'"),
        (
            ["-o", "no/such/dir/out.nc"],
            "output: directory 'no/such/dir' does not exist; create it or choose another path",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_file(tmp_path, args, message):
    done = ldpsim_cli("run", QUICKSTART, *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_toml_error_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[domain\n")
    done = ldpsim_cli("run", bad, cwd=tmp_path)
    assert done.returncode == 2 and "invalid TOML" in done.stderr and "line 2" in done.stderr
    done = ldpsim_cli("run", tmp_path / "none.toml", cwd=tmp_path)
    assert done.returncode == 2 and "scenario file" in done.stderr and "not found" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_list_shows_names_plugins_descriptions_and_parameters():
    result = runner.invoke(app, ["list", "mechanisms"])
    assert result.exit_code == 0
    assert "krr" in result.stdout and "geometric" in result.stdout and "matrix" in result.stdout
    assert "eps: float > 0 (required)" in result.stdout
    assert "k-ary randomized response" in result.stdout and f"ldpsim {ldpsim.__version__}" in result.stdout
    assert "estimators" not in result.stdout
    everything = runner.invoke(app, ["list"])
    for kind in ("mechanisms", "estimators", "datasets", "metrics", "executors"):
        assert kind in everything.stdout
    executors = runner.invoke(app, ["list", "executors"]).stdout
    assert "processes  A pool of worker processes" in executors and "needs ldpsim[dask]" in executors
    assert "scheduler: str (optional)" in executors


def test_list_unknown_kind():
    result = runner.invoke(app, ["list", "mechanismz"])
    assert result.exit_code == 2 and "unknown plugin or kind 'mechanismz'; did you mean 'mechanisms'?" in result.stderr


def test_show_summarizes_a_results_file(tmp_path):
    out = tmp_path / "m.nc"
    ldpsim.results.io.save_results(
        ldpsim.run_scenario(ROOT / "scenarios" / "mixed-population.toml", users=3000, repetitions=2), out
    )
    result = runner.invoke(app, ["show", str(out)])
    assert result.exit_code == 0
    assert "mixed-population" in result.stdout and "mechanism:krr" in result.stdout
    assert "ibu" in result.stdout and "inv-p" in result.stdout
    bad = tmp_path / "not.nc"
    bad.write_text("hello")
    result = runner.invoke(app, ["show", str(bad)])
    assert result.exit_code == 2 and "is not a readable netCDF file" in result.stderr


def test_no_traceback_for_a_broken_plugin_either(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "ldpsim_broken.py").write_text("raise ImportError('needs libfoo')\n")
    info = site / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ldpsim]\nbroken = ldpsim_broken\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("ldpsim")), "list", "metrics"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0
    assert done.stderr.strip().startswith(
        "warning: plugin 'broken' from broken-plugin failed to import (ImportError: needs libfoo)"
    )
    assert "Traceback" not in done.stderr and "tv" in done.stdout


def test_check_mechanism_prints_the_theory():
    result = runner.invoke(
        app,
        [
            "check",
            "mechanism",
            "krr",
            "--domain",
            "integers:0..9",
            "-p",
            "eps=1",
            "--prior",
            "uniform",
            "--users",
            "2000",
        ],
    )
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "LDP         eps = 1:" in out
    assert "rank 10 for |X| = 10 values and 10 outputs" in out and "identifies the distribution" in out
    assert "upper bound 46.51/n (004 Prop. 7.6, k-RR)" in out and ": holds" in out
    assert "LIP         eps = 0.84" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["krr", "-d", "int:0..9", "-p", "eps=1"],
            "error: --domain: 'int:0..9' is not a domain; write integers:0..99[:step]",
        ),
        (["krr", "-d", "integers:0..9", "-p", "eps=-1"], "error: --param eps: must be > 0, got -1.0; choose eps > 0"),
        (
            ["geometric", "-d", "grid:3x3", "-p", "eps=1"],
            "error: --domain: mechanism 'geometric' does not work on a grid domain",
        ),
        (
            ["krr", "-d", "integers:0..2", "-p", "eps=1", "--prior", "0.5,0.6,0.1"],
            "error: --prior: needs 3 non-negative numbers summing to 1",
        ),
        (["krrr", "-d", "integers:0..2", "-p", "eps=1"], "error: unknown mechanism 'krrr'; did you mean 'krr'?"),
        # The frequency oracles' bad parameters; integer parameters show as given (0, not 0.0).
        (
            ["subset_selection", "-d", "integers:0..9", "-p", "eps=1", "-p", "omega=0"],
            "error: --param omega: must be >= 1, got 0; choose omega >= 1",
        ),
        (
            ["subset_selection", "-d", "integers:0..9", "-p", "eps=1", "-p", "omega=10"],
            "error: --param omega: must be at most k - 1 = 9",
        ),
        (
            ["hadamard", "-d", "integers:0..9", "-p", "eps=1", "-p", "order=8"],
            "error: --param order: must be a power of 2 of at least k + 1 = 11, got 8",
        ),
        (["olh", "-d", "integers:0..9", "-p", "eps=1", "-p", "g=1"], "error: --param g: must be >= 2, got 1;"),
        (
            ["cms", "-d", "integers:0..9", "-p", "eps=1", "-p", "buckets=0"],
            "error: --param buckets: must be >= 2, got 0;",
        ),
        (
            ["flh", "-d", "integers:0..9", "-p", "eps=1", "-p", "hashes=0"],
            "error: --param hashes: must be >= 1, got 0;",
        ),
        (
            ["piecewise", "-d", "categorical:a,b,c", "-p", "eps=1"],
            "error: --domain: mechanism 'piecewise' does not work on a categorical domain",
        ),
    ],
)
def test_check_mechanism_bad_input(args, message):
    result = runner.invoke(app, ["check", "mechanism", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_check_estimate_regenerates_the_reports(tmp_path):
    out = tmp_path / "q.nc"
    ldpsim.results.io.save_results(
        ldpsim.run_scenario(
            QUICKSTART,
            users=3000,
            repetitions=2,
            set=["estimators={ibu = {delta = 1e-9, max_iter = 100000}, inv-p = {}}"],
        ),
        out,
    )
    result = runner.invoke(app, ["check", "estimate", str(out)])
    assert result.exit_code == 0, result.stderr
    rows = {line.split("│")[2].strip(): line for line in result.stdout.splitlines() if "binomial" in line}
    assert "2/2" in rows["ibu"].split("│")[4]  # converged IBU: an MLE in both repetitions
    assert "0/2" in rows["inv-p"].split("│")[4]


def test_check_estimate_detects_results_it_cannot_reproduce(tmp_path):
    ds = ldpsim.run_scenario(QUICKSTART, users=300, repetitions=1)
    ds["truth"] = ds["truth"] * 0 + 0.01  # as if another version had drawn other users
    ldpsim.results.io.save_results(ds, tmp_path / "q.nc")
    result = runner.invoke(app, ["check", "estimate", str(tmp_path / "q.nc")])
    assert result.exit_code == 2 and "gives other true values than the file holds" in result.stderr


def test_check_estimate_finds_data_files_from_the_scenario_folder(tmp_path, monkeypatch):
    """Results name no absolute path: data paths start from the folder given, or the results file's own."""
    study = tmp_path / "study"
    (study / "data").mkdir(parents=True)
    (study / "data" / "people.csv").write_text((ROOT / "tests" / "data" / "people.csv").read_text())
    (study / "s.toml").write_text(
        'users = 200\nestimators = ["ibu"]\nmetrics = ["tv"]\n'
        '[domain]\nkind = "integers"\nlow = 0\nhigh = 99\n'
        '[dataset]\nname = "csv"\npath = "data/people.csv"\ncolumn = "age"\nreplace = true\n'
        '[cohorts.all]\nreports = [{ mechanism = "krr", eps = 1 }]\n'
    )
    out = tmp_path / "r.nc"
    assert runner.invoke(app, ["run", str(study / "s.toml"), "-o", str(out), "-e", "serial", "-q"]).exit_code == 0
    monkeypatch.chdir(tmp_path)
    elsewhere = runner.invoke(app, ["check", "estimate", str(out)])
    assert elsewhere.exit_code == 2 and "data/people.csv" in elsewhere.stderr
    given = runner.invoke(app, ["check", "estimate", str(out), "--scenario-dir", str(study)])
    assert given.exit_code == 0, given.stderr
    beside = study / "r.nc"
    beside.write_bytes(out.read_bytes())
    assert runner.invoke(app, ["check", "estimate", str(beside)]).exit_code == 0  # from tmp_path: its own folder


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    from ldpsim.results.io import save_results

    path = tmp_path_factory.mktemp("plot") / "q.nc"
    return save_results(ldpsim.run_scenario(QUICKSTART, users=500, repetitions=2), path)


def test_plot_kinds_write_images(quick_results, tmp_path):
    for kind, extra in (
        ("box", ["--metric", "tv", "-e", "ibu", "-e", "inv-p"]),
        ("bar", ["--at", "data=uniform20-39", "--rep", "1"]),
    ):
        out = tmp_path / f"{kind}.png"
        result = runner.invoke(app, ["plot", str(quick_results), "--kind", kind, "-o", str(out), *extra])
        assert result.exit_code == 0, result.stderr
        assert result.stderr.strip() == f"wrote {out}" and imread(out).ndim == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kind", "heatmap"],
            "error: --kind: a heatmap needs a grid domain; this results file's domain is integers; use --kind bar",
        ),
        (["--metric", "emb"], "error: --metric: 'emb' is not in this results file; did you mean 'emd'?"),
        (["--kind", "box", "--at", "data"], "error: --at: 'data' is not AXIS=LABEL; write e.g. --at eps=0.5"),
        (["--kind", "bar", "--at", "data=zipf"], "error: --at: axis 'data' has no label 'zipf'"),
    ],
)
def test_plot_bad_options_are_one_line_exit_2_and_no_file(quick_results, tmp_path, args, message):
    out = tmp_path / "fig.png"
    result = runner.invoke(app, ["plot", str(quick_results), "-o", str(out), *args])
    assert result.exit_code == 2 and result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1 and not out.exists()
