"""Product domains and tuple protocols against independent brute force.

The reference channels are built here from the definitions (k-RR's p and q, the protocols'
sampling and fake-data laws), never from the protocols' own likelihood code.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2

import ldpsim
from ldpsim import DataError, Observations, ParameterError, Product
from ldpsim.model import tuples as tuples_module
from ldpsim.testing import check_tuple_mechanism


def product(*sizes: int) -> Product:
    return Product(
        attributes=[{"name": f"a{j}", "kind": "integers", "low": 0, "high": k - 1} for j, k in enumerate(sizes)]
    )


def krr_matrix(k: int, eps: float) -> np.ndarray:
    p, q = math.exp(eps) / (math.exp(eps) + k - 1), 1 / (math.exp(eps) + k - 1)
    return np.where(np.eye(k, dtype=bool), p, q)


def brute_channel(name: str, sizes: tuple[int, ...], eps: float, prior: np.ndarray | None = None):
    """(|X|, |Z|) channel and the (|Z|, width) report rows, from the protocols' definitions."""
    d = len(sizes)
    if name == "spl":
        mats = [krr_matrix(k, eps / d) for k in sizes]
        channel = mats[0]
        for m in mats[1:]:
            channel = np.kron(channel, m)
        rows = np.array(list(itertools.product(*[range(k) for k in sizes])))
        return channel, rows
    if name == "smp":
        cols, rows = [], []
        cells = np.array(list(itertools.product(*[range(k) for k in sizes])))
        for j, k in enumerate(sizes):
            m = krr_matrix(k, eps)
            for z in range(k):
                cols.append(m[cells[:, j], z] / d)
                rows.append([j, z])
        return np.array(cols).T, np.array(rows)
    # RS+FD / RS+RFD with GRR: (1/d) sum_j M_j(z_j | x_j) prod_{i != j} fake_i(z_i)
    eps_prime = math.log(d * math.expm1(eps) + 1)
    cells = np.array(list(itertools.product(*[range(k) for k in sizes])))
    rows = cells.copy()
    fakes = []
    for i, k in enumerate(sizes):
        if prior is None:
            fakes.append(np.full(k, 1 / k))
        else:
            fakes.append(prior.reshape(sizes).sum(axis=tuple(a for a in range(d) if a != i)))
    channel = np.zeros((cells.shape[0], rows.shape[0]))
    for j, k in enumerate(sizes):
        m = krr_matrix(k, eps_prime)
        term = m[cells[:, j]][:, rows[:, j]]
        for i in range(d):
            if i != j:
                term = term * fakes[i][rows[:, i]][None, :]
        channel += term / d
    return channel, rows


PROTOCOLS = ["spl", "smp", "rsfd", "rsrfd"]


def build(name: str, dom: Product, eps: float, prior: np.ndarray | None = None):
    params: dict = {"eps": eps}
    if name == "rsrfd":
        params["prior"] = prior
    return make("mechanism", name, dom, **params)


def _prior(size: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(size))


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(PROTOCOLS),
    sizes=st.lists(st.integers(2, 4), min_size=2, max_size=3).map(tuple),
    eps=st.floats(0.1, 4.0),
    seed=st.integers(0, 1000),
)
def test_structured_likelihood_is_the_brute_force_channel(name, sizes, eps, seed):
    dom = product(*sizes)
    prior = _prior(dom.size, seed) if name == "rsrfd" else None
    mech = build(name, dom, eps, prior)
    channel, rows = brute_channel(name, sizes, eps, prior)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)  # the reference is a channel
    shift, op = mech.structured_likelihood(rows)
    dense = np.exp(shift)[:, None] * (op @ np.eye(dom.size))
    np.testing.assert_allclose(dense, channel.T, rtol=1e-10, atol=1e-15)
    w = np.random.default_rng(seed).random(rows.shape[0])
    np.testing.assert_allclose(op.T @ w, (channel.T / np.exp(shift)[:, None]).T @ w, rtol=1e-10)
    np.testing.assert_allclose(mech.likelihood(rows), channel.T, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_sampler_follows_the_brute_force_channel(name):
    """Chi-square per tested tuple, Bonferroni over them: a correct sampler fails with probability <= 1e-4."""
    sizes = (3, 2, 2)
    dom = product(*sizes)
    prior = _prior(dom.size, 5) if name == "rsrfd" else None
    mech = build(name, dom, 1.5, prior)
    channel, rows = brute_channel(name, sizes, 1.5, prior)
    n = 30_000
    tested = [0, 5, dom.size - 1]
    for x in tested:
        reports = mech.sample(np.full(n, x), np.random.default_rng([11, x]))
        keys = {tuple(r): i for i, r in enumerate(rows)}
        observed = np.bincount([keys[tuple(r)] for r in np.unique(reports, axis=0)], minlength=rows.shape[0])
        uniq, counts = np.unique(reports, axis=0, return_counts=True)
        observed = np.zeros(rows.shape[0])
        observed[[keys[tuple(r)] for r in uniq]] = counts
        expected = n * channel[x]
        stat = float(((observed - expected) ** 2 / expected).sum())
        assert chi2.sf(stat, rows.shape[0] - 1) >= 1e-4 / len(tested), (name, x)


@pytest.mark.parametrize(
    "name,params",
    [
        ("spl", {"eps": 2.0}),
        ("spl", {"eps": 2.0, "local": "oue"}),
        ("smp", {"eps": 1.0, "per_attribute": [{"mechanism": "oue"}, {"mechanism": "krr"}]}),
        ("rsfd", {"eps": 1.0}),
        ("rsfd", {"eps": 1.0, "local": "oue-z"}),
        ("rsfd", {"eps": 1.0, "local": "oue-r"}),
        ("rsrfd", {"eps": 1.0, "prior": [0.1, 0.2, 0.1, 0.2, 0.3, 0.1]}),
    ],
)
def test_protocols_meet_the_tuple_contract(name, params):
    """Sampler, likelihoods, privacy claim, and the marginal estimates' bias and stated variance."""
    check_tuple_mechanism(make("mechanism", name, product(3, 2), **params))


class _Uncorrected(ldpsim.get_registry().get("mechanism", "rsfd").cls):  # type: ignore[misc]
    """RS+FD whose aggregator forgets the fake data: biased, as the check must find."""

    name = "rsfd-uncorrected"

    def _marginal_estimates(self, reports, counts):
        return [len(self.parts) * v for v in super()._marginal_estimates(reports, counts)]


def test_the_tuple_contract_finds_a_biased_aggregator():
    with pytest.raises(AssertionError, match="biased"):
        check_tuple_mechanism(_Uncorrected(product(3, 2), eps=1.0), repetitions=100)


def test_rsfd_declares_the_whole_tuples_level_not_the_papers():
    """Tuples that differ in every attribute: P(z|x)/P(z|x') reaches p/q = e^eps' (brute force)."""
    sizes = (3, 2, 2)
    channel, _ = brute_channel("rsfd", sizes, 1.0)
    log_c = np.log(channel)
    level = float((log_c.max(axis=0) - log_c.min(axis=0)).max())
    mech = build("rsfd", product(*sizes), 1.0)
    assert mech.privacy.eps == pytest.approx(level, rel=1e-12)
    assert level == pytest.approx(math.log(3 * math.expm1(1.0) + 1), rel=1e-12)
    assert level > 1.0 + 0.5  # the paper's eps = 1 does not hold for whole tuples


def test_modes_and_blocks_give_the_same_products(monkeypatch):
    """The report-by-report path (large distinct-report tensors) equals the mode-product path."""
    dom = product(4, 3, 5)
    mech = make("mechanism", "spl", dom, eps=3.0, local="oue")
    rng = np.random.default_rng(3)
    reports = mech.sample(rng.integers(dom.size, size=3000), rng)
    uniq = np.unique(reports, axis=0)
    theta, w = rng.dirichlet(np.ones(dom.size)), rng.random(uniq.shape[0])
    _, op = mech.structured_likelihood(uniq)
    modes = (op @ theta, op.T @ w)
    monkeypatch.setattr(tuples_module, "MODE_PRODUCT_MAX", 1)
    monkeypatch.setattr(tuples_module, "BLOCK_FLOATS", 64)
    _, op = mech.structured_likelihood(uniq)
    np.testing.assert_allclose(op @ theta, modes[0], rtol=1e-12)
    np.testing.assert_allclose(op.T @ w, modes[1], rtol=1e-12)


def test_joint_mle_carries_its_certificate():
    dom = product(4, 3, 5)
    mech = make("mechanism", "spl", dom, eps=4.0)
    rng = np.random.default_rng(8)
    truth = rng.dirichlet(np.ones(dom.size))
    reports = mech.sample(rng.choice(dom.size, size=20_000, p=truth), rng)
    obs = Observations.from_reports(dom, [(mech, reports)])
    mle = make("estimator", "mle").estimate(obs)
    ibu = make("estimator", "ibu").estimate(obs)
    assert mle.kkt < 1e-8 and mle.gap < 1e-4
    assert ibu.loglik <= mle.loglik + 1e-6  # the MLE is the likelihood's maximum
    assert not isinstance(ldpsim.Likelihood(obs).H, np.ndarray)  # no dense (reports x cells) matrix


def test_marginals_estimator_is_the_peers_aggregator():
    """SPL with k-RR: per attribute (n_v / n - q) / (p - q), clipped and normalized (multi-freq-ldpy's SPL_GRR)."""
    sizes = (4, 3)
    dom = product(*sizes)
    mech = make("mechanism", "spl", dom, eps=2.0)
    rng = np.random.default_rng(4)
    reports = mech.sample(rng.integers(dom.size, size=5000), rng)
    est = make("estimator", "marginals").estimate(Observations.from_reports(dom, [(mech, reports)]))
    for j, k in enumerate(sizes):
        p, q = math.exp(1.0) / (math.exp(1.0) + k - 1), 1 / (math.exp(1.0) + k - 1)
        raw = (np.bincount(reports[:, j], minlength=k) / 5000 - q) / (p - q)
        clipped = np.clip(raw, 0, None)
        np.testing.assert_allclose(dom.marginal(est.distribution, j), clipped / clipped.sum(), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), seed=st.integers(0, 99))
def test_product_domain_laws(sizes, seed):
    sizes = tuple(max(k, 2) for k in sizes)
    dom = product(*sizes)
    rng = np.random.default_rng(seed)
    values = rng.integers(dom.size, size=50)
    assert np.array_equal(dom.join(dom.split(values)), values)
    assert np.array_equal(dom.index([s for s in dom.split(values)]), values)
    theta = rng.dirichlet(np.ones(dom.size))
    for j in range(len(sizes)):
        m = dom.marginal(theta, j)
        assert m.shape == (sizes[j],) and m.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(m, np.bincount(dom.split(np.arange(dom.size))[j], weights=theta))
    if len(sizes) >= 2:  # the marginal of a 2-way marginal is the 1-way marginal
        pair = dom.marginal(theta, (1, 0)).reshape(sizes[1], sizes[0])
        np.testing.assert_allclose(pair.sum(axis=0), dom.marginal(theta, 0))


def test_product_domain_coordinates_are_the_attributes():
    dom = Product(
        attributes=[
            {"name": "sex", "kind": "categorical", "values": ["F", "M"]},
            {"name": "age", "kind": "integers", "low": 20, "high": 22},
            {"name": "cell", "kind": "grid", "rows": 2, "cols": 2},
        ]
    )
    assert dom.dims == ("sex", "age", "cell_row", "cell_col") and dom.shape == (2, 3, 2, 2)
    assert list(dom.coords()["age"]) == [20, 21, 22]
    assert dom.labels()[0] == "(F, 20, (0,0))"
    assert list(dom.index([["M"], [21], np.array([[1, 0]])])) == [1 * 12 + 1 * 4 + 2]
    with pytest.raises(DataError, match="attribute 'sex'"):
        dom.index([["X"], [21], np.array([[1, 0]])])


@pytest.mark.parametrize(
    "attributes,problem",
    [
        ([{"name": "a", "kind": "integers", "low": 0, "high": 2}] * 2, "used twice"),
        ([{"name": "a", "kind": "integers", "low": 0, "high": 2}], "at least two attributes"),
        ([{"kind": "integers", "low": 0, "high": 2}] * 2, "no name"),
        (
            [
                {"name": "rep", "kind": "integers", "low": 0, "high": 2},
                {"name": "b", "kind": "integers", "low": 0, "high": 1},
            ],
            "already use",
        ),
        ([{"name": f"a{j}", "kind": "integers", "low": 0, "high": 999} for j in range(3)], "marginals only"),
    ],
)
def test_bad_product_domains_are_refused_in_one_line(attributes, problem):
    with pytest.raises(ParameterError, match=problem) as info:
        Product(attributes=attributes)
    assert "\n" not in str(info.value)


def test_bad_tuple_protocols_are_refused_in_one_line():
    dom = Product(
        attributes=[
            {"name": "sex", "kind": "categorical", "values": ["F", "M"]},
            {"name": "age", "kind": "integers", "low": 0, "high": 3},
        ]
    )
    with pytest.raises(ParameterError, match="attribute 'sex'.*integers") as info:
        make("mechanism", "spl", dom, eps=1.0, local="geometric")
    assert info.value.field == "local.domain"
    with pytest.raises(ParameterError, match="2 attributes"):
        make("mechanism", "spl", dom, eps=1.0, per_attribute=[{"mechanism": "krr"}])
    with pytest.raises(ParameterError, match="add up to 3"):
        make("mechanism", "spl", dom, eps=1.0, per_attribute=[{"mechanism": "krr", "eps": 2}, {"eps": 1}])
    with pytest.raises(ParameterError, match="product"):
        make("mechanism", "smp", ldpsim.Integers(low=0, high=3), eps=1.0)
    with pytest.raises(ParameterError, match="attribute 'sex'.*'smp' does not work on a categorical"):
        make("mechanism", "spl", dom, eps=1.0, local="smp")


def test_marginal_metrics():
    dom = product(3, 2, 2)
    rng = np.random.default_rng(2)
    truth, est = rng.dirichlet(np.ones(dom.size)), rng.dirichlet(np.ones(dom.size))
    tv = make("metric", "tv")
    assert make("metric", "marginal-tv")(truth, truth, dom) == 0
    assert make("metric", "kway-tv", k=3)(est, truth, dom) == pytest.approx(tv(est, truth, dom))
    expected = np.mean([0.5 * np.abs(dom.marginal(est, j) - dom.marginal(truth, j)).sum() for j in range(3)])
    assert make("metric", "marginal-tv")(est, truth, dom) == pytest.approx(expected)
    assert make("metric", "kway-tv", k=1)(est, truth, dom) == pytest.approx(expected)
    mse = np.mean([np.mean((dom.marginal(est, j) - dom.marginal(truth, j)) ** 2) for j in range(3)])
    assert make("metric", "marginal-mse")(est, truth, dom) == pytest.approx(mse)
    with pytest.raises(ParameterError, match="k = 4"):
        make("metric", "kway-tv", k=4).check_domain(dom)


def test_marginals_of_results_are_sums_of_the_joint(tmp_path):
    scenario = {
        "seed": 2,
        "users": 3000,
        "repetitions": 2,
        "domain": {
            "kind": "product",
            "attributes": [
                {"name": "sex", "kind": "categorical", "values": ["F", "M"]},
                {"name": "cell", "kind": "grid", "rows": 2, "cols": 2},
                {"name": "age", "kind": "integers", "low": 0, "high": 2},
            ],
        },
        "dataset": {"name": "zipf"},
        "cohorts": {"all": {"reports": [{"mechanism": "spl", "eps": 3.0}]}},
        "estimators": ["mle", "marginals"],
        "metrics": ["marginal-tv"],
    }
    ds = ldpsim.run_scenario(scenario)
    dom = Product(attributes=scenario["domain"]["attributes"])
    age = ldpsim.marginals(ds, "age")
    assert age.dims == ("estimator", "rep", "age") and list(age["age"].values) == [0, 1, 2]
    flat = ds["estimate"].sel(estimator="mle").isel(rep=0).values.ravel()
    np.testing.assert_allclose(age.sel(estimator="mle").isel(rep=0), dom.marginal(flat, 2))
    pair = ldpsim.marginals(ds, "age", "sex", variable="truth")
    assert pair.dims == ("rep", "sex", "age")
    np.testing.assert_allclose(
        pair.isel(rep=0).values.ravel(), dom.marginal(ds["truth"].isel(rep=0).values.ravel(), (0, 2))
    )
    # the marginal-tv score is the mean TV of these marginals
    truth = ds["truth"].isel(rep=0).values.ravel()
    tv = np.mean([0.5 * np.abs(dom.marginal(flat, j) - dom.marginal(truth, j)).sum() for j in range(3)])
    assert float(ds["marginal-tv"].sel(estimator="mle").isel(rep=0)) == pytest.approx(tv)
    with pytest.raises(ldpsim.LdpsimError, match="no attribute 'weight'"):
        ldpsim.marginals(ds, "weight")


def test_marginal_intervals_are_linear_statistics_that_cover():
    """A marginal is a linear statistic of the joint: the MLE's Wald intervals (intervals = true) cover it.

    800 intervals (100 populations x 8 attribute values) at 95 %: a correct interval covers 760 on average;
    even if the 8 intervals of a population moved together, fewer than 700 happens with probability < 1e-4.
    """
    dom = product(3, 2, 3)
    mech = make("mechanism", "spl", dom, eps=6.0)
    estimator = make("estimator", "mle", intervals=True)
    rng = np.random.default_rng(0)
    truth = rng.dirichlet(np.full(dom.size, 3.0))
    cells = dom.split(np.arange(dom.size))
    covered = 0
    for _ in range(100):
        values = rng.choice(dom.size, size=5000, p=truth)
        est = estimator.estimate(Observations.from_reports(dom, [(mech, mech.sample(values, rng))]))
        for j, k in enumerate(dom.sizes):
            for v in range(k):
                w = (cells[j] == v).astype(float)
                value, low, high = est.linear_interval(w, 0.95)
                assert value == pytest.approx(dom.marginal(est.distribution, j)[v])
                covered += low <= w @ truth <= high
    assert 700 <= covered < 800, covered  # 756 at this seed
