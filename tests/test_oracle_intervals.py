"""Intervals and the planner for every frequency oracle with its own unbiased estimate (issue 34).

Inversion (``inv-p``, ``inv-n``) on a mechanism with its own unbiased estimate (OUE, RAPPOR, local
hashing, Hadamard, subset selection, CMS, ...) states the variance the mechanism declares,
``estimate_variance(theta)`` per user for a fixed population, plus the users' sampling
``theta (1 - theta)`` (the law of total variance; the same total as the inverted matrix's exact
covariance, as k-RR shows). Before, those intervals were [0, 1] and the planner searched up to 10^9
users. Several reports of a plan whose joint matrix would be too large are estimated report by
report (the average of unbiased estimates), never forming the joint matrix (80 GiB for OUE on 10
values, 4 reports).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from scipy.stats import norm

import ldpsim
from ldpsim import EstimationError, Integers, Observations, ParameterError, project_simplex
from ldpsim.estimation import unbiased
from ldpsim.estimation.unbiased import inversion_bytes, inverts_jointly, plan_matrix, plan_moments

Z = float(norm.ppf(0.975))

#: every built-in mechanism with its own unbiased estimate and a declared variance
ORACLES = ["oue", "rappor", "olh", "blh", "flh", "hadamard", "subset_selection", "cms", "hcms", "she", "the", "adp"]


def observations(plan, theta, n, rng):
    """Reports of n users drawn iid from theta, each applying every mechanism of the plan."""
    domain = plan[0].domain
    values = rng.choice(domain.size, size=n, p=theta)
    reports = np.hstack([mech.sample(values, rng) for mech in plan])
    return Observations.from_reports(domain, [(tuple(plan), reports)])


def inv_p():
    return ldpsim.get_registry().create("estimator", "inv-p", intervals=True)


@pytest.mark.parametrize("name", ORACLES)
def test_an_oracles_intervals_are_its_declared_variance(name):
    """Not [0, 1]: se_x = sqrt((estimate_variance(theta)_x + theta_x (1 - theta_x)) / n) at the projected estimate,
    and the interval is the unbiased estimate +- z se where that is inside [0, 1]."""
    domain = Integers(low=0, high=15)
    mech = make("mechanism", name, domain, eps=2.0)
    theta = np.linspace(1, 3, 16) / np.linspace(1, 3, 16).sum()
    obs = observations((mech,), theta, 5000, np.random.default_rng(7))
    est = inv_p().estimate(obs)
    v = ldpsim.unbiased_estimate(obs)
    fit = project_simplex(v)
    se = np.sqrt((mech.estimate_variance(fit) + fit * (1 - fit)) / obs.n)
    np.testing.assert_allclose(est.uncertainty.se, se, rtol=1e-12)
    lower, upper = est.interval(0.95)
    inside = (v - Z * se > 0) & (v + Z * se < 1)
    assert inside.sum() >= 8
    np.testing.assert_allclose((upper - lower)[inside] / 2, Z * se[inside], rtol=1e-9)
    assert np.all(upper - lower < 0.5)  # before: [0, 1] for every value
    np.testing.assert_array_equal(est.extras["se"], est.uncertainty.se)
    with pytest.raises(ValueError, match="no covariance .* estimate with mle and intervals = true"):  # variances only
        est.linear_interval(np.arange(16.0))


def test_the_declared_total_is_the_inverted_matrixs_exact_covariance():
    """k-RR declares its variance and is inverted through its matrix: both give the same moments, so the
    ``+ theta (1 - theta)`` convention of the declared path is the one matrix intervals always had."""
    domain = Integers(low=0, high=5)
    mech = make("mechanism", "krr", domain, eps=1.5)
    theta = np.array([0.3, 0.25, 0.2, 0.15, 0.1, 0.0])
    moments = plan_moments((mech,), theta)
    assert moments is not None and moments.source == "matrix"
    np.testing.assert_allclose(moments.given, mech.estimate_variance(theta), rtol=1e-9)
    np.testing.assert_allclose(moments.variance, mech.estimate_variance(theta) + theta * (1 - theta), rtol=1e-9)


@pytest.mark.parametrize("name", ["oue", "olh"])
def test_oracle_intervals_cover_at_their_nominal_level(name):
    """300 seeded repetitions x 10 values, users drawn from theta (the intervals' model), truth theta.

    Each repetition's coverage (a mean of indicators of variance 0.95 x 0.05) has sd <= 0.218, so the
    mean over 300 has sd <= 0.0126 whatever the correlation between values: a band of +-0.05 (4 sd)
    fails a correct implementation with probability below 1e-4, and catches standard errors 30 % off
    (coverage 0.87 or 0.99).
    """
    domain = Integers(low=0, high=9)
    plan = (make("mechanism", name, domain, eps=1.0),)
    theta = np.array([0.2, 0.15, 0.15, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05])
    rng = np.random.default_rng(34)
    estimator = inv_p()
    covered = []
    for _ in range(300):
        lower, upper = estimator.estimate(observations(plan, theta, 1000, rng)).interval(0.95)
        covered.append(np.mean((lower <= theta) & (theta <= upper)))
    assert abs(np.mean(covered) - 0.95) < 0.05


def test_the_planner_answers_oue_analytically():
    """OUE, k = 100, eps = 1, uniform, half-width 0.01: n = z^2 max_x n Var / 0.01^2 with
    n Var = q (1-q) / (p-q)^2 + f (1-p-q) / (p-q) (estimate_variance, Wang et al. 2017; p = 1/2,
    q = 1 / (e + 1), f = 1/100) plus f (1 - f) (the users' sampling): 142,234 users. Before: over 500 s
    of simulations, and a half-width of 0.5 at that many users."""
    p, q, f = 0.5, 1 / (math.e + 1), 0.01
    declared = q * (1 - q) / (p - q) ** 2 + f * (1 - p - q) / (p - q)
    exact = Z**2 * (declared + f * (1 - f)) / 0.01**2
    for method in ("analytic", "auto"):  # analytic first: before the fix it was refused at once
        answer = ldpsim.plan("oue", "integers:0..99", eps=1, target=0.01, error="halfwidth", method=method)
        assert answer.method == "analytic" and answer.answer == math.ceil(exact)
        assert answer.answer == pytest.approx(Z**2 * declared / 0.01**2, rel=0.02)  # the brief's formula
    at = ldpsim.plan("oue", "integers:0..99", eps=1, users=int(answer.answer), error="halfwidth")
    assert at.method == "analytic" and at.answer <= 0.01
    l2 = ldpsim.plan("oue", "integers:0..99", eps=1, users=10_000, error="l2", method="analytic")
    assert l2.answer == pytest.approx(math.sqrt(100 * declared / 10_000), rel=1e-9)  # against the users' values


def test_the_planner_refuses_a_half_width_the_estimator_states_as_0_1():
    """dbitflip's own unbiased estimate declares no variance: inv-p's intervals are all [0, 1], and a
    simulated search would run up to 10^9 users. Refused before anything is simulated."""
    with pytest.raises(ParameterError, match=r"states no interval on 'dbitflip'.*every interval is \[0, 1\]"):
        ldpsim.plan("dbitflip", "integers:0..9", eps=1, target=0.05, error="halfwidth")


def test_repeated_reports_are_estimated_report_by_report_without_the_joint_matrix():
    """OUE on 10 values, eps 5, 4 reports: the joint matrix has 1024^4 columns (its third factor alone
    80 GiB). The plan is estimated as the average of its reports' unbiased estimates instead, with
    intervals from their variances, and the joint matrix is refused before it is formed."""
    domain = Integers(low=0, high=9)
    oue = make("mechanism", "oue", domain, eps=5.0)
    plan = (oue,) * 4
    assert not inverts_jointly(plan) and inversion_bytes(plan) is None
    with pytest.raises(EstimationError, match="more than 2,000,000 joint outputs"):
        plan_matrix(plan)
    theta = np.full(10, 0.1)
    obs = observations(plan, theta, 20_000, np.random.default_rng(3))
    est = inv_p().estimate(obs)
    v = ldpsim.unbiased_estimate(obs)
    fit = project_simplex(v)
    per_report = np.mean([oue.unbiased_estimate(cols, obs.groups[0].counts) for _, cols in obs.groups[0].columns()], 0)
    np.testing.assert_allclose(v, per_report, atol=1e-12)
    expected = (oue.estimate_variance(fit) / 4 + fit * (1 - fit)) / obs.n
    np.testing.assert_allclose(est.uncertainty.se**2, expected, rtol=1e-12)
    assert np.abs(est.distribution - theta).max() < 0.02


def test_a_scenario_of_repeated_oue_reports_runs_with_inversion():
    """The scenario that tried to allocate 80 GiB runs (serial, one repetition) and estimates well."""
    ds = ldpsim.run_scenario(
        {
            "seed": 1,
            "users": 2000,
            "repetitions": 1,
            "domain": {"kind": "integers", "low": 0, "high": 9},
            "dataset": {"name": "uniform"},
            "cohorts": {"all": {"reports": [{"mechanism": "oue", "eps": 5, "repeat": 4}]}},
            "estimators": {"inv-p": {"intervals": True}},
            "metrics": ["tv"],
        },
        executor="serial",
    )
    assert float(ds["tv"].max()) < 0.05
    assert float((ds["upper"] - ds["lower"]).max()) < 0.2


@pytest.mark.parametrize(
    ("first", "second"), [("krr", "krr"), ("oue", "oue"), ("krr", "oue")], ids=["matrices", "declared", "mixed"]
)
def test_averaged_reports_have_the_variance_their_moments_state(monkeypatch, first, second):
    """Two reports (eps 1 and 0.5), forced report by report: the per-report average is unbiased and its
    spread over 1000 seeded draws matches plan_moments (variance within 18 %: the sample variance of 1000
    draws has sd 4.5 %, so 4 sd), matrices inverted, declared variances or both. With matrices alone the
    covariance is known too, so a mean gets an interval."""
    monkeypatch.setattr(unbiased, "MAX_JOINT_OUTPUTS", 10)  # >= 4 x 4 = 16 joint outputs: report by report
    domain = Integers(low=0, high=3)
    plan = (make("mechanism", first, domain, eps=1.0), make("mechanism", second, domain, eps=0.5))
    assert not inverts_jointly(plan)
    theta = np.array([0.4, 0.3, 0.2, 0.1])
    n = 200
    rng = np.random.default_rng(11)
    values = rng.choice(4, size=1000 * n, p=theta)  # the users of every draw, their reports drawn at once
    reports = np.hstack([mech.sample(values, rng) for mech in plan]).reshape(1000, n, -1)
    draws = np.array([ldpsim.unbiased_estimate(Observations.from_reports(domain, [(plan, r)])) for r in reports])
    moments = plan_moments(plan, theta)
    assert moments is not None and moments.source == "per report"
    np.testing.assert_allclose(draws.mean(0), theta, atol=4 * np.sqrt(moments.variance / n / 1000).max())
    np.testing.assert_allclose(draws.var(0, ddof=1) * n, moments.variance, rtol=0.18)
    if first == second == "krr":
        assert moments.covariance is not None
        np.testing.assert_allclose(np.diag(moments.covariance), moments.variance, rtol=1e-9)
        value, low, high = inv_p().estimate(observations(plan, theta, n, rng)).linear_interval(np.arange(4.0))
        assert low < value < high
    else:
        assert moments.covariance is None


@pytest.mark.parametrize("name", ["l-oue", "l-sue", "l-osue", "l-soue"])
def test_a_unary_longitudinal_rounds_channel_declares_its_exact_variance(name):
    """Each round of an L-UE protocol is a unary encoding: its declared n Var is the exact one from its matrix."""
    from ldpsim.testing import check_estimate_variance

    mech = make("mechanism", name, Integers(low=0, high=3), eps_inf=2.0, eps_1=1.0, rounds=2)
    channel = mech.round_channel(1)
    assert channel.capabilities.estimate_variance and channel.matrix is not None
    check_estimate_variance(channel)


def test_lolohas_round_channel_declares_the_variance_its_estimates_have():
    """Simulated per-round estimates of LOLOHA's hashed channel: their variance over 400 populations is the
    declared one (the ratio sample/declared is chi-square with 399 degrees of freedom over 399; Bonferroni
    over the 8 values, false alarm < 1e-4)."""
    from scipy.stats import chi2

    domain = Integers(low=0, high=7)
    channel = make("mechanism", "loloha", domain, eps_inf=2.0, eps_1=1.0, rounds=2).round_channel(0)
    theta = np.linspace(1, 2, 8) / np.linspace(1, 2, 8).sum()
    rng = np.random.default_rng(11)
    n, reps = 2000, 400
    counts = rng.multinomial(n, theta)  # one fixed population: its values, re-randomized by the channel
    values = np.repeat(np.arange(8), counts)
    estimates = np.array(
        [channel.unbiased_estimate(channel.sample(values, rng), np.ones(n, dtype=np.int64)) for _ in range(reps)]
    )
    ratio = estimates.var(axis=0, ddof=1) / (channel.estimate_variance(counts / n) / n)
    low, high = chi2.ppf([1e-4 / 16, 1 - 1e-4 / 16], reps - 1) / (reps - 1)
    assert np.all((ratio > low) & (ratio < high)), ratio


def test_per_round_inversion_of_l_oue_states_intervals():
    """Round t's channel, as ``rounds = "each"`` inverts it, states intervals, not [0, 1]."""
    domain = Integers(low=0, high=15)
    mech = make("mechanism", "l-oue", domain, eps_inf=4.0, eps_1=2.0, rounds=2)
    channel = mech.round_channel(0)
    theta = np.linspace(1, 3, 16) / np.linspace(1, 3, 16).sum()
    obs = observations((channel,), theta, 5000, np.random.default_rng(5))
    lower, upper = inv_p().estimate(obs).interval(0.95)
    assert np.all(upper - lower < 0.5)
