"""Intervals of linear statistics without the K x K information, and range answers stored as results.

:func:`ldpsim.linear_intervals` is held against the dense path (:func:`ldpsim.mle_uncertainty` and
:meth:`ldpsim.Uncertainty.linear_interval`) on small domains, and on a domain beyond the dense path's
``MAX_INTERVAL_VALUES`` against k-RR's closed form: on the tangent space ``a_y . u = (p - q) u_y``, so
the information is diagonal there, ``D = (p - q)^2 diag(c / P(y)^2)``, and
``Var(w . theta) = w' D^-1 w - (w' D^-1 1)^2 / (1' D^-1 1)``. ``range-mle`` and ``range-answers`` are
run through a scenario: stored answers consistent across the tree, certified, with intervals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ldpsim
from ldpsim import Integers, Likelihood, Observations, ParameterError, linear_intervals, mle_uncertainty
from ldpsim.estimation.uncertainty import MAX_INTERVAL_VALUES
from ldpsim.output.cli import app

MECHANISMS = [
    ("krr", {}, 12),
    ("oue", {}, 10),
    ("rappor", {}, 8),
    ("hh", {"branching": 2}, 16),
    ("hh", {"branching": 4, "oracle": "olh"}, 16),
    ("haar-hrr", {}, 32),
]


def observe(name, params, k, eps, theta, users, seed):
    mech = make("mechanism", name, Integers(low=0, high=k - 1), eps=eps, **params)
    rng = np.random.default_rng(seed)
    values = rng.choice(k, size=users, p=theta)
    return Observations.from_reports(mech.domain, [(mech, mech.sample(values, rng))])


@settings(max_examples=30, deadline=None)
@given(
    case=st.sampled_from(MECHANISMS),
    eps=st.floats(0.5, 4.0),
    zeros=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)
def test_matrix_free_equals_the_dense_path(case, eps, zeros, seed):
    """Any theta (a few values at zero: the face's boundary), any statistics: the same variances to 1e-8."""
    name, params, k = case
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.ones(k))
    theta[rng.choice(k, size=zeros, replace=False)] = 0.0
    theta /= theta.sum()
    obs = observe(name, params, k, eps, rng.dirichlet(np.ones(k)), 3000, seed)
    dense = mle_uncertainty(obs, theta)
    assume(dense.covariance is not None)  # values the data cannot tell apart: the dense path has no answer
    weights = np.vstack([np.ones(k), (np.arange(k) < k // 3).astype(float), rng.normal(size=(3, k))])
    value, lower, upper = linear_intervals(obs, theta, weights, 0.9)
    np.testing.assert_allclose(upper - value, value - lower, rtol=1e-12, atol=1e-15)
    expected = np.array([dense.linear_interval(w, 0.9) for w in weights])
    np.testing.assert_allclose(value, expected[:, 0], rtol=1e-12, atol=1e-15)
    var = ((upper - lower) / 2) ** 2
    var_dense = ((expected[:, 2] - expected[:, 1]) / 2) ** 2
    np.testing.assert_allclose(var, var_dense, rtol=1e-8, atol=1e-12 * var_dense.max())


def test_beyond_the_dense_path_krr_closed_form():
    """k-RR on 8,192 values (twice MAX_INTERVAL_VALUES, where the dense path gives up): the closed form."""
    k, eps, n = 2 * MAX_INTERVAL_VALUES, 1.0, 200_000
    rng = np.random.default_rng(0)
    theta = 0.5 * rng.dirichlet(np.ones(k)) + 0.5 / k  # every value above one user's mass: no boundary
    obs = observe("krr", {}, k, eps, theta, n, 1)
    assert mle_uncertainty(obs, theta).covariance is None
    weights = np.zeros((3, k))
    weights[0, :100] = 1.0
    weights[1, 50:5000] = 1.0
    weights[2] = rng.normal(size=k)
    value, lower, upper = linear_intervals(obs, theta, weights)
    e = math.exp(eps)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    counts = np.zeros(k)
    for group in obs.groups:
        np.add.at(counts, group.reports[:, 0], group.counts)
    assert counts.min() > 0
    d_inv = 1.0 / ((p - q) ** 2 * counts / (q + (p - q) * theta) ** 2)
    var = np.einsum("ij,j,ij->i", weights, d_inv, weights) - (weights @ d_inv) ** 2 / d_inv.sum()
    np.testing.assert_allclose((upper - lower) / 2, 1.959963984540054 * np.sqrt(var), rtol=1e-8)
    np.testing.assert_allclose(value, weights @ theta, rtol=1e-12)


def test_a_single_statistic_and_bad_weights():
    obs = observe("krr", {}, 6, 1.0, np.ones(6) / 6, 2000, 3)
    theta = np.ones(6) / 6
    value, lower, upper = linear_intervals(obs, theta, np.arange(6.0))
    assert np.ndim(value) == 0 and lower < value < upper and value == pytest.approx(2.5)
    whole = linear_intervals(obs, theta, np.ones(6))  # the total is 1 on the simplex: no spread at all
    assert whole[1] == whole[2] == pytest.approx(1.0)
    for bad in (np.ones(5), np.array([1.0, np.nan, 0, 0, 0, 0])):
        with pytest.raises(ParameterError, match="weights") as info:
            linear_intervals(obs, theta, bad)
        assert "\n" not in str(info.value)


SCENARIO = {
    "name": "range-answers",
    "seed": 7,
    "users": 30_000,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 63},
    "dataset": {"name": "zipf", "s": 1.1},
    "cohorts": {"everyone": {"share": 1, "reports": [{"mechanism": "hh", "eps": 2.0, "branching": 4}]}},
    # the tree's node [0, 15], its four children, and a grandchild
    "estimators": {"range-ci": {}, "range-mle": {"ranges": [[0, 15], [0, 3], [4, 7], [8, 11], [12, 15], [0, 0]]}},
    "metrics": {"head": {"name": "range-answers", "ranges": [[0, 15], [0, 3], [4, 7], [8, 11], [12, 15], [0, 0]]}},
}


def test_stored_range_answers_are_consistent_certified_and_bounded():
    """Per estimator and run: answers and truth of every range; the joint MLE's answer of a parent is the sum
    of its children's (to rounding), its certificate holds, and it alone carries intervals around them."""
    ds = ldpsim.run_scenario(SCENARIO)
    answer, truth = ds["range_answer"], ds["range_truth"]
    assert answer.dims == ("estimator", "rep", "query") and answer.sizes["query"] == 6
    estimate = ds["estimate"].values  # (estimator, rep, value)
    bounds = [(0, 15), (0, 3), (4, 7), (8, 11), (12, 15), (0, 0)]
    sums = np.stack([estimate[..., a : b + 1].sum(axis=-1) for a, b in bounds], axis=-1)
    np.testing.assert_allclose(answer.values, sums, atol=1e-14)
    tv = ds["truth"].values
    np.testing.assert_allclose(truth.values[0], np.stack([tv[..., a : b + 1].sum(-1) for a, b in bounds], -1))
    mle = answer.sel(estimator="range-mle").values
    np.testing.assert_allclose(mle[:, 0], mle[:, 1:5].sum(axis=1), atol=1e-14)  # parent = sum of children
    assert (ds["kkt"].sel(estimator="range-mle").values < 1e-6).all()
    lower, upper = ds["range_lower"].sel(estimator="range-mle").values, ds["range_upper"].sel(estimator="range-mle")
    assert (lower <= mle).all() and (mle <= upper.values).all() and (upper.values - lower > 0).all()
    assert np.isnan(ds["range_lower"].sel(estimator="range-ci").values).all()
    score = ds["head"]
    assert np.isnan(score.sel(estimator="range-ci").values).all()
    assert ((score.sel(estimator="range-mle").values >= 0) & (score.sel(estimator="range-mle").values <= 1)).all()


@pytest.mark.parametrize("where", ["estimators", "metrics"])
def test_a_range_outside_the_domain_exits_2_in_one_line(where, tmp_path):
    lines = [
        'name = "bad"\nseed = 1\nusers = 1000\nrepetitions = 1',
        '[domain]\nkind = "integers"\nlow = 0\nhigh = 15',
        '[dataset]\nname = "uniform"',
        '[cohorts.everyone]\nshare = 1\nreports = [{ mechanism = "hh", eps = 1.0, branching = 2 }]',
        f"[estimators.range-mle]\nranges = {[[0, 3], [4, 16]] if where == 'estimators' else [[0, 3]]}",
        f'[metrics.r]\nname = "range-answers"\nranges = {[[0, 3], [4, 16]] if where == "metrics" else [[0, 3]]}',
    ]
    path = tmp_path / "bad.toml"
    path.write_text("\n\n".join(lines) + "\n")
    out = tmp_path / "out.nc"
    result = CliRunner().invoke(app, ["run", str(path), "-o", str(out), "--executor", "serial"])
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "ranges" in message and "[4, 16]" in message, message
    assert not out.exists()


def test_likelihood_is_shared_with_the_estimate():
    """The intervals read the observations' cached likelihood: no second build of a large one."""
    obs = observe("hh", {"branching": 2}, 16, 1.0, np.ones(16) / 16, 2000, 5)
    first = Likelihood.of(obs)
    linear_intervals(obs, np.ones(16) / 16, np.ones((1, 16)))
    assert Likelihood.of(obs) is first
