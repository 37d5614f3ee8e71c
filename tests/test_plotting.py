"""Figures: the panels show what the results hold, labelled from the results' metadata."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.image import imread
from typer.testing import CliRunner

import ldpsim
from ldpsim import Grid, Integers, LdpsimError, Observations
from ldpsim.output.cli import app
from ldpsim.output.plotting import figure
from ldpsim.results.io import open_results, save_results
from ldpsim.results.noisy import noisy_distribution

DOC = {
    "seed": 2,
    "users": 1000,
    "repetitions": 3,
    "domain": {"kind": "integers", "low": 0, "high": 9},
    "dataset": {"name": "binomial"},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
    "estimators": ["ibu", "inv-n"],
    "metrics": ["tv", "l2"],
    "sweep": {"eps": {"path": "cohorts.all.reports.0.eps", "values": [0.5, 2.0]}},
}
GRID = {
    **DOC,
    "repetitions": 2,
    "domain": {"kind": "grid", "rows": 3, "cols": 4, "cell": 0.5, "unit": "km"},
    "dataset": {"name": "zipf"},
    "cohorts": {"all": {"reports": [{"mechanism": "planar-geometric", "eps": 2.0, "window": [1, 1, 2, 3]}]}},
    "metrics": ["tv"],
}


@pytest.fixture(scope="module")
def line_ds():
    """Two sweep axes (eps, users), so other axes must be fixed."""
    return ldpsim.run_scenario({**DOC, "sweep": {**DOC["sweep"], "n": {"path": "users", "values": [500, 1000]}}})


@pytest.fixture(scope="module")
def grid_ds():
    return ldpsim.run_scenario(GRID)


def mechanism(name, domain, **params):
    return ldpsim.get_registry().get("mechanism", name).cls(domain, **params)


# ------------------------------------------------------------------ the noisy distribution
@given(st.lists(st.integers(0, 50), min_size=5, max_size=5).filter(any))
def test_noisy_of_a_square_mechanism_is_the_report_frequencies(counts):
    domain = Integers(low=0, high=4)
    obs = Observations.from_counts(domain, mechanism("krr", domain, eps=1.0), np.arange(5), counts)
    np.testing.assert_allclose(noisy_distribution(obs), np.array(counts) / sum(counts))


def test_noisy_counts_planar_window_cells_at_their_own_cell():
    grid = Grid(rows=3, cols=4)
    mech = mechanism("planar-geometric", grid, eps=1.0, window=[1, 1, 2, 2])  # outputs (1,1) (1,2) (2,1) (2,2)
    obs = Observations.from_counts(grid, mech, np.arange(4), [1, 2, 3, 4])
    expected = np.zeros((3, 4))
    expected[1:3, 1:3] = [[0.1, 0.2], [0.3, 0.4]]
    np.testing.assert_allclose(noisy_distribution(obs).reshape(3, 4), expected)


def test_noisy_is_undefined_for_unnamed_outputs_and_repeated_reports():
    domain = Integers(low=0, high=3)
    three_outputs = mechanism("matrix", domain, rows=[[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]])
    assert noisy_distribution(Observations.from_counts(domain, three_outputs, [0, 1, 2], [1, 1, 1])) is None
    krr = mechanism("krr", domain, eps=1.0)
    assert noisy_distribution(Observations.from_counts(domain, (krr, krr), [[0, 1], [2, 2]], [1, 1])) is None


def test_results_hold_noisy_where_defined_and_nan_elsewhere(line_ds):
    ds = ldpsim.run_scenario({**DOC, "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 40.0}]}}, "sweep": {}})
    np.testing.assert_allclose(ds["noisy"].values, ds["truth"].values)  # k-RR at eps = 40 keeps every value
    np.testing.assert_allclose(line_ds["noisy"].sum("value"), 1.0)
    twice = ldpsim.run_scenario(
        {**DOC, "repetitions": 1, "sweep": {"repeat": {"path": "cohorts.all.reports.0.repeat", "values": [1, 2]}}}
    )
    assert np.isfinite(twice["noisy"].sel(repeat=1)).all() and np.isnan(twice["noisy"].sel(repeat=2)).all()
    assert "NaN where some user made several reports" in twice["noisy"].attrs["description"]
    only_twice = ldpsim.run_scenario(
        {
            **DOC,
            "repetitions": 1,
            "sweep": {},
            "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0, "repeat": 2}]}},
        }
    )
    assert "noisy" not in only_twice


# ------------------------------------------------------------------ metadata
def test_results_describe_their_coordinates_and_survive_netcdf(grid_ds, tmp_path):
    back = open_results(save_results(grid_ds, tmp_path / "g.nc"))
    assert back["x"].attrs["units"] == "km" and back["y"].attrs["units"] == "km"
    np.testing.assert_allclose(back["x"].values, [0.25, 0.75, 1.25, 1.75])
    assert back["eps"].attrs["long_name"] == "eps"
    assert back["eps"].attrs["sweep_paths"] == "cohorts.all.reports.0.eps"
    assert back["tv"].attrs["long_name"] == "Total variation distance" and back["tv"].attrs["units"] == "1"
    assert json.loads(back.attrs["domain"])["unit"] == "km"
    assert "unit" not in Grid(rows=2, cols=2).spec()  # unit-less grids keep their old spec


# ------------------------------------------------------------------ figures
def test_summary_figure_panels():
    ds = ldpsim.run_scenario(DOC)
    fig = figure(ds, "summary")
    top = [ax for ax in fig.axes if ax.get_title() in ("tv", "l2")]
    assert [ax.get_title() for ax in top] == ["tv", "l2"]
    assert [t.get_text() for t in top[0].get_legend().get_texts()] == ["ibu", "inv-n"]
    assert [t.get_text() for t in top[0].get_xticklabels()] == ["eps=0.5", "eps=2.0"]
    assert top[0].get_ylabel() == "Total variation distance"
    bottom = [ax for ax in fig.axes if ax.get_title().startswith("rep 0")]
    assert len(bottom) == 2
    line = bottom[0].get_lines()[0]  # ibu's estimate at eps=0.5, rep 0
    np.testing.assert_allclose(line.get_ydata(), ds["estimate"].sel(estimator="ibu").isel(eps=0, rep=0).values)


def test_box_figure_boxes_per_sweep_value_and_estimator(line_ds):
    fig = figure(line_ds, "box", metrics=["l2"], at={"n": "1000"})
    (ax,) = fig.axes
    assert len(ax.patches) == 2 * 2  # eps values x estimators
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "2.0"]
    assert ax.get_xlabel() == "eps" and ax.get_ylabel() == "L2 (Euclidean) distance"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ibu", "inv-n"]
    assert "n=1000" in fig._suptitle.get_text()
    # inv-n's box at eps = 2 spans the quartiles of its errors at n = 1000
    errors = line_ds["l2"].sel(estimator="inv-n", eps=2.0, n=1000).values
    ys = ax.patches[3].get_path().vertices[:, 1]
    np.testing.assert_allclose([ys.min(), ys.max()], np.percentile(errors, [25, 75]))


def test_box_figure_without_a_sweep_has_one_box_per_estimator():
    ds = ldpsim.run_scenario({**DOC, "sweep": {}, "repetitions": 2})
    fig = figure(ds, "box", estimators=["inv-n"])
    assert [len(ax.patches) for ax in fig.axes] == [1, 1]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["inv-n"]


def test_line_figure_means_with_quartile_band(line_ds):
    fig = figure(line_ds, "line", metrics=["tv"], sweep="n", at={"eps": "2"})
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["ibu", "inv-n"]
    np.testing.assert_allclose(lines[0].get_xdata(), [500, 1000])
    expected = line_ds["tv"].sel(estimator="ibu", eps=2.0).mean("rep").values
    np.testing.assert_allclose(lines[0].get_ydata(), expected)
    assert len(ax.collections) == 2  # one band per estimator
    assert "25-75" in ax.get_legend().get_title().get_text()
    assert ax.get_xlabel() == "users"


def test_heatmap_figure_truth_noisy_and_estimates_on_one_scale(grid_ds):
    fig = figure(grid_ds, "heatmap", at={"eps": "2.0"}, rep=1)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["truth", "noisy", "ibu", "inv-n"]
    np.testing.assert_allclose(panels[1].images[0].get_array(), grid_ds["noisy"].sel(eps=2.0, rep=1).values)
    assert len({ax.images[0].get_clim() for ax in panels}) == 1
    colorbar = panels[-1].images[0].colorbar  # one bar for all panels
    assert colorbar is not None and colorbar.ax.get_ylabel() == "probability"
    assert panels[0].get_xlabel() == "x (km)" and panels[0].images[0].get_extent() == [0.0, 2.0, 0.0, 1.5]
    assert "eps=2.0" in fig._suptitle.get_text() and "repetition 1" in fig._suptitle.get_text()


def test_bar_figure_truth_noisy_and_estimates(line_ds):
    fig = figure(line_ds, "bar", estimators=["ibu"], at={"eps": "0.5", "n": "500"})
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["truth", "noisy", "ibu"]
    assert len(ax.patches) == 2 * 10
    truth = line_ds["truth"].sel(eps=0.5, n=500, rep=0).values
    np.testing.assert_allclose([p.get_height() for p in ax.patches[:10]], truth)
    assert ax.get_xlabel() == "value"


@pytest.mark.parametrize(
    "kind, options, message",
    [
        (
            "heatmap",
            {},
            "--kind: a heatmap needs a grid domain; this results file's domain is integers; use --kind bar",
        ),
        ("box", {"metrics": ["tvv"]}, "--metric: 'tvv' is not in this results file; did you mean 'tv'?"),
        (
            "box",
            {"estimators": ["ibu", "inv"]},
            "--estimator: 'inv' is not in this results file; did you mean 'inv-n'?",
        ),
        ("line", {"sweep": "esp"}, "--sweep: 'esp' is not a sweep axis of this results file; did you mean 'eps'?"),
        ("box", {"at": {"n": "700"}}, "--at: axis 'n' has no label '700'"),
        ("box", {"at": {"eps": "2"}}, "--at: 'eps' is the plot's x axis"),
        ("bar", {"rep": 3}, "--rep: repetition 3 does not exist; choose 0..2"),
        ("pie", {}, "--kind: unknown kind 'pie'"),
        ("summary", {"rep": 1}, "--kind: the summary shows every sweep point"),
    ],
)
def test_bad_plot_options_are_one_line_errors(line_ds, kind, options, message):
    with pytest.raises(LdpsimError) as info:
        figure(line_ds, kind, **options)
    assert str(info.value).startswith(message)


def test_bar_of_a_grid_and_line_without_sweep_are_refused(grid_ds):
    with pytest.raises(LdpsimError, match="--kind: a bar chart needs a 1-D domain.*use --kind heatmap"):
        figure(grid_ds, "bar")
    with pytest.raises(LdpsimError, match="--kind: a line plot needs a sweep axis.*use --kind box"):
        figure(grid_ds.isel(eps=0, drop=True), "line")


def test_plot_command_writes_an_image(tmp_path):
    path = save_results(
        ldpsim.run_scenario({**DOC, "domain": {"kind": "grid", "rows": 2, "cols": 5}, "dataset": {"name": "zipf"}}),
        tmp_path / "r.nc",
    )
    result = CliRunner().invoke(app, ["plot", str(path)])
    assert result.exit_code == 0, result.stderr
    image = imread(tmp_path / "r.png")
    assert image.ndim == 3 and image.shape[0] > 200
    bad = CliRunner().invoke(app, ["plot", str(path), "-o", str(tmp_path / "r.xyz")])
    assert bad.exit_code == 2 and "output:" in bad.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc", "r.png"]  # no temporary file left behind
