"""The GIBU engine against the theory of 001 (ElSalamouny & Palamidessi, EuroS&P 2020)."""

from __future__ import annotations

import gc
import itertools
import math
import weakref

import numpy as np
import pytest
from helpers import em_problems, make, matrix_mechanism, observe
from hypothesis import given
from hypothesis import strategies as st

import ldpsim
from ldpsim import EstimationError, Integers, Likelihood, Observations, ParameterError, gibu

# 001 eq. (7): a singular mechanism, and eq. (8): 3-RR with eps = log 2.
A7 = [[1 / 2, 1 / 3, 1 / 6], [1 / 3, 1 / 3, 1 / 3], [1 / 6, 1 / 3, 1 / 2]]
A8 = [[1 / 2, 1 / 4, 1 / 4], [1 / 4, 1 / 2, 1 / 4], [1 / 4, 1 / 4, 1 / 2]]


def naive_gibu_step(theta, per_user_g):
    """Algorithm 1's update written literally, one user at a time (the reference)."""
    post = [theta * g / (theta @ g) for g in per_user_g]
    return np.mean(post, axis=0)


class TestCounterexamplesOf001:
    def test_III_A_mle_not_unique_but_always_theta1_equals_theta3(self):
        lik = Likelihood(observe(matrix_mechanism(A7), [0, 1, 2]))
        starts = [[0.6, 0.3, 0.1], [0.1, 0.3, 0.6], [0.2, 0.7, 0.1], [0.45, 0.1, 0.45], [1 / 3] * 3]
        finals = [gibu(lik, np.array(s), delta=1e-14, max_iter=100_000) for s in starts]
        best = 3 * math.log(1 / 3)  # L on the whole line theta1 = theta3
        for result in finals:
            assert result.converged
            assert result.theta[0] == pytest.approx(result.theta[2], abs=1e-6)
            assert result.loglik == pytest.approx(best, abs=1e-10)
        middles = [r.theta[1] for r in finals]
        assert max(middles) - min(middles) > 0.3  # different starts, different MLEs

    def test_III_B_every_theta_with_theta1_equal_theta3_is_a_fixed_point(self):
        lik = Likelihood(observe(matrix_mechanism(A7), [0, 1, 2]))
        for a in (0.0, 0.1, 0.25, 0.5):
            theta = np.array([a, 1 - 2 * a, a])
            nxt, _ = lik.em_step(theta)
            np.testing.assert_allclose(nxt, theta, atol=1e-15)

    def test_III_C_converges_to_the_boundary_mle(self):
        lik = Likelihood(observe(matrix_mechanism(A8), [0, 1, 1, 2]))
        result = gibu(lik, delta=1e-15, max_iter=400_000)
        np.testing.assert_allclose(result.theta, [0, 1, 0], atol=1e-4)
        assert result.loglik == pytest.approx(2 * math.log(1 / 4) + 2 * math.log(1 / 2), abs=1e-9)

    def test_III_C_the_paper_derivatives_hold_with_three_observations_of_2(self):
        # With observations 1,2,2,3 the gradient at (0,1,0) is (4,4,4) = n: that MLE *is*
        # stationary on the simplex. The paper's dL/dtheta_1 = dL/dtheta_3 = -0.5 (with
        # theta_2 = 1 - theta_1 - theta_3) holds for 1,2,2,2,3; there GIBU also reaches (0,1,0).
        tie = Likelihood(observe(matrix_mechanism(A8), [0, 1, 1, 2]))
        np.testing.assert_allclose(tie.gradient(np.array([0.0, 1, 0])), [4, 4, 4])
        lik = Likelihood(observe(matrix_mechanism(A8), [0, 1, 1, 1, 2]))
        grad = lik.gradient(np.array([0.0, 1, 0]))
        assert grad[0] - grad[1] == pytest.approx(-0.5)
        assert grad[2] - grad[1] == pytest.approx(-0.5)
        result = gibu(lik, delta=1e-15, max_iter=10_000)
        np.testing.assert_allclose(result.theta, [0, 1, 0], atol=1e-12)


class TestTheorem6SingleInput:
    def test_unique_argmax_gives_a_point_mass(self):
        domain = Integers(low=0, high=4)
        krr = make("mechanism", "krr", domain, eps=1.0)
        obs = Observations.from_reports(domain, [((krr, krr, krr), np.array([[2, 2, 3]]))])
        result = gibu(Likelihood(obs), delta=1e-14, max_iter=10_000)
        np.testing.assert_allclose(result.theta, [0, 0, 1, 0, 0], atol=1e-9)

    def test_tied_argmax_shares_the_mass_as_the_start_does(self):
        # Truncated geometric reports 1 and 3: |1-x| + |3-x| = 2 for x in {1, 2, 3}.
        domain = Integers(low=0, high=4)
        geo = make("mechanism", "geometric", domain, eps=0.7)
        obs = Observations.from_reports(domain, [((geo, geo), np.array([[1, 3]]))])
        g = np.exp(obs.log_likelihood()[0])
        argmax = np.flatnonzero(np.isclose(g, g.max(), rtol=1e-12))
        np.testing.assert_array_equal(argmax, [1, 2, 3])
        start = np.array([0.1, 0.2, 0.3, 0.1, 0.3])
        result = gibu(Likelihood(obs), start, delta=1e-15, max_iter=100_000)
        assert result.theta[argmax].sum() == pytest.approx(1, abs=1e-9)
        np.testing.assert_allclose(result.theta[argmax], start[argmax] / start[argmax].sum(), atol=1e-9)
        assert result.loglik == pytest.approx(math.log(g.max()), abs=1e-9)

    def test_different_mechanisms_in_one_output_vector(self):
        domain = Integers(low=0, high=5)
        plan = (make("mechanism", "krr", domain, eps=2.0), make("mechanism", "geometric", domain, eps=0.3))
        obs = Observations.from_reports(domain, [(plan, np.array([[4, 1]]))])
        g = plan[0].likelihood([4])[0] * plan[1].likelihood([1])[0]  # P(z|x) = product over reports
        result = gibu(Likelihood(obs), delta=1e-15, max_iter=100_000)
        assert result.theta[np.argmax(g)] == pytest.approx(1, abs=1e-9)


class TestEngine:
    def test_matches_algorithm_1_written_per_user(self, rng):
        domain = Integers(low=0, high=5)
        krr = make("mechanism", "krr", domain, eps=0.8)
        geo = make("mechanism", "geometric", domain, eps=0.4)
        data = [
            (krr, rng.integers(0, 6, (40, 1))),
            ((geo, krr), rng.integers(0, 6, (25, 2))),
            (geo, rng.integers(0, 6, (30, 1))),
        ]
        lik = Likelihood(Observations.from_reports(domain, data))
        per_user = [
            np.prod([m.likelihood([z])[0] for m, z in zip(plan if isinstance(plan, tuple) else (plan,), row)], axis=0)
            for plan, reports in data
            for row in reports
        ]
        theta = np.array([0.1, 0.3, 0.2, 0.15, 0.05, 0.2])
        for _ in range(5):
            expected = naive_gibu_step(theta, per_user)
            theta, _ = lik.em_step(theta)
            np.testing.assert_allclose(theta, expected, rtol=1e-12)

    def test_single_mechanism_is_eq_6_on_the_empirical_distribution(self, rng):
        domain = Integers(low=0, high=7)
        geo = make("mechanism", "geometric", domain, eps=0.5)
        reports = geo.sample(rng.integers(0, 8, 500), rng)
        lik = Likelihood(Observations.from_reports(domain, [(geo, reports)]))
        q = np.bincount(reports[:, 0], minlength=8) / 500
        a = geo.matrix
        theta = np.full(8, 1 / 8)
        nxt, _ = lik.em_step(theta)
        eq6 = np.array([sum(q[z] * theta[x] * a[x, z] / (theta @ a[:, z]) for z in range(8) if q[z]) for x in range(8)])
        np.testing.assert_allclose(nxt, eq6, rtol=1e-12)

    def test_products_of_thousands_of_reports_do_not_underflow(self, rng):
        # 0.1 ** 3000 is 0.0 in floating point; the engine works in log space.
        domain = Integers(low=0, high=9)
        krr = make("mechanism", "krr", domain, eps=0.5)
        truth = rng.integers(0, 10, 20)
        plan = (krr,) * 3000
        reports = np.column_stack([krr.sample(truth, rng) for _ in plan])
        obs = Observations.from_reports(domain, [(plan, reports)])
        assert np.all(np.exp(obs.log_likelihood()) == 0.0)  # the linear-space products vanish
        result = gibu(Likelihood(obs), delta=1e-12, max_iter=10_000)
        expected = np.bincount(truth, minlength=10) / 20  # 3000 reports identify each user's value
        np.testing.assert_allclose(result.theta, expected, atol=1e-6)

    def test_loglik_is_exactly_the_returned_thetas(self, rng):
        domain = Integers(low=0, high=9)
        geo = make("mechanism", "geometric", domain, eps=0.3)
        lik = Likelihood(Observations.from_reports(domain, [(geo, geo.sample(rng.integers(0, 10, 300), rng))]))
        result = gibu(lik)
        assert result.loglik == pytest.approx(lik.loglik(result.theta), rel=1e-12)

    def test_stops_at_max_iter_and_says_so(self, rng):
        domain = Integers(low=0, high=9)
        geo = make("mechanism", "geometric", domain, eps=0.1)
        lik = Likelihood(Observations.from_reports(domain, [(geo, geo.sample(rng.integers(0, 10, 300), rng))]))
        result = gibu(lik, delta=1e-300, max_iter=7)
        assert result.iterations == 7 and not result.converged

    def test_stopping_rule_is_on_the_loglik_change(self, rng):
        domain = Integers(low=0, high=9)
        geo = make("mechanism", "geometric", domain, eps=0.3)
        lik = Likelihood(Observations.from_reports(domain, [(geo, geo.sample(rng.integers(0, 10, 300), rng))]))
        result = gibu(lik, delta=1e-6, trace=True)
        steps = np.abs(np.diff(result.trace))
        assert steps[-1] < 1e-6 and np.all(steps[:-1] >= 1e-6)
        assert len(result.trace) == result.iterations + 1

    def test_default_delta_is_absolute_so_more_users_get_closer_to_the_mle(self):
        domain = Integers(low=0, high=9)
        geo = make("mechanism", "geometric", domain, eps=0.3)
        counts = np.arange(1, 11)
        small = Likelihood(Observations.from_counts(domain, geo, np.arange(10), counts))
        large = Likelihood(Observations.from_counts(domain, geo, np.arange(10), counts * 1000))
        # Same empirical distribution, so the same MLE; L scales by 1000 and with the default
        # delta = 0.01 nats the larger population is followed further towards it.
        a, b = gibu(small, trace=True), gibu(large, trace=True)
        assert a.iterations < b.iterations
        assert abs(a.trace[-1] - a.trace[-2]) < ldpsim.DEFAULT_DELTA <= abs(a.trace[-2] - a.trace[-3])
        mle = gibu(large, delta=1e-9, max_iter=100_000).theta
        assert np.abs(b.theta - mle).sum() < np.abs(a.theta - mle).sum()

    def test_a_start_with_a_zero_is_refused(self):
        lik = Likelihood(observe(matrix_mechanism(A8), [0, 1, 2]))
        with pytest.raises(ParameterError, match="start: is zero at index 1.*positive mass"):
            gibu(lik, np.array([0.5, 0.0, 0.5]))

    def test_a_report_no_input_can_produce_is_an_error(self):
        mech = matrix_mechanism([[1, 0, 0], [0.5, 0.5, 0], [0, 1, 0]])
        with pytest.raises(EstimationError, match=r"report \(2,\) .* probability 0 under every value"):
            Likelihood(observe(mech, [0, 1, 2]))

    def test_row_rescaling_leaves_update_and_gradient_unchanged(self, rng):
        mech = matrix_mechanism(rng.dirichlet(np.ones(6), size=6))  # two reports through a dense matrix
        lik = Likelihood(Observations.from_reports(mech.domain, [((mech, mech), rng.integers(0, 6, (50, 2)))]))
        assert isinstance(lik.H, np.ndarray)
        theta = rng.dirichlet(np.ones(6))
        nxt, _ = lik.em_step(theta)
        lik.H *= rng.uniform(0.1, 10, size=(lik.H.shape[0], 1))  # any positive per-row factor
        nxt2, _ = lik.em_step(theta)
        np.testing.assert_allclose(nxt, nxt2, rtol=1e-12)


@given(em_problems(max_count=50))
def test_loglik_never_decreases(problem):
    a, counts, start = problem
    mech = matrix_mechanism(a)
    obs = Observations.from_counts(mech.domain, mech, np.arange(a.shape[1]), counts)
    result = gibu(Likelihood(obs), start, delta=1e-13, max_iter=300, trace=True)
    assert np.all(np.diff(result.trace) >= -1e-10 * np.abs(result.trace[:-1]))
    assert result.theta.sum() == pytest.approx(1) and np.all(result.theta >= 0)


@given(em_problems(max_count=50))
def test_every_iterate_is_a_distribution_with_full_support(problem):
    a, counts, start = problem
    mech = matrix_mechanism(a)
    lik = Likelihood(Observations.from_counts(mech.domain, mech, np.arange(a.shape[1]), counts))
    theta = start
    for _ in range(20):
        theta, _ = lik.em_step(theta)
        assert theta.sum() == pytest.approx(1, abs=1e-12)
        assert np.all(theta > 0)


def test_kkt_conditions_hold_at_convergence(rng):
    # theta is an MLE iff dL/dtheta_x <= n for all x, with equality where theta_x > 0.
    domain = Integers(low=0, high=7)
    krr = make("mechanism", "krr", domain, eps=1.5)
    values = rng.choice(8, size=2000, p=[0.3, 0.3, 0.2, 0.1, 0.1, 0, 0, 0])
    lik = Likelihood(Observations.from_reports(domain, [(krr, krr.sample(values, rng))]))
    result = gibu(lik, delta=1e-13, max_iter=200_000)
    grad = lik.gradient(result.theta)
    assert np.all(grad <= lik.n * (1 + 1e-6))
    support = result.theta > 1e-6
    np.testing.assert_allclose(grad[support], lik.n, rtol=1e-6)


def test_all_permutations_of_users_give_the_same_estimate(rng):
    domain = Integers(low=0, high=4)
    krr = make("mechanism", "krr", domain, eps=1.0)
    reports = rng.integers(0, 5, (6, 1))
    results = set()
    for perm in itertools.islice(itertools.permutations(range(6)), 20):
        obs = Observations.from_reports(domain, [(krr, reports[list(perm)])])
        results.add(tuple(np.round(gibu(Likelihood(obs)).theta, 14)))
    assert len(results) == 1


def test_exchangeable_reports_are_merged_without_changing_the_update(rng):
    domain = Integers(low=0, high=5)
    krr = make("mechanism", "krr", domain, eps=0.8)
    geo = make("mechanism", "geometric", domain, eps=0.4)
    plan = (krr, geo, krr)
    reports = rng.integers(0, 6, (400, 3))
    obs = Observations.from_reports(domain, [(plan, reports)])
    lik = Likelihood(obs)
    assert lik.H.shape[0] < obs.n_distinct  # (a, g, b) and (b, g, a) share a row
    per_user = [krr.likelihood([a])[0] * geo.likelihood([g])[0] * krr.likelihood([b])[0] for a, g, b in reports]
    theta = rng.dirichlet(np.ones(6))
    nxt, loglik = lik.em_step(theta)
    np.testing.assert_allclose(nxt, naive_gibu_step(theta, per_user), rtol=1e-12)
    assert loglik == pytest.approx(sum(np.log(theta @ g) for g in per_user), rel=1e-12)


@given(
    st.lists(st.tuples(st.integers(-5, 5), st.integers(0, 3), st.integers(-(2**40), 2**40)), min_size=1, max_size=60),
    st.integers(1, 3),
)
def test_unique_rows_agrees_with_numpy(rows, width):
    from ldpsim.estimation.observations import unique_rows

    reports = np.array(rows, dtype=np.int64)[:, :width]
    uniq, counts = unique_rows(reports)
    ref_uniq, ref_counts = np.unique(reports, axis=0, return_counts=True)
    np.testing.assert_array_equal(uniq, ref_uniq)
    np.testing.assert_array_equal(counts, ref_counts)


def test_a_likelihood_is_built_once_per_observations_and_support_and_dropped_with_them():
    obs = observe(matrix_mechanism([[0.7, 0.3], [0.2, 0.8]]), [0, 1, 1])
    lik = Likelihood.of(obs)
    assert Likelihood.of(obs) is lik
    assert Likelihood.of(obs, np.array([True, True])) is lik  # the whole domain: the same likelihood
    assert Likelihood.of(obs, np.array([True, False])) is not lik
    gone = weakref.ref(lik)
    del obs, lik
    gc.collect()
    assert gone() is None


@given(
    rows=st.integers(2, 300),
    width=st.integers(2, 6),
    tied=st.floats(0.0, 0.5),
    high=st.sampled_from([3, 2**61]),
    seed=st.integers(0, 2**32 - 1),
)
def test_rows_tied_on_their_first_key_are_ordered_like_a_full_lexsort(rows, width, tied, high, seed):
    """Wide rows (one packed key per column) sort on the first key and refine only its ties: the order is
    np.lexsort's (ties on every key in their original order), and the distinct rows and counts numpy's."""
    from ldpsim.estimation.observations import _key_columns, _lexsort, sum_equal_rows, unique_rows

    rng = np.random.default_rng(seed)
    reports = rng.integers(0, 2**61, size=(rows, width))
    reports[:, 1:] = rng.integers(0, high, size=(rows, width - 1))
    share = rng.random(rows) < tied
    reports[share, 0] = reports[0, 0]  # a run of equal first keys, refined on the other columns
    reports[rng.random(rows) < tied / 4] = reports[-1]  # some rows equal on every key
    reports[0, 0], reports[-1, 0] = 0, 2**61 - 1  # the first column spans 61 bits: a key of its own
    lo = reports.min(axis=0)
    spans = reports.max(axis=0) - lo + 1
    groups = _key_columns(spans)
    assert groups is not None
    np.testing.assert_array_equal(_lexsort(reports, lo, spans, groups)[0], np.lexsort(reports.T[::-1]))
    uniq, counts = unique_rows(reports)
    ref_uniq, ref_counts = np.unique(reports, axis=0, return_counts=True)
    np.testing.assert_array_equal(uniq, ref_uniq)
    np.testing.assert_array_equal(counts, ref_counts)
    weights = rng.integers(1, 9, size=rows)
    summed = sum_equal_rows(reports, weights)
    _, inverse = np.unique(reports, axis=0, return_inverse=True)
    np.testing.assert_array_equal(summed[1], np.bincount(inverse.ravel(), weights=weights).astype(np.int64))
