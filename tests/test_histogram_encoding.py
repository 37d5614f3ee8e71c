"""Histogram encoding: SHE (Laplace noise on the one-hot vector, a density) and THE (its thresholded bits).

Closed forms are recomputed from Wang et al. 2017's definitions with scipy's Laplace law,
independently of the plugins. Statistical tests are seeded (deterministic); each states the
chance that a correct implementation fails it at a random seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from scipy.stats import chi2, laplace

from ldpsim import EstimationError, Integers, Likelihood, Observations, ParameterError, gibu, ldp_level
from ldpsim.testing import check_density_sampler, check_mechanism

FRACTION = 2.0**-32


def line(k: int) -> Integers:
    return Integers(low=0, high=k - 1)


def test_she_likelihood_is_the_product_of_laplace_densities():
    """log P(y | x) - log P(y | x') = sum_j log Lap(y_j - [j = x]) - sum_j log Lap(y_j - [j = x']), y the cells'
    midpoints (the exact cell-probability ratio: 0 and 1 are cell ends and the Laplace density is
    exponential on each side of them)."""
    k, eps = 5, 1.3
    mech = make("mechanism", "she", line(k), eps=eps)
    cells = np.array(
        [[-3, 0, 5, 2**31, 2**32], [2**32 - 1, -1, 2**33, -(2**34), 123_456_789], [7, 2**32 + 9, -5, 0, 1]]
    )
    y = (cells + 0.5) * FRACTION
    brute = np.array([[laplace.logpdf(row - np.eye(k)[x], scale=2 / eps).sum() for x in range(k)] for row in y])
    got = mech.log_likelihood(cells)
    np.testing.assert_allclose(got - got[:, :1], brute - brute[:, :1], rtol=1e-9, atol=1e-12)
    assert np.all(got <= 0) and np.all(got >= -eps)
    shift, op = mech.structured_likelihood(cells)
    np.testing.assert_allclose(np.exp(shift)[:, None] * (op @ np.eye(k)), np.exp(got), rtol=1e-12)
    with np.errstate(divide="ignore"):
        assert ldp_level(got) == pytest.approx(eps, rel=1e-12)  # a cell at or above 1 and one below 0
    with pytest.raises(EstimationError, match="fixed-point range"):
        mech.log_likelihood(np.full((1, k), (1 << 62) + 1))


def test_she_reports_are_the_one_hot_vector_plus_laplace_noise():
    """Each coordinate of 20 000 reports of value 2 against Laplace(e_2, 2/eps) (Kolmogorov-Smirnov at 1e-4
    per coordinate, false-alarm rate 4e-4)."""
    from scipy.stats import kstest

    k, eps, n = 4, 0.7, 20_000
    mech = make("mechanism", "she", line(k), eps=eps)
    y = mech.midpoints(mech.sample(np.full(n, 2), np.random.default_rng(8)))
    for j in range(k):
        assert kstest(y[:, j], laplace(loc=float(j == 2), scale=2 / eps).cdf).pvalue > 1e-4


def test_the_density_check_catches_a_wrong_sampler(registry):
    """Noise of scale 2.4/eps instead of 2/eps: the likelihood-ratio identity fails."""

    class Wider(registry.get("mechanism", "she").cls):
        @property
        def scale(self):
            return 2.4 / self.eps

        def _log_likelihood(self, reports):
            return self.eps * (np.clip(self.midpoints(reports), 0.0, 1.0) - 1.0)

    with pytest.raises(AssertionError, match="mean density ratio"):
        check_density_sampler(Wider(line(4), eps=1.0))


def test_she_at_scale_structured_and_gibu():
    """k = 1024: the structured likelihood's products are the dense ones; GIBU's 200 iterations on 3000 reports
    of 8 values put on them more than 20 times their uniform share (0.24 measured at this seed)."""
    k, eps = 1024, 1.0
    mech = make("mechanism", "she", line(k), eps=eps)
    rng = np.random.default_rng(5)
    values = rng.integers(0, 8, 3000)
    reports = mech.sample(values, rng)
    shift, op = mech.likelihood_operator(reports)
    dense = np.exp(mech.log_likelihood(reports) - shift[:, None])
    theta, w = rng.dirichlet(np.ones(k)), rng.random(reports.shape[0])
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-10)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-10)
    result = gibu(Likelihood(Observations.from_reports(mech.domain, [(mech, reports)])), max_iter=200)
    assert result.theta[:8].sum() > 20 * 8 / k


def test_she_variance_is_wang_et_al():
    """n Var = 8 / eps^2; simulated over R = 300 runs of 500 users: chi-square two-sided at 1e-4 on 3 values
    (false-alarm rate 3e-4)."""
    k, n, runs, eps = 6, 500, 300, 1.5
    mech = make("mechanism", "she", line(k), eps=eps)
    theta = np.array([0.4, 0.4, 0.2, 0, 0, 0])
    np.testing.assert_allclose(mech.estimate_variance(theta), 8 / eps**2)
    values = np.repeat(np.arange(3), (theta[:3] * n).astype(int))
    rng = np.random.default_rng(3)
    reports = mech.sample(np.tile(values, runs), rng).reshape(runs, n, k)
    estimates = np.array([mech.unbiased_estimate(r, np.ones(n)) for r in reports])
    sigma2 = 8 / eps**2 / n
    np.testing.assert_allclose(estimates.mean(axis=0), theta, atol=6 * math.sqrt(sigma2 / runs))
    for x in (0, 2, 4):
        stat = (runs - 1) * estimates[:, x].var(ddof=1) / sigma2
        assert chi2.ppf(0.5e-4, runs - 1) < stat < chi2.isf(0.5e-4, runs - 1)


# ------------------------------------------------------------------ THE
@pytest.mark.parametrize(("eps", "threshold"), [(1.0, None), (2.0, 0.8), (0.5, 0.3)])
def test_the_bits_are_thresholded_laplace(eps, threshold):
    """p = P(1 + Lap(2/eps) > theta), q = P(Lap(2/eps) > theta) from scipy; the matrix's LDP level is
    log(p (1 - q) / ((1 - p) q)) < eps (post-processing of SHE: declared eps, not tight)."""
    k = 5
    mech = make("mechanism", "the", line(k), eps=eps, threshold=threshold)
    theta = mech.theta
    p, q = laplace.sf(theta, loc=1, scale=2 / eps), laplace.sf(theta, scale=2 / eps)
    assert (mech.p, mech.q) == (pytest.approx(p, rel=1e-12), pytest.approx(q, rel=1e-12))
    with np.errstate(divide="ignore"):
        level = ldp_level(np.log(mech.matrix).T)
    assert level == pytest.approx(math.log(p * (1 - q) / ((1 - p) * q)), rel=1e-9)
    assert level < eps and mech.privacy.eps == eps and not mech.tight_privacy
    variance = mech.estimate_variance(np.full(k, 1 / k))
    np.testing.assert_allclose(variance, (p * (1 - p) / k + (1 - 1 / k) * q * (1 - q)) / (p - q) ** 2, rtol=1e-9)


def test_the_default_threshold_is_the_variance_optimal_one():
    """Wang et al. 2017's Var* = (2 e^(eps theta / 2) - 1) / (1 + e^(eps (theta - 1/2)) - 2 e^(eps theta / 2))^2,
    minimized over a fine grid of theta in (0, 1)."""
    for eps in (0.5, 1.0, 2.0, 4.0):
        grid = np.linspace(0.001, 0.999, 99_901)
        var = (2 * np.exp(eps * grid / 2) - 1) / (1 + np.exp(eps * (grid - 0.5)) - 2 * np.exp(eps * grid / 2)) ** 2
        mech = make("mechanism", "the", line(8), eps=eps)
        assert mech.theta == pytest.approx(grid[np.argmin(var)], abs=2e-5)
        p, q = mech.p, mech.q
        assert q * (1 - q) / (p - q) ** 2 == pytest.approx(var.min(), rel=1e-9)


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [("she", {"eps": 1e-5}, "eps"), ("the", {"eps": 1.0, "threshold": 1.0}, "threshold")],
)
def test_bad_parameters_name_the_field(name, params, field):
    with pytest.raises(ParameterError, match=field):
        make("mechanism", name, line(6), **params)


@pytest.mark.parametrize(("name", "params"), [("she", {"eps": 2.0}), ("the", {"eps": 1.0})])
def test_contract_on_a_larger_domain(name, params):
    check_mechanism(make("mechanism", name, line(20), **params))
