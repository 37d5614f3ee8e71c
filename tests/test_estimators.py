"""Estimators: INV-N / INV-P against linear algebra and an independent projection; IBU's parameters."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make, matrix_mechanism
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize

import ldpsim
from ldpsim import (
    EstimationError,
    Integers,
    Likelihood,
    Mechanism,
    Observations,
    ParameterError,
    Privacy,
    project_simplex,
)


def krr_observations(rng, n=5000, k=6, eps=1.0, p=None):
    domain = Integers(low=0, high=k - 1)
    krr = make("mechanism", "krr", domain, eps=eps)
    values = rng.choice(k, size=n, p=p)
    return krr, Observations.from_reports(domain, [(krr, krr.sample(values, rng))])


def unbiased(obs):
    return ldpsim.unbiased_estimate(obs)


def test_inv_solves_q_equals_v_a(rng):
    krr, obs = krr_observations(rng)
    v = unbiased(obs)
    q = np.bincount(obs.groups[0].reports[:, 0], weights=obs.groups[0].counts, minlength=6) / obs.n
    np.testing.assert_allclose(v @ krr.matrix, q, atol=1e-12)


def test_inv_on_a_two_report_plan_solves_the_normal_equations(rng):
    domain = Integers(low=0, high=3)
    krr = make("mechanism", "krr", domain, eps=0.7)
    values = rng.integers(0, 4, 3000)
    reports = np.column_stack([krr.sample(values, rng), krr.sample(values, rng)])
    obs = Observations.from_reports(domain, [((krr, krr), reports)])
    joint = np.einsum("xi,xj->xij", krr.matrix, krr.matrix).reshape(4, 16)
    q = np.bincount(reports[:, 0] * 4 + reports[:, 1], minlength=16) / 3000
    v = unbiased(obs)
    np.testing.assert_allclose(
        (v @ joint - q) @ joint.T, 0, atol=1e-12
    )  # least squares: residual orthogonal to A's rows


def test_inv_is_unbiased_for_a_mixed_population(rng):
    domain = Integers(low=0, high=4)
    theta = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    krr = make("mechanism", "krr", domain, eps=1.0)
    geo = make("mechanism", "geometric", domain, eps=0.8)
    estimates = []
    for _ in range(400):
        a, b = rng.choice(5, 600, p=theta), rng.choice(5, 300, p=theta)
        obs = Observations.from_reports(
            domain, [(krr, krr.sample(a, rng)), ((geo, krr), np.column_stack([geo.sample(b, rng), krr.sample(b, rng)]))]
        )
        estimates.append(unbiased(obs))
    estimates = np.array(estimates)
    se = estimates.std(axis=0) / np.sqrt(len(estimates))
    assert np.all(np.abs(estimates.mean(axis=0) - theta) < 4.5 * se)


def test_inv_n_truncates_and_normalizes(rng):
    _, obs = krr_observations(rng, n=300, eps=0.3, p=[0.5, 0.5, 0, 0, 0, 0])
    v = unbiased(obs)
    assert (v < 0).any()  # the interesting case
    est = make("estimator", "inv-n").estimate(obs).distribution
    np.testing.assert_allclose(est, np.clip(v, 0, None) / np.clip(v, 0, None).sum())


def test_inv_p_is_the_euclidean_projection(rng):
    _, obs = krr_observations(rng, n=300, eps=0.3, p=[0.5, 0.5, 0, 0, 0, 0])
    v = unbiased(obs)
    est = make("estimator", "inv-p").estimate(obs).distribution
    np.testing.assert_allclose(est, reference_projection(v), atol=1e-6)


def reference_projection(v):
    """An independent projection: a generic constrained optimizer."""
    res = minimize(
        lambda p: ((p - v) ** 2).sum(),
        np.full(v.size, 1 / v.size),
        jac=lambda p: 2 * (p - v),
        bounds=[(0, 1)] * v.size,
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1, "jac": lambda p: np.ones_like(p)}],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    return res.x


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=30))
def test_projection_lands_on_the_simplex_and_is_closest(values):
    v = np.array(values)
    p = project_simplex(v)
    assert p.sum() == pytest.approx(1) and np.all(p >= 0)
    # KKT: p = max(v - tau, 0) for one tau, so v - p is constant on the support and >= it off it.
    gap = v - p
    support = p > 0
    assert np.ptp(gap[support]) < 1e-9
    assert np.all(gap[~support] <= gap[support][0] + 1e-9)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30).filter(lambda x: sum(x) > 0))
def test_projection_leaves_distributions_alone(values):
    p = np.array(values) / sum(values)
    np.testing.assert_allclose(project_simplex(p), p, atol=1e-12)


class Unbounded(Mechanism):
    """Reports x + noise on all integers: no finite matrix."""

    name = "unbounded"

    @property
    def privacy(self):
        return Privacy("none", float("inf"))

    def _sample(self, values, rng):
        return (values + rng.integers(-1, 2, values.shape[0]))[:, None]

    def _log_likelihood(self, reports):
        d = np.abs(reports[:, :1] - np.arange(self.domain.size)[None, :])
        with np.errstate(divide="ignore"):
            return np.where(d <= 1, np.log(1 / 3), -np.inf)


@pytest.mark.parametrize("name", ["inv-n", "inv-p"])
def test_inv_explains_why_it_cannot_run_without_a_matrix(name, rng):
    domain = Integers(low=0, high=4)
    mech = Unbounded(domain)
    obs = Observations.from_reports(domain, [(mech, mech.sample(rng.integers(0, 5, 50), rng))])
    with pytest.raises(EstimationError, match="needs mechanisms with a finite matrix.*use ibu"):
        make("estimator", name).estimate(obs)
    assert make("estimator", "ibu").estimate(obs).distribution.sum() == pytest.approx(1)


def test_every_estimate_carries_its_loglik(rng):
    _, obs = krr_observations(rng, n=2000)
    results = {name: make("estimator", name, certify="always").estimate(obs) for name in ("inv-n", "inv-p")}
    results["ibu"] = make("estimator", "ibu", delta=1e-11, max_iter=100_000).estimate(obs)
    assert all(np.isfinite(r.loglik) for r in results.values())
    # Run to convergence, IBU maximizes the likelihood: no other estimate explains the reports better.
    assert results["ibu"].loglik >= max(results["inv-n"].loglik, results["inv-p"].loglik) - 1e-9
    assert results["ibu"].iterations > 0 and results["inv-n"].iterations == 0


def test_ibu_start_parameter():
    with pytest.raises(ParameterError, match="start: is zero at index 0"):
        make("estimator", "ibu", start=[0.0, 0.5, 0.5])
    with pytest.raises(ParameterError, match="start: sums to 0.9, not 1"):
        make("estimator", "ibu", start=[0.4, 0.5])
    mech = matrix_mechanism([[0.5, 0.5], [0.2, 0.8]])
    obs = Observations.from_counts(mech.domain, mech, [0, 1], [3, 7])
    with pytest.raises(ParameterError, match="start: has 3 entries, the domain has 2"):
        make("estimator", "ibu", start=[0.2, 0.3, 0.5]).estimate(obs)


def test_ibu_reports_non_convergence(rng):
    _, obs = krr_observations(rng, n=2000)
    est = make("estimator", "ibu", max_iter=2, delta=1e-12).estimate(obs)
    assert est.iterations == 2 and not est.converged


@pytest.mark.parametrize(
    ("name", "eps", "values"), [("krr", 4.0, [0, 1, 2, 3]), ("geometric", 0.8, [8, 9, 10, 11, 12])]
)
def test_ibu_on_the_likely_subset_finds_the_same_mle(rng, name, eps, values):
    # 004 Theorem 8.1: MLEs on X are the MLEs on a likely subset, padded with zeros.
    domain = Integers(low=0, high=19)
    mech = make("mechanism", name, domain, eps=eps)
    obs = Observations.from_reports(domain, [(mech, mech.sample(rng.choice(values, 60), rng))])
    subset = obs.likely_subset()
    assert subset.sum() < 20
    tight = {"delta": 1e-13, "max_iter": 200_000}
    restricted = make("estimator", "ibu", **tight).estimate(obs)
    full = make("estimator", "ibu", likely=False, **tight).estimate(obs)
    assert np.all(restricted.distribution[~subset] == 0)
    assert full.distribution[~subset].max() < 1e-4  # IBU on all of X drives them towards 0
    assert restricted.loglik == pytest.approx(full.loglik, abs=1e-6)
    assert restricted.loglik >= full.loglik - 1e-9


def test_per_plan_gibu_is_consistent_when_cohorts_differ():
    # Cohorts drawn from different distributions and reporting through different mechanisms break
    # 001's one-distribution model: its MLE stays biased as n grows; per-plan GIBU does not.
    doc = {
        "seed": 4,
        "repetitions": 2,
        "domain": {"kind": "integers", "low": 0, "high": 4},
        "dataset": {"name": "uniform"},
        "cohorts": {
            "a": {
                "share": 0.5,
                "dataset": {"name": "pmf", "p": [0.6, 0.4, 0, 0, 0]},
                "reports": [{"mechanism": "krr", "eps": 0.5}],
            },
            "b": {
                "share": 0.5,
                "dataset": {"name": "pmf", "p": [0, 0, 0.2, 0.3, 0.5]},
                "reports": [{"mechanism": "krr", "eps": 4.0}],
            },
        },
        "estimators": {
            "joint": {"name": "ibu", "delta": 1e-7},
            "split": {"name": "ibu", "delta": 1e-7, "per_plan": True},
        },
        "metrics": ["tv"],
        "sweep": {"n": {"path": "users", "values": [20_000, 200_000]}},
    }
    err = ldpsim.run_scenario(doc)["tv"].mean("rep")
    # split's TV at n = 200,000 averages 0.0055 with a standard deviation of 0.0025 per repetition
    assert float(err.sel(estimator="split", n=200_000)) < 0.015
    assert float(err.sel(estimator="joint", n=200_000)) > 3 * float(err.sel(estimator="split", n=200_000))
    assert float(err.sel(estimator="joint", n=200_000)) > 0.5 * float(err.sel(estimator="joint", n=20_000))  # no decay


def test_certificates_of_inversion_follow_the_certify_policy(rng, monkeypatch):
    """`certify`: auto certifies estimators that maximize the likelihood while it is small; inversion when asked."""
    from ldpsim.estimation import estimator as module

    _, obs = krr_observations(rng, n=2000)
    auto = make("estimator", "inv-p").estimate(obs)  # no MLE: certified only when asked
    assert np.isnan(auto.loglik) and np.isnan(auto.kkt) and np.isnan(auto.gap)
    forced = make("estimator", "inv-p", certify="always").estimate(obs)
    assert np.isfinite(forced.loglik) and np.isfinite(forced.kkt) and np.isfinite(forced.gap)
    np.testing.assert_array_equal(forced.distribution, auto.distribution)
    assert forced.loglik == Likelihood.of(obs).loglik(forced.distribution)
    # the closed-form MLE is certified by default: it is the MLE, so its gap is (numerically) zero
    closed = make("estimator", "krr-mle").estimate(obs)
    assert np.isfinite(closed.gap) and closed.kkt < 1e-9
    assert np.isnan(make("estimator", "krr-mle", certify="never").estimate(obs).gap)
    # above the budget auto skips the likelihood pass, and always still makes it
    monkeypatch.setattr(module, "CERTIFY_MAX_PAIRS", obs.n_distinct * obs.domain.size - 1)
    assert np.isnan(make("estimator", "krr-mle").estimate(obs).gap)
    again = make("estimator", "inv-p", certify="always").estimate(obs)
    assert (again.loglik, again.kkt, again.gap) == (forced.loglik, forced.kkt, forced.gap)
    # an estimator with its own certificate keeps it whatever the policy
    assert np.isfinite(make("estimator", "mle", certify="never").estimate(obs).gap)
