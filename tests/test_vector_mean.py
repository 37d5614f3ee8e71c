"""Mean estimation of numeric vectors: duchi-md, pm-sampling, hm-sampling, the vector-mean estimator and its metric.

Statistical tests fail a correct implementation with probability at most ALPHA each (Bonferroni inside a test).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from ldpsim_plugins.mechanisms.vector_mean import (
    attribute_inputs,
    duchi_md_bound,
    duchi_md_closed_form,
    duchi_md_weights,
)
from scipy.stats import chi2, norm

import ldpsim
from ldpsim import Integers, Observations, Product
from ldpsim.testing import check_mechanism, check_tuple_mechanism

#: false-alarm rate of each statistical test
ALPHA = 1e-4


def product(d: int, k: int = 3, low: int = 0, step: int = 1) -> Product:
    return Product(
        attributes=[
            {"name": f"a{j}", "kind": "integers", "low": low, "high": low + (k - 1) * step, "step": step}
            for j in range(d)
        ]
    )


def cell_inputs(mech) -> np.ndarray:
    """(|X|, d) the vector t of every cell."""
    cols = mech.domain.split(np.arange(mech.domain.size))
    return np.column_stack([attribute_inputs(p)[c] for p, c in zip(mech.domain.parts, cols)])


# ------------------------------------------------------------------ duchi-md: the constant and unbiasedness
def _enumerated_mean(t: np.ndarray, eps: float, ties: str) -> np.ndarray:
    """E[z | t] by enumerating every v and s in {-1, 1}^d: P(v | t) P(s | v) B s, from Algorithm 3's steps."""
    d = t.size
    g, b = duchi_md_weights(d, eps, ties), duchi_md_bound(d, eps, ties)
    mean, total = np.zeros(d), 0.0
    for v in itertools.product((-1, 1), repeat=d):
        pv = math.prod((1 + vj * tj) / 2 for vj, tj in zip(v, t))
        for s in itertools.product((-1, 1), repeat=d):
            p = pv * g[sum(int(a == c) for a, c in zip(s, v))]
            mean += p * b * np.array(s, dtype=float)
            total += p
    assert total == pytest.approx(1.0, abs=1e-12)
    return mean


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("ties", ["split", "negative"])
def test_duchi_md_is_unbiased_by_enumeration_of_its_outputs(d, ties, rng):
    for eps in (0.3, 1.0, 4.0):
        for t in rng.uniform(-1, 1, size=(3, d)).tolist() + [[1.0] * d, [-1.0] + [0.5] * (d - 1)]:
            np.testing.assert_allclose(_enumerated_mean(np.array(t), eps, ties), t, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3, 4, 5])
@pytest.mark.parametrize("ties", ["split", "negative"])
def test_duchi_md_matrix_reports_average_to_t(d, ties):
    mech = make("mechanism", "duchi-md", product(d, 3 if d <= 3 else 2), eps=0.8, ties=ties)
    m = mech.matrix
    assert m.shape == (mech.domain.size, 2**d)
    reports = mech.bound * mech.signs(np.arange(2**d))
    np.testing.assert_allclose(m @ reports, cell_inputs(mech), atol=1e-12)


def test_duchi_md_constant():
    # split ties (and odd d): (e^eps + 1)/(e^eps - 1) * 2^(d-1) / binom(d-1, floor((d-1)/2)); d = 1 is the 1-D mechanism
    for d in range(1, 12):
        for eps in (0.1, 1.0, 5.0):
            assert duchi_md_bound(d, eps) == pytest.approx(duchi_md_closed_form(d, eps), rel=1e-12)
            if d % 2:
                assert duchi_md_bound(d, eps, "negative") == pytest.approx(duchi_md_closed_form(d, eps), rel=1e-12)
    one_d = make("mechanism", "duchi", Integers(low=0, high=3), eps=1.0)
    assert duchi_md_bound(1, 1.0) == pytest.approx(one_d.bound, rel=1e-14)
    e = math.exp(1.0)
    assert duchi_md_bound(2, 1.0) == pytest.approx(2 * (e + 1) / (e - 1))  # 4.3279
    assert duchi_md_bound(3, 1.0) == pytest.approx(2 * (e + 1) / (e - 1))
    assert duchi_md_bound(4, 1.0) == pytest.approx(8 / 3 * (e + 1) / (e - 1))  # 5.7705
    # Algorithm 3 as printed (ties with T-), d = 2: P(+|v) = pi on s = v, (1 - pi)/3 elsewhere: E[s_1 v_1] = pi - (1-pi)/3
    pi = e / (e + 1)
    assert duchi_md_bound(2, 1.0, "negative") == pytest.approx(1 / (pi - (1 - pi) / 3))


def test_duchi_md_uses_the_one_dimensional_mapping():
    dom = product(2, 5, low=10, step=5)
    mech = make("mechanism", "duchi-md", dom, eps=1.0)
    one_d = make("mechanism", "duchi", dom.parts[0], eps=1.0)
    np.testing.assert_array_equal(attribute_inputs(dom.parts[0]), one_d.inputs)
    # the estimate of a sure value is itself: the matrix's reports mapped back average to the cell's values
    est = mech.matrix @ mech.attribute_estimates(np.arange(4))
    values = np.column_stack([p.values[c] for p, c in zip(dom.parts, dom.split(np.arange(dom.size)))])
    np.testing.assert_allclose(est, values, atol=1e-9)


# ------------------------------------------------------------------ duchi-md: privacy and the sampler's law
@pytest.mark.parametrize("d", [2, 3, 4, 5])
def test_duchi_md_exact_ldp_level_of_its_channel(d):
    for eps in (0.5, 2.0):
        for ties in ("split", "negative"):
            mech = make("mechanism", "duchi-md", product(d, 2), eps=eps, ties=ties)
            m = mech.matrix
            level = float(np.max(np.log(m.max(axis=0) / m.min(axis=0))))
            if ties == "split" or d % 2:
                assert level == pytest.approx(eps, rel=1e-12)
            else:  # the printed algorithm: ties all on the negative side, sides of sizes (2^d -+ binom(d, d/2)) / 2
                mid = math.comb(d, d // 2)
                assert level == pytest.approx(eps + math.log((2**d + mid) / (2**d - mid)), rel=1e-12)
            assert mech.privacy.eps == pytest.approx(level, rel=1e-12)


@pytest.mark.parametrize("ties", ["split", "negative"])
def test_duchi_md_sampler_follows_its_matrix(ties):
    mech = make("mechanism", "duchi-md", product(4, 2), eps=1.5, ties=ties)
    m = mech.matrix
    values = [0, 5, 15]
    for x in values:
        n = 40_000
        reports = mech.sample(np.full(n, x), np.random.default_rng(x))
        observed = np.bincount(reports[:, 0], minlength=16)
        stat = float(((observed - n * m[x]) ** 2 / (n * m[x])).sum())
        assert chi2.sf(stat, 15) > ALPHA / len(values)


@pytest.mark.parametrize(
    "name, d, params",
    [
        ("duchi-md", 2, {"eps": 1.0}),
        ("duchi-md", 3, {"eps": 2.0}),
        ("duchi-md", 2, {"eps": 1.0, "ties": "negative"}),
        ("pm-sampling", 2, {"eps": 1.0}),
        ("pm-sampling", 3, {"eps": 6.0}),  # k = 2
        ("hm-sampling", 2, {"eps": 1.0}),
        ("hm-sampling", 3, {"eps": 3.0, "k": 3}),
    ],
)
def test_mechanisms_meet_the_contract(name, d, params):
    mech = make("mechanism", name, product(d, 3), **params)
    if name == "duchi-md":
        check_mechanism(mech, samples=5000)
    else:
        check_tuple_mechanism(mech, samples=5000, repetitions=50)


# ------------------------------------------------------------------ pm / hm with sampling
def test_sampling_picks_k_as_wang_et_al():
    dom = product(5, 3)
    assert [make("mechanism", "pm-sampling", dom, eps=e).sampled for e in (0.5, 2.4, 2.5, 7.6, 20.0)] == [1, 1, 1, 3, 5]
    mech = make("mechanism", "hm-sampling", dom, eps=6.0)
    assert mech.sampled == 2 and mech.part_eps == 3.0 and mech.parts[0].name == "hybrid"
    with pytest.raises(ldpsim.ParameterError, match="k = 6 exceeds"):
        make("mechanism", "pm-sampling", dom, eps=1.0, k=6)
    with pytest.raises(ldpsim.ParameterError):
        make(
            "mechanism",
            "pm-sampling",
            Product(
                attributes=[
                    {"name": "a", "kind": "integers", "low": 0, "high": 2},
                    {"name": "b", "kind": "categorical", "values": ["x", "y"]},
                ]
            ),
            eps=1.0,
        )


@pytest.mark.parametrize("name", ["pm-sampling", "hm-sampling"])
def test_sampling_estimates_are_exactly_unbiased(name):
    # every report enumerated (each sampled set, every cell of its attributes), weighted by the exact channel
    mech = make("mechanism", name, product(3, 4, low=2, step=3), eps=5.0)  # k = 2 of 3
    d, k = 3, mech.sampled
    reports = []
    for chosen in itertools.combinations(range(d), k):
        for cells in itertools.product(*(range(mech.parts[j].output_size) for j in chosen)):
            row = np.zeros(2 * d, dtype=np.int64)
            row[list(chosen)] = cells
            row[[d + j for j in chosen]] = 1
            reports.append(row)
    reports = np.array(reports)
    probs = mech.likelihood(reports)  # (R, |X|)
    np.testing.assert_allclose(probs.sum(axis=0), 1.0, atol=1e-12)
    values = np.column_stack([p.values[c] for p, c in zip(mech.domain.parts, mech.domain.split(np.arange(64)))])
    np.testing.assert_allclose(probs.T @ mech.attribute_estimates(reports), values, atol=1e-9)


@pytest.mark.parametrize("name", ["pm-sampling", "hm-sampling", "duchi-md"])
def test_unbiased_mean_by_simulation(name, rng):
    dom = product(3, 5, low=0, step=10)
    mech = make("mechanism", name, dom, eps=2.0)
    theta = rng.dirichlet(np.ones(dom.size))
    n = 60_000
    values = np.repeat(np.arange(dom.size), rng.multinomial(n, theta))
    pop = np.bincount(values, minlength=dom.size) / n
    est = mech.attribute_estimates(mech.sample(values, rng)).mean(axis=0)
    z = (est - mech.true_vector(pop)) / np.sqrt(mech.mean_variances(pop) / n)
    assert np.all(np.abs(z) < norm.isf(ALPHA / 2 / z.size)), z


@pytest.mark.parametrize(
    "name, eps", [("pm-sampling", 1.0), ("pm-sampling", 6.0), ("hm-sampling", 6.0), ("duchi-md", 1.0)]
)
def test_variance_formulas_match_simulation(name, eps, rng):
    dom = product(4, 3, low=0, step=7)
    mech = make("mechanism", name, dom, eps=eps)
    theta = rng.dirichlet(np.ones(dom.size))
    n, reps = 400, 400
    values = np.repeat(np.arange(dom.size), rng.multinomial(n, theta))
    pop = np.bincount(values, minlength=dom.size) / n
    reports = mech.sample(np.tile(values, reps), rng)
    means = mech.attribute_estimates(reports).reshape(reps, n, 4).mean(axis=1)
    ratio = means.var(axis=0, ddof=1) / (mech.mean_variances(pop) / n)
    # (reps - 1) ratio ~ chi2(reps - 1) for normal means; Bonferroni over the four attributes
    low, high = chi2.ppf(ALPHA / 8, reps - 1) / (reps - 1), chi2.isf(ALPHA / 8, reps - 1) / (reps - 1)
    assert np.all((low < ratio) & (ratio < high)), ratio


def test_pm_sampling_continuous_variance_is_the_papers():
    # Wang et al.: Var[(d/k) y I | t] = (d/k) Var_PM(t; eps/k) + (d/k - 1) t^2, Var_PM their Lemma 2
    dom = product(4, 5)
    mech = make("mechanism", "pm-sampling", dom, eps=5.0)  # k = 2, eps/k = 2.5
    d, k = 4, mech.sampled
    part = mech.parts[0]
    for x in (0, 2, 4):
        theta = np.zeros(dom.size)
        theta[dom.join([np.array([x])] * 4)[0]] = 1.0
        t = part.inputs[x]
        paper = d / k * part.report_variance()[x] + (d / k - 1) * t**2
        got = mech.mean_variances(theta, continuous=True) / (dom.parts[0].high - dom.parts[0].low) ** 2 * 4
        np.testing.assert_allclose(got, paper, rtol=1e-10)
        assert np.all(mech.mean_variances(theta) <= mech.mean_variances(theta, continuous=True))


# ------------------------------------------------------------------ the estimator, the metric, a scenario
def test_the_estimator_gives_the_mean_vector_and_a_product_distribution(rng):
    dom = product(3, 4, low=1, step=2)  # values 1, 3, 5, 7
    mech = make("mechanism", "pm-sampling", dom, eps=4.0)
    values = rng.integers(0, dom.size, 5000)
    reports = mech.sample(values, rng)
    obs = Observations.from_reports(dom, [(mech, reports)])
    est = make("estimator", "vector-mean").estimate(obs)
    np.testing.assert_allclose(est.extras["vector_mean"], mech.attribute_estimates(reports).mean(axis=0), rtol=1e-12)
    assert est.extras["vector_mean_se"].shape == (3,) and np.all(est.extras["vector_mean_se"] > 0)
    for j, part in enumerate(dom.parts):
        clipped = np.clip(est.extras["vector_mean"][j], 1, 7)
        assert dom.marginal(est.distribution, j) @ part.values == pytest.approx(clipped)
    truth = np.bincount(values, minlength=dom.size) / values.size
    score = make("metric", "vector-mean-mse")(est.distribution, truth, dom, est.extras)
    assert score == pytest.approx(np.mean((est.extras["vector_mean"] - mech.true_vector(truth)) ** 2))
    assert math.isnan(make("metric", "vector-mean-mse")(est.distribution, truth, dom, {}))
    with pytest.raises(ldpsim.EstimationError, match="vector-mean needs"):
        spl = make("mechanism", "spl", dom, eps=1.0)
        make("estimator", "vector-mean").estimate(Observations.from_reports(dom, [(spl, spl.sample(values, rng))]))


def test_a_small_scenario_runs_with_finite_scores(tmp_path):
    scenario = {
        "name": "vector-mean-small",
        "seed": 3,
        "users": 4000,
        "repetitions": 2,
        "estimators": ["vector-mean"],
        "metrics": ["vector-mean-mse"],
        "domain": {
            "kind": "product",
            "attributes": [{"name": f"x{j}", "kind": "integers", "low": 0, "high": 4} for j in range(3)],
        },
        "dataset": {"name": "copula", "rho": 0.5},
        "cohorts": {"all": {"share": 1, "reports": [{"mechanism": "duchi-md", "eps": 1.0}]}},
        "sweep": {
            "mechanism": {
                "path": "cohorts.all.reports.0.mechanism",
                "values": ["duchi-md", "pm-sampling", "hm-sampling"],
            }
        },
    }
    ds = ldpsim.run_scenario(scenario, output=tmp_path / "out.nc")
    scores = ds["vector-mean-mse"].values
    assert scores.shape == (1, 3, 2) and np.all(np.isfinite(scores)) and np.all(scores < 1.0)
    assert ds["vector_mean"].dims[-1] == "attribute" and ds.sizes["attribute"] == 3
    assert list(ds["attribute"].values) == ["x0", "x1", "x2"]  # labelled by the product's attribute names
    reread = ldpsim.open_results(tmp_path / "out.nc")
    assert list(reread["attribute"].values) == ["x0", "x1", "x2"]
