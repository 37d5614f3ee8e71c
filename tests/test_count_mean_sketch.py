"""Apple's count-mean sketches (HCMS), checked against the paper's definitions.

Brute-force formulas are recomputed here with Python integers and floats, independently of the
plugin. Statistical tests are seeded (deterministic); each states the chance that a correct
implementation fails it at a random seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from scipy.stats import chi2

from ldpsim import Categorical, EstimationError, Integers, ParameterError, ldp_level
from ldpsim.testing import check_estimate_variance, check_mechanism, check_parameters

PRIME = (1 << 31) - 1


def line(k: int) -> Integers:
    return Integers(low=0, high=k - 1)


def family(hashes: int, seed: int) -> list[tuple[int, int]]:
    """HCMS's documented family: (a_j, b_j) drawn from SeedSequence(family_seed), a in 1..P-1, b in 0..P-1."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    a = rng.integers(1, PRIME, size=hashes, dtype=np.int64)
    b = rng.integers(0, PRIME, size=hashes, dtype=np.int64)
    return [(int(x), int(y)) for x, y in zip(a, b, strict=True)]


def brute_force_hcms(k: int, m: int, eps: float, hashes: int, seed: int) -> np.ndarray:
    """P(z = 2 (j m + l) + y | x) = (e^eps if (-1)^y = H[l, h_j(x)] else 1) / (e^eps + 1) / (hashes m)."""
    out = np.zeros((k, 2 * hashes * m))
    for j, (a, b) in enumerate(family(hashes, seed)):
        for x in range(k):
            h = (a * x + b) % PRIME % m
            for row in range(m):
                coefficient = (-1) ** bin(row & h).count("1")
                for y in (0, 1):
                    hit = (-1) ** y == coefficient
                    out[x, 2 * (j * m + row) + y] = (math.exp(eps) if hit else 1.0) / (math.exp(eps) + 1) / (hashes * m)
    return out


def paper_estimate(mech, z: int) -> np.ndarray:
    """The paper's debiased estimate from one report (n = 1): m / (m - 1) (c_eps (+-1) H[l, h_j(x)] - 1 / m)."""
    m, eps = mech.buckets, mech.eps
    c = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    j, row, y = z // (2 * m), (z // 2) % m, z % 2
    coefficient = np.array([(-1) ** bin(row & int(h)).count("1") for h in mech.table[j]])
    return m / (m - 1) * (c * (-1) ** y * coefficient - 1 / m)


def one_report(mech, z: int) -> np.ndarray:
    return mech.unbiased_estimate(np.array([[z]]), np.array([1]))


CASES = [
    ("hcms", line(5), {"eps": 1.0, "hashes": 8, "buckets": 4}),
    ("hcms", Categorical(values=list("abcdefg")), {"eps": 2.0, "hashes": 5, "buckets": 8, "family_seed": 7}),
    ("hcms", line(30), {"eps": 0.5, "hashes": 20, "buckets": 16}),
]


@pytest.mark.parametrize(("name", "domain", "params"), CASES, ids=lambda v: repr(v) if not isinstance(v, str) else v)
def test_contract(name, domain, params):
    check_mechanism(make("mechanism", name, domain, **params))


def test_parameters_are_validated(registry):
    check_parameters(registry.get("mechanism", "hcms").cls, line(6), {"eps": 1.0, "hashes": 4, "buckets": 4})


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"eps": 1.0, "buckets": 0}, "buckets"),
        ({"eps": 1.0, "buckets": 48}, "buckets"),
        ({"eps": 1.0, "hashes": 0}, "hashes"),
        ({"eps": 0.0}, "eps"),
    ],
)
def test_bad_parameters_name_the_field(params, field):
    with pytest.raises(ParameterError, match=field) as error:
        make("mechanism", "hcms", line(6), **params)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("k", "m", "eps", "hashes", "seed"), [(5, 2, 1.0, 7, 0), (6, 4, 0.7, 5, 3), (9, 8, 2.0, 3, 1)])
def test_hcms_likelihood_is_the_brute_force_one(k, m, eps, hashes, seed):
    mech = make("mechanism", "hcms", line(k), eps=eps, buckets=m, hashes=hashes, family_seed=seed)
    truth = brute_force_hcms(k, m, eps, hashes, seed)
    assert mech.output_count() == truth.shape[1]
    np.testing.assert_allclose(mech.matrix, truth, rtol=1e-12)
    outputs = np.arange(truth.shape[1])[:, None]
    np.testing.assert_allclose(mech.likelihood(outputs), truth.T, rtol=1e-12)
    assert ldp_level(np.log(truth).T) == pytest.approx(eps, rel=1e-12)


def test_the_estimate_is_exactly_unbiased_and_the_papers_is_not_for_a_small_family():
    """Why HCMS solves its family's collision system: the paper's estimate assumes collisions at rate
    1/m; with 6 hashes of 4 buckets on 8 values its expectation is off by more than 0.1 (computed exactly
    from the matrix), while sum_z P(z | x) f_hat(z) = e_x for the mechanism's."""
    mech = make("mechanism", "hcms", line(8), eps=1.0, hashes=6, buckets=4)
    m = mech.matrix
    outputs = range(m.shape[1])
    exact = np.array([one_report(mech, z) for z in outputs])
    np.testing.assert_allclose(m @ exact, np.eye(8), atol=1e-9)
    paper = np.array([paper_estimate(mech, z) for z in outputs])
    assert np.abs(m @ paper - np.eye(8)).max() > 0.1


@pytest.mark.parametrize(("k", "hashes", "m", "seed"), [(3, 4, 4, 11), (2, 2, 2, 2)])
def test_with_ideal_collisions_both_estimates_are_unbiased_and_the_family_ones_varies_less(k, hashes, m, seed):
    """Families where every pair of values collides on exactly 1/m of the hashes: C = (1 - 1/m) I + 1/m, the
    collisions the paper's debiasing assumes, so its estimate is exactly unbiased too; it subtracts the
    expected total of the supports where C^-1 uses the observed one, and varies more (exact variances)."""
    mech = make("mechanism", "hcms", line(k), eps=1.5, hashes=hashes, buckets=m, family_seed=seed)
    collisions = (mech.table[:, :, None] == mech.table[:, None, :]).mean(axis=0)
    np.testing.assert_array_equal(collisions, (1 - 1 / m) * np.eye(k) + 1 / m)
    matrix, outputs = mech.matrix, range(mech.output_count())
    ours = np.array([one_report(mech, z) for z in outputs])
    paper = np.array([paper_estimate(mech, z) for z in outputs])
    np.testing.assert_allclose(matrix @ ours, np.eye(k), atol=1e-12)
    np.testing.assert_allclose(matrix @ paper, np.eye(k), atol=1e-12)
    theta = np.full(k, 1 / k)
    assert np.all(theta @ matrix @ ours**2 < 0.7 * (theta @ matrix @ paper**2))


def test_a_family_that_cannot_tell_values_apart_has_no_unbiased_estimate():
    """One hash into 2 buckets on 5 values: C has rank 2 < 5."""
    mech = make("mechanism", "hcms", line(5), eps=1.0, hashes=1, buckets=2)
    assert mech.unbiased_estimate(np.array([[0]]), np.array([1])) is None
    assert mech.estimate_variance(np.full(5, 0.2)) is None


def test_estimates_from_many_reports_add_up():
    """The estimate is linear in the counts: that of many reports is the count-weighted mean of one-report ones."""
    mech = make("mechanism", "hcms", line(6), eps=1.0, hashes=4, buckets=4)
    rng = np.random.default_rng(5)
    reports, counts = np.unique(mech.sample(rng.integers(0, 6, 500), rng), axis=0, return_counts=True)
    singles = np.array([one_report(mech, int(z)) for z in reports[:, 0]])
    np.testing.assert_allclose(mech.unbiased_estimate(reports, counts), counts @ singles / 500, atol=1e-12)


def test_variance_is_exact():
    """n Var[f_hat(x)] = sum_x' theta_x' E_x'[v_x(Z)^2] - theta_x, v(z) the estimate of one report."""
    mech = make("mechanism", "hcms", line(7), eps=1.0, hashes=5, buckets=8)
    m = mech.matrix
    v = np.array([one_report(mech, z) for z in range(m.shape[1])])
    theta = np.random.default_rng(2).dirichlet(np.ones(7))
    np.testing.assert_allclose(mech.estimate_variance(theta), theta @ m @ v**2 - theta, rtol=1e-9)
    check_estimate_variance(mech)


def test_simulated_variance_matches_the_formula():
    """R = 300 runs of n = 2000 users with a fixed population: (R-1) s^2 / sigma^2 is close to chi-square(R-1)
    (sums of 2000 bounded terms, near normal), tested two-sided at 1e-4 for each of 3 values: a false-alarm
    rate of about 3e-4; the mean within 6 standard errors of theta."""
    k, n, runs = 12, 2000, 300
    mech = make("mechanism", "hcms", line(k), eps=1.0, hashes=16, buckets=16)
    theta = np.zeros(k)
    theta[:4] = [0.5, 0.3, 0.2, 0.0]
    values = np.repeat(np.arange(4), (theta[:4] * n).astype(int))
    rng = np.random.default_rng(21)
    reports = mech.sample(np.tile(values, runs), rng).reshape(runs, n, -1)
    estimates = np.array([mech.unbiased_estimate(*np.unique(r, axis=0, return_counts=True)) for r in reports])
    sigma2 = mech.estimate_variance(theta) / n
    np.testing.assert_allclose(estimates.mean(axis=0), theta, atol=6 * math.sqrt(sigma2.max() / runs))
    for x in (0, 1, 3):
        stat = (runs - 1) * estimates[:, x].var(ddof=1) / sigma2[x]
        assert chi2.ppf(0.5e-4, runs - 1) < stat < chi2.isf(0.5e-4, runs - 1), (x, stat / (runs - 1))


# ------------------------------------------------------------------ CMS
def brute_force_cms(k: int, m: int, eps: float, hashes: int, seed: int) -> np.ndarray:
    """P((j, v) | x) = (1/hashes) prod_b (1 - f if v_b = [b = h_j(x)] else f), f = 1 / (e^(eps/2) + 1); column
    j 2^m + v (v's bits little-endian)."""
    f = 1 / (math.exp(eps / 2) + 1)
    out = np.zeros((k, hashes << m))
    for j, (a, b) in enumerate(family(hashes, seed)):
        for x in range(k):
            h = (a * x + b) % PRIME % m
            for v in range(1 << m):
                agree = sum((v >> bucket & 1) == (bucket == h) for bucket in range(m))
                out[x, (j << m) + v] = (1 - f) ** agree * f ** (m - agree) / hashes
    return out


def cms_outputs(hashes: int, m: int) -> np.ndarray:
    """Every report (j, v) of a CMS with m <= 62 buckets (one word), in brute_force_cms's column order."""
    z = np.arange(hashes << m)
    return np.stack([z >> m, z & ((1 << m) - 1)], axis=1)


CMS_CASES = [
    (line(5), {"eps": 1.0, "hashes": 4, "buckets": 5}),
    (Categorical(values=list("abcdefg")), {"eps": 2.0, "hashes": 6, "buckets": 3, "family_seed": 7}),
    (line(20), {"eps": 1.0, "hashes": 3, "buckets": 70}),  # two words per bit vector
]


@pytest.mark.parametrize(("domain", "params"), CMS_CASES, ids=repr)
def test_cms_contract(domain, params):
    check_mechanism(make("mechanism", "cms", domain, **params))


@pytest.mark.parametrize(
    ("params", "field"),
    [({"eps": 1.0, "buckets": 0}, "buckets"), ({"eps": 1.0, "hashes": 0}, "hashes"), ({"eps": -1.0}, "eps")],
)
def test_cms_bad_parameters_name_the_field(params, field):
    with pytest.raises(ParameterError, match=field) as error:
        make("mechanism", "cms", line(6), **params)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("k", "m", "eps", "hashes", "seed"), [(5, 3, 1.0, 4, 0), (6, 4, 0.7, 3, 3)])
def test_cms_likelihood_is_the_brute_force_one_and_the_estimate_is_exact(k, m, eps, hashes, seed):
    """The likelihood of every report, its LDP level, and sum_z P(z | x) f_hat(z) = e_x exactly; the paper's
    m / (m - 1) (s - 1/m) is off for these small families. The variance is the exact one of the estimate."""
    mech = make("mechanism", "cms", line(k), eps=eps, buckets=m, hashes=hashes, family_seed=seed)
    truth = brute_force_cms(k, m, eps, hashes, seed)
    outputs = cms_outputs(hashes, m)
    np.testing.assert_allclose(mech.likelihood(outputs), truth.T, rtol=1e-12)
    shift, op = mech.structured_likelihood(outputs)
    np.testing.assert_allclose(np.exp(shift)[:, None] * (op @ np.eye(k)), truth.T, rtol=1e-12)
    assert ldp_level(np.log(truth).T) == pytest.approx(eps, rel=1e-12)
    ours = np.array([mech.unbiased_estimate(z[None, :], np.array([1])) for z in outputs])
    np.testing.assert_allclose(truth @ ours, np.eye(k), atol=1e-9)
    c = (math.exp(eps / 2) + 1) / (math.exp(eps / 2) - 1)
    bit = (outputs[:, 1:2] >> mech.table[outputs[:, 0]]) & 1  # v[h_j(x)] of each report, each x
    paper = m / (m - 1) * (c * (bit - 0.5) + 0.5 - 1 / m)
    assert np.abs(truth @ paper - np.eye(k)).max() > 0.05
    theta = np.random.default_rng(2).dirichlet(np.ones(k))
    np.testing.assert_allclose(mech.estimate_variance(theta), theta @ truth @ ours**2 - theta, rtol=1e-9)


def test_cms_simulated_variance_matches_the_formula():
    """As for HCMS: R = 300 runs of n = 2000 users, chi-square(R-1) two-sided at 1e-4 for each of 3 values (a
    false-alarm rate of about 3e-4); the mean within 6 standard errors of theta."""
    k, n, runs = 12, 2000, 300
    mech = make("mechanism", "cms", line(k), eps=1.0, hashes=16, buckets=16)
    theta = np.zeros(k)
    theta[:4] = [0.5, 0.3, 0.2, 0.0]
    values = np.repeat(np.arange(4), (theta[:4] * n).astype(int))
    rng = np.random.default_rng(21)
    reports = mech.sample(np.tile(values, runs), rng).reshape(runs, n, -1)
    estimates = np.array([mech.unbiased_estimate(*np.unique(r, axis=0, return_counts=True)) for r in reports])
    sigma2 = mech.estimate_variance(theta) / n
    np.testing.assert_allclose(estimates.mean(axis=0), theta, atol=6 * math.sqrt(sigma2.max() / runs))
    for x in (0, 1, 3):
        stat = (runs - 1) * estimates[:, x].var(ddof=1) / sigma2[x]
        assert chi2.ppf(0.5e-4, runs - 1) < stat < chi2.isf(0.5e-4, runs - 1), (x, stat / (runs - 1))


def test_cms_refuses_reports_that_are_not_outputs():
    mech = make("mechanism", "cms", line(5), eps=1.0, hashes=4, buckets=5)
    with pytest.raises(EstimationError, match="not an output"):
        mech.log_likelihood(np.array([[4, 0]]))
    with pytest.raises(EstimationError, match="not an output"):
        mech.log_likelihood(np.array([[0, 1 << 5]]))
