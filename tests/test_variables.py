"""Result variables are declared once: runs, checkpoints, assembly and the summary follow the declarations."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import ldpsim
from ldpsim import DOMAIN, TASK, Estimate, Estimator, Metric, PluginError, Registry, Variable, hookimpl
from ldpsim.results.io import open_results, save_results
from ldpsim.results.summary import summarize
from ldpsim.results.variables import CORE, declared
from ldpsim.running.checkpoint import Checkpoint
from ldpsim.running.runner import execute
from ldpsim.running.scenario import load_scenario

SCENARIO = {
    "seed": 11,
    "users": 3000,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 5},
    "dataset": {"name": "binomial", "p": 0.3},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
    "estimators": {"ibu": {}, "mle": {}, "band": {}},
    "metrics": ["tv", "inside"],
    "sweep": {"eps": {"path": "cohorts.all.reports.0.eps", "values": [0.5, 2.0]}},
}

LOWER = Variable("band_lower", ("estimator", TASK, DOMAIN), "lower bound of each value's frequency")
UPPER = Variable("band_upper", ("estimator", TASK, DOMAIN), "upper bound of each value's frequency")
WIDTH = Variable("mean_width", ("estimator", TASK), "mean width of the band", summary=True)
INSIDE = Variable("truth_inside", ("estimator", TASK), "share of values whose band holds the truth", source="metric")


class Band(Estimator):
    """IBU's estimate with a fixed band of +-0.01 around it (a stand-in for an interval estimator)."""

    name = "band"
    outputs = (LOWER, UPPER, WIDTH)

    def _estimate(self, observations):
        theta = ldpsim.gibu(ldpsim.Likelihood.of(observations)).theta
        return Estimate(
            theta, extras={"band_lower": np.clip(theta - 0.01, 0, 1), "band_upper": theta + 0.01, "mean_width": 0.02}
        )


class Inside(Metric):
    """Largest absolute error, and (declared output) whether each estimate is within 0.05 everywhere."""

    name = "inside"
    outputs = (INSIDE,)

    def _compute(self, estimate, truth, domain):
        return float(np.abs(estimate - truth).max())

    def _outputs(self, estimate, truth, domain):
        return {"truth_inside": float(np.mean(np.abs(estimate - truth) <= 0.05))}


@pytest.fixture
def with_band(monkeypatch):
    """A registry with a third party's estimator and metric that declare extra outputs."""
    module = types.ModuleType("ldpsim_band")

    @hookimpl
    def register_estimators(register):
        register(Band)

    @hookimpl
    def register_metrics(register):
        register(Inside)

    module.register_estimators = register_estimators
    module.register_metrics = register_metrics
    registry = Registry.from_entry_points()
    registry.add(module, name="band")
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", registry)
    return registry


def test_the_core_variables_are_the_results_variables():
    ds = ldpsim.run_scenario({**SCENARIO, "estimators": ["ibu"], "metrics": ["tv", "l2"], "sweep": {}})
    per_metric = [v.name for v in CORE if v.dims[0] == "metric"]
    assert per_metric == ["scores"]  # stored as one variable per metric, named by its label
    # noisy included: k-RR reports are values; privacy_over_time only for memoized mechanisms, central_eps and
    # central_delta only for shuffled cohorts
    present = [v for v in CORE if v.name not in ("scores", "privacy_over_time", "central_eps", "central_delta")]
    assert list(ds.data_vars) == ["tv", "l2", *(v.name for v in present)]
    for var in present:
        if var.name != "scores":
            assert ds[var.name].attrs["long_name"] == var.long_name
            assert ds[var.name].dtype == np.dtype(var.dtype)
    assert ds["tv"].attrs == {"long_name": "Total variation distance", "units": "1", "ldpsim_metric": "tv"}
    assert ldpsim.scores(ds).dims == ("metric", "estimator", "rep")
    assert list(ldpsim.scores(ds)["metric"].values) == ["tv", "l2"]


def test_the_kkt_violation_is_recorded_and_gives_the_gap():
    estimators = {"ibu": {}, "mle": {}, "inv-p": {"certify": "always"}}  # inversion is certified when asked
    ds = ldpsim.run_scenario({**SCENARIO, "estimators": estimators, "metrics": ["tv"]})
    kkt, gap = ds["kkt"], ds["gap"]
    assert kkt.dims == ("estimator", "eps", "rep")
    assert bool((kkt >= 0).all())
    n = ds["users"].broadcast_like(kkt)
    np.testing.assert_allclose(gap.values, n.values * np.log1p(kkt.values), rtol=1e-12)  # Likelihood.certificate
    assert float(kkt.sel(estimator="mle").max()) <= ldpsim.DEFAULT_TOL  # the certified MLE stops at the tolerance
    assert float(kkt.sel(estimator="ibu").min()) > ldpsim.DEFAULT_TOL  # the paper's rule stops short of it


def test_a_plugins_declared_outputs_appear_in_the_results_and_survive_a_file(with_band, tmp_path):
    ds = ldpsim.run_scenario(SCENARIO)
    assert ds["band_lower"].dims == ("estimator", "eps", "rep", "value")
    assert ds["mean_width"].dims == ("estimator", "eps", "rep")
    assert ds["truth_inside"].dims == ("estimator", "eps", "rep")
    band = ds.sel(estimator="band")
    np.testing.assert_allclose(band["band_upper"] - band["estimate"], 0.01, atol=1e-15)
    assert bool(np.isnan(ds["band_lower"].sel(estimator="ibu")).all())  # ibu declares no band: the fill value
    assert bool(((ds["truth_inside"] >= 0) & (ds["truth_inside"] <= 1)).all())  # every estimate is scored
    assert ds["band_upper"].attrs["long_name"] == UPPER.long_name
    back = open_results(save_results(ds, tmp_path / "band.nc"))
    np.testing.assert_array_equal(back["band_lower"].values, ds["band_lower"].values)
    rows = summarize(back)
    assert [r["mean_width"] for r in rows if r["estimator"] == "band"] == [pytest.approx(0.02)] * 2
    assert math.isnan(next(r["mean_width"] for r in rows if r["estimator"] == "ibu"))


def test_declared_outputs_go_through_checkpoints(with_band, tmp_path):
    whole = execute(load_scenario(SCENARIO))
    out = tmp_path / "r.nc"
    checkpoint = Checkpoint(out, load_scenario(SCENARIO))
    first = execute(load_scenario(SCENARIO), checkpoint=checkpoint)
    checkpoint.flush()  # the runs deferred at the end, as when the results cannot be written
    assert len(checkpoint.load()) == 4  # every run, through the checkpoint's files
    resumed = execute(load_scenario(SCENARIO), checkpoint=Checkpoint(out, load_scenario(SCENARIO), resume=True))
    for ds in (first, resumed):
        for name in ("band_lower", "band_upper", "mean_width", "truth_inside", "estimate", "kkt"):
            np.testing.assert_array_equal(ds[name].values, whole[name].values)


def test_conflicting_declarations_are_refused():
    class Other(Estimator):
        name = "other"
        outputs = (Variable("band_lower", ("estimator", TASK), "a scalar lower bound"),)

    class Shadow(Estimator):
        name = "shadow"
        outputs = (Variable("gap", ("estimator", TASK), "not the core's gap"),)

    assert [v.name for v in declared([Band(), Band()])][-3:] == ["band_lower", "band_upper", "mean_width"]
    with pytest.raises(PluginError, match="declares output 'band_lower', which is another plugin's output"):
        declared([Band(), Other()])
    with pytest.raises(PluginError, match="declares output 'gap', which is a core variable"):
        declared([Shadow()])


def test_an_undeclared_extra_is_a_plugin_bug(with_band):
    class Sloppy(Band):
        name = "sloppy"
        outputs = (LOWER,)

    obs = ldpsim.Observations.from_reports(
        ldpsim.Integers(low=0, high=2),
        [(ldpsim.get_registry().create("mechanism", "krr", ldpsim.Integers(low=0, high=2), eps=1.0), np.zeros((5, 1)))],
    )
    with pytest.raises(ValueError, match=r"undeclared outputs \['band_upper', 'mean_width'\]"):
        Sloppy().estimate(obs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "_key"}, "without a leading underscore"),
        ({"name": "x", "source": "elsewhere"}, "source must be one of"),
        ({"name": "x", "dims": (TASK,)}, "must start with 'estimator'"),
    ],
)
def test_malformed_declarations_fail_where_they_are_written(kwargs, message):
    spec = {"name": "x", "dims": ("estimator", TASK), "long_name": "x", **kwargs}
    with pytest.raises(ValueError, match=message):
        Variable(**spec)
