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


class Dented(ldpsim.Mechanism):
    """k-RR-like matrix with one defect chosen by `defect`, as a third party's bug would be."""

    name = "dented"
    defect = ldpsim.Param("str", "negative", choices=("negative", "short", "nan"), doc="the defect")

    @property
    def privacy(self):
        return ldpsim.Privacy("ldp", 1.0)

    def _matrix(self):
        k = self.domain.size
        m = np.full((k, k), 1.0 / k)
        if self.defect == "negative":  # rows still sum to 1
            m[2, 3], m[2, 0] = m[2, 3] - 0.3, m[2, 0] + 0.3
            m[1, 4], m[1, 0] = m[1, 4] - 0.25, m[1, 0] + 0.25
        elif self.defect == "short":
            m[4, 1] -= 0.03
            m[3, 1] -= 0.01
        else:
            m[3, 2] = np.nan
        return m


@pytest.mark.parametrize(
    ("defect", "problem"),
    [
        ("negative", "matrix has negative entries, the least -0.1 at row 2, column 3 (counting from 0)"),
        ("short", "matrix row 4 sums to 0.97, not 1 (rows counting from 0)"),
        ("nan", "matrix has a non-finite entry, nan at row 3, column 2 (counting from 0)"),
    ],
)
def test_a_bad_matrix_is_reported_at_the_report_that_uses_it_with_its_defect(defect, problem):
    """It read "estimators.inv-p: dented(): matrix is not row-stochastic": the estimator that met it, and no
    defect. Cohort b's second report (its first repeats krr) is the one; the entries are set by hand above."""
    doc = {
        **SCENARIO,
        "domain": {"kind": "integers", "low": 0, "high": 4},
        "cohorts": {
            "a": {"share": 0.5, "reports": [{"mechanism": "krr", "eps": 1.0}]},
            "b": {
                "share": 0.5,
                "reports": [{"mechanism": "krr", "eps": 1.0, "repeat": 2}, {"mechanism": "dented", "defect": defect}],
            },
        },
        "metrics": ["tv"],
    }
    with ldpsim.registered(Dented), pytest.raises(PluginError) as caught:
        ldpsim.run_scenario(doc, executor="serial")
    assert str(caught.value).startswith(
        f"cohorts.b.reports[1]: mechanism 'dented', checked for estimator inv-p: {problem}; fix the plugin"
    )


def test_the_defect_named_is_where_a_brute_force_search_finds_it(rng):
    from ldpsim.model.mechanism import stochastic_defect

    for _ in range(50):
        m = rng.dirichlet(np.ones(6), size=5)
        assert stochastic_defect(m) is None
        i, j = rng.integers(5), rng.integers(6)
        m[i, j] -= 0.5  # the only negative entry, or the only short row
        worst = min((m[r, c], r, c) for r in range(5) for c in range(6))
        if worst[0] < 0:
            assert stochastic_defect(m) == (
                f"has negative entries, the least {worst[0]:.6g} at row {worst[1]}, column {worst[2]} (counting from 0)"
            )
        else:
            assert stochastic_defect(m) == f"row {i} sums to {m[i].sum():.12g}, not 1 (rows counting from 0)"
