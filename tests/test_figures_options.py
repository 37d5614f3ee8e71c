"""Figures for a paper: axis scales, ``--robust/--no-robust``, the paper style, coverage, axis labels, titles."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy.stats import binomtest
from typer.testing import CliRunner

import ldpsim
from ldpsim import LdpsimError, ScenarioError
from ldpsim.output.cli import app
from ldpsim.output.plan_figure import plan_title
from ldpsim.output.plot_panels import rate_interval
from ldpsim.output.plot_style import auto_xscale
from ldpsim.output.plotting import figure, plot_options
from ldpsim.results.io import open_results, save_results

DOC = {
    "seed": 3,
    "users": 1000,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 4},
    "dataset": {"name": "binomial"},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
    "estimators": ["inv-n"],
    "metrics": ["tv"],
    "sweep": {"n": {"path": "users", "values": [300, 3000, 30000], "label": "respondents", "units": "people"}},
}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    from ldpsim.output.plotting import pyplot

    pyplot().close("all")


@pytest.fixture(scope="module")
def users_ds():
    return ldpsim.run_scenario(DOC)


def test_a_log_x_axis_when_a_numeric_axis_spans_two_decades():
    assert auto_xscale([300, 3000, 30000]) == "log"
    assert auto_xscale([1, 100]) == "log"  # exactly two decades
    assert auto_xscale([1, 99]) == "linear"
    assert auto_xscale([0.5, 1, 2, 4]) == "linear"
    assert auto_xscale([0, 10, 1000]) == "linear"  # zero has no logarithm
    assert auto_xscale(np.array(["krr", "oue"])) == "linear"


def test_line_plots_take_the_automatic_or_the_given_x_scale(users_ds):
    ax = figure(users_ds, "line").axes[0]
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["300", "3000", "30000"]  # ticks at the sweep's values
    assert figure(users_ds, "line", xscale="linear").axes[0].get_xscale() == "linear"
    assert figure(users_ds, "line", yscale="symlog").axes[0].get_yscale() == "symlog"
    with pytest.raises(LdpsimError, match="--xscale: a summary's x axis is not a numeric sweep axis"):
        figure(users_ds, "summary", xscale="log")
    with pytest.raises(LdpsimError, match="--xscale: unknown scale 'ln'"):
        figure(users_ds, "line", xscale="ln")


def test_a_sweep_axis_is_labelled_as_the_scenario_declares_also_in_the_results_file(users_ds, tmp_path):
    save_results(users_ds, tmp_path / "r.nc")
    back = open_results(tmp_path / "r.nc")
    assert back["n"].attrs["long_name"] == "respondents" and back["n"].attrs["units"] == "people"
    assert figure(back, "line").axes[0].get_xlabel() == "respondents (people)"
    lines = back["tv"].isel(estimator=0, rep=0).plot.line(x="n")
    assert lines[0].axes.get_xlabel() == "respondents [people]"  # any xarray user sees them too


def test_a_label_that_is_not_a_string_is_refused():
    sweep = {"n": {"path": "users", "values": [300, 3000], "units": 3}}
    with pytest.raises(ScenarioError, match="sweep.n.units: must be a string"):
        ldpsim.run_scenario({**DOC, "sweep": sweep})


def test_titles_carry_the_fixed_settings(users_ds):
    title = figure(users_ds, "line")._suptitle.get_text().replace("\n", " ")
    assert "krr, ε = 1, values 0..4" in title and "n = " not in title  # n is swept


def test_the_rate_interval_is_wilsons():
    values = np.array([[0.75, 1.0], [0.5, 0.75]])  # two positions, two repetitions of 4 values each
    rate, low, high = rate_interval(values, trials=4)
    np.testing.assert_allclose(rate, [7 / 8, 5 / 8])
    for k, lo, hi in zip([7, 5], low, high):
        ci = binomtest(k, 8).proportion_ci(confidence_level=0.95, method="wilson")
        assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_coverage_is_points_with_intervals_and_the_nominal_level_said_once():
    doc = {
        **DOC,
        "estimators": {"mle": {"intervals": True}},
        "metrics": ["coverage"],
        "sweep": {"n": {"path": "users", "values": [300, 3000]}},
    }
    ds = ldpsim.run_scenario(doc)
    ds.attrs["title"] = "coverage"
    fig = figure(ds)
    ax = fig.axes[0]
    assert not ax.patches  # no boxes
    assert ax.get_lines() and any(t.get_text() == "nominal 95 %" for t in ax.texts)
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [0.95]
    titles = [a.get_title() for a in fig.axes] + [f._suptitle.get_text() for f in (fig, *fig.subfigs) if f._suptitle]
    assert sum(t.count("coverage") for t in titles) == 1
    legend = ax.get_legend()
    assert legend is not None and legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1  # beside the data


def test_the_paper_style_has_a_columns_width_small_fonts_and_vector_output(users_ds, tmp_path):
    fig = figure(users_ds, "line", style="paper", width="column")
    assert fig.get_size_inches()[0] == pytest.approx(3.5)
    assert fig.axes[0].xaxis.label.get_fontsize() == 8 and fig.axes[0].get_xticklabels()[0].get_fontsize() == 7
    assert figure(users_ds, "summary", style="paper", width="page").get_size_inches()[0] == pytest.approx(7.0)
    path = tmp_path / "r.nc"
    save_results(users_ds, path)
    for suffix, magic in ((".pdf", b"%PDF"), (".svg", b"<?xml")):
        target = tmp_path / f"f{suffix}"
        options = ["--style", "paper", "--width", "column", "-o", str(target)]
        result = CliRunner().invoke(app, ["plot", str(path), *options])
        assert result.exit_code == 0, result.stderr
        assert target.read_bytes().startswith(magic)
    bad = CliRunner().invoke(app, ["plot", str(path), "--width", "narrow", "-o", str(tmp_path / "g.png")])
    assert bad.exit_code == 2 and "--width: unknown width 'narrow'" in bad.stderr


def test_no_robust_overrides_the_scenarios_plot_table(tmp_path):
    grid = {
        **DOC,
        "repetitions": 1,
        "domain": {"kind": "grid", "rows": 3, "cols": 4},
        "dataset": {"name": "zipf"},
        "cohorts": {"all": {"reports": [{"mechanism": "planar-geometric", "eps": 2.0}]}},
        "sweep": {},
        "plot": {"kind": "heatmap", "robust": True},
    }
    path = tmp_path / "g.nc"
    save_results(ldpsim.run_scenario(grid), path)
    ds = open_results(path)

    def colour_bar_label(options: dict) -> str:
        fig = figure(ds, **plot_options(ds, options))
        return [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel().startswith("probability")][0]

    assert colour_bar_label({"robust": None}) == "probability (2-98 %)"  # not given: the table's
    assert colour_bar_label({"robust": False}) == "probability"  # --no-robust
    result = CliRunner().invoke(app, ["plot", str(path), "--no-robust", "-o", str(tmp_path / "f.png")])
    assert result.exit_code == 0, result.stderr


def test_the_plan_figures_title_names_eps_users_and_the_domain():
    ds = xr.Dataset(
        attrs={
            "method": "simulation",
            "setting_mechanism": "krr",
            "setting_estimator": "inv-p",
            "eps": 1.0,
            "users": 10000,
            "setting_domain": "{'kind': 'integers', 'low': 0, 'high': 99}",
        }
    )
    assert plan_title(ds) == "simulation: krr, inv-p | ε = 1, n = 10,000, domain integers 0..99"


def test_the_summarys_estimate_panels_follow_a_stated_rule_or_at(users_ds):
    fig = figure(users_ds)
    estimates = fig.subfigs[1]
    assert [ax.get_title() for ax in estimates.axes if ax.get_title()] == ["n=300", "n=3000", "n=30000"]
    assert "every sweep point" in estimates._suptitle.get_text()
    chosen = figure(users_ds, at={"n": "3000"}).subfigs[1]
    assert [ax.get_title() for ax in chosen.axes if ax.get_title()] == ["n=3000"]
