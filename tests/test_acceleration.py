"""Accelerated GIBU (SQUAREM) and the exact-MLE mode against oracles and the theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import em_problems, make, matrix_mechanism, observe
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim_plugins.estimators.krr_mle import water_fill

import ldpsim
from ldpsim import Integers, Likelihood, Observations, ParameterError, gibu

# 001 eq. (7): a singular mechanism whose MLE is not unique (001 Sec. III-A)
A7 = [[1 / 2, 1 / 3, 1 / 6], [1 / 3, 1 / 3, 1 / 3], [1 / 6, 1 / 3, 1 / 2]]


def krr_problem(rng, k=30, n=20_000, eps=1.0):
    domain = Integers(low=0, high=k - 1)
    krr = make("mechanism", "krr", domain, eps=eps)
    p = 1 / np.arange(1, k + 1) ** 1.2
    values = rng.choice(k, size=n, p=p / p.sum())
    obs = Observations.from_reports(domain, [(krr, krr.sample(values, rng))])
    counts = np.bincount(obs.groups[0].reports[:, 0], weights=obs.groups[0].counts, minlength=k)
    return obs, water_fill(counts, krr._keep, krr._other)


def _likelihood(a, counts):
    mech = matrix_mechanism(a)
    return Likelihood(Observations.from_counts(mech.domain, mech, np.arange(a.shape[1]), counts))


@settings(deadline=None)
@given(em_problems(max_count=500))
def test_squarem_never_lowers_the_loglik_and_stays_in_the_simplex(problem):
    a, counts, start = problem
    result = gibu(_likelihood(a, counts), start, stop="kkt", tol=1e-12, max_iter=300, trace=True, accelerate="squarem")
    assert np.all(np.diff(result.trace) >= -1e-12 * np.abs(result.trace[:-1]))
    assert result.theta.sum() == pytest.approx(1, abs=1e-12) and np.all(result.theta > 0)


@settings(deadline=None)
@given(em_problems(max_count=500), st.integers(0, 2**32 - 1))
def test_the_certificate_bounds_the_loglik_still_to_gain(problem, seed):
    # L(theta*) - L(theta) <= n log(max_x g_x / n) for every theta*, in particular the MLE
    a, counts, _ = problem
    lik = _likelihood(a, counts)
    mle = gibu(lik, stop="kkt", tol=1e-13, max_iter=100_000, accelerate="squarem")
    theta = np.random.default_rng(seed).dirichlet(np.ones(a.shape[0]))
    loglik, grad = lik.em_parts(theta)
    assert np.dot(theta, grad) == pytest.approx(lik.n, rel=1e-12)  # sum_x theta_x g_x = n
    kkt, gap = lik.certificate(grad)
    assert kkt >= 0 and gap == pytest.approx(lik.n * math.log1p(kkt))
    assert mle.loglik - loglik <= gap + 1e-9 * abs(loglik)


@settings(deadline=None)
@given(em_problems(max_count=500), st.sampled_from(["none", "squarem"]), st.sampled_from(["delta", "kkt"]))
def test_the_returned_certificate_is_that_of_the_returned_estimate(problem, accelerate, stop):
    # under the delta rule it is computed once, at the end: it must be the kept iterate's, not a neighbour's
    a, counts, start = problem
    lik = _likelihood(a, counts)
    result = gibu(lik, start, stop=stop, delta=1e-3, tol=1e-9, max_iter=200, accelerate=accelerate)
    kkt, gap = lik.certificate(lik.gradient(result.theta))
    assert result.loglik == pytest.approx(lik.loglik(result.theta), rel=1e-12, abs=1e-9)
    assert result.kkt == pytest.approx(kkt, rel=1e-9, abs=1e-12)
    assert result.gap == pytest.approx(gap, rel=1e-9, abs=1e-9)


def test_exact_mode_finds_the_closed_form_krr_mle(rng):
    obs, closed = krr_problem(rng)
    lik = Likelihood.of(obs)
    result = gibu(lik, stop="kkt", tol=1e-12, accelerate="squarem", max_iter=1_000_000)
    assert result.converged and result.rule == "kkt" and result.kkt < 1e-12
    assert abs(result.loglik - lik.loglik(closed)) <= 1e-9 * obs.n
    assert lik.loglik(closed) - result.loglik <= result.gap + 1e-9
    assert 0.5 * np.abs(result.theta - closed).sum() < 1e-6
    plain = gibu(lik, stop="kkt", tol=1e-8, max_iter=1_000_000)  # plain EM: the same rule, slower
    assert plain.converged and 0 <= lik.loglik(closed) - plain.loglik <= plain.gap + 1e-9


def test_the_mle_estimator_is_certified_where_ibu_stops_early(rng):
    obs, closed = krr_problem(rng, k=60, eps=0.5)
    ibu = make("estimator", "ibu").estimate(obs)
    mle = make("estimator", "mle", tol=1e-10).estimate(obs)
    assert (ibu.rule, mle.rule) == ("delta", "kkt")
    assert mle.kkt < 1e-10 and mle.gap <= obs.n * 1e-10 * (1 + 1e-6)
    assert ibu.gap > 100 * mle.gap  # the paper's rule stops while the certificate is still loose
    assert 0.5 * np.abs(mle.distribution - closed).sum() < 1e-4
    # estimators without a stopping rule get the same certificate, computed from their estimate
    krr_mle = make("estimator", "krr-mle").estimate(obs)
    assert krr_mle.rule == "none" and krr_mle.gap < 1e-6


def test_squarem_reaches_the_loglik_of_plain_em_run_to_convergence(rng):
    domain = Integers(low=0, high=39)
    geo = make("mechanism", "geometric", domain, eps=0.3)
    values = rng.binomial(39, 0.4, 5_000)
    lik = Likelihood(Observations.from_reports(domain, [(geo, geo.sample(values, rng))]))
    plain = gibu(lik, delta=1e-10, max_iter=2_000_000)
    fast = gibu(lik, stop="kkt", tol=1e-10, accelerate="squarem", max_iter=1_000_000)
    assert plain.converged and fast.converged
    assert fast.loglik == pytest.approx(plain.loglik, abs=1e-5)
    assert fast.iterations < plain.iterations / 10


def test_a_non_unique_mle_is_certified_by_its_loglik_not_its_argmax():
    # 001 Sec. III-A: every theta with theta_1 = theta_3 is an MLE of these observations; which one
    # is reached depends on the start, so only L (and the certificate) is guaranteed.
    lik = Likelihood(observe(matrix_mechanism(A7), [0, 1, 2]))
    for start in ([0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [1 / 3] * 3):
        result = gibu(lik, np.array(start), stop="kkt", tol=1e-12, accelerate="squarem")
        assert result.converged and result.kkt < 1e-12
        assert result.loglik == pytest.approx(3 * math.log(1 / 3), abs=1e-10)


def test_structured_and_dense_likelihoods_give_the_same_iterates(rng, monkeypatch):
    k = ldpsim.STRUCTURED_MIN_SIZE
    domain = Integers(low=0, high=k - 1)
    geo = make("mechanism", "geometric", domain, eps=0.05)
    obs = Observations.from_reports(domain, [(geo, geo.sample(rng.binomial(k - 1, 0.3, 20_000), rng))])
    structured = Likelihood(obs)
    monkeypatch.setattr(geo, "structured_min_size", k + 1)  # the dense path on the same domain
    dense = Likelihood(obs)
    assert isinstance(dense.H, np.ndarray) and not isinstance(structured.H, np.ndarray)
    for accelerate in ("none", "squarem"):
        a = gibu(structured, max_iter=40, delta=1e-300, accelerate=accelerate, trace=True)
        b = gibu(dense, max_iter=40, delta=1e-300, accelerate=accelerate, trace=True)
        np.testing.assert_allclose(a.trace, b.trace, rtol=1e-12)
        np.testing.assert_allclose(a.theta, b.theta, rtol=1e-8, atol=1e-15)


def test_stopping_parameters_are_validated():
    lik = Likelihood(observe(matrix_mechanism(A7), [0, 1, 2]))
    with pytest.raises(ParameterError, match="stop: unknown rule 'gap'"):
        gibu(lik, stop="gap")
    with pytest.raises(ParameterError, match="accelerate"):
        gibu(lik, accelerate="anderson")
    with pytest.raises(ParameterError, match="tol: must be > 0"):
        gibu(lik, stop="kkt", tol=0.0)
    with pytest.raises(ParameterError, match="stop"):
        make("estimator", "ibu", stop="kkkt")


def test_results_record_the_rule_and_the_gap():
    doc = {
        "seed": 3,
        "users": 5_000,
        "repetitions": 2,
        "domain": {"kind": "integers", "low": 0, "high": 19},
        "dataset": {"name": "binomial", "p": 0.3},
        "cohorts": {"all": {"share": 1, "reports": [{"mechanism": "krr", "eps": 1.0}]}},
        "estimators": ["ibu", "mle", "inv-p"],
        "metrics": ["tv"],
    }
    ds = ldpsim.run_scenario(doc)
    assert list(ds["stop_rule"].values) == ["delta", "kkt", "none"]
    assert "stopping rule" in ds["stop_rule"].attrs["long_name"]
    assert ds["gap"].attrs["units"] == "nat"
    gap = ds["gap"].to_pandas()
    assert (gap.loc["mle"] <= 5_000 * 1e-6).all() and (gap.loc["ibu"] > gap.loc["mle"]).all()
    assert gap.loc["inv-p"].isna().all()  # inversion is no MLE: certified only when asked (certify = "always")
