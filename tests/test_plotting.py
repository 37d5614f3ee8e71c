"""Figures: the panels show what the results hold."""

from __future__ import annotations

import numpy as np
from matplotlib.image import imread
from typer.testing import CliRunner

import ldpsim
from ldpsim.cli import app
from ldpsim.plotting import summary_figure
from ldpsim.results import save_results

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


def test_summary_figure_panels():
    ds = ldpsim.run_scenario(DOC)
    fig = summary_figure(ds)
    top = [ax for ax in fig.axes if ax.get_title() in ("tv", "l2")]
    assert [ax.get_title() for ax in top] == ["tv", "l2"]
    assert [t.get_text() for t in top[0].get_legend().get_texts()] == ["ibu", "inv-n"]
    assert [t.get_text() for t in top[0].get_xticklabels()] == ["eps=0.5", "eps=2.0"]
    bottom = [ax for ax in fig.axes if ax.get_title().startswith("rep 0")]
    assert len(bottom) == 2
    line = bottom[0].get_lines()[0]  # ibu's estimate at eps=0.5, rep 0
    np.testing.assert_allclose(line.get_ydata(), ds["estimate"].sel(estimator="ibu").isel(eps=0, rep=0).values)


def test_plot_command_writes_an_image(tmp_path):
    path = save_results(ldpsim.run_scenario({**DOC, "domain": {"kind": "grid", "rows": 2, "cols": 5}, "dataset": {"name": "zipf"}}), tmp_path / "r.nc")
    result = CliRunner().invoke(app, ["plot", str(path)])
    assert result.exit_code == 0, result.stderr
    image = imread(tmp_path / "r.png")
    assert image.ndim == 3 and image.shape[0] > 200
    bad = CliRunner().invoke(app, ["plot", str(path), "-o", str(tmp_path / "r.xyz")])
    assert bad.exit_code == 2 and "output:" in bad.stderr
