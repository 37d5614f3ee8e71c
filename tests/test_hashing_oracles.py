"""Local hashing with any g (BLH, OLH, FLH) and the closed-form variances of the frequency oracles.

Closed forms are recomputed here from the papers' definitions with Python integers and
floats, independently of the plugins. Statistical tests are seeded (deterministic); each
states the chance that a correct implementation fails it at a random seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from scipy.stats import chi2

from ldpsim import Categorical, Integers, ParameterError, ldp_level
from ldpsim.testing import check_estimate_variance, check_mechanism, check_parameters
from ldpsim.theory.sampling import counted

PRIME = (1 << 31) - 1


def line(k: int) -> Integers:
    return Integers(low=0, high=k - 1)


def flh_pool(hashes: int, seed: int) -> list[tuple[int, int]]:
    """FLH's documented pool: (a_j, b_j) drawn from SeedSequence(pool_seed), a in 1..P-1, b in 0..P-1."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    a = rng.integers(1, PRIME, size=hashes, dtype=np.int64)
    b = rng.integers(0, PRIME, size=hashes, dtype=np.int64)
    return [(int(x), int(y)) for x, y in zip(a, b, strict=True)]


def brute_force_flh(k: int, g: int, eps: float, hashes: int, seed: int) -> np.ndarray:
    """P(z = j g + y | x) = (1/hashes) (e^eps if h_j(x) = y else 1) / (e^eps + g - 1), with Python integers."""
    m = np.zeros((k, hashes * g))
    for j, (a, b) in enumerate(flh_pool(hashes, seed)):
        for x in range(k):
            h = (a * x + b) % PRIME % g
            for y in range(g):
                m[x, j * g + y] = (math.exp(eps) if y == h else 1.0) / (math.exp(eps) + g - 1) / hashes
    return m


# ------------------------------------------------------------------ contract
CASES = [
    ("blh", line(5), {"eps": 1.0}),
    ("blh", Categorical(values=list("abcdefgh")), {"eps": 3.0}),
    ("flh", line(5), {"eps": 1.0, "hashes": 20}),
    ("flh", Categorical(values=list("abcdefg")), {"eps": 2.0, "hashes": 40, "g": 3, "pool_seed": 7}),
    ("flh", line(30), {"eps": 0.5, "hashes": 100}),
]


@pytest.mark.parametrize(("name", "domain", "params"), CASES, ids=lambda v: repr(v) if not isinstance(v, str) else v)
def test_contract(name, domain, params):
    check_mechanism(make("mechanism", name, domain, **params))


@pytest.mark.parametrize(("name", "params"), [("blh", {"eps": 1.0}), ("flh", {"eps": 1.0, "hashes": 10, "g": 3})])
def test_parameters_are_validated(registry, name, params):
    check_parameters(registry.get("mechanism", name).cls, line(6), params)


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("flh", {"eps": 1.0, "g": 1}, "g"),
        ("flh", {"eps": 1.0, "hashes": 0}, "hashes"),
        ("olh", {"eps": 1.0, "g": 1}, "g"),
        ("blh", {"eps": 0.0}, "eps"),
    ],
)
def test_bad_sizes_name_the_field(name, params, field):
    with pytest.raises(ParameterError, match=field):
        make("mechanism", name, line(6), **params)


# ------------------------------------------------------------------ BLH
def test_blh_is_olh_with_two_buckets():
    """Same reports from the same generator, same likelihood; p = e^eps / (e^eps + 1)."""
    k, eps = 40, 1.5
    blh, olh = make("mechanism", "blh", line(k), eps=eps), make("mechanism", "olh", line(k), eps=eps, g=2)
    assert blh.buckets == 2 and blh.p == pytest.approx(math.exp(eps) / (math.exp(eps) + 1), rel=1e-15)
    values = np.random.default_rng(1).integers(0, k, 500)
    reports = blh.sample(values, np.random.default_rng(4))
    np.testing.assert_array_equal(reports, olh.sample(values, np.random.default_rng(4)))
    assert set(np.unique(reports[:, 2])) == {0, 1}
    np.testing.assert_array_equal(blh.log_likelihood(reports), olh.log_likelihood(reports))


# ------------------------------------------------------------------ FLH
@pytest.mark.parametrize(
    ("k", "g", "eps", "hashes", "seed"), [(5, 2, 1.0, 7, 0), (6, 4, 0.7, 5, 3), (9, 3, 2.0, 11, 1)]
)
def test_flh_likelihood_is_the_brute_force_one(k, g, eps, hashes, seed):
    mech = make("mechanism", "flh", line(k), eps=eps, g=g, hashes=hashes, pool_seed=seed)
    truth = brute_force_flh(k, g, eps, hashes, seed)
    np.testing.assert_allclose(mech.matrix, truth, rtol=1e-12)
    outputs = np.arange(hashes * g)[:, None]
    np.testing.assert_allclose(mech.likelihood(outputs), truth.T, rtol=1e-12)
    shift, op = mech.structured_likelihood(outputs)
    np.testing.assert_allclose(np.exp(shift)[:, None] * (op @ np.eye(k)), truth.T, rtol=1e-12)
    assert ldp_level(np.log(truth).T) == pytest.approx(eps, rel=1e-12)
    # exactly unbiased: sum_z P(z | x) f_hat(z) = e_x
    estimates = np.array([mech.unbiased_estimate(z[None, :], np.array([1])) for z in outputs])
    np.testing.assert_allclose(truth @ estimates, np.eye(k), atol=1e-9)


def test_flh_default_g_and_counts_at_scale():
    """k = 1024, eps = 1: g = round(e + 1) = 4, 1000 hashes: 4000 outputs, simulated by counts; the structured
    likelihood agrees with the dense one."""
    k = 1024
    mech = make("mechanism", "flh", line(k), eps=1.0)
    assert (mech.buckets, mech.output_count()) == (4, 4000)
    assert counted([mech], 10**6)
    rng = np.random.default_rng(3)
    reports = np.unique(mech.sample(rng.integers(0, k, 3000), rng), axis=0)
    shift, op = mech.likelihood_operator(reports)
    dense = np.exp(mech.log_likelihood(reports) - shift[:, None])
    theta, w = rng.dirichlet(np.ones(k)), rng.random(reports.shape[0])
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-10)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-10)


def test_flh_literature_estimate_is_biased_for_a_small_pool():
    """Why FLH solves its pool's collision system: OLH's formula (c(x, x') = 1/g) is off by a constant
    for a pool of 5 hashes, exactly computed here; the mechanism's estimate is exact."""
    k, g, eps, hashes = 6, 2, 1.0, 5
    mech = make("mechanism", "flh", line(k), eps=eps, g=g, hashes=hashes)
    m = mech.matrix
    p = math.exp(eps) / (math.exp(eps) + g - 1)
    support = (mech.table[np.arange(hashes * g) // g] == (np.arange(hashes * g) % g)[:, None]).astype(float)
    literature = (support - 1 / g) / (p - 1 / g)  # OLH's estimate of one report
    assert np.abs(m @ literature - np.eye(k)).max() > 0.1
    exact = np.array([mech.unbiased_estimate(np.array([[z]]), np.array([1])) for z in range(hashes * g)])
    np.testing.assert_allclose(m @ exact, np.eye(k), atol=1e-9)


def test_flh_refuses_a_pool_that_cannot_tell_values_apart():
    """One hash to 2 buckets on 5 values: the support counts span hashes (g - 1) + 1 = 2 < 5 dimensions,
    no unbiased estimate exists (nor does one for 4 hashes of 6 values, nor when two values collide on
    every hash, as values 0 and 5 on the 6 hashes of pool 0)."""
    mech = make("mechanism", "flh", line(5), eps=1.0, g=2, hashes=1)
    assert mech.unbiased_estimate(np.array([[0]]), np.array([1])) is None
    assert mech.estimate_variance(np.full(5, 0.2)) is None
    for hashes in (4, 6):
        mech = make("mechanism", "flh", line(6), eps=1.0, g=2, hashes=hashes)
        assert mech.unbiased_estimate(np.array([[0]]), np.array([1])) is None
    assert np.array_equal(mech.table[:, 0], mech.table[:, 5])


# ------------------------------------------------------------------ variances
def estimate(mech, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The mechanism's unbiased estimate, or the inverted matrix's (k-RR, ADP's k-RR)."""
    own = mech.unbiased_estimate(reports, counts)
    if own is not None:
        return own
    m = mech.matrix
    share = np.bincount(reports[:, 0], weights=counts, minlength=m.shape[1]) / counts.sum()
    return share @ np.linalg.pinv(m)


def one_report_estimate(mech, z: int) -> np.ndarray:
    return estimate(mech, np.array([[z]]), np.array([1]))


FINITE = [
    ("krr", line(6), {"eps": 1.0}),
    ("oue", line(6), {"eps": 1.0}),
    ("rappor", line(5), {"eps": 2.0}),
    ("adp", line(5), {"eps": 1.0}),
    ("hadamard", line(6), {"eps": 1.0}),
    ("subset_selection", line(7), {"eps": 0.8}),
    ("flh", line(6), {"eps": 1.0, "hashes": 30}),
    ("flh", line(8), {"eps": 2.0, "hashes": 25, "g": 3}),
]


@pytest.mark.parametrize(("name", "domain", "params"), FINITE, ids=lambda v: repr(v) if not isinstance(v, str) else v)
def test_variance_is_exact_for_finite_oracles(name, domain, params):
    """n Var[f_hat(x)] = sum_x' theta_x' E_x'[v_x(Z)^2] - theta_x for the linear estimate v(z) of one report,
    computed from the matrix and each output's estimate (the inverted matrix's when there is none)."""
    mech = make("mechanism", name, domain, **params)
    k = domain.size
    outputs = np.flatnonzero(mech.matrix.max(axis=0) > 0)  # subset selection sends only some bit vectors
    m = mech.matrix[:, outputs]
    v = np.array([one_report_estimate(mech, z) for z in outputs])
    np.testing.assert_allclose(m @ v, np.eye(k), atol=1e-9)
    theta = np.random.default_rng(2).dirichlet(np.ones(k))
    exact = theta @ m @ v**2 - theta
    np.testing.assert_allclose(mech.estimate_variance(theta), exact, rtol=1e-9)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("olh", {"eps": 1.0}),
        ("blh", {"eps": 1.0}),
        ("flh", {"eps": 1.0, "hashes": 50}),
        ("oue", {"eps": 1.0}),
        ("krr", {"eps": 2.0}),
    ],
)
def test_simulated_variance_matches_the_formula(name, params):
    """R = 300 runs of n = 2000 users with a fixed population: (R-1) s^2 / sigma^2 is close to chi-square(R-1)
    (the estimates are sums of 2000 bounded terms, near normal), tested two-sided at 1e-4 for each of 3 values:
    a false-alarm rate of about 3e-4 per mechanism."""
    k, n, runs = 12, 2000, 300
    mech = make("mechanism", name, line(k), **params)
    theta = np.zeros(k)
    theta[:4] = [0.5, 0.3, 0.2, 0.0]
    values = np.repeat(np.arange(4), (theta[:4] * n).astype(int))
    rng = np.random.default_rng(21)
    reports = mech.sample(np.tile(values, runs), rng).reshape(runs, n, -1)
    estimates = np.array([estimate(mech, *np.unique(r, axis=0, return_counts=True)) for r in reports])
    sigma2 = mech.estimate_variance(theta) / n
    np.testing.assert_allclose(estimates.mean(axis=0), theta, atol=6 * math.sqrt(sigma2.max() / runs))
    for x in (0, 1, 3):
        stat = (runs - 1) * estimates[:, x].var(ddof=1) / sigma2[x]
        assert chi2.ppf(0.5e-4, runs - 1) < stat < chi2.isf(0.5e-4, runs - 1), (x, stat / (runs - 1))


def test_a_wrong_variance_is_caught(registry):
    class WrongKRR(registry.get("mechanism", "krr").cls):
        def _estimate_variance(self, theta):
            return 1.01 * super()._estimate_variance(theta)

    with pytest.raises(AssertionError, match="estimate_variance gives"):
        check_estimate_variance(WrongKRR(line(4), eps=1.0))


# ------------------------------------------------------------------ the variance table
@pytest.mark.parametrize(
    ("name", "params", "formula"),
    [
        ("krr", ["eps=1"], lambda k, e: (k - 2 + e) / (e - 1) ** 2),
        ("oue", ["eps=1"], lambda k, e: 4 * e / (e - 1) ** 2),
        ("blh", ["eps=1"], lambda k, e: (e + 1) ** 2 / (e - 1) ** 2),
    ],
)
def test_check_mechanism_prints_the_variance_beside_a_simulation(name, params, formula):
    """Wang et al. 2017's n Var at theta_x -> 0 (GRR (k - 2 + e^eps) / (e^eps - 1)^2, OUE 4 e^eps / (e^eps - 1)^2,
    BLH (e^eps + 1)^2 / (e^eps - 1)^2) plus the theta_x terms at an even population; the simulated mean within
    5 of its standard errors (false-alarm rate below 1e-5 each)."""
    from typer.testing import CliRunner

    from ldpsim import get_registry
    from ldpsim.output.cli import app
    from ldpsim.theory.diagnostics import variance_check

    k, users = 8, 4000
    args = ["check", "mechanism", name, "-d", f"integers:0..{k - 1}", "--users", str(users)]
    done = CliRunner().invoke(app, args + [arg for p in params for arg in ("-p", p)])
    assert done.exit_code == 0, done.output
    (line_,) = [row for row in done.output.splitlines() if row.startswith("variance")]
    mech = get_registry().create("mechanism", name, line(k), eps=1.0)
    check = variance_check(mech, users=users)
    e, theta = math.e, 1 / k
    p, q = {"krr": (e / (e + k - 1), 1 / (e + k - 1)), "oue": (0.5, 1 / (e + 1)), "blh": (e / (e + 1), 0.5)}[name]
    assert formula(k, e) == pytest.approx(q * (1 - q) / (p - q) ** 2, rel=1e-12)  # the paper's form
    expected = (theta * p * (1 - p) + (1 - theta) * q * (1 - q)) / (p - q) ** 2
    np.testing.assert_allclose(check.formula, expected, rtol=1e-12)
    assert f"n Var[f_hat(x)] = {expected:.4g}" in line_
    assert f"simulated {np.mean(check.simulated):.4g}" in line_
    assert abs(np.mean(check.simulated) - expected) < 5 * check.standard_error
