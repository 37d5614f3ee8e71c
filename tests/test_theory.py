"""The theorems and counterexamples of 004 and 001 as runnable diagnostics; krr-mle and norm-sub."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make, matrix_mechanism, observe
from hypothesis import given
from hypothesis import strategies as st

import ldpsim
from ldpsim import (
    EstimationError,
    Integers,
    Likelihood,
    Observations,
    check_estimate,
    mechanism_report,
    project_simplex,
)
from ldpsim.theory import diagnostics
from ldpsim.theory.diagnostics import inv_mse, kkt_violation, strictly_concave, unique_mle

M4 = [[0.10, 0.45, 0.45], [0.45, 0.10, 0.45], [0.45, 0.45, 0.10]]  # 004 eq. (4)
M12 = [[0.45, 0.10, 0.45], [0.05, 0.90, 0.05], [0.45, 0.10, 0.45]]  # 004 eq. (12)
A7 = [[1 / 2, 1 / 3, 1 / 6], [1 / 3, 1 / 3, 1 / 3], [1 / 6, 1 / 3, 1 / 2]]  # 001 eq. (7)
TIGHT = {"delta": 1e-12, "max_iter": 200_000}


class TestStrictConcavity004:
    def test_sec_4_1_one_observation_is_not_strictly_concave(self):
        assert not strictly_concave(Likelihood(observe(matrix_mechanism(M4), [1])))

    def test_sec_4_1_two_observations_are(self):
        assert strictly_concave(Likelihood(observe(matrix_mechanism(M4), [1, 0])))

    def test_sec_5_1_unique_mle_without_strict_concavity(self):
        lik = Likelihood(observe(matrix_mechanism(M12), [1, 1, 1, 1]))
        assert not strictly_concave(lik)
        result = ldpsim.gibu(lik, delta=1e-15, max_iter=10_000)
        np.testing.assert_allclose(result.theta, [0, 1, 0], atol=1e-9)
        assert unique_mle(lik, result.theta)

    def test_sec_5_1_adding_1_and_3_gives_many_mles(self):
        obs = observe(matrix_mechanism(M12), [1, 1, 1, 1, 0, 2])
        report = check_estimate(obs, make("estimator", "ibu", **TIGHT).estimate(obs).distribution)
        assert report.is_mle and not report.strictly_concave and report.unique_mle is False
        # Indeed: every theta with the same theta_2 is an MLE (rows 1 and 3 of (12) are equal).
        lik = Likelihood(obs)
        theta = make("estimator", "ibu", **TIGHT).estimate(obs).distribution
        other = np.array([theta[0] + theta[2], theta[1], 0.0])
        assert lik.loglik(other) == pytest.approx(lik.loglik(theta), abs=1e-12)

    def test_001_sec_III_A_is_not_unique_either(self):
        obs = observe(matrix_mechanism(A7), [0, 1, 2])
        theta = make("estimator", "ibu", **TIGHT).estimate(obs).distribution
        report = check_estimate(obs, theta)
        assert report.is_mle and not report.strictly_concave and report.unique_mle is False

    def test_krr_strict_concavity_needs_all_but_one_value_observed(self, rng):
        # 004 Corollary (k-RR): strictly concave once every value is observed. Condition (iii) shows more:
        # G w = 0 forces w_z = 0 on each observed z, and sum(w) = 0 then fixes one missing value.
        domain = Integers(low=0, high=5)
        krr = make("mechanism", "krr", domain, eps=0.5)

        def concave(seen):
            return strictly_concave(
                Likelihood(Observations.from_counts(domain, krr, np.arange(seen), np.ones(seen, int)))
            )

        assert concave(6) and concave(5) and not concave(4)


class TestKKTCertificate:
    def test_certifies_converged_ibu_and_rejects_inversion(self, rng):
        domain = Integers(low=0, high=9)
        geo = make("mechanism", "geometric", domain, eps=0.3)
        obs = Observations.from_reports(domain, [(geo, geo.sample(rng.binomial(9, 0.4, 3000), rng))])
        ibu = make("estimator", "ibu", **TIGHT).estimate(obs).distribution
        inv = make("estimator", "inv-p").estimate(obs).distribution
        assert check_estimate(obs, ibu).kkt_violation < 1e-6
        assert check_estimate(obs, inv).kkt_violation > 1e-2

    def test_the_001_III_C_boundary_mle_satisfies_kkt(self):
        lik = Likelihood(
            observe(matrix_mechanism([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]]), [0, 1, 1, 1, 2])
        )
        assert kkt_violation(lik, np.array([0.0, 1.0, 0.0])) < 1e-12  # dL/dtheta = (4.5, 5, 4.5) <= n = 5
        assert kkt_violation(lik, np.array([0.1, 0.8, 0.1])) > 0.01


class TestKrrMLE:
    @pytest.mark.parametrize(
        ("eps", "p"), [(0.5, None), (1.0, [0.3, 0.3, 0.2, 0.1, 0.1, 0, 0, 0]), (3.0, [0.9, 0.1, 0, 0, 0, 0, 0, 0])]
    )
    def test_certifies_ibu_to_the_solvers_tolerance(self, rng, eps, p):
        domain = Integers(low=0, high=7)
        krr = make("mechanism", "krr", domain, eps=eps)
        obs = Observations.from_reports(domain, [(krr, krr.sample(rng.choice(8, 2000, p=p), rng))])
        exact = make("estimator", "krr-mle").estimate(obs)
        ibu = make("estimator", "ibu", **TIGHT).estimate(obs)
        assert exact.loglik >= ibu.loglik - 1e-9
        assert exact.loglik - ibu.loglik < 1e-7
        np.testing.assert_allclose(ibu.distribution, exact.distribution, atol=1e-5)
        assert kkt_violation(Likelihood(obs), exact.distribution) < 1e-12

    @given(st.lists(st.integers(0, 300), min_size=2, max_size=12).filter(lambda c: sum(c) > 0), st.floats(0.05, 6))
    def test_closed_form_is_the_mle(self, counts, eps):
        k = len(counts)
        domain = Integers(low=0, high=k - 1)
        krr = make("mechanism", "krr", domain, eps=eps)
        obs = Observations.from_counts(domain, krr, np.arange(k), np.array(counts))
        theta = make("estimator", "krr-mle").estimate(obs).distribution
        assert kkt_violation(Likelihood(obs), theta) < 1e-9

    def test_equals_inversion_when_inversion_is_a_distribution(self, rng):
        domain = Integers(low=0, high=3)
        krr = make("mechanism", "krr", domain, eps=2.0)
        obs = Observations.from_reports(domain, [(krr, krr.sample(rng.integers(0, 4, 5000), rng))])
        v = ldpsim.unbiased_estimate(obs)
        assert v.min() > 0
        np.testing.assert_allclose(make("estimator", "krr-mle").estimate(obs).distribution, v, atol=1e-12)

    def test_refuses_anything_but_krr(self, rng):
        domain = Integers(low=0, high=3)
        geo = make("mechanism", "geometric", domain, eps=1.0)
        obs = Observations.from_reports(domain, [(geo, geo.sample(rng.integers(0, 4, 50), rng))])
        with pytest.raises(EstimationError, match="krr-mle needs every user to send one report through the same k-RR"):
            make("estimator", "krr-mle").estimate(obs)


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=40))
def test_norm_sub_is_the_projection(values):
    from ldpsim_plugins.estimators.norm_sub import norm_sub

    np.testing.assert_allclose(norm_sub(np.array(values)), project_simplex(np.array(values)), atol=1e-12)


class TestMechanismReports:
    def test_levels_rank_and_inv_bounds_for_krr(self):
        report = mechanism_report(make("mechanism", "krr", Integers(low=0, high=99), eps=2.0), users=5000)
        assert report.ldp_eps == pytest.approx(2.0) and report.identifiable and report.consistent
        (bound,) = report.inv_bounds
        # 004 Sec. 7.6 for k = 100, eps = 2: ((e^2 + 99)/(e^2 - 1))^2 = 277.28 (the text prints 227.28).
        assert bound.kind == "upper" and bound.bound == pytest.approx(277.28, abs=0.01)
        assert bound.exact <= bound.bound and bound.holds
        assert bound.simulated == pytest.approx(bound.exact, rel=0.1)

    def test_inv_lower_bound_for_the_geometric_mechanism(self):
        report = mechanism_report(make("mechanism", "geometric", Integers(low=0, high=99), eps=0.05), users=None)
        (bound,) = report.inv_bounds
        # beta^3 - 2 alpha beta^2 - 2 with alpha = e^-0.05: 7818.8 (the text prints 7238).
        assert bound.kind == "lower" and bound.bound == pytest.approx(7818.8, abs=0.5)
        assert bound.exact >= bound.bound
        assert report.geo_eps == pytest.approx(0.05) and report.ldp_eps == pytest.approx(0.05 * 99)

    def test_exact_inv_mse_matches_simulation(self, rng):
        m = make("mechanism", "geometric", Integers(low=0, high=5), eps=0.4).matrix
        theta = np.array([0.3, 0.2, 0.2, 0.1, 0.1, 0.1])
        n, reps = 400, 20_000
        q = rng.multinomial(n, theta @ m, size=reps) / n
        sim = n * ((q @ np.linalg.inv(m) - theta) ** 2).sum(axis=1).mean()
        assert sim == pytest.approx(inv_mse(m, theta), rel=0.03)

    def test_lip_level_under_a_prior(self):
        report = mechanism_report(
            make("mechanism", "krr", Integers(low=0, high=2), eps=1.0), prior=np.array([0.2, 0.3, 0.5]), users=None
        )
        # eps-LDP implies eps-LIP (002 Theorem), and here it is strictly less.
        assert 0 < report.lip_eps < 1.0

    def test_a_singular_mechanism_does_not_identify(self):
        report = mechanism_report(matrix_mechanism(A7), users=None)
        assert report.rank == 2 and not report.identifiable and math.isinf(report.condition)
        assert any("does NOT identify" in line for line in report.lines())


def test_strict_concavity_is_judged_once_per_observations(monkeypatch):
    calls = []
    real = diagnostics.strictly_concave
    monkeypatch.setattr(diagnostics, "strictly_concave", lambda lik: calls.append(lik) or real(lik))
    obs = observe(matrix_mechanism(M4), [1, 0, 2])
    for theta in (np.full(3, 1 / 3), np.array([0.5, 0.3, 0.2])):
        check_estimate(obs, theta)
    assert len(calls) == 1
    check_estimate(observe(matrix_mechanism(M4), [1, 0, 2]), np.full(3, 1 / 3))
    assert len(calls) == 2  # other observations: judged again
