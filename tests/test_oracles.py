"""Frequency oracles from the field: subset selection, ADP and Hadamard response.

Closed forms are recomputed here from the papers, independently of the plugins: subset
selection's likelihood by enumerating every subset, Hadamard response's from
``scipy.linalg.hadamard``. Statistical tests are seeded (deterministic); each states the
chance that a correct implementation fails it at a random seed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from scipy.linalg import hadamard
from scipy.stats import chi2

from ldpsim import Categorical, EstimationError, Integers, Likelihood, Observations, ParameterError, gibu, ldp_level
from ldpsim.testing import check_mechanism, check_parameters

WORD_BITS = 62


def line(k: int) -> Integers:
    return Integers(low=0, high=k - 1)


def encode(subsets: list[tuple[int, ...]], k: int) -> np.ndarray:
    """The documented report encoding, by hand: bit j of word j // 62 is set iff j is in S."""
    words = np.zeros((len(subsets), -(-k // WORD_BITS)), dtype=np.int64)
    for row, subset in enumerate(subsets):
        for j in subset:
            words[row, j // WORD_BITS] |= 1 << (j % WORD_BITS)
    return words


def decode(reports: np.ndarray, k: int) -> np.ndarray:
    j = np.arange(k)
    return (reports[:, j // WORD_BITS] >> (j % WORD_BITS)) & 1


def brute_force_subset_selection(k: int, omega: int, eps: float) -> dict[tuple[int, ...], np.ndarray]:
    """P(S | x) for every subset S of size omega: e^eps [x in S] normalized over all subsets, per x."""
    subsets = list(itertools.combinations(range(k), omega))
    weights = np.array([[math.exp(eps) if x in s else 1.0 for x in range(k)] for s in subsets])
    return dict(zip(subsets, weights / weights.sum(axis=0), strict=True))


# ------------------------------------------------------------------ contract
CASES = [
    ("subset_selection", line(5), {"eps": 1.0}),
    ("subset_selection", Categorical(values=list("abcdefgh")), {"eps": 0.5, "omega": 3}),
    ("subset_selection", line(12), {"eps": 2.0}),  # the largest matrix: 12 x 4096
    ("subset_selection", line(70), {"eps": 1.0, "omega": 5}),  # two words, no matrix
    ("adp", line(5), {"eps": 1.0}),  # k-RR
    ("adp", line(12), {"eps": 1.0}),  # OUE
    ("hadamard", line(3), {"eps": 1.0}),
    ("hadamard", Categorical(values=list("abcdefg")), {"eps": 0.5}),
    ("hadamard", line(20), {"eps": 2.0, "order": 64}),
]


@pytest.mark.parametrize(("name", "domain", "params"), CASES, ids=lambda v: repr(v) if not isinstance(v, str) else v)
def test_contract(name, domain, params):
    check_mechanism(make("mechanism", name, domain, **params))


@pytest.mark.parametrize(
    ("name", "params"),
    [("subset_selection", {"eps": 1.0, "omega": 2}), ("adp", {"eps": 1.0}), ("hadamard", {"eps": 1.0, "order": 8})],
)
def test_parameters_are_validated(registry, name, params):
    check_parameters(registry.get("mechanism", name).cls, line(6), params)


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("subset_selection", {"eps": 1.0, "omega": 6}, "omega"),  # omega = k
        ("subset_selection", {"eps": 1.0, "omega": 0}, "omega"),
        ("hadamard", {"eps": 1.0, "order": 4}, "order"),  # below k + 1 = 7
        ("hadamard", {"eps": 1.0, "order": 12}, "order"),  # not a power of 2
    ],
)
def test_bad_sizes_name_the_field(name, params, field):
    with pytest.raises(ParameterError, match=field):
        make("mechanism", name, line(6), **params)


# --------------------------------------------------------- subset selection
@pytest.mark.parametrize(("k", "omega", "eps"), [(5, 2, 1.0), (7, 3, 0.3), (8, 1, 4.0), (6, 5, 2.0)])
def test_subset_selection_likelihood_is_the_enumerated_one(k, omega, eps):
    mech = make("mechanism", "subset_selection", line(k), eps=eps, omega=omega)
    truth = brute_force_subset_selection(k, omega, eps)
    reports = encode(list(truth), k)
    expected = np.log(np.array(list(truth.values())))
    np.testing.assert_allclose(mech.log_likelihood(reports), expected, rtol=1e-12)
    # the matrix: column sum_{j in S} 2^j holds P(S | x); bit vectors of another size are never sent
    matrix = mech.matrix
    np.testing.assert_allclose(matrix[:, reports[:, 0]], np.exp(expected).T)
    other = np.setdiff1d(np.arange(1 << k), reports[:, 0])
    assert np.all(matrix[:, other] == 0)
    with np.errstate(divide="ignore"):
        assert ldp_level(np.log(matrix).T) == pytest.approx(eps, rel=1e-12)
    # the structured likelihood's products are those of the enumerated likelihood
    shift, op = mech.structured_likelihood(reports)
    np.testing.assert_allclose(np.exp(shift)[:, None] * (op @ np.eye(k)), np.exp(expected), rtol=1e-12)


def test_subset_selection_default_size_is_the_optimal_one():
    for k, eps in [(2, 0.1), (10, 1.0), (1000, 1.0), (1000, 5.0), (64, 0.01)]:
        mech = make("mechanism", "subset_selection", line(k), eps=eps)
        assert mech.size == max(1, math.ceil(k / (math.exp(eps) + 1)))
        assert 1 <= mech.size <= k - 1


def test_subset_selection_likelihood_at_scale_is_the_closed_form():
    """k = 1000: log P(S | x) = eps [x in S] - log(C(k-1, omega-1) e^eps + C(k-1, omega)), exact integers via math.comb."""
    k, eps = 1000, 1.0
    mech = make("mechanism", "subset_selection", line(k), eps=eps)
    omega = mech.size
    rng = np.random.default_rng(5)
    reports = mech.sample(rng.integers(0, k, 50), rng)
    bits = decode(reports, k)
    assert np.all(bits.sum(axis=1) == omega)
    log_z = math.log(math.comb(k - 1, omega - 1) * math.exp(eps) + math.comb(k - 1, omega))
    np.testing.assert_allclose(mech.log_likelihood(reports), eps * bits - log_z, rtol=1e-12)
    shift, op = mech.likelihood_operator(reports)  # structured at every size
    theta = rng.dirichlet(np.ones(k))
    np.testing.assert_allclose(np.exp(shift) * (op @ theta), np.exp(eps * bits - log_z) @ theta, rtol=1e-10)


def test_subset_selection_sampler_at_scale():
    """P(x in S) = omega e^eps / (omega e^eps + k - omega); every other value equally often (5-sigma bounds and a
    chi-square at 1e-4: a correct sampler fails one of them with probability below 1e-3)."""
    k, n, eps = 1000, 20_000, 1.0
    mech = make("mechanism", "subset_selection", line(k), eps=eps)
    omega = mech.size
    rng = np.random.default_rng(2)
    values = np.full(n, 17)
    bits = decode(mech.sample(values, rng), k)
    p = omega * math.exp(eps) / (omega * math.exp(eps) + k - omega)
    assert abs(bits[:, 17].mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    others = np.delete(bits.sum(axis=0), 17)
    expected = (omega * n - bits[:, 17].sum()) / (k - 1)
    stat = ((others - expected) ** 2 / expected).sum() * (k - 1) / (k - 1 - omega)  # multivariate-hypergeometric
    assert chi2.sf(stat, k - 2) > 1e-4


@pytest.mark.parametrize(("k", "omega", "eps"), [(6, 2, 1.0), (8, 6, 0.5), (7, 3, 3.0), (5, 1, 0.2)])
def test_subset_selection_sampler_follows_the_enumerated_law(k, omega, eps):
    """Reports follow P(S | x) exactly: a chi-square over every subset of size omega for each of three
    values (false-alarm rate 1e-4 each), at rates of the independent bits below and above q, omega
    near k (members removed) and omega = 1."""
    mech = make("mechanism", "subset_selection", line(k), eps=eps, omega=omega)
    truth = brute_force_subset_selection(k, omega, eps)
    codes = encode(list(truth), k)[:, 0]
    n = 30_000
    rng = np.random.default_rng(k * 100 + omega)
    for x in (0, k // 2, k - 1):
        reports = mech.sample(np.full(n, x), rng)[:, 0]
        observed = np.array([np.sum(reports == code) for code in codes])
        assert observed.sum() == n  # every report is a subset of size omega
        expected = n * np.array([p[x] for p in truth.values()])
        assert chi2.sf(((observed - expected) ** 2 / expected).sum(), len(truth) - 1) > 1e-4


def test_subset_selection_sampler_across_words():
    """k = 130 (three words, padding in each), values in every word: every report holds omega values, x
    is in it w.p. p (5 sigma), and the other values are equally likely (chi-square at 1e-4)."""
    k, n, eps, omega = 130, 30_000, 1.0, 40
    mech = make("mechanism", "subset_selection", line(k), eps=eps, omega=omega)
    values = np.array([0, 61, 62, 70, 124, 129]).repeat(n // 6)
    reports = mech.sample(values, np.random.default_rng(4))
    assert np.all(reports >= 0) and np.all(reports < 1 << WORD_BITS)
    bits = decode(reports, k).astype(bool)
    assert np.all(bits.sum(axis=1) == omega)
    own = bits[np.arange(n), values]
    p = omega * math.exp(eps) / (omega * math.exp(eps) + k - omega)
    assert abs(own.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    for x in (0, 70, 129):  # each group's other values: multivariate hypergeometric counts, equal means
        group = bits[values == x]
        others = np.delete(group.sum(axis=0), x)
        expected = (omega * group.shape[0] - group[:, x].sum()) / (k - 1)
        stat = ((others - expected) ** 2 / expected).sum() * (k - 1) / (k - 1 - omega)
        assert chi2.sf(stat, k - 2) > 1e-4


@pytest.mark.parametrize("report", [[1 << 10], [-1], [(1 << 3) | 1 | 2]], ids=["beyond-k", "negative", "wrong-size"])
def test_subset_selection_refuses_reports_it_cannot_send(report):
    mech = make("mechanism", "subset_selection", line(10), eps=1.0, omega=2)
    if report == [(1 << 3) | 1 | 2]:  # a bit vector, but of 3 values: probability 0 under every x
        assert np.all(np.isneginf(mech.log_likelihood(np.array([report]))))
        with pytest.raises(EstimationError, match="holds 3 values"):
            mech.unbiased_estimate(np.array([report]), np.array([1]))
        with pytest.raises(EstimationError, match="probability 0"):
            gibu(Likelihood(Observations.from_reports(mech.domain, [(mech, np.array([report]))])))
        return
    with pytest.raises(EstimationError, match="is not an output of subset_selection"):
        mech.log_likelihood(np.array([report]))


def test_subset_selection_estimate_is_exactly_unbiased():
    """sum_S P(S | x) f_hat(S) = e_x, over the enumerated subsets."""
    k, omega, eps = 7, 3, 0.8
    mech = make("mechanism", "subset_selection", line(k), eps=eps, omega=omega)
    truth = brute_force_subset_selection(k, omega, eps)
    reports = encode(list(truth), k)
    estimates = np.array([mech.unbiased_estimate(r[None, :], np.array([1])) for r in reports])
    probs = np.array(list(truth.values()))  # (subsets, k)
    np.testing.assert_allclose(probs.T @ estimates, np.eye(k), atol=1e-12)


def test_subset_selection_variance_is_the_closed_form():
    """n Var[f_hat(x)] = (theta_x p(1-p) + (1-theta_x) q(1-q)) / (p-q)^2 for a fixed population.

    R = 400 independent runs; (R-1) s^2 / sigma^2 is close to chi-square(R-1) (sums of 2000 Bernoullis are
    near normal), tested two-sided at 1e-4 for each of 3 values: false-alarm rate about 3e-4.
    """
    k, n, eps, runs = 20, 2000, 1.0, 400
    mech = make("mechanism", "subset_selection", line(k), eps=eps)
    theta = np.zeros(k)
    theta[:4] = [0.5, 0.3, 0.2, 0.0]
    values = np.repeat(np.arange(4), (theta[:4] * n).astype(int))
    rng = np.random.default_rng(9)
    reports = mech.sample(np.tile(values, runs), rng).reshape(runs, n, -1)
    estimates = np.array([mech.unbiased_estimate(*np.unique(r, axis=0, return_counts=True)) for r in reports])
    p, q = mech.p, mech.q
    assert p == pytest.approx(mech.size * math.e / (mech.size * math.e + k - mech.size))
    sigma2 = (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / (p - q) ** 2 / n
    np.testing.assert_allclose(mech.estimate_variance(theta) / n, sigma2, rtol=1e-12)
    np.testing.assert_allclose(estimates.mean(axis=0), theta, atol=6 * math.sqrt(sigma2.max() / runs))
    for x in (0, 1, 3):
        stat = (runs - 1) * estimates[:, x].var(ddof=1) / sigma2[x]
        assert chi2.ppf(0.5e-4, runs - 1) < stat < chi2.isf(0.5e-4, runs - 1), (x, stat / (runs - 1))


def test_subset_selection_likely_subset_is_the_reported_values():
    mech = make("mechanism", "subset_selection", line(10), eps=1.0, omega=2)
    mask = mech.likely_subset(encode([(1, 4), (4, 7)], 10))
    assert sorted(np.flatnonzero(mask)) == [1, 4, 7]


# ----------------------------------------------------------------------- ADP
@pytest.mark.parametrize(
    ("k", "eps", "chosen"), [(5, 1.0, "krr"), (10, 1.0, "krr"), (11, 1.0, "oue"), (62, 3.0, "krr"), (63, 3.0, "oue")]
)
def test_adp_picks_the_lower_variance_oracle(k, eps, chosen):
    """Wang et al. 2017: GRR's n Var is (k - 2 + e^eps) / (e^eps - 1)^2, OUE's 4 e^eps / (e^eps - 1)^2."""
    mech = make("mechanism", "adp", line(k), eps=eps)
    assert mech.chosen == chosen
    grr, oue = (k - 2 + math.exp(eps)), 4 * math.exp(eps)
    assert (grr < oue) == (chosen == "krr")
    inner = make("mechanism", chosen, line(k), eps=eps)
    assert mech.report_width == inner.report_width
    rng = np.random.default_rng(1)
    values = rng.integers(0, k, 300)
    reports = mech.sample(values, np.random.default_rng(4))
    np.testing.assert_array_equal(reports, inner.sample(values, np.random.default_rng(4)))
    np.testing.assert_allclose(mech.log_likelihood(reports), inner.log_likelihood(reports))
    assert mech.privacy == inner.privacy


# ------------------------------------------------------------ Hadamard response
@pytest.mark.parametrize(("k", "eps"), [(3, 1.0), (4, 0.5), (7, 2.0), (15, 1.0)])
def test_hadamard_matrix_is_the_papers(k, eps):
    """P(y | x) = 2 e^eps / (K (1 + e^eps)) where H_K[x + 1, y] = +1, else 2 / (K (1 + e^eps)); K = 2^ceil(log2(k+1))."""
    mech = make("mechanism", "hadamard", line(k), eps=eps)
    size = 2 ** math.ceil(math.log2(k + 1))
    h = hadamard(size)[1 : k + 1]
    expected = np.where(h == 1, 2 * math.exp(eps), 2.0) / (size * (1 + math.exp(eps)))
    np.testing.assert_allclose(mech.matrix, expected, rtol=1e-12)
    assert ldp_level(np.log(mech.matrix).T) == pytest.approx(eps, rel=1e-12)
    # the estimate of pure-ldp's Hadamard_Rand_high_priv: (2 F (1 + e^eps) - (1 + e^eps)) / (e^eps - 1)
    outputs = np.arange(size)[:, None]
    estimates = np.array([mech.unbiased_estimate(z[None, :], np.array([1])) for z in outputs])
    share = (h.T == 1).astype(float)  # F_x for a single report y
    np.testing.assert_allclose(estimates, (2 * share * (1 + math.exp(eps)) - (1 + math.exp(eps))) / math.expm1(eps))
    np.testing.assert_allclose(mech.matrix @ estimates, np.eye(k), atol=1e-12)  # exactly unbiased


def test_hadamard_structured_likelihood_at_scale():
    k, eps = 1000, 1.0
    mech = make("mechanism", "hadamard", line(k), eps=eps)
    assert mech.output_count() == 1024
    rng = np.random.default_rng(6)
    reports = np.unique(mech.sample(rng.integers(0, k, 3000), rng), axis=0)
    shift, op = mech.likelihood_operator(reports)
    dense = np.exp(mech.log_likelihood(reports) - shift[:, None])
    theta, w = rng.dirichlet(np.ones(k), size=3).T, rng.random(reports.shape[0])
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-10)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-10)


# ------------------------------------------------------------------ GIBU recovers the truth
def per_user_variance(mech, theta: np.ndarray) -> np.ndarray:
    """n Var of the unbiased estimate: the mechanism's closed form, or OUE's (Wang et al. 2017) for ADP."""
    if mech.name != "adp":
        return mech.estimate_variance(theta)
    assert mech.chosen == "oue"
    p, q = 0.5, 1 / (math.exp(mech.eps) + 1)
    return (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / (p - q) ** 2


@pytest.mark.parametrize("name", ["subset_selection", "hadamard", "adp"])
def test_gibu_recovers_the_truth(name):
    """k = 100, n = 50 000, eps = 2, a Zipf-like truth. Tolerance: the expected TV of the unbiased estimate,
    0.5 sum_x sqrt(2 Var_x / pi) (normal approximation, from the closed-form variances); the MLE must do
    better, and better than the unbiased estimate clipped and renormalized on the same reports.

    Measured at this seed (GIBU / clipped / tolerance): subset selection 0.094 / 0.108 / 0.149,
    Hadamard 0.178 / 0.199 / 0.234, ADP (OUE) 0.117 / 0.132 / 0.153.
    """
    k, n, eps = 100, 50_000, 2.0
    mech = make("mechanism", name, line(k), eps=eps)
    rng = np.random.default_rng(12)
    weights = 1.0 / np.arange(1, k + 1)
    values = rng.choice(k, n, p=weights / weights.sum())
    truth = np.bincount(values, minlength=k) / n
    reports = mech.sample(values, rng)
    result = gibu(Likelihood(Observations.from_reports(mech.domain, [(mech, reports)])), max_iter=5000)
    tv = 0.5 * np.abs(result.theta - truth).sum()
    tolerance = 0.5 * np.sqrt(2 * per_user_variance(mech, truth) / (math.pi * n)).sum()
    unbiased = mech.unbiased_estimate(*np.unique(reports, axis=0, return_counts=True))
    clipped = np.clip(unbiased, 0, None) / np.clip(unbiased, 0, None).sum()
    assert tv < min(tolerance, 0.5 * np.abs(clipped - truth).sum()), (tv, tolerance)
