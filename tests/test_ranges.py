"""Range-query protocols (hh, haar-hrr), their published pipelines (range-ci) and the range metrics.

Checked against the definitions: the channels from first principles (k-RR on the level's node; the
Haar coefficient's sign times Sylvester's Hadamard matrix), the samplers against those channels by
chi-square, the structured operators against the dense likelihood, the pipelines against exact
expected counts (a linear unbiased estimate returns the truth on them) and Hay et al.'s consistency
against a hand-computed tree and least squares.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim_plugins.estimators.hierarchical import (
    check_range,
    constrained_inference,
    norm_sub,
    range_interval,
    tree_norm_sub,
)
from ldpsim_plugins.metrics.ranges import quantile_values, random_ranges, range_answers
from scipy.linalg import hadamard
from scipy.stats import chi2
from typer.testing import CliRunner

from ldpsim import Integers, Observations, ParameterError
from ldpsim.output.cli import app


def domain(size: int) -> Integers:
    return Integers(low=0, high=size - 1)


def all_reports(mech) -> np.ndarray:
    """Every report of a small mechanism (hh over k-RR, haar-hrr), one row each."""
    rows = []
    for lv in range(1, mech.depth + 1):
        if mech.name == "hh":
            rows += [(lv, z) for z in range(mech.b**lv)]
        else:
            rows += [(lv, j, y) for j in range(1 << (lv - 1)) for y in (0, 1)]
    return np.array(rows, dtype=np.int64)


def channel_from_definition(mech, x: int, report: tuple[int, ...]) -> float:
    """P(report | x) written out from the protocols' definitions (module docstring of the plugin)."""
    h, e = mech.depth, math.exp(mech.eps)
    lv = report[0]
    if mech.name == "hh":
        nodes = mech.b**lv
        node = x // mech.b ** (h - lv)
        keep = e / (e + nodes - 1)
        return (keep if report[1] == node else (1 - keep) / (nodes - 1)) / h
    m = 1 << (lv - 1)
    c, sign = x >> (h - lv + 1), 1 if (x >> (h - lv)) % 2 == 0 else -1
    t = sign * hadamard(m)[report[1], c]  # Sylvester's matrix: entry (j, c) = (-1)^popcount(j & c)
    keep = e / (e + 1)
    return (keep if 2 * report[2] - 1 == t else 1 - keep) / (h * m)


SMALL = [("hh", {"branching": 2}, 8), ("hh", {"branching": 3}, 9), ("hh", {"branching": 4}, 16), ("haar-hrr", {}, 8)]


@pytest.mark.parametrize(("name", "params", "size"), SMALL)
def test_channel_is_the_definition_and_a_distribution(name, params, size):
    mech = make("mechanism", name, domain(size), eps=1.3, **params)
    reports = all_reports(mech)
    probs = np.exp(mech.log_likelihood(reports))  # (reports, values)
    expected = np.array([[channel_from_definition(mech, x, tuple(r)) for x in range(size)] for r in reports])
    np.testing.assert_allclose(probs, expected, rtol=1e-12)
    np.testing.assert_allclose(probs.sum(axis=0), 1.0, rtol=1e-12)


@pytest.mark.parametrize(("name", "params", "size"), SMALL)
def test_sampler_follows_the_channel(name, params, size):
    """Chi-square of 40,000 seeded reports of one value against its channel: a false alarm 1e-4 of the time."""
    mech = make("mechanism", name, domain(size), eps=1.0, **params)
    x = size // 3
    reports = mech.sample(np.full(40_000, x), np.random.default_rng(29))
    every = all_reports(mech)
    index = {tuple(r): i for i, r in enumerate(every)}
    observed = np.bincount([index[tuple(r)] for r in reports], minlength=len(every))
    expected = 40_000 * np.exp(mech.log_likelihood(every)[:, x])
    stat = float(((observed - expected) ** 2 / expected).sum())
    assert stat < chi2.ppf(1 - 1e-4, len(every) - 1), stat


def test_olh_and_oue_levels_sample_their_oracles_law():
    """hh over OUE: each level's bits follow OUE on the level's nodes (P(bit of the true node) = 1/2,
    others 1/(e^eps + 1)); z-test over 20,000 reports, false alarm about 1e-4 per bit (|z| < 3.9)."""
    eps = 1.0
    mech = make("mechanism", "hh", domain(16), eps=eps, branching=4, oracle="oue")
    x = 7
    reports = mech.sample(np.full(20_000, x), np.random.default_rng(5))
    for lv, nodes, p_other in ((1, 4, 1 / (math.exp(eps) + 1)), (2, 16, 1 / (math.exp(eps) + 1))):
        bits = reports[reports[:, 0] == lv, 1]
        m = bits.size
        for node in range(nodes):
            p = 0.5 if node == x // 4 ** (2 - lv) else p_other
            share = ((bits >> node) & 1).mean()
            assert abs(share - p) < 3.9 * math.sqrt(p * (1 - p) / m), (lv, node, share, p)


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(2, 4),
    depth=st.integers(1, 3),
    eps=st.floats(0.1, 5.0),
    oracle=st.sampled_from(["krr", "oue", "olh"]),
    seed=st.integers(0, 2**16),
)
def test_hh_operator_equals_the_dense_likelihood(b, depth, eps, oracle, seed):
    size = b**depth
    mech = make("mechanism", "hh", domain(size), eps=eps, branching=b, oracle=oracle)
    assert_operator_is_dense(mech, size, seed)


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(1, 6), eps=st.floats(0.1, 5.0), seed=st.integers(0, 2**16))
def test_haar_operator_equals_the_dense_likelihood(depth, eps, seed):
    mech = make("mechanism", "haar-hrr", domain(1 << depth), eps=eps)
    assert_operator_is_dense(mech, 1 << depth, seed)


def assert_operator_is_dense(mech, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    reports = np.unique(mech.sample(rng.integers(0, size, 60), rng), axis=0)
    shift, op = mech.structured_likelihood(reports)
    dense = np.exp(mech.log_likelihood(reports) - shift[:, None])
    theta, w, block = rng.random(size), rng.random(reports.shape[0]), rng.random((size, 3))
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(op.matmat(block), dense @ block, rtol=1e-10, atol=1e-13)
    if hasattr(op, "rows"):
        pick = np.arange(0, reports.shape[0], 3)
        np.testing.assert_allclose(op.rows(pick), dense[pick], rtol=1e-10, atol=1e-13)
    if hasattr(op, "min_entry"):
        assert dense.min() >= op.min_entry * (1 - 1e-12)


def expected_observations(mech, theta: np.ndarray, users: float = 1e6) -> Observations:
    """Observations holding the expected count of every report: a linear unbiased estimate returns theta."""
    every = all_reports(mech)
    counts = users * np.exp(mech.log_likelihood(every)) @ theta
    return Observations.from_counts(mech.domain, mech, every, counts)


@pytest.mark.parametrize(("name", "params", "size"), [*SMALL, ("haar-hrr", {}, 32)])
def test_published_pipelines_are_exact_on_expected_counts(name, params, size):
    """Per-level unbiased estimates (and Hay's consistency, which keeps a consistent tree) return theta."""
    mech = make("mechanism", name, domain(size), eps=0.8, **params)
    theta = np.random.default_rng(3).dirichlet(np.ones(size))
    est = make("estimator", "range-ci").estimate(expected_observations(mech, theta))
    np.testing.assert_allclose(est.distribution, theta, atol=1e-9)


def test_constrained_inference_matches_a_hand_computed_tree():
    """b = 2, h = 2, root 1. Up: z_1 = 2/3 y_1 + 1/3 (children) = [17/30, 8/30]. Down: z_1 + (1 - 25/30) / 2
    = [0.65, 0.35]; leaves y_2 + (x_1 - children) / 2 = [0.275, 0.375, 0.175, 0.175]."""
    levels = constrained_inference([np.array([0.6, 0.3]), np.array([0.2, 0.3, 0.1, 0.1])], 2)
    np.testing.assert_allclose(levels[0], [0.65, 0.35], rtol=1e-12)
    np.testing.assert_allclose(levels[1], [0.275, 0.375, 0.175, 0.175], rtol=1e-12)


@pytest.mark.parametrize(("b", "h"), [(2, 3), (3, 3), (4, 2)])
def test_constrained_inference_is_the_least_squares_tree(b, h):
    """Hay et al.'s two passes = argmin sum_l ||A_l x - y_l||^2 subject to sum x = 1 (a KKT solve)."""
    rng = np.random.default_rng(b * 10 + h)
    ys = [rng.random(b**lv) for lv in range(1, h + 1)]
    k = b**h
    a = np.vstack([np.kron(np.eye(b**lv), np.ones((1, b ** (h - lv)))) for lv in range(1, h + 1)])
    kkt = np.block([[2 * a.T @ a, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
    solution = np.linalg.solve(kkt, np.concatenate([2 * a.T @ np.concatenate(ys), [1.0]]))[:k]
    out = constrained_inference(ys, b)
    np.testing.assert_allclose(out[-1], solution, atol=1e-12)
    for lv in range(1, h):  # every parent the sum of its children
        np.testing.assert_allclose(out[lv - 1], out[lv].reshape(-1, b).sum(axis=1), atol=1e-12)


def test_norm_sub_is_the_nearest_nonnegative_vector_with_the_sum():
    np.testing.assert_allclose(norm_sub(np.array([0.5, 0.6, -0.2, 0.1])), [13 / 30, 16 / 30, 0, 1 / 30])
    # tree version: each node's children Norm-Sub'ed to its mass; a consistent non-negative tree is kept
    levels = [np.array([0.7, 0.3]), np.array([0.5, 0.2, 0.1, 0.2])]
    np.testing.assert_allclose(tree_norm_sub(levels, 2), levels[1])
    np.testing.assert_allclose(
        tree_norm_sub([np.array([1.1, -0.1]), np.array([0.6, 0.5, -0.2, 0.1])], 2), [0.55, 0.45, 0, 0]
    )


def test_joint_mle_ranges_are_consistent_and_certified():
    """The MLE is one leaf histogram: every range answer is the sum of its sub-ranges' (a parent the sum of
    its children), it carries a KKT certificate, and a range's interval holds its answer."""
    mech = make("mechanism", "haar-hrr", domain(64), eps=1.0)
    rng = np.random.default_rng(11)
    values = np.clip(np.rint(rng.normal(20, 8, 20_000)), 0, 63).astype(np.int64)
    obs = Observations.from_reports(mech.domain, [(mech, mech.sample(values, rng))])
    est = make("estimator", "mle", tol=1e-7).estimate(obs)
    assert est.kkt <= 1e-6 and est.gap < 1.0  # the certificate: within a nat of the maximum
    theta = est.distribution
    tree = mech.tree(theta)
    for lv in range(mech.depth):
        np.testing.assert_allclose(tree[lv], tree[lv + 1][0::2] + tree[lv + 1][1::2], atol=1e-15)
    low, high = np.array([3, 10]), np.array([40, 17])
    parts = range_answers(theta, low, np.array([20, 12])) + range_answers(theta, np.array([21, 13]), high)
    np.testing.assert_allclose(range_answers(theta, low, high), parts, atol=1e-15)
    answer, lower, upper = range_interval(obs, theta, 10, 30)
    assert lower < answer < upper and answer == pytest.approx(theta[10:31].sum())
    truth = np.bincount(values, minlength=64)[10:31].sum() / values.size
    assert abs(answer - truth) < 4 * (upper - lower)  # a loose sanity bound, not a coverage claim


def test_range_mse_and_quantiles_against_brute_force():
    rng = np.random.default_rng(2)
    truth, estimate = rng.dirichlet(np.ones(50)), rng.dirichlet(np.ones(50))
    low, high = random_ranges(50, 0.3, 40, seed=7)
    assert np.all(high - low + 1 == 15) and low.min() >= 0 and high.max() <= 49
    again = random_ranges(50, 0.3, 40, seed=7)
    assert np.array_equal(low, again[0])  # the same ranges for every estimate
    brute = np.mean([(estimate[a : b + 1].sum() - truth[a : b + 1].sum()) ** 2 for a, b in zip(low, high)])
    metric = make("metric", "range-mse", volume=0.3, queries=40, seed=7)
    assert metric(estimate, truth, domain(50)) == pytest.approx(brute, rel=1e-12)
    values = np.arange(50) + 100.0
    cdf = np.cumsum(truth)
    for q in (0.1, 0.5, 0.9):
        brute_q = values[next(i for i in range(50) if cdf[i] >= q)]
        assert quantile_values(truth, values, np.array([q]))[0] == brute_q
    score = make("metric", "quantile-error", quantiles=[0.5])(estimate, truth, Integers(low=100, high=149))
    assert score == abs(quantile_values(estimate, values, [0.5])[0] - quantile_values(truth, values, [0.5])[0])


def test_bad_input_is_one_line():
    with pytest.raises(ParameterError, match="branching") as bad:
        make("mechanism", "hh", domain(16), eps=1.0, branching=1)
    assert "\n" not in str(bad.value)
    with pytest.raises(ParameterError, match="not a power of the branching factor 4") as bad:
        make("mechanism", "hh", domain(32), eps=1.0, branching=4)
    assert "\n" not in str(bad.value) and "domain" in str(bad.value)
    with pytest.raises(ParameterError, match="not inside the domain"):
        check_range(5, 70, 64)
    with pytest.raises(ParameterError, match="quantiles"):
        make("metric", "quantile-error", quantiles=[0.5, 1.0])(np.ones(4) / 4, np.ones(4) / 4, domain(4))


SCENARIO = """name = "bad"
seed = 1
users = 1000
repetitions = 1
estimators = ["range-ci"]
metrics = ["range-mse"]

[domain]
kind = "integers"
low = 0
high = {high}

[dataset]
name = "uniform"

[cohorts.everyone]
share = 1
reports = [{report}]
"""


@pytest.mark.parametrize(
    ("high", "report", "expected"),
    [
        (15, '{ mechanism = "hh", eps = 1.0, branching = 1 }', "branching"),
        (31, '{ mechanism = "hh", eps = 1.0, branching = 4 }', "power of the branching factor"),
        (15, '{ mechanism = "krr", eps = 1.0 }', "hh or haar-hrr"),
    ],
)
def test_bad_range_scenarios_exit_2_in_one_line(high, report, expected, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(SCENARIO.format(high=high, report=report))
    out = tmp_path / "out.nc"
    result = CliRunner().invoke(app, ["run", str(path), "-o", str(out), "--executor", "serial"])
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and expected in message, message
    assert not out.exists()


def test_every_report_of_a_small_tree_is_listed_once():
    """The enumeration the tests use covers the whole output space exactly (a guard on the guards)."""
    mech = make("mechanism", "hh", domain(8), eps=1.0, branching=2)
    assert len({tuple(r) for r in all_reports(mech)}) == 2 + 4 + 8
    haar = make("mechanism", "haar-hrr", domain(8), eps=1.0)
    assert len(all_reports(haar)) == sum(2 * (1 << (lv - 1)) for lv in range(1, 4))
    assert list(itertools.islice(map(tuple, all_reports(haar)), 2)) == [(1, 0, 0), (1, 0, 1)]
