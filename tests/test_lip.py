"""Localized information privacy (002): the LIP mechanisms, the MMSE estimator, the aggregate metrics,
and the LIP scenarios, against the paper's closed forms (re-derived) and simulation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import make, observe
from hypothesis import assume, given
from hypothesis import strategies as st

import ldpsim
from ldpsim import (
    Categorical,
    EstimationError,
    Integers,
    LdpsimError,
    Likelihood,
    Observations,
    ParameterError,
    ldp_level,
    lip_level,
)
from ldpsim.running.build import Builder
from ldpsim.running.scenario import load_scenario
from ldpsim.testing import check_mechanism, check_parameters

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
BIT = Integers(low=0, high=1)

priors = st.lists(st.one_of(st.just(0.0), st.floats(0.001, 1.0)), min_size=2, max_size=8).filter(
    lambda p: sum(x > 0 for x in p) >= 2
)
full_priors = st.lists(st.floats(0.01, 1.0), min_size=2, max_size=8)
epsilons = st.floats(0.05, 6.0)


def normalized(p):
    p = np.asarray(p, dtype=float)
    return p / p.sum()


def lip(prior, eps, *, strict=False, name="lip"):
    prior = normalized(prior)
    return make("mechanism", name, Integers(low=0, high=prior.size - 1), eps=eps, prior=prior.tolist(), strict=strict)


def threshold(eps):
    """Smallest positive prior entry under which Theorems 2/3 are eps-LIP."""
    return 1 / (1 + math.exp(eps))


def posteriors(mech, prior=None):
    """P(X = . | Y = y) for every output y, from the mmse estimator on a single report."""
    est = make("estimator", "mmse") if prior is None else make("estimator", "mmse", prior=list(prior))
    marginal = np.asarray(mech.privacy.prior if prior is None else prior) @ mech.matrix
    return np.array(
        [
            est.estimate(observe(mech, [y])).distribution if marginal[y] > 0 else np.zeros(mech.domain.size)
            for y in range(mech.matrix.shape[1])
        ]
    )


def eq21(p1, eps):
    """002 eq. (21), per user: P1 (1-P1) (2 e^-eps - e^-2eps)."""
    return p1 * (1 - p1) * (2 * math.exp(-eps) - math.exp(-2 * eps))


def eq24(p1, eps):
    """002 eq. (24), per user (optimal binary LDP, q0 = q1 = 1/(e^eps+1))."""
    e = math.exp(eps)
    return p1 * (1 - p1) - (p1 * (1 - p1) * (1 - e)) ** 2 / ((1 - p1 + p1 * e) * (e - p1 * e + p1))


# ----------------------------------------------------------------- the mechanisms
@pytest.mark.parametrize(
    ("name", "domain", "eps", "prior", "strict"),
    [
        ("lip", Integers(low=1, high=3), 3.0, [0.1, 0.2, 0.7], True),
        ("lip", Integers(low=1, high=3), 1.0, [0.1, 0.2, 0.7], False),  # 002's example: only 1.9-LIP
        ("lip", Categorical(values=list("abcd")), 2.0, [0.5, 0.0, 0.3, 0.2], True),  # a zero-prior value
        ("lip", Integers(low=0, high=2), 1.0, [0.0, 1.0, 0.0], True),  # a point mass: 0-LIP
        ("lip", Integers(low=0, high=11), 0.5, np.full(12, 1 / 12).tolist(), False),
        ("lip-binary", BIT, 1.0, [0.7, 0.3], True),
        ("lip-binary", BIT, 1.0, [0.95, 0.05], False),
    ],
)
def test_contract(name, domain, eps, prior, strict):
    mech = make("mechanism", name, domain, eps=eps, prior=prior, strict=strict)
    check_mechanism(mech)  # includes: the declared LIP level is exactly lip_level(matrix, prior)
    assert mech.privacy.notion == "lip" and mech.privacy.prior == tuple(prior)


def test_parameters_are_validated(registry):
    check_parameters(
        registry.get("mechanism", "lip").cls, Integers(low=0, high=2), {"eps": 3.0, "prior": [0.2, 0.3, 0.5]}
    )
    check_parameters(registry.get("mechanism", "lip-binary").cls, BIT, {"eps": 1.0, "prior": [0.5, 0.5]})


@given(priors, epsilons)
def test_theorem_3_closed_form_and_its_exact_levels(prior, eps):
    p = normalized(prior)
    mech = lip(p, eps)
    m, a = mech.matrix, math.exp(-eps)
    on = p > 0
    np.testing.assert_allclose(m.sum(axis=1), 1, atol=1e-12)
    np.testing.assert_allclose(p @ m, p, atol=1e-12)  # the output marginal is the prior
    np.testing.assert_allclose(np.diag(m), 1 - (1 - p) * a, rtol=1e-12)
    off = ~np.eye(p.size, dtype=bool)
    np.testing.assert_allclose(m[off], np.broadcast_to(a * p, m.shape)[off], rtol=1e-12)
    # The constraints with m != k hold with equality: P_k / q_mk = e^eps for every k in the support.
    with np.errstate(invalid="ignore"):  # 0/0 in the columns of zero-prior values
        ratios = p[None, :] / m
    np.testing.assert_allclose(ratios[off & on[None, :]], math.exp(eps), rtol=1e-12)
    # The one with m = k holds iff P_k >= 1/(1+e^eps); the level is the closed form, also for the kit's lip_level.
    level = max(eps, math.log((1 - a) / p[on].min() + a))
    assert mech.lip_level == pytest.approx(level, rel=1e-12)
    assert lip_level(m, p) == pytest.approx(level, rel=1e-9)
    if abs(p[on].min() - threshold(eps)) > 1e-6:
        assert (level > eps) == (p[on].min() < threshold(eps))
    # LDP: eps + log(q_kk / P_k) at P_min, <= 2 * LIP level (002 Theorem 1); infinite with a zero-prior value.
    with np.errstate(divide="ignore"):
        ldp = ldp_level(np.log(m).T)
    assert ldp == pytest.approx(mech.ldp_level, rel=1e-9)
    if on.all():
        assert ldp == pytest.approx(math.log(1 + (math.exp(eps) - 1) / p.min()), rel=1e-9)
        assert ldp <= 2 * level * (1 + 1e-9)
    else:
        assert math.isinf(ldp)


@given(priors, epsilons)
def test_strict_mode_refuses_exactly_the_priors_where_the_closed_form_is_not_eps_lip(prior, eps):
    p = normalized(prior)
    p_min = p[p > 0].min()
    assume(abs(p_min - threshold(eps)) > 1e-6)
    if p_min >= threshold(eps):
        assert lip(p, eps, strict=True).privacy.eps == pytest.approx(eps)
    else:
        with pytest.raises(ParameterError, match=r"^prior: the closed form of 002 Theorem 3 is not"):
            lip(p, eps, strict=True)


def test_the_papers_example_prior_is_not_1_lip():
    # 002 Sec. IV-B: P = (0.1, 0.2, 0.7). For x = y = 1: P(Y=1)/P(Y=1|X=1) = 0.1/(1 - 0.9/e) = 0.1495 < 1/e.
    domain = Integers(low=1, high=3)
    p = [0.1, 0.2, 0.7]
    expected = math.log((1 - 1 / math.e) / 0.1 + 1 / math.e)  # 1.9005
    with pytest.raises(ParameterError) as info:
        make("mechanism", "lip", domain, eps=1.0, prior=p)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "prior: the closed form of 002 Theorem 3 is not 1-LIP under this prior: value 1 has prior 0.1"
    )
    assert "< 1/(1+e^eps) = 0.2689" in message and "P(Y=1)/P(Y=1|X=1) = 0.1495 < e^-eps = 0.3679" in message
    assert "use eps >= 2.197" in message and "every positive entry >= 0.2689" in message and "strict = false" in message
    loose = make("mechanism", "lip", domain, eps=1.0, prior=p, strict=False)
    assert loose.privacy.eps == pytest.approx(expected, rel=1e-12)
    assert lip_level(loose.matrix, np.array(p)) == pytest.approx(1.900477, abs=1e-6)
    check_mechanism(loose)
    # The suggested eps is the boundary: log(0.9/0.1) makes the diagonal constraint an equality.
    edge = make("mechanism", "lip", domain, eps=math.log(9), prior=p)
    assert edge.matrix[0, 0] * math.exp(-math.log(9)) == pytest.approx(0.1, rel=1e-12)


def test_a_uniform_prior_on_many_values_cannot_be_made_lip_below_log_of_size_minus_one():
    with pytest.raises(ParameterError, match=r"with 10 of them none qualifies below eps = 2\.197"):
        make("mechanism", "lip", Integers(low=0, high=9), eps=2.0, prior=np.full(10, 0.1).tolist())
    make("mechanism", "lip", Integers(low=0, high=9), eps=2.2, prior=np.full(10, 0.1).tolist())


@given(st.floats(0.01, 0.99), epsilons)
def test_lip_binary_is_theorem_2(p1, eps):
    mech = lip([1 - p1, p1], eps, name="lip-binary")
    a = math.exp(-eps)
    assert mech.q0 == pytest.approx(p1 * a, rel=1e-12) and mech.q1 == pytest.approx((1 - p1) * a, rel=1e-12)
    np.testing.assert_allclose(mech.matrix, lip([1 - p1, p1], eps).matrix, rtol=1e-15)
    # 002 notes the optimum sits where F1 = lambda0 / q1 and F4 = lambda1 / q0 equal e^eps.
    assert (1 - p1) / mech.q1 == pytest.approx(math.exp(eps)) and p1 / mech.q0 == pytest.approx(math.exp(eps))


def test_lip_binary_needs_two_values_and_reports_its_ldp_level():
    with pytest.raises(ParameterError, match=r"^domain: needs a domain of exactly 2 values"):
        make("mechanism", "lip-binary", Integers(low=0, high=2), eps=1.0, prior=[0.2, 0.3, 0.5])
    with pytest.raises(ParameterError, match=r"^prior: the closed form of 002 Theorem 2 is not 1-LIP"):
        make("mechanism", "lip-binary", BIT, eps=1.0, prior=[0.9, 0.1])
    mech = make("mechanism", "lip-binary", BIT, eps=1.0, prior=[0.7, 0.3])
    ldp = ldp_level(np.log(mech.matrix).T)
    assert ldp == pytest.approx(math.log(1 + (math.e - 1) / 0.3))  # 1.906: between eps and 2 eps (Theorem 1)
    assert 1.0 < ldp < 2.0


def test_prior_must_match_the_domain_and_dataset_needs_a_scenario():
    with pytest.raises(ParameterError, match=r"^prior: has 2 entries, the domain has 3 values"):
        make("mechanism", "lip", Integers(low=0, high=2), eps=1.0, prior=[0.5, 0.5])
    with pytest.raises(ParameterError, match=r'^prior: is "dataset", which only a scenario can resolve'):
        make("mechanism", "lip", Integers(low=0, high=2), eps=1.0, prior="dataset")
    with pytest.raises(ParameterError, match=r"^prior: unknown value 'datset'; did you mean 'dataset'\?"):
        make("mechanism", "lip", Integers(low=0, high=2), eps=1.0, prior="datset")


def test_zero_prior_values_keep_the_theorems_row():
    # lip_level ignores values of zero prior (Definition 3 is 0/0) and outputs of zero marginal:
    # the level is that of the support, and the matrix stays invertible (eigenvalues 1 - e^-eps and 1).
    p = np.array([0.5, 0.0, 0.3, 0.2])
    mech = make("mechanism", "lip", Categorical(values=list("abcd")), eps=2.0, prior=p.tolist())
    support = make("mechanism", "lip", Categorical(values=list("acd")), eps=2.0, prior=[0.5, 0.3, 0.2])
    assert lip_level(mech.matrix, p) == pytest.approx(lip_level(support.matrix, p[p > 0])) == pytest.approx(2.0)
    assert mech.matrix[1, 1] == pytest.approx(1 - math.exp(-2)) and (mech.matrix[[0, 2, 3], 1] == 0).all()
    np.testing.assert_allclose(sorted(np.linalg.eigvals(mech.matrix).real), [1 - math.exp(-2)] * 3 + [1], rtol=1e-9)
    assert math.isinf(mech.ldp_level)  # output b exposes a user holding b: LIP under the prior says nothing of them


@given(full_priors, epsilons)
def test_krr_is_eps_lip_under_any_prior(prior, eps):
    # 002 Theorem 1, second part: eps-LDP implies eps-LIP.
    p = normalized(prior)
    krr = make("mechanism", "krr", Integers(low=0, high=p.size - 1), eps=eps)
    assert lip_level(krr.matrix, p) <= eps * (1 + 1e-12)


# -------------------------------------------------------------- MSE: eqs. (21), (24), (28)
@given(st.floats(0.01, 0.99), epsilons)
def test_exact_mmse_errors_are_eqs_21_and_24(p1, eps):
    # The per-user MSE of the MMSE estimate E[X|Y] is sum_{x,y} P(x) A[x,y] (x - P(X=1|Y=y))^2.
    prior = np.array([1 - p1, p1])
    lip_mech = lip(prior, eps, name="lip-binary")  # strict = false: eq. (21) is a property of the matrix
    krr = make("mechanism", "krr", BIT, eps=eps)
    errors = {}
    for label, mech, given_prior in (("lip", lip_mech, None), ("ldp", krr, prior)):
        post1 = posteriors(mech, given_prior)[:, 1]
        errors[label] = float(np.sum(prior[:, None] * mech.matrix * (np.array([0, 1])[:, None] - post1[None, :]) ** 2))
    assert errors["lip"] == pytest.approx(eq21(p1, eps), rel=1e-9)
    assert errors["ldp"] == pytest.approx(eq24(p1, eps), rel=1e-9)
    assert errors["lip"] <= errors["ldp"] * (1 + 1e-12)  # 002 Proposition 4


@given(full_priors, epsilons)
def test_summation_mse_is_var_x_minus_eq_28(prior, eps):
    # Summation of values a_m: per-user MSE of E[X|Y] = Var(X) - Var(E[X|Y]) (eq. 14), with eq. (28) for the latter.
    p = normalized(prior)
    mech = lip(p, eps)
    a = np.arange(p.size, dtype=float) ** 1.5  # any values
    q, lam = mech.matrix, p @ mech.matrix
    var_hat = np.einsum("m,n,m,n,mk,nk->", a, a, p, p, q, q / lam[None, :] - 1)  # eq. (28)
    post = posteriors(mech)
    x_hat = post @ a
    mse = float(np.sum(p[:, None] * q * (a[:, None] - x_hat[None, :]) ** 2))
    var_x = float(p @ a**2 - (p @ a) ** 2)
    assert mse == pytest.approx(var_x - var_hat, rel=1e-9, abs=1e-12)


def test_simulated_survey_mse_matches_eqs_21_and_24_and_lip_beats_ldp():
    # 002 Sec. IV-A: N users with X_i ~ Bernoulli(P1), S = sum X_i, S_hat = N * mmse(1). S - S_hat is a sum of N
    # independent zero-mean terms, so E[(S - S_hat)^2] = N * (per-user MSE) exactly, for any N. R independent
    # populations are simulated at once; the mean of (S - S_hat)^2 is within 5 standard errors of N * eq. (21)
    # (resp. (24)) except with probability ~6e-7 (CLT). 5 SE is < 6% of the value, far below the 36% gap
    # between (21) and (24) at P1 = 0.3, eps = 1 (a prior that passes the strict check: 0.3 >= 1/(1+e) = 0.269).
    p1, eps, n, reps = 0.3, 1.0, 100, 20_000
    rng = np.random.default_rng(20210318)
    x = (rng.random((reps, n)) < p1).astype(np.int64)
    s = x.sum(axis=1)
    prior = [1 - p1, p1]
    results = {}
    for label, mech, given_prior, expected in (
        ("lip", make("mechanism", "lip-binary", BIT, eps=eps, prior=prior), None, eq21(p1, eps)),
        ("ldp", make("mechanism", "krr", BIT, eps=eps), prior, eq24(p1, eps)),
    ):
        y = mech.sample(x.ravel(), rng)[:, 0].reshape(reps, n)
        post1 = posteriors(mech, given_prior)[:, 1]
        ones = y.sum(axis=1)
        s_hat = (n - ones) * post1[0] + ones * post1[1]  # linear in the report counts
        for r in range(3):  # the estimator itself on whole populations
            est = make("estimator", "mmse", **({} if given_prior is None else {"prior": given_prior}))
            assert n * est.estimate(observe(mech, y[r])).distribution[1] == pytest.approx(s_hat[r], rel=1e-12)
        d2 = (s - s_hat) ** 2
        mse, se = d2.mean(), d2.std(ddof=1) / math.sqrt(reps)
        assert 5 * se < 0.06 * n * expected
        assert abs(mse - n * expected) < 5 * se, (label, mse, n * expected, se)
        results[label] = (mse, se)
    (lip_mse, lip_se), (ldp_mse, ldp_se) = results["lip"], results["ldp"]
    assert ldp_mse - lip_mse > 5 * math.hypot(lip_se, ldp_se)  # 002 Proposition 4, in simulation


# ------------------------------------------------------------------------ mmse
@given(full_priors, epsilons, st.data())
def test_mmse_with_one_mechanism_and_a_global_prior_is_one_bayes_step(prior, eps, data):
    p = normalized(prior)
    mech = lip(p, eps)
    counts = np.array(
        data.draw(st.lists(st.integers(0, 50), min_size=p.size, max_size=p.size).filter(lambda c: sum(c) > 0))
    )
    obs = Observations.from_counts(mech.domain, mech, np.arange(p.size), counts)
    likelihood = Likelihood(obs)
    own = make("estimator", "mmse").estimate(obs)
    np.testing.assert_allclose(own.distribution, likelihood.em_step(p)[0], atol=1e-12)
    other = normalized(data.draw(st.lists(st.floats(0.01, 1), min_size=p.size, max_size=p.size)))
    given_prior = make("estimator", "mmse", prior=other.tolist()).estimate(obs)
    np.testing.assert_allclose(given_prior.distribution, likelihood.em_step(other)[0], atol=1e-12)
    assert own.iterations == 1


def test_mmse_combines_per_plan_priors_like_a_per_user_computation(rng):
    domain = Integers(low=0, high=2)
    a = make("mechanism", "lip", domain, eps=3.0, prior=[0.6, 0.3, 0.1])
    b = make("mechanism", "lip", domain, eps=2.0, prior=[0.2, 0.2, 0.6])
    users = [  # (plan, reports): one cohort per prior; the third reports twice under b's prior
        ((a,), rng.integers(0, 3, size=(7, 1))),
        ((b,), rng.integers(0, 3, size=(5, 1))),
        ((b, b), rng.integers(0, 3, size=(4, 2))),
    ]
    obs = Observations.from_reports(domain, users)
    brute = np.zeros(3)
    for plan, reports in users:
        prior = np.array(plan[0].privacy.prior)
        for row in reports:  # each user's posterior P(X = . | their reports), by Bayes' rule
            joint = prior * np.prod([mech.matrix[:, z] for mech, z in zip(plan, row)], axis=0)
            brute += joint / joint.sum()
    brute /= obs.n
    got = make("estimator", "mmse").estimate(obs).distribution
    np.testing.assert_allclose(got, brute, atol=1e-12)
    one_prior = make("estimator", "mmse", prior=[0.6, 0.3, 0.1]).estimate(obs).distribution
    assert np.abs(one_prior - brute).max() > 0.01  # so the per-plan priors were really used


def test_mmse_errors():
    domain = Integers(low=0, high=2)
    krr = make("mechanism", "krr", domain, eps=1.0)
    a = make("mechanism", "lip", domain, eps=3.0, prior=[0.6, 0.3, 0.1])
    b = make("mechanism", "lip", domain, eps=3.0, prior=[0.2, 0.2, 0.6])
    with pytest.raises(EstimationError, match=r'prior = "mechanisms" needs each plan to declare a prior; plan \[krr'):
        make("estimator", "mmse").estimate(observe(krr, [0, 1, 2]))
    mixed = Observations.from_reports(domain, [((a, b), np.array([[0, 1], [2, 2]]))])
    with pytest.raises(EstimationError, match=r"declare different priors"):
        make("estimator", "mmse").estimate(mixed)
    with pytest.raises(ParameterError, match=r"^prior: has 2 entries, the domain has 3 values"):
        make("estimator", "mmse", prior=[0.5, 0.5]).estimate(observe(krr, [0, 1]))
    with pytest.raises(ParameterError, match=r'^prior: is "dataset", which only a scenario can resolve'):
        make("estimator", "mmse", prior="dataset")
    c = make("mechanism", "lip", domain, eps=3.0, prior=[0.5, 0.5, 0.0])
    with pytest.raises(EstimationError, match=r"some report has probability 0 under the prior \[0.5, 0.5, 0.0\]"):
        make("estimator", "mmse").estimate(observe(c, [0, 2]))  # output 2 comes only from X = 2, ruled out by the prior


# ------------------------------------------------------------------------- metrics
@given(st.integers(2, 12), st.integers(-5, 5), st.integers(1, 3), st.data())
def test_mean_and_linear_metrics(k, low, step, data):
    domain = Integers(low=low, high=low + step * (k - 1), step=step)
    vec = st.lists(st.floats(0.01, 1), min_size=k, max_size=k)
    est, truth = normalized(data.draw(vec)), normalized(data.draw(vec))
    mean_error = abs(domain.values @ est - domain.values @ truth)
    assert make("metric", "mean")(est, truth, domain) == pytest.approx(mean_error, abs=1e-12)
    assert make("metric", "mean", squared=True)(est, truth, domain) == pytest.approx(mean_error**2, abs=1e-12)
    # weighted summation a x + b: b cancels, the error is |a| times the summation's
    weights = (-2.5 * domain.values + 7).tolist()
    assert make("metric", "linear", weights=weights)(est, truth, domain) == pytest.approx(2.5 * mean_error, abs=1e-9)
    # survey: the indicator of one value gives that value's count error per user
    v = data.draw(st.integers(0, k - 1))
    survey = make("metric", "linear", weights=np.eye(k)[v].tolist())
    assert survey(est, truth, domain) == pytest.approx(abs(est[v] - truth[v]), abs=1e-12)


def test_metric_errors():
    labels = Categorical(values=list("abc"))
    with pytest.raises(LdpsimError, match=r"^domain: metric 'mean' does not work on a categorical domain"):
        make("metric", "mean")([0.2, 0.3, 0.5], [0.3, 0.3, 0.4], labels)
    assert make("metric", "linear", weights=[0, 1, 0])([0.2, 0.3, 0.5], [0.3, 0.25, 0.45], labels) == pytest.approx(
        0.05
    )
    with pytest.raises(LdpsimError, match=r"^weights: has 2 entries, the domain has 3 values; give metric 'linear'"):
        make("metric", "linear", weights=[1, 2])([0.2, 0.3, 0.5], [0.3, 0.3, 0.4], labels)
    # In a scenario the mismatch is found before anything runs, with the field's path.
    doc = {
        "seed": 1,
        "users": 100,
        "domain": {"kind": "categorical", "values": ["a", "b", "c"]},
        "dataset": {"name": "uniform"},
        "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
        "estimators": ["ibu"],
        "metrics": {"mean": {}},
    }
    with pytest.raises(
        LdpsimError, match=r"^metrics\.mean\.domain: metric 'mean' does not work on a categorical domain"
    ):
        ldpsim.load_scenario(doc)


# ------------------------------------------------------------------------ scenarios
def exact_mean_mse(mech, prior):
    """Per-user E[Var(X | Y)] of the MMSE of the average value: the expected squared `mean` error times n."""
    values = np.asarray(mech.domain.values, dtype=float)
    post = posteriors(mech, prior)
    return float(np.sum(prior[:, None] * mech.matrix * (values[:, None] - (post @ values)[None, :]) ** 2))


def test_global_prior_scenario():
    users, reps = 2_000, 40
    ds = ldpsim.run_scenario(SCENARIOS / "lip-global-prior.toml", users=users, repetitions=reps)
    err = ldpsim.scores(ds)
    prior = np.array([0.15, 0.25, 0.35, 0.25])
    domain = Integers(low=0, high=3)
    for mechanism in ("lip", "krr"):
        ratios = []
        for eps in ds["eps"].values:
            mech = make(
                "mechanism",
                mechanism,
                domain,
                eps=float(eps),
                **({"prior": prior.tolist()} if mechanism == "lip" else {}),
            )
            squared = err.sel(mechanism=mechanism, eps=eps, metric="mean", estimator="mmse") ** 2
            ratios.append(squared.values / (exact_mean_mse(mech, prior) / users))
        # The truth is the users' empirical distribution and mmse uses the generating prior, so E[mean error^2] is
        # exactly E[Var(X|Y)] / n: the pooled ratio has mean 1 and (chi-square-like) sd ~ sqrt(2 / 120) = 0.13.
        pooled = float(np.mean(ratios))
        assert 0.4 < pooled < 1.6, (mechanism, pooled)
    # At every eps, eps-LIP + MMSE is more accurate than eps-LDP (k-RR) + MMSE, on the histogram and the mean.
    mean = err.mean("rep")
    for metric in ("tv", "mean"):
        lip_err = mean.sel(mechanism="lip", metric=metric, estimator="mmse")
        krr_err = mean.sel(mechanism="krr", metric=metric, estimator="mmse")
        assert (lip_err < krr_err).all(), (metric, lip_err.values, krr_err.values)
    assert (mean.sel(metric="tv").diff("eps") < 0).all()  # more eps, less error, for every mechanism and estimator


def test_local_priors_scenario_uses_each_cohorts_prior():
    scenario = load_scenario(SCENARIOS / "lip-local-priors.toml")
    setup = Builder(scenario.base_dir).setup(next(scenario.points()))
    for cohort in setup.cohorts:  # prior = "dataset" resolved to the cohort's own distribution
        assert cohort.plan[0].privacy.prior == tuple(cohort.dataset.distribution())
    np.testing.assert_allclose(
        setup.dataset.distribution(), np.mean([c.dataset.distribution() for c in setup.cohorts], axis=0)
    )

    ds = ldpsim.run_scenario(SCENARIOS / "lip-local-priors.toml", users=12_000, repetitions=3)
    tv = ds["tv"].mean("rep")
    truth = ds["truth"]
    uniform = float((0.5 * np.abs(truth - 1 / 3).sum("value")).mean())  # ~0.067: a uniform guess
    for eps in ds["eps"].values:
        local = float(tv.sel(eps=eps, estimator="mmse"))
        assert local < uniform / 10  # each user's own prior: the posterior mean recovers the mixture
        assert float(tv.sel(eps=eps, estimator="ibu")) < uniform  # GIBU with every cohort's likelihood
        assert float(tv.sel(eps=eps, estimator="inv-p")) < uniform / 5  # per-plan unbiased estimates, averaged
        # 002 Sec. V: local priors beat one global prior (the mixture), which biases every cohort's posterior.
        assert local < float(tv.sel(eps=eps, estimator="mmse-global")) / 4
