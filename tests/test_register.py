"""In-process registration: plugin classes of a notebook or a test, without a package or an entry point."""

from __future__ import annotations

import numpy as np
import pytest

import ldpsim
from ldpsim import Metric, PluginError, get_registry


class Worst(Metric):
    """Largest absolute error of one value's frequency."""

    name = "worst"

    def _compute(self, estimate, truth, domain):
        return float(np.abs(estimate - truth).max())


class Impostor(Metric):
    name = "tv"

    def _compute(self, estimate, truth, domain):
        return 0.0


SCENARIO = {
    "seed": 2,
    "users": 5000,
    "domain": {"kind": "integers", "low": 0, "high": 9},
    "dataset": {"name": "binomial", "p": 0.4},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 2.0}]}},
    "estimators": ["inv-p"],
    "metrics": ["worst", "tv"],
}


@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_a_registered_class_runs_in_a_scenario_and_is_gone_after_the_block(executor):
    with ldpsim.registered(Worst) as registry:
        assert registry.get("metric", "worst").plugin == "in-process"
        ds = ldpsim.run_scenario(SCENARIO, executor=executor, workers=2 if executor == "processes" else None)
    assert "worst" not in get_registry().names("metric")
    assert bool((ds["worst"] <= ds["tv"] + 1e-15).all())  # errors above and below the truth each sum to TV
    assert ds["worst"].attrs["ldpsim_metric"] == "worst"


def test_a_name_already_taken_is_refused_and_nothing_is_registered():
    with pytest.raises(PluginError, match="metric 'tv' is registered by two plugins: distances .* and in-process"):
        ldpsim.register(Worst, Impostor)
    assert "worst" not in get_registry().names("metric")  # all or nothing
    assert get_registry().get("metric", "tv").cls is not Impostor


def test_what_is_not_a_plugin_class_is_refused():
    with pytest.raises(PluginError, match="is not a plugin class"):
        ldpsim.register(dict)
