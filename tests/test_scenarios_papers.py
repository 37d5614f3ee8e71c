"""The papers' experiments as shipped scenarios: every file validates, and cheap versions of a
few show what the papers state (fixed seeds, so each assertion is a deterministic check)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import ldpsim
from ldpsim.running.open_runs import load_open_scenario
from ldpsim.running.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(SCENARIOS.glob("*.toml"))
PAPER_FILES = [f for f in FILES if f.name[:4] in ("001-", "002-", "004-")]


def test_there_is_a_scenario_per_figure_of_the_brief():
    names = {f.stem.split("-")[0] + "-" + f.stem.split("-")[1] for f in PAPER_FILES}
    expected = {"001-fig9", "001-fig10", "001-fig11", "001-fig12", "001-fig13", "001-fig14"}
    expected |= {"004-fig1", "004-fig9ace", "004-fig10a", "004-fig12", "004-fig6"}
    expected |= {"002-fig5", "002-fig6a", "002-fig7", "002-fig8"}
    assert expected <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scenario_validates_and_says_what_it_reproduces(path):
    if 'kind = "heavy-hitters"' in path.read_text():  # run by ldpsim.running.open_runs
        opened = load_open_scenario(path)  # builds every sweep point's plugins
        assert len(opened.setups) == math.prod(len(a.values) for a in opened.axes)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # check-ins outside a sub-box are left out, with a warning
        scenario = load_scenario(path)  # builds every sweep point's plugins
    assert len(list(scenario.points())) == math.prod(scenario.shape)
    if path in PAPER_FILES:
        header = path.read_text().split("\nname =")[0]
        assert "Fig." in header and "repetitions" in header


@pytest.mark.parametrize("path", [f for f in PAPER_FILES if "avg-mse" in f.read_text()], ids=lambda p: p.stem)
def test_avg_mse_has_the_scenarios_number_of_users(path):
    # avg-mse is (S - S_hat)^2 / N: with N different from the users the paper's E/N is off by their ratio
    scenario = load_scenario(path)
    for point in scenario.points():
        setup = scenario.builder.setup(point, scenario.axes)
        assert setup.metrics["avg-mse"].users == setup.users


def _mean_error(ds, metric, **sel):
    return float(ds[metric].sel(**sel).mean("rep"))


def test_001_fig2_ibu_beats_inversion_on_geometric_noise():
    ds = ldpsim.run_scenario(SCENARIOS / "quickstart.toml", users=20_000, repetitions=2)
    for data in ds["data"].values:
        ibu = _mean_error(ds, "tv", estimator="ibu", data=data)
        assert ibu < 0.5 * _mean_error(ds, "tv", estimator="inv-n", data=data)
        assert ibu < 0.5 * _mean_error(ds, "tv", estimator="inv-p", data=data)


def test_001_fig14_rappor_estimators_are_comparable():
    # RAPPOR is randomized response: IBU and INV within a small factor of each other (001 Fig. 14),
    # unlike the geometric mechanism where INV is many times worse
    ds = ldpsim.run_scenario(
        SCENARIOS / "001-fig14-rappor-tv.toml", users=20_000, repetitions=3, sweep__eps__values=[1.0, 4.0]
    )
    tv = ds["tv"].mean("rep")
    ratio = tv.sel(estimator="ibu") / tv.sel(estimator="inv-p")
    assert float(ratio.max()) < 2.5 and float(ratio.min()) > 0.4


def test_002_fig5_orders_the_models_and_matches_eq42():
    ds = ldpsim.run_scenario(
        SCENARIOS / "002-fig5-binary-lip-vs-ldp.toml", repetitions=100, sweep__eps__values=[1.0, 2.0]
    )
    root = np.sqrt(ds["avg-mse"].mean("rep"))  # 002's sqrt(E/N)
    for eps in (1.0, 2.0):
        at = root.sel(eps=eps, prior="P1=0.99")
        lip = float(at.sel(mechanism="lip-binary", estimator="mmse"))
        opt_ldp = float(at.sel(mechanism="krr", estimator="mmse"))
        free = float(at.sel(mechanism="krr", estimator="inv-p"))
        assert lip < opt_ldp < free
        # context-free LDP at P1 = 0.5 (no clipping): eq. (42), sqrt(p(1-p))/(2p-1) = e^(eps/2)/(e^eps-1)
        unclipped = float(root.sel(eps=eps, prior="P1=0.5", mechanism="krr", estimator="inv-p"))
        assert unclipped == pytest.approx(math.exp(eps / 2) / math.expm1(eps), rel=0.2)


def test_004_fig6_region_is_the_shared_check_ins_of_its_box():
    """The scenario's pmf is the region's distribution computed from the shared SNAP subset."""
    from helpers import make, shared_data

    scenario = load_scenario(SCENARIOS / "004-fig6-non-identifying-planar.toml")
    setup = scenario.builder.setup(next(iter(scenario.points())), scenario.axes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # check-ins outside the region are left out, with a warning
        region = make(
            "dataset",
            "gowalla",
            setup.domain,
            path=str(shared_data("gowalla_sf.csv")),
            lat_min=37.75,
            lat_max=37.7946,
            lon_min=-122.4357,
            lon_max=-122.3789,
            cell_km=1.0,
        )
    assert region.size == 101_377
    np.testing.assert_allclose(setup.dataset.distribution(), region.distribution(), atol=1e-10)


def test_002_fig6b_ldp_matrices_are_randomized_response_on_the_users_values():
    """Theorem 3's matrix at a = log((K - 1 + e^eps) / K) under the uniform prior on K values is K-RR at eps."""
    from helpers import make

    from ldpsim import Integers

    scenario = load_scenario(SCENARIOS / "002-fig6b-ldp-domain-size.toml")
    for point in scenario.points():
        setup = scenario.builder.setup(point, scenario.axes)
        k = int(point.coords["size"])
        m = setup.cohorts[0].plan[0].matrix
        krr = make("mechanism", "krr", Integers(low=0, high=k - 1), eps=1.0).matrix
        np.testing.assert_allclose(m[:k, :k], krr, rtol=1e-12)
        assert not m[:k, k:].any()  # values beyond |D| - 1 are never reported by the users


def test_mmse_local_prior_is_each_cohorts_own_for_any_mechanism():
    """prior = "local": cohorts with one k-RR plan but their own datasets keep their own priors."""
    from ldpsim.running.runner import simulate, tasks

    doc = {
        "seed": 1,
        "users": 2000,
        "repetitions": 1,
        "domain": {"kind": "integers", "low": 0, "high": 1},
        "dataset": {"name": "pmf", "p": [0.5, 0.5]},
        "cohorts": {
            c: {"share": 0.5, "dataset": {"name": "pmf", "p": p}, "reports": [{"mechanism": "krr", "eps": 1.0}]}
            for c, p in (("low", [0.9, 0.1]), ("high", [0.2, 0.8]))
        },
        "estimators": {"local": {"name": "mmse", "prior": "local"}, "global": {"name": "mmse", "prior": "dataset"}},
        "metrics": ["tv"],
    }
    scenario = load_scenario(doc)
    setup, _, obs = simulate(tasks(scenario)[0], scenario.builder)
    assert len(obs.groups) == 2  # one plan, two priors: kept apart
    keep = math.e / (1 + math.e)
    m = np.array([[keep, 1 - keep], [1 - keep, keep]])
    want = np.zeros(2)
    for group in obs.groups:  # sum over users of P(X = x | their report) under their own prior
        post = group.prior[:, None] * m / (group.prior @ m)
        want += post[:, group.reports[:, 0]] @ group.counts
    got = setup.estimators["local"].estimate(obs).distribution
    np.testing.assert_allclose(got, want / obs.n, rtol=1e-12)
    assert not np.allclose(got, setup.estimators["global"].estimate(obs).distribution, atol=1e-3)
