"""The second-order exact-MLE solver behind `mle`: certified, never below EM, exact zeros, deterministic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import em_problems, make, matrix_mechanism, observe
from hypothesis import example, given, settings
from hypothesis import strategies as st
from ldpsim_plugins.estimators.krr_mle import water_fill

import ldpsim
from ldpsim import Integers, Likelihood, Observations, gibu, newton_mle
from ldpsim.estimation import active_set, hessian_rows, interior_point, linalg, newton
from ldpsim.estimation.nonnegative_qp import nonnegative_qp


def _likelihood(a, counts):
    mech = matrix_mechanism(a)
    return Likelihood(Observations.from_counts(mech.domain, mech, np.arange(a.shape[1]), counts))


@st.composite
def sparse_problems(draw):
    """Channels with zero entries (some reports impossible for some values) and skewed counts:
    their MLEs often have zero components."""
    k = draw(st.integers(2, 12))
    m = draw(st.integers(2, 15))
    rows = np.array(draw(st.lists(st.lists(st.floats(0.0, 1.0), min_size=m, max_size=m), min_size=k, max_size=k)))
    rows[np.arange(k), np.arange(k) % m] += 0.05  # every value can send some report
    counts = np.array(draw(st.lists(st.integers(0, 10_000), min_size=m, max_size=m)))
    a = rows / rows.sum(axis=1, keepdims=True)
    reachable = a.sum(axis=0) > 0
    counts = np.where(reachable, counts, 0)
    if counts.sum() == 0:
        counts[np.argmax(reachable)] = 1
    return a, counts


def _check_against_squarem(lik, start=None):
    em = gibu(lik, start, stop="kkt", tol=1e-6, accelerate="squarem", max_iter=1_000_000)  # `mle` before
    for warm in (0, newton.WARM_PASSES):  # straight from the start, and after SQUAREM's warm-up
        result = newton_mle(lik, start, tol=1e-6, warm_passes=warm)
        assert result.converged and result.rule == "kkt" and result.kkt < 1e-6
        assert result.gap == pytest.approx(lik.n * math.log1p(result.kkt))
        assert np.all(result.theta >= 0) and result.theta.sum() == pytest.approx(1, abs=1e-12)
        assert result.loglik == pytest.approx(lik.loglik(result.theta), abs=1e-9 * max(1.0, abs(result.loglik)))
        # at least the likelihood `mle` reached with SQUAREM (up to rounding in L's last digits)
        assert result.loglik >= em.loglik - 1e-10 * max(1.0, abs(em.loglik))
        # and never below the start's
        initial = lik.loglik(np.full(lik.size, 1 / lik.size) if start is None else start)
        assert result.loglik >= initial - 1e-12 * max(1.0, abs(initial))


@settings(deadline=None, max_examples=150)
@given(em_problems(max_count=500))
def test_certified_and_at_least_as_likely_as_squarem(problem):
    a, counts, start = problem
    _check_against_squarem(_likelihood(a, counts), start)


@settings(deadline=None, max_examples=150)
@given(sparse_problems())
def test_mles_with_zero_components(problem):
    a, counts = problem
    _check_against_squarem(_likelihood(a, counts))


def _krr(rng, k=60, n=50_000, eps=0.5):
    domain = Integers(low=0, high=k - 1)
    krr = make("mechanism", "krr", domain, eps=eps)
    p = 1 / np.arange(1, k + 1) ** 1.5
    obs = Observations.from_reports(domain, [(krr, krr.sample(rng.choice(k, size=n, p=p / p.sum()), rng))])
    counts = np.bincount(obs.groups[0].reports[:, 0], weights=obs.groups[0].counts, minlength=k)
    return obs, water_fill(counts, krr._keep, krr._other)


def test_equals_the_closed_form_krr_mle_zeros_included(rng):
    obs, closed = _krr(rng)
    assert np.sum(closed == 0) >= 10  # the test is about exact zeros
    lik = Likelihood.of(obs)
    result = newton_mle(lik, tol=1e-9)
    assert result.converged and result.kkt < 1e-9
    assert abs(result.loglik - lik.loglik(closed)) <= 1e-9 * obs.n
    np.testing.assert_array_equal(result.theta == 0, closed == 0)  # the MLE's zeros, exactly
    np.testing.assert_allclose(result.theta, closed, atol=1e-7)


def test_deterministic(rng):
    obs, _ = _krr(rng)
    a = newton_mle(Likelihood(obs), trace=True)
    b = newton_mle(Likelihood(obs), trace=True)
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.trace, b.trace)
    assert (a.loglik, a.iterations, a.kkt) == (b.loglik, b.iterations, b.kkt)


def test_tens_of_passes_where_em_needs_thousands(rng):
    # the truncated geometric mechanism at small eps: a flat likelihood, EM crawls
    domain = Integers(low=0, high=149)
    geo = make("mechanism", "geometric", domain, eps=0.1)
    obs = Observations.from_reports(domain, [(geo, geo.sample(rng.binomial(149, 0.3, 20_000), rng))])
    lik = Likelihood.of(obs, obs.likely_subset())
    em = gibu(lik, stop="kkt", tol=1e-6, accelerate="squarem", max_iter=1_000_000)
    result = newton_mle(lik, tol=1e-6)
    assert result.converged and result.iterations <= 60 and em.iterations > 20 * result.iterations
    assert result.loglik >= em.loglik
    assert np.any(result.theta == 0)


def test_a_non_unique_mle_reaches_the_maximum():
    a7 = [[1 / 2, 1 / 3, 1 / 6], [1 / 3, 1 / 3, 1 / 3], [1 / 6, 1 / 3, 1 / 2]]  # 001 eq. (7), Sec. III-A
    lik = Likelihood(observe(matrix_mechanism(a7), [0, 1, 2]))
    for start in ([0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [1 / 3] * 3):
        result = newton_mle(lik, np.array(start), tol=1e-12, warm_passes=0)
        assert result.converged and result.loglik == pytest.approx(3 * math.log(1 / 3), abs=1e-10)


def test_too_large_a_hessian_falls_back_to_squarem(rng, monkeypatch):
    domain = Integers(low=0, high=59)
    geo = make("mechanism", "geometric", domain, eps=0.2)
    obs = Observations.from_reports(domain, [(geo, geo.sample(rng.binomial(59, 0.3, 5_000), rng))])
    lik = Likelihood(obs)
    monkeypatch.setattr(hessian_rows, "DENSE_MAX_ENTRIES", 0)
    monkeypatch.setattr(hessian_rows, "SAMPLED_MAX_FLOPS", 0)  # nor one from its rows in single precision
    fallback = newton_mle(lik, tol=1e-8)
    em = gibu(lik, stop="kkt", tol=1e-8, accelerate="squarem", max_iter=1_000_000)
    np.testing.assert_array_equal(fallback.theta, em.theta)
    assert fallback.iterations == em.iterations


def test_the_mle_estimator_runs_the_newton_solver_and_em_on_request(rng):
    obs, closed = _krr(rng)
    mle = make("estimator", "mle").estimate(obs)
    assert mle.rule == "kkt" and mle.converged and mle.kkt < 1e-6
    np.testing.assert_array_equal(mle.distribution == 0, closed == 0)
    em = make("estimator", "mle", solver="em").estimate(obs)
    old = gibu(Likelihood.of(obs), stop="kkt", tol=1e-6, accelerate="squarem", max_iter=1_000_000)
    np.testing.assert_array_equal(em.distribution, old.theta)  # `solver = em` is `mle` as it was
    assert mle.loglik >= em.loglik
    # ibu is untouched: the paper's rule, plain EM
    ibu = make("estimator", "ibu").estimate(obs)
    plain = gibu(Likelihood.of(obs))
    np.testing.assert_array_equal(ibu.distribution, plain.theta)


def test_conjugate_gradients_through_the_operator_reach_the_same_maximum(rng):
    domain = Integers(low=0, high=59)
    geo = make("mechanism", "geometric", domain, eps=0.2)
    obs = Observations.from_reports(domain, [(geo, geo.sample(rng.binomial(59, 0.3, 5_000), rng))])
    lik = Likelihood.of(obs)
    dense = newton_mle(lik, tol=1e-8)
    cg = newton_mle(lik, tol=1e-8, hessian="cg")
    assert cg.converged and cg.kkt < 1e-8
    assert abs(cg.loglik - dense.loglik) <= obs.n * 1e-8
    em = gibu(lik, stop="kkt", tol=1e-8, accelerate="squarem", max_iter=1_000_000)
    assert cg.iterations < em.iterations  # passes: each CG step costs one (H and H^T once)
    with pytest.raises(ldpsim.ParameterError, match="hessian: unknown mode"):
        newton_mle(lik, hessian="lu")


@pytest.mark.parametrize("restricted", [False, True])
def test_krr_newton_systems_are_solved_exactly_in_linear_time(rng, monkeypatch, restricted):
    # k-RR's Hessian is a diagonal plus rank 2 (Woodbury); on a support holding the MLE's, the same MLE
    obs, closed = _krr(rng)
    support = (closed > 0) | (np.arange(closed.size) % 2 == 0) if restricted else None
    lik = Likelihood.of(obs, support)
    assert hessian_rows.named_columns(lik) is not None
    fast = newton_mle(lik, tol=1e-9)
    assert fast.converged and abs(fast.loglik - Likelihood.of(obs).loglik(closed)) <= 1e-9 * obs.n
    np.testing.assert_array_equal(lik.expand(fast.theta) == 0, closed == 0)
    monkeypatch.setattr(newton, "named_columns", lambda _: None)  # the dense Hessian instead
    dense = newton_mle(lik, tol=1e-9)
    assert dense.iterations == fast.iterations
    np.testing.assert_allclose(dense.theta, fast.theta, atol=1e-9)


def test_only_reports_naming_one_value_are_treated_as_krr(rng):
    domain = Integers(low=0, high=29)
    geo = make("mechanism", "geometric", domain, eps=0.5)
    obs = Observations.from_reports(domain, [(geo, geo.sample(rng.integers(0, 30, 1_000), rng))])
    assert hessian_rows.named_columns(Likelihood(obs)) is None
    krr = make("mechanism", "krr", domain, eps=0.5)
    twice = Observations.from_reports(domain, [((krr, krr), rng.integers(0, 30, (1_000, 2)))])
    assert hessian_rows.named_columns(Likelihood(twice)) is None  # two reports per user: not one named value


@settings(deadline=None, max_examples=4)
@given(eps=st.floats(1.0, 3.0), seed=st.integers(0, 2**32 - 1), shape=st.sampled_from([(16, 32), (24, 24)]))
def test_small_grids_pass_over_the_exact_dense_rows_to_the_same_certified_maximum(eps, seed, shape):
    """Below DENSE_PASS_MAX_SIZE values SQUAREM's passes use the structured operator's exact rows: the
    same probabilities, so a certified MLE at least as likely as SQUAREM's on the FFT operator."""
    rng = np.random.default_rng(seed)
    domain = ldpsim.Grid(rows=shape[0], cols=shape[1], cell=1.0)
    mech = make("mechanism", "planar-geometric", domain, eps=eps)
    values = rng.choice(domain.size, 1_500, p=rng.dirichlet(np.full(domain.size, 0.2)))
    obs = Observations.from_reports(domain, [(mech, mech.sample(values, rng))])
    lik = Likelihood(obs)
    assert not isinstance(lik.H, np.ndarray)  # the FFT convolution
    passes = hessian_rows.likelihood_for_passes(lik, None)
    assert isinstance(passes.H, np.ndarray) and passes.H is not lik.H
    np.testing.assert_array_equal(passes.H, lik.H.rows(np.arange(lik.H.shape[0])))
    assert passes.counts is lik.counts and passes.n == lik.n
    tol = 1e-6
    result = newton_mle(lik, tol=tol)
    em = gibu(lik, stop="kkt", tol=tol, accelerate="squarem", max_iter=1_000_000)
    assert result.converged and result.kkt < tol
    assert lik.certificate(lik.gradient(result.theta))[0] < tol * 1.01  # certified on the FFT operator itself
    # both certified: each within n log(1 + tol) of the maximum
    assert result.loglik >= em.loglik - lik.n * math.log1p(tol)
    assert hessian_rows.likelihood_for_passes(Likelihood(obs), lik.H.rows(np.arange(lik.H.shape[0]))).H is not lik.H


@st.composite
def bit_problems(draw):
    """OUE, subset selection and local hashing at small sizes: their likelihoods are constant plus a bit
    pattern, read from packed reports (no dense matrix), with reports drawn from skewed data."""
    name = draw(st.sampled_from(["oue", "subset_selection", "olh", "blh", "the", "cms"]))
    k = draw(st.integers(4, 24))
    eps = draw(st.floats(0.3, 3.0))
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(200, 3_000))
    return name, k, eps, seed, n


@settings(deadline=None, max_examples=40)
@given(bit_problems())
# hypothesis found it: 4 distinct reports, all in the sample, and one sharpening step left the barrier's pull on
# a value of 1.4e-4 (2.0e-4, KKT 5e-8, 3.7e-6 nats below SQUAREM); a sample of every row now sharpens fully
@example(problem=("subset_selection", 4, 1.953125, 1004, 1004))
def test_a_hessian_from_a_sample_of_rows_reaches_a_certified_mle_at_least_as_likely(problem):
    """The sampled Hessian only steers the Newton steps: the certificate is exact, so the estimate is an MLE
    to tol, at least as likely as SQUAREM's and the start, with the MLE's zeros exact."""
    name, k, eps, seed, n = problem
    rng = np.random.default_rng(seed)
    domain = Integers(low=0, high=k - 1)
    params = {"hashes": 4, "buckets": 8} if name == "cms" else {}
    mech = make("mechanism", name, domain, eps=eps, **params)
    values = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.3)))
    lik = Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))
    assert callable(getattr(lik.H, "rows", None))
    sample = hessian_rows.sampled_rows(lik, always=True)
    assert sample is not None and np.isclose(sample.weight.sum(), 1.0)
    _check_against_squarem_with(lik, hessian="sampled")


def test_a_stalled_newton_run_still_ends_at_least_as_likely_as_squarem():
    """hypothesis found it: with a sampled Hessian on 4 values the interior point stalls, and SQUAREM from its
    iterate stopped just inside tol, 1.2e-6 nats below SQUAREM from the uniform; the fallback now goes on to
    tol * SHARPEN, as certified Newton iterations do."""
    rng = np.random.default_rng(200)
    domain = Integers(low=0, high=3)
    mech = make("mechanism", "blh", domain, eps=1.5)
    values = rng.choice(4, 200, p=rng.dirichlet(np.full(4, 0.3)))
    lik = Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))
    result, em = _check_against_squarem_with(lik, hessian="sampled")
    assert result.loglik >= em.loglik


def _check_against_squarem_with(lik, **options):
    em = gibu(lik, stop="kkt", tol=1e-6, accelerate="squarem", max_iter=1_000_000)
    result = newton_mle(lik, tol=1e-6, **options)
    assert result.converged and result.kkt < 1e-6 and np.all(result.theta >= 0)
    assert result.loglik >= em.loglik - 1e-10 * max(1.0, abs(em.loglik))
    assert result.loglik >= lik.loglik(np.full(lik.size, 1 / lik.size)) - 1e-12 * abs(result.loglik)
    return result, em


def test_the_sampled_hessian_is_the_exact_one_when_it_holds_every_row(rng):
    domain = Integers(low=0, high=9)
    mech = make("mechanism", "oue", domain, eps=1.0)
    lik = Likelihood(Observations.from_reports(domain, [(mech, mech.sample(rng.integers(0, 10, 120), rng))]))
    sample = hessian_rows.sampled_rows(lik, always=True)
    assert sample is not None and sample.index.size == lik.H.shape[0]  # fewer rows than 16 per value
    assert sample.every_row  # so the polish takes its full steps, as with the float64 Hessian
    # packed bits pass faster as they are: never materialized
    assert hessian_rows.likelihood_for_passes(lik, None) is lik
    dense = hessian_rows._exact_dense(lik)
    np.testing.assert_allclose(sample.rows, dense, rtol=1e-7)
    theta = rng.dirichlet(np.ones(10))
    p = dense @ theta
    exact = (dense * (lik.counts / lik.n / p**2)[:, None]).T @ dense
    solver = interior_point.Solver(lik, None, None, sample)
    pt = solver.point(theta)
    solver.complete(pt)
    rhs = rng.standard_normal(10)
    np.testing.assert_allclose(solver.system(pt, np.ones(10))(rhs), np.linalg.solve(exact + np.eye(10), rhs), rtol=1e-4)


def test_a_sample_of_rows_estimates_the_hessian_and_saves_passes(rng, monkeypatch):
    # OUE at k = 64, eps = 0.5: every report distinct, too many for the dense Hessian (forced off), a sample
    # of 1024 rows
    domain = Integers(low=0, high=63)
    mech = make("mechanism", "oue", domain, eps=0.5)
    values = rng.choice(64, 20_000, p=rng.dirichlet(np.full(64, 0.5)))
    lik = Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))
    monkeypatch.setattr(hessian_rows, "DENSE_MAX_FLOPS", 0)
    monkeypatch.setattr(hessian_rows, "SAMPLED_FORM_FLOPS", 0)  # 16 rows per value, not what 64 values afford
    sample = hessian_rows.sampled_rows(lik)
    assert sample is not None and sample.index.size <= hessian_rows.SAMPLE_ROWS_PER_VALUE * 64 < lik.H.shape[0]
    assert not sample.every_row
    # systematic sampling proportional to the counts: the sample's Hessian is within ~sqrt(|X| / m) of the truth
    dense = hessian_rows._exact_dense(lik)
    theta = np.full(64, 1 / 64)
    weight = 1 / (dense @ theta) ** 2
    exact = (dense * (lik.counts / lik.n * weight)[:, None]).T @ dense
    estimate = (sample.rows * (sample.weight * weight[sample.index])[:, None]).T @ sample.rows
    assert np.linalg.norm(estimate - exact, 2) < 0.5 * np.linalg.norm(exact, 2)
    result, em = _check_against_squarem_with(lik)
    # a stalled Newton would hand over to SQUAREM: more passes. Newton takes 17-20 passes whatever the
    # draw; SQUAREM 32-59 (32 for these reports, 50 for those of the uniforms sampler)
    assert result.iterations <= 25 and result.iterations < em.iterations
    assert newton_mle(lik, tol=1e-6).iterations == result.iterations  # deterministic


def test_a_sampled_hessian_needs_an_operator_that_reads_its_rows(rng):
    domain = Integers(low=0, high=59)
    geo = make("mechanism", "geometric", domain, eps=0.2)
    lik = Likelihood(Observations.from_reports(domain, [(geo, geo.sample(rng.integers(0, 60, 500), rng))]))
    lik.H = ldpsim.rank_one_plus_sparse(
        __import__("scipy.sparse.linalg", fromlist=["aslinearoperator"]).aslinearoperator(
            np.eye(60)[:1].repeat(lik.H.shape[0], 0)
        ),
        0.5,
    )
    with pytest.raises(ldpsim.ParameterError, match="hessian: .*cannot read its rows"):
        newton_mle(lik, hessian="sampled")


def test_a_grid_beyond_the_float64_hessian_gets_every_row_in_single_precision(rng):
    """32 x 32 planar geometric at eps = 0.25: D |X|^2 = 10^9 is above DENSE_MAX_FLOPS, so `mle` ran
    thousands of SQUAREM passes; the Hessian from every row in single precision takes tens."""
    domain = ldpsim.Grid(rows=32, cols=32, cell=1.0)
    mech = make("mechanism", "planar-geometric", domain, eps=0.25)
    values = rng.choice(domain.size, 20_000, p=rng.dirichlet(np.full(domain.size, 0.1)))
    lik = Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))
    assert hessian_rows.dense_likelihood(lik) is None
    sample = hessian_rows.sampled_rows(lik)
    assert sample is not None and sample.index.size == lik.H.shape[0]  # every row: the exact Hessian
    result, em = _check_against_squarem_with(lik)
    assert result.iterations <= 60 and em.iterations > 20 * result.iterations
    assert np.sum(result.theta == 0) > np.sum(em.theta == 0)  # the MLE's zeros, exact


def _grid_likelihood(rng, side=24, eps=0.25, users=20_000):
    domain = ldpsim.Grid(rows=side, cols=side, cell=1.0)
    mech = make("mechanism", "planar-geometric", domain, eps=eps)
    values = rng.choice(domain.size, users, p=rng.dirichlet(np.full(domain.size, 0.1)))
    return Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))


def test_the_active_set_reaches_a_certified_mle_on_the_whole_domain_at_least_as_likely_as_squarem(rng):
    """Newton on the MLE's likely support, forced on a 24 x 24 grid at eps = 0.25: the certificate is the whole
    domain's (every value's gradient, not only the active set's), and L is at least SQUAREM's."""
    lik = _grid_likelihood(rng)
    em = gibu(lik, stop="kkt", tol=1e-6, accelerate="squarem", max_iter=1_000_000)
    result = newton_mle(lik, tol=1e-6, hessian="active")
    assert result.converged and result.rule == "kkt"
    kkt, gap = lik.certificate(lik.gradient(result.theta))  # the whole domain's, recomputed
    assert kkt < 1e-6 and result.kkt == pytest.approx(kkt, rel=1e-6, abs=1e-12)
    assert result.loglik == pytest.approx(lik.loglik(result.theta), abs=1e-9 * abs(result.loglik))
    assert result.loglik >= em.loglik - 1e-10 * abs(em.loglik)
    assert np.all(result.theta >= 0) and result.theta.sum() == pytest.approx(1, abs=1e-12)
    # the active set's exact zeros (SQUAREM's iterates never have any) and far fewer passes
    assert np.sum(result.theta == 0) > lik.size // 2 and np.sum(em.theta == 0) == 0
    assert result.iterations < em.iterations / 5


def test_a_large_grid_takes_the_active_set_and_falls_back_to_squarem_beyond_its_budget(rng, monkeypatch):
    """Where neither the float64 nor the sampled Hessian is affordable, `auto` iterates on an active set for
    an operator that reads a few columns cheaply (a convolution); an active set beyond ACTIVE_MAX_FLOPS
    hands over to SQUAREM from the warm start, still certified and never below it."""
    lik = _grid_likelihood(rng)
    monkeypatch.setattr(hessian_rows, "DENSE_MAX_FLOPS", 1.0)
    monkeypatch.setattr(hessian_rows, "SAMPLED_MAX_FLOPS", 1.0)
    calls = []
    real = newton.active_set_mle
    monkeypatch.setattr(newton, "active_set_mle", lambda *a, **k: calls.append(1) or real(*a, **k))
    active = newton_mle(lik, tol=1e-6)
    assert calls and active.kkt < 1e-6 and np.sum(active.theta == 0) > 0
    monkeypatch.setattr(active_set, "ACTIVE_MAX_FLOPS", 1.0)  # an active set of one value at most
    fallback = newton_mle(lik, tol=1e-6)
    warm = gibu(lik, stop="kkt", tol=1e-6, accelerate="squarem", max_iter=newton.ACTIVE_WARM_PASSES)
    assert fallback.converged and fallback.kkt < 1e-6 and fallback.loglik >= warm.loglik
    assert lik.certificate(lik.gradient(fallback.theta))[0] < 1e-6
    assert fallback.loglik >= active.loglik - lik.n * math.log1p(1e-6)


def test_the_active_set_needs_an_operator_that_reads_its_rows(rng):
    from scipy.sparse.linalg import aslinearoperator

    lik = _grid_likelihood(rng, side=6, users=500)
    assert isinstance(lik.H, np.ndarray)  # a small grid's dense likelihood: the active set indexes it
    assert newton_mle(lik, tol=1e-6, hessian="active").kkt < 1e-6
    lik.H = aslinearoperator(lik.H)  # products only
    with pytest.raises(ldpsim.ParameterError, match="hessian: .*cannot read its rows"):
        newton_mle(lik, hessian="active")


@st.composite
def nonnegative_qps(draw):
    """Positive definite quadratics, some nearly singular (a smoothing kernel's Hessian), whose minimizers over
    y >= 0 have zero and positive components."""
    m = draw(st.integers(1, 25))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m + draw(st.integers(0, 10)), m))
    a *= np.logspace(0, -draw(st.integers(0, 6)), m)  # columns of very different scales
    return a.T @ a + 1e-9 * np.eye(m), rng.standard_normal(m) * 10 ** rng.uniform(-3, 3, m), rng.random(m)


@pytest.mark.parametrize("guessed", [False, True], ids=["interior", "guess"])
@pytest.mark.parametrize("refinements", [linalg._REFINEMENTS, 0], ids=["float32", "float64"])
@settings(deadline=None, max_examples=150)
@given(nonnegative_qps())
def test_the_active_sets_subproblem_is_solved_to_its_kkt_conditions(refinements, guessed, problem):
    """Against its optimality conditions and scipy's NNLS (Lawson-Hanson) on the same problem written as least
    squares: y^T B y / 2 + c^T y = |R y + R^-T c|^2 / 2 + const for B = R^T R. Its systems factorized in float32
    and refined, and (no refinement allowed) the float64 factorizations it falls back on, for all but the
    affine steps, which are not refined; with a guess of the positive values tried first, or not."""
    from unittest import mock

    from scipy.linalg import cholesky, solve_triangular
    from scipy.optimize import nnls

    hess, c, start = problem
    with mock.patch.object(linalg, "_REFINEMENTS", refinements):
        y = nonnegative_qp(hess, c, start, guess=start > 0.5 if guessed else None)
    assert np.all(y >= 0)

    def q(v):
        return 0.5 * v @ hess @ v + c @ v

    r = cholesky(hess)
    reference, _ = nnls(r, -solve_triangular(r, c, trans="T"), maxiter=50 * c.size)
    scale = max(1.0, abs(q(reference)))
    assert q(y) <= q(reference) + 1e-7 * scale
    grad = hess @ y + c  # KKT: no descent into any bound, none along any positive component
    unit = np.sqrt(np.diag(hess))
    tol = 1e-6 * np.abs(c / unit).max()
    assert np.all(grad / unit >= -tol)
    assert np.all(np.abs(grad / unit)[y > 0] <= tol)


def test_refined_cholesky_solves_to_double_precision_or_falls_back(rng):
    """(q + diag(extra)) v = rhs with extra spanning 30 orders of magnitude (the largest rows left out of the
    factorization), to float64's accuracy; and a q that
    float32 cannot factorize (indefinite by 1e-9, within float32's round-off) is solved by the float64 fallback."""
    a = rng.standard_normal((80, 60)) * np.logspace(0, -2, 60)
    g = a.T @ a
    q = g / np.sqrt(np.outer(np.diag(g), np.diag(g)))
    extra = np.concatenate([np.zeros(30), np.logspace(-10, 20, 30)])
    rhs = rng.standard_normal(60)
    v = linalg.refined_cholesky(q, q.astype(np.float32), extra, np.abs(q).sum(axis=1))(rhs)
    np.testing.assert_allclose(v, np.linalg.solve(q + np.diag(extra), rhs), rtol=1e-9, atol=0)

    u = rng.standard_normal((60, 1))
    q = u @ u.T + 1e-9 * np.eye(60)  # rank one: float32 fails, the float64 factorization needs no ridge
    q /= np.sqrt(np.outer(np.diag(q), np.diag(q)))
    rhs = q @ np.ones(60)
    v = linalg.refined_cholesky(q, q.astype(np.float32), np.zeros(60), np.abs(q).sum(axis=1))(rhs)
    assert np.abs(q @ v - rhs).max() < 1e-9 * np.abs(rhs).max()


def test_the_active_hessian_follows_changing_active_sets_and_weights(rng):
    """Values join and leave across steps, and the reports' weights move: each Hessian is H[:, S]^T diag(w') H[:, S]
    for weights w' within ACTIVE_REWEIGHT of the current ones (exactly the current ones where they moved more), in
    slots reused from values that left."""
    from ldpsim.estimation.operators import exact_block

    h = rng.random((30, 50))
    store = active_set._ActiveHessian(h, 30, 12, exact_block)
    scale = rng.uniform(0.5, 2.0, 30)
    for step, active in enumerate(([1, 5, 9], [5, 9, 20, 21, 40], [0, 2, 40], list(range(38, 50)), [3])):
        if step:
            scale = scale * np.where(rng.random(30) < 0.5, rng.uniform(0.5, 1.5, 30), 1 + 0.01 * rng.random(30))
        got = store.hessian(np.array(active), scale, exact=step == 3)
        exact = h[:, active].T @ (scale[:, None] ** 2 * h[:, active])
        within = (0.0 if step == 3 else active_set.ACTIVE_REWEIGHT) * exact  # positive entries: sums of positive terms
        assert np.all(np.abs(got - exact) <= within + 1e-5 * exact)
        if step:  # the moved weights were brought up to date: better than the stale ones would give
            stale = h[:, active].T @ (store.weights[:, None] * store.top**2 * h[:, active])
            np.testing.assert_allclose(got, stale, rtol=1e-5)
    assert store.data.shape == (12, 30)  # slots are reused: 12 values at a time, 22 read in all


def test_newcomers_are_the_most_violated_one_per_neighbourhood_first():
    """On a line of 10 values whose violations form two valleys, the two valley floors join first, then the
    rest by violation; an operator without a geometry gives the most violated alone; all fit when room allows."""
    _, line = ldpsim.convolution_likelihood(np.ones(3), (10,), np.array([0]))
    grad_f = np.array([0.0, -1.0, -3.0, -2.9, -2.8, 0.0, -2.0, -2.5, -1.5, 0.0])  # floors at 2 and 7
    violating = np.flatnonzero(grad_f < 0)
    assert active_set.ACTIVE_SPREAD == 2
    np.testing.assert_array_equal(active_set._newcomers(line, grad_f, violating, 3), [2, 7, 3])
    np.testing.assert_array_equal(active_set._newcomers(np.ones((1, 10)), grad_f, violating, 3), [2, 3, 4])
    assert set(active_set._newcomers(line, grad_f, violating, 10)) == set(violating)


def test_the_active_set_hands_over_when_its_kkt_would_need_too_many_steps():
    """The projection behind the hand-over to SQUAREM, at the fastest rate seen over three steps: from 2^-6 after
    halving per step (then a slower phase) it needs log2(2^-6 / tol) more; a KKT that never fell never gets
    there; one below tol needs none."""
    assert active_set.ACTIVE_RATE_STEPS == 3
    halving = [2.0**-i for i in range(6)] + [2.0**-5.5, 2.0**-6]  # 7 steps, then from 2^-6
    assert active_set._steps_to_tol(halving, 2.0**-26) == pytest.approx(7 + 20)
    assert active_set._steps_to_tol([1.0, 2.0, 1.5, 1.0], 1e-6) == math.inf
    assert active_set._steps_to_tol([1.0, 0.5, 1e-7], 1e-6) == 2


def test_the_active_hessian_grows_past_its_budget_keeping_its_columns_and_products():
    """A budget that binds grows (the MLE's support larger than it): the kept columns and Gram matrix carry over,
    and values that join after the growth get their products as before."""
    rng = np.random.default_rng(4)
    dense = rng.random((50, 9))
    scale = rng.random(50) + 0.5

    def read(H, rows, columns, dtype):
        return np.asarray(H[np.ix_(rows, columns)], dtype=dtype)

    def exact(active):
        block = dense[:, active] * scale[:, None]
        return block.T @ block

    store = active_set._ActiveHessian(dense, 50, 3, read)
    np.testing.assert_allclose(store.hessian(np.array([0, 4, 7]), scale, exact=True), exact([0, 4, 7]), rtol=1e-5)
    store.grow(6)
    assert store.data.shape == (6, 50)
    active = np.array([0, 2, 4, 5, 7, 8])
    np.testing.assert_allclose(store.hessian(active, scale, exact=False), exact(active), rtol=1e-5)
