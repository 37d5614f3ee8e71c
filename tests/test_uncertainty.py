"""Standard errors and intervals: closed forms, agreement of two derivations, and seeded coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st

import ldpsim
from ldpsim import Integers, Observations, ParameterError, mle_uncertainty, unbiased_uncertainty

K = 8


def krr_observations(theta, n, eps, seed):
    domain = Integers(low=0, high=len(theta) - 1)
    mech = make("mechanism", "krr", domain, eps=eps)
    rng = np.random.default_rng(seed)
    values = rng.choice(len(theta), size=n, p=theta)
    return mech, Observations.from_reports(domain, [(mech, mech.sample(values, rng))])


def test_the_inversion_standard_error_is_the_multinomial_closed_form():
    eps, n = 1.0, 5000
    mech, obs = krr_observations(np.full(K, 1 / K), n, eps, seed=3)
    p = math.exp(eps) / (math.exp(eps) + K - 1)
    q = 1 / (math.exp(eps) + K - 1)
    freq = np.bincount(obs.groups[0].reports[:, 0], weights=obs.groups[0].counts, minlength=K) / n
    v = (freq - q) / (p - q)  # k-RR's unbiased estimate, linear in the observed frequencies
    spread = unbiased_uncertainty(obs, v)
    np.testing.assert_allclose(spread.se, np.sqrt(freq * (1 - freq) / n) / (p - q), rtol=1e-9)


def test_an_interior_mle_has_the_inversions_standard_errors():
    """For a square invertible mechanism an interior MLE is the inversion estimate, and the inverse of the
    observed information on the simplex is the delta-method covariance of q A^-1 (saturated multinomial)."""
    theta = np.array([0.05, 0.1, 0.2, 0.15, 0.1, 0.1, 0.2, 0.1])
    _, obs = krr_observations(theta, 200_000, 2.0, seed=4)
    est = ldpsim.get_registry().create("estimator", "mle", intervals=True).estimate(obs)
    v = ldpsim.unbiased_estimate(obs)
    assert v.min() > 0.01  # interior
    np.testing.assert_allclose(est.distribution, v, atol=1e-5)  # the MLE's KKT tolerance
    np.testing.assert_allclose(est.uncertainty.se, unbiased_uncertainty(obs, v).se, rtol=1e-4)
    assert est.uncertainty.method == "fisher" and not est.uncertainty.boundary.any()


def test_values_on_the_boundary_get_a_one_sided_interval():
    theta = np.array([0.5, 0.5, 0, 0, 0, 0, 0, 0])
    _, obs = krr_observations(theta, 3000, 1.0, seed=5)
    est = ldpsim.get_registry().create("estimator", "mle", intervals=True).estimate(obs)
    spread = est.uncertainty
    assert spread.boundary.sum() >= 3  # most empty values are estimated at zero
    low, high = est.interval(0.95)
    assert np.all(low[spread.boundary] == 0) and np.all(high[spread.boundary] > 0)
    assert np.all(high[spread.boundary] < 0.2)  # informative, not [0, 1]
    assert np.all(spread.slope[spread.boundary] <= 1e-6 * obs.n)  # KKT: moving mass there lowers L


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.5, 0.98), b=st.floats(0.5, 0.98), seed=st.integers(0, 1000))
def test_intervals_are_nested_in_the_level(a, b, seed):
    lo_level, hi_level = sorted((a, b))
    theta = np.array([0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0])
    _, obs = krr_observations(theta, 2000, 1.0, seed=seed)
    spread = mle_uncertainty(obs, ldpsim.get_registry().create("estimator", "mle").estimate(obs).distribution)
    l1, u1 = spread.interval(lo_level)
    l2, u2 = spread.interval(hi_level)
    assert np.all(l2 <= l1 + 1e-15) and np.all(u1 <= u2 + 1e-15)
    assert np.all((0 <= l2) & (u2 <= 1))


def test_coverage_is_nominal_for_krr_in_a_seeded_sweep():
    """400 repetitions x 8 values. Under the asymptotic model each repetition's coverage has sd at most
    sqrt(0.95 * 0.05) ~ 0.22, so the mean over 400 has sd <= 0.011; a band of +-0.045 (4 sd) fails a
    correct implementation with probability < 1e-4, and catches standard errors off by 25 %."""
    ds = ldpsim.run_scenario(
        {
            "seed": 2026,
            "users": 20_000,
            "repetitions": 400,
            "domain": {"kind": "integers", "low": 0, "high": K - 1},
            "dataset": {"name": "binomial", "p": 0.5},
            "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 2.0}]}},
            "estimators": {"mle": {"intervals": True}, "inv-p": {"intervals": True}, "ibu": {}},
            "metrics": ["coverage"],
        }
    )
    coverage = ds["coverage"].mean("rep")
    assert abs(float(coverage.sel(estimator="mle")) - 0.95) < 0.045
    assert abs(float(coverage.sel(estimator="inv-p")) - 0.95) < 0.045
    assert math.isnan(float(coverage.sel(estimator="ibu")))  # no intervals asked: no coverage
    assert ds["lower"].dims == ("estimator", "rep", "value")
    assert float(ds["confidence"].sel(estimator="mle").min()) == 0.95


def test_without_intervals_the_results_have_no_bounds_and_estimates_none():
    ds = ldpsim.run_scenario(
        {
            "users": 500,
            "domain": {"kind": "integers", "low": 0, "high": 3},
            "dataset": {"name": "uniform"},
            "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
            "estimators": ["ibu", "inv-p"],
            "metrics": ["tv"],
        }
    )
    assert "lower" not in ds and "upper" not in ds
    _, obs = krr_observations(np.full(4, 0.25), 100, 1.0, seed=0)
    with pytest.raises(ValueError, match="intervals = true"):
        ldpsim.get_registry().create("estimator", "ibu").estimate(obs).interval()


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1])
def test_a_confidence_level_outside_0_1_is_refused(level):
    with pytest.raises(ParameterError, match="confidence"):
        ldpsim.get_registry().create("estimator", "ibu", intervals=True, confidence=level)
    spread = mle_uncertainty(*krr_observations(np.full(4, 0.25), 100, 1.0, seed=0)[1:], np.full(4, 0.25))
    with pytest.raises(ParameterError, match=r"confidence: must be in \(0, 1\)"):
        spread.interval(level)


def test_the_bootstrap_agrees_with_the_fisher_information_inside_the_simplex():
    """Interior k-RR MLE: the bootstrap's standard errors estimate the same asymptotic sd. With 400
    replicates each is within ~3.5 % (1/sqrt(2 * 400)) of its target; 20 % would be 5.7 sd."""
    theta = np.array([0.05, 0.1, 0.2, 0.15, 0.1, 0.1, 0.2, 0.1])
    _, obs = krr_observations(theta, 50_000, 2.0, seed=6)
    make_mle = ldpsim.get_registry().get("estimator", "mle").cls
    fisher = make_mle(intervals=True).estimate(obs).uncertainty
    boot = make_mle(intervals=True, interval_method="bootstrap", replicates=400).estimate(obs)
    assert boot.uncertainty.method == "bootstrap"
    np.testing.assert_allclose(boot.uncertainty.se, fisher.se, rtol=0.2)
    again = make_mle(intervals=True, interval_method="bootstrap", replicates=400).estimate(obs)
    np.testing.assert_array_equal(again.uncertainty.se, boot.uncertainty.se)  # seeded by the observations
    low, high = boot.interval(0.95)
    assert np.all(low <= boot.distribution) and np.all(boot.distribution <= high)


def test_the_bootstrap_measures_the_estimator_used():
    """INV-N sets negatives to 0 and renormalises: on a sparse truth its spread is smaller than the unbiased
    estimate's exact covariance says, and the bootstrap (which re-runs INV-N) sees that."""
    _, obs = krr_observations(np.array([0.5, 0.5, 0, 0, 0, 0, 0, 0]), 2000, 1.0, seed=7)
    inv_n = ldpsim.get_registry().get("estimator", "inv-n").cls
    exact = inv_n(intervals=True).estimate(obs).uncertainty.se
    boot = inv_n(intervals=True, interval_method="bootstrap", replicates=200).estimate(obs).uncertainty.se
    assert np.all(boot[2:] < exact[2:])


def test_the_interval_of_a_mean_is_the_closed_form_for_inversion():
    """v = (f - q) / (p - q) for k-RR, so mean = sum_x x v_x has variance w' Cov(f) w / (p - q)^2 exactly."""
    eps, n = 1.0, 4000
    _, obs = krr_observations(np.full(K, 1 / K), n, eps, seed=8)
    est = ldpsim.get_registry().create("estimator", "inv-p", intervals=True).estimate(obs)
    p = math.exp(eps) / (math.exp(eps) + K - 1)
    q = 1 / (math.exp(eps) + K - 1)
    f = est.uncertainty.estimate * (p - q) + q  # the frequencies, back from the unbiased estimate
    w = np.arange(K, dtype=float)
    sd = math.sqrt((w**2 @ f - (w @ f) ** 2) / n) / (p - q)
    value, low, high = est.linear_interval(w)
    assert value == pytest.approx(w @ est.uncertainty.estimate)
    assert (high - low) / 2 == pytest.approx(1.959963984540054 * sd, rel=1e-9)
    mle = ldpsim.get_registry().create("estimator", "mle", intervals=True).estimate(obs)
    assert mle.linear_interval(np.ones(K))[1:] == pytest.approx((1.0, 1.0), abs=1e-9)  # the total is known
    with pytest.raises(ValueError, match="one per value"):
        mle.linear_interval(np.ones(K + 1))
