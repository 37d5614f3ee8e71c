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
from ldpsim.output.plotting import figure, plot_options, summary_figure
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
    assert back["eps"].attrs["long_name"] == "privacy level ε"  # the field's long name, never its path
    assert back["eps"].attrs["sweep_paths"] == "cohorts.all.reports.0.eps"
    assert back["tv"].attrs["long_name"] == "Total variation distance" and back["tv"].attrs["units"] == "1"
    assert json.loads(back.attrs["domain"])["unit"] == "km"
    assert "unit" not in Grid(rows=2, cols=2).spec()  # unit-less grids keep their old spec


# ------------------------------------------------------------------ figures
def test_summary_figure_panels():
    ds = ldpsim.run_scenario(DOC)
    fig = summary_figure(ds)
    top = [ax for ax in fig.axes if ax.get_title() in ("tv", "l2")]
    assert [ax.get_title() for ax in top] == ["tv", "l2"]
    assert [t.get_text() for t in top[0].get_legend().get_texts()] == ["ibu", "inv-n"]
    assert [t.get_text() for t in top[0].get_xticklabels()] == ["0.5", "2.0"]
    assert top[0].get_xlabel() == "privacy level ε"
    assert top[0].get_ylabel() == "Total variation distance"
    bottom = [ax for ax in fig.axes if ax.get_title().startswith("eps=")]
    assert len(bottom) == 2
    line = bottom[0].get_lines()[0]  # ibu's estimate at eps=0.5, rep 0
    np.testing.assert_allclose(line.get_ydata(), ds["estimate"].sel(estimator="ibu").isel(eps=0, rep=0).values)


def test_box_figure_boxes_per_sweep_value_and_estimator(line_ds):
    fig = figure(line_ds, "box", metrics=["l2"], at={"n": "1000"})
    (ax,) = fig.axes
    assert len(ax.patches) == 2 * 2  # eps values x estimators
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "2.0"]
    assert ax.get_xlabel() == "privacy level ε" and ax.get_ylabel() == "L2 (Euclidean) distance"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ibu", "inv-n"]
    assert "n=1000" in fig._suptitle.get_text()
    # inv-n's box at eps = 2 spans the quartiles of its errors at n = 1000
    errors = line_ds["l2"].sel(estimator="inv-n", eps=2.0, n=1000).values
    ys = ax.patches[3].get_path().vertices[:, 1]
    np.testing.assert_allclose([ys.min(), ys.max()], np.percentile(errors, [25, 75]))


def test_box_figure_without_a_sweep_has_one_box_per_estimator():
    ds = ldpsim.run_scenario({**DOC, "sweep": {}, "repetitions": 2})
    fig = figure(ds, "box", estimators=["inv-n"])
    assert [len(ax.patches) for ax in fig.axes] == [1, 1]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["inv-n"]


def test_line_figure_means_with_standard_error_band(line_ds):
    fig = figure(line_ds, "line", metrics=["tv"], sweep="n", at={"eps": "2"})
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ibu", "inv-n"]
    np.testing.assert_allclose(lines[0].get_xdata(), [500, 1000])
    errors = line_ds["tv"].sel(estimator="ibu", eps=2.0)
    np.testing.assert_allclose(lines[0].get_ydata(), errors.mean("rep").values)
    assert len(ax.collections) == 2  # one band per estimator
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    se = errors.std("rep", ddof=1).values / np.sqrt(line_ds.sizes["rep"])
    np.testing.assert_allclose(
        [band.min(), band.max()], [(errors.mean("rep") - 2 * se).min(), (errors.mean("rep") + 2 * se).max()]
    )
    assert "2 standard errors" in fig._suptitle.get_text()
    assert ax.get_xlabel() == "number of users"  # the long name of the field the axis sets


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


# ------------------------------------------------------------------ layouts: facets, categories, scales
@pytest.fixture(scope="module")
def categorical_ds():
    """A categorical sweep axis (the dataset by name) beside eps."""
    return ldpsim.run_scenario(
        {
            **DOC,
            "repetitions": 4,
            "metrics": ["tv"],
            "sweep": {
                **DOC["sweep"],
                "data": {
                    "path": "dataset",
                    "labels": ["binomial", "zipf"],
                    "values": [{"name": "binomial"}, {"name": "zipf"}],
                },
            },
        }
    )


def _drawn_extent(fig, artist):
    fig.canvas.draw()
    return artist.get_window_extent(fig.canvas.get_renderer())


def test_a_categorical_axis_is_drawn_as_points_not_joined_lines(categorical_ds):
    fig = figure(categorical_ds, "line", sweep="data", at={"eps": "2.0"})
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["binomial", "zipf"]
    assert ax.get_xlabel() == "dataset"
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]  # not the error bars' caps
    assert len(markers) == 2 and all(ln.get_linestyle() == "None" for ln in markers)  # no line joins categories
    expected = categorical_ds["tv"].sel(estimator="inv-n", eps=2.0).mean("rep").values
    np.testing.assert_allclose(markers[1].get_ydata(), expected)
    assert markers[0].get_xdata()[0] < 0 < markers[1].get_xdata()[0]  # dodged around the category


def test_any_dimension_can_be_hue_column_or_row(line_ds):
    fig = figure(line_ds, "line", sweep="eps", hue=["n", "estimator"], col="metric")
    assert [ax.get_title() for ax in fig.axes] == ["tv", "l2"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["Total variation distance", "L2 (Euclidean) distance"]
    assert len(fig.axes[0].get_lines()) == 4 and len(fig.axes[0].collections) == 4  # 2 n x 2 estimators
    legend = fig.legends[0]
    assert legend.get_title().get_text() == "n / estimator"
    assert [t.get_text() for t in legend.get_texts()] == ["500 / ibu", "500 / inv-n", "1000 / ibu", "1000 / inv-n"]
    expected = line_ds["l2"].sel(estimator="inv-n", n=1000).mean("rep").values
    np.testing.assert_allclose(fig.axes[1].get_lines()[3].get_ydata(), expected)

    grid = figure(line_ds, "box", metrics=["tv"], row="n", col="estimator")
    assert np.shape(grid.axes) == (4,)
    assert [ax.get_title() for ax in grid.axes] == [
        "n = 500, ibu",
        "n = 500, inv-n",
        "n = 1000, ibu",
        "n = 1000, inv-n",
    ]
    assert all(len(ax.patches) == 2 for ax in grid.axes)  # a box per eps, one hue
    assert len({ax.get_ylim() for ax in grid.axes}) == 1  # one metric: panels share the y scale


def test_two_metrics_shown_nowhere_get_rows_of_their_own(line_ds):
    fig = figure(line_ds, "box", col="n", at={})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["tv, n = 500", "tv, n = 1000", "l2, n = 500", "l2, n = 1000"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"hue": ["epss"]}, "--hue: 'epss' is not a dimension of this results file; did you mean 'eps'?"),
        ({"sweep": "eps", "col": "eps"}, "--col: 'eps' is the x axis"),
        ({"hue": ["n"], "row": "n"}, "--row: 'n' is shown already"),
    ],
)
def test_bad_facets_are_one_line_errors(line_ds, options, message):
    with pytest.raises(LdpsimError) as info:
        figure(line_ds, "line", **options)
    assert str(info.value).startswith(message)
    with pytest.raises(LdpsimError, match="a heatmap has a fixed layout"):
        figure(line_ds, "heatmap", hue=["n"])


def test_summary_of_many_sweep_points_fills_the_figure_without_clipping(categorical_ds):
    many = ldpsim.run_scenario(
        {
            **DOC,
            "repetitions": 2,
            "metrics": ["tv", "emd"],
            "sweep": {
                "data": {
                    "path": "dataset",
                    "labels": ["binomial", "zipf"],
                    "values": [{"name": "binomial"}, {"name": "zipf"}],
                },
                "eps": {"path": "cohorts.all.reports.0.eps", "values": [0.5, 1, 1.5, 2, 3, 4, 5, 6, 8]},
            },
        }
    )
    fig = summary_figure(many)
    fig.canvas.draw()
    top = [ax for ax in fig.axes if ax.get_title() in ("tv", "emd")]
    assert len(top) == 2 and top[0].get_position().x1 - top[0].get_position().x0 > 0.8  # stacked, full width
    assert len(top[0].get_xticklabels()) == 18
    width = fig.get_size_inches()[0] * fig.dpi
    for text in (fig._suptitle, *(sub._suptitle for sub in fig.subfigs)):
        if text is not None:
            box = _drawn_extent(fig, text)
            assert box.x0 >= 0 and box.x1 <= width  # never clipped at the edges
    for ax in top:  # the y label and the panel title do not run into each other
        assert not _drawn_extent(fig, ax.yaxis.label).overlaps(_drawn_extent(fig, ax.title))
    ticks = [_drawn_extent(fig, t) for t in top[1].get_xticklabels()]
    assert not any(a.overlaps(b) for a, b in zip(ticks, ticks[1:]))
    estimates = [ax.get_title() for ax in fig.subfigs[1].axes if ax.get_title()]
    # the first, middle and last sweep point, and the figure says so
    assert estimates == ["data=binomial, eps=0.5", "data=binomial, eps=8.0", "data=zipf, eps=8.0"]
    assert "first, middle and last of 18 sweep points" in fig.subfigs[1]._suptitle.get_text()
    assert not [p for ax in top for p in ax.patches]  # past MAX_BOX_POINTS: no boxes, the mean with a band
    assert {t.get_rotation() for t in top[1].get_xticklabels()} == {0.0}  # no crowd of rotated labels


def test_a_long_title_is_wrapped_inside_the_figure(line_ds):
    ds = line_ds.copy()
    ds.attrs["title"] = "a scenario title long enough to run past both edges of a single panel " * 2
    fig = figure(ds, "line", metrics=["tv"], estimators=["ibu"], sweep="eps", at={"n": "500"})
    box = _drawn_extent(fig, fig._suptitle)
    assert box.x0 >= 0 and box.x1 <= fig.get_size_inches()[0] * fig.dpi and "\n" in fig._suptitle.get_text()


def test_summary_of_a_grid_has_one_colour_bar_and_names_its_sweep_point(grid_ds):
    fig = summary_figure(grid_ds)
    maps = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in maps] == ["truth", "ibu", "inv-n"]
    assert len({ax.images[0].get_clim() for ax in maps}) == 1
    bars = [ax for ax in fig.axes if ax.get_ylabel() == "probability" and not ax.images]
    assert len(bars) == 1  # the colour bar's axes
    assert "eps=0.5" in fig.subfigs[1]._suptitle.get_text()
    assert maps[0].get_xlabel() == "x (km)"


def test_robust_heatmap_scale_is_the_2nd_to_98th_percentile(grid_ds):
    plain = figure(grid_ds, "heatmap")
    robust = figure(grid_ds, "heatmap", robust=True)
    panels = [np.ma.getdata(ax.images[0].get_array()) for ax in robust.axes if ax.images]
    low, high = np.percentile(np.concatenate([np.ravel(p) for p in panels]), [2, 98])
    assert robust.axes[0].images[0].get_clim() == pytest.approx((low, high))
    assert plain.axes[0].images[0].get_clim()[0] == 0
    assert [ax for ax in robust.axes if ax.images][-1].images[0].colorbar.extend == "both"
    with pytest.raises(LdpsimError, match="--robust"):
        figure(grid_ds, "box", robust=True)


def test_log_scale_and_unknown_scale(line_ds):
    assert figure(line_ds, "line", metrics=["tv"], yscale="log").axes[0].get_yscale() == "log"
    with pytest.raises(LdpsimError, match="--yscale: unknown scale 'ln'; choose linear, log, symlog"):
        figure(line_ds, "line", yscale="ln")


# ------------------------------------------------------------------ a scenario's default figure
def test_the_scenarios_plot_table_is_the_default_figure(tmp_path):
    doc = {**DOC, "repetitions": 2, "plot": {"kind": "line", "metric": "tv", "hue": ["n", "estimator"]}}
    doc["sweep"] = {**DOC["sweep"], "n": {"path": "users", "values": [500, 1000]}}
    path = save_results(ldpsim.run_scenario(doc), tmp_path / "r.nc")
    ds = open_results(path)
    assert plot_options(ds, {})["kind"] == "line"
    fig = figure(ds, **plot_options(ds, {}))
    assert len(fig.axes) == 1 and len(fig.axes[0].get_lines()) == 4
    assert plot_options(ds, {"yscale": "log"})["hue"] == ["n", "estimator"]  # an option given overrides one key
    assert plot_options(ds, {"kind": "box"}) == {"kind": "box"}  # another kind: the table does not apply
    result = CliRunner().invoke(app, ["plot", str(path), "-o", str(tmp_path / "f.png")])
    assert result.exit_code == 0, result.stderr
    options = ["--kind", "box", "--hue", "n", "--col", "estimator", "--yscale", "log", "-o", str(tmp_path / "g.png")]
    assert CliRunner().invoke(app, ["plot", str(path), *options]).exit_code == 0
    bad = CliRunner().invoke(app, ["plot", str(path), "--robust", "-o", str(tmp_path / "h.png")])
    assert bad.exit_code == 2 and "--robust scales the colours of heat maps" in bad.stderr  # the table's kind is line


def test_a_bad_plot_table_is_refused_when_the_scenario_loads():
    with pytest.raises(LdpsimError, match="plot: unknown field 'hues'; did you mean 'hue'"):
        ldpsim.run_scenario({**DOC, "plot": {"hues": ["eps"]}})


def test_sweep_axis_long_names_never_are_a_bare_index():
    from ldpsim.results.labels import axis_long_name
    from ldpsim.running.sweep import Axis

    def axis(name, *paths):
        return type("A", (), {"name": name, "paths": paths})()

    assert axis_long_name(axis("eps", "cohorts.all.reports.0.eps")) == "privacy level ε"
    assert axis_long_name(axis("mech", "cohorts.all.reports.0")) == "mechanism"  # a whole report
    assert axis_long_name(axis("prior", "dataset.p")) == "prior"  # a bare letter: the axis's name, not the path
    assert axis_long_name(axis("a", "cohorts.everyone.reports.0.a")) == "a"
    assert axis_long_name(axis("e", "cohorts.a.reports.0.eps", "cohorts.b.reports.0.eps")) == "privacy level ε"
    assert axis_long_name(axis("both", "cohorts.a.reports.0", "cohorts.b.dataset")) == "both"
    labelled = type("A", (), {"name": "n", "paths": ("users",), "label": "respondents", "units": "people"})()
    assert axis_long_name(labelled) == "respondents"  # the scenario's own label first
    assert Axis  # the scenario's axes have name and paths


def test_gowalla_scenarios_measure_distances_in_km():
    import tomllib
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "scenarios"
    grids = [tomllib.loads(p.read_text())["domain"] for p in sorted(folder.glob("0*.toml"))]
    grids = [d for d in grids if d["kind"] == "grid"]
    assert len(grids) >= 5 and all(d["unit"] == "km" for d in grids)
