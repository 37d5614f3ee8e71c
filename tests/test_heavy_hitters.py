"""Heavy hitters over open domains: samplers, lumped level channels, the open-domain path, bad input, metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldpsim_plugins.datasets.open_domain import csv_strings, scatter, zipf
from ldpsim_plugins.estimators.heavy_hitters import level_mle, pem_heavy_hitters, prune, treehist_heavy_hitters
from ldpsim_plugins.mechanisms.heavy_hitters import (
    MAX_CANDIDATES,
    PEM,
    HadamardLevel,
    OLHLevel,
    TreeHist,
    check_candidates,
    olh_bucket,
    parity,
)
from scipy import stats

from ldpsim import (
    Likelihood,
    MemoryLimitError,
    Observations,
    OpenDomain,
    ParameterError,
    gibu,
    hash_string,
    newton_mle,
    top_k_score,
)

#: every seeded chi-square / binomial test below rejects at this level: a false alarm once in 10^4 runs each
ALPHA = 1e-4


# ---------------------------------------------------------------- open domain and data
def test_open_domain_prefixes_and_hash() -> None:
    d = OpenDomain(bits=32)
    v = np.array([0xDEADBEEF, 0], dtype=np.uint64)
    assert d.prefixes(v, 8).tolist() == [0xDE, 0]
    assert d.prefixes(v, 32).tolist() == v.tolist()
    # BLAKE2b-64 of b"abc", big-endian, independent of any seed (the hashlib digest is the spec)
    import hashlib

    assert hash_string("abc") == int(hashlib.blake2b(b"abc", digest_size=8).hexdigest(), 16)
    ids, names = d.hash_strings(["x", "y", "x"])
    assert ids[0] == ids[2] != ids[1] and names[int(ids[1])] == "y"
    assert int(ids.max()) < 2**32


def test_zipf_ids_scattered_and_distinct() -> None:
    d = OpenDomain(bits=32)
    data = zipf(d, 50_000, np.random.default_rng(0), exponent=1.2, support=1000)
    assert np.unique(data.items).size == 1000
    assert np.isclose(data.frequency.sum(), 1.0)
    assert not np.isin(data.top(10), np.arange(1000, dtype=np.uint64)).any()  # not the ranks themselves
    # the empirical share of the top id is the law's within 5 sd (false alarm < 10^-6)
    share = np.mean(data.values == data.items[0])
    sd = math.sqrt(data.frequency[0] * (1 - data.frequency[0]) / 50_000)
    assert abs(share - data.frequency[0]) < 5 * sd
    assert np.array_equal(scatter(np.arange(1000), 32), data.items)  # fixed ids, whatever the seed


def test_csv_strings(tmp_path) -> None:
    path = tmp_path / "words.csv"
    path.write_text("word,n\nhello,1\nworld,2\nhello,3\nhi,4\n")
    data = csv_strings(OpenDomain(bits=64), path, "word")
    assert data.values.size == 4 and data.names is not None
    assert data.names[int(data.items[0])] == "hello" and data.frequency[0] == 0.5
    assert int(data.items[0]) == hash_string("hello")


# ---------------------------------------------------------------- samplers follow their law
def test_pem_sampler_follows_olh_law() -> None:
    d = OpenDomain(bits=16)
    pem = PEM(d, eps=1.5, k=4, step=2, hash_pool=64)
    value = np.uint64(0xBEEF)
    n = 60_000
    groups = pem.sample(np.full(n, value), np.random.default_rng(3))
    # groups: uniform over the G groups (chi-square)
    sizes = np.array([c.sum() for _, c in groups])
    assert stats.chisquare(sizes).pvalue > ALPHA
    g = pem.g
    p = math.exp(1.5) / (math.exp(1.5) + g - 1)
    offsets = np.zeros(g)
    for i, (reports, counts) in enumerate(groups):
        prefix = d.prefixes(np.array([value]), pem.lengths()[i])
        true = olh_bucket(prefix, reports[:, 0].astype(np.uint64), g)
        np.add.at(offsets, (reports[:, 1] - true) % g, counts)
    expected = n * np.array([p] + [(1 - p) / (g - 1)] * (g - 1))
    assert stats.chisquare(offsets, expected).pvalue > ALPHA


def test_treehist_sampler_follows_hadamard_law() -> None:
    d = OpenDomain(bits=8)
    th = TreeHist(d, eps=2.0, k=4, step=2)
    value = np.uint64(0b10110110)
    n = 40_000
    levels, words = th.sample(np.full(n, value), np.random.default_rng(4))
    assert stats.chisquare([lv.shape[0] for lv in levels]).pvalue > ALPHA
    p = math.exp(1.0) / (math.exp(1.0) + 1)  # eps/2 per report
    for reports, length in [*zip(levels, th.lengths()), (words, 8)]:
        j = reports[:, 0].astype(np.uint64)
        prefix = d.prefixes(np.array([value]), length)
        agree = int((parity(prefix, j) == reports[:, 1]).sum())
        assert stats.binomtest(agree, reports.shape[0], p).pvalue > ALPHA
        assert stats.chisquare(np.bincount(j.astype(np.int64), minlength=2**length)).pvalue > ALPHA


@pytest.mark.parametrize("channel", ["olh", "hadamard"])
def test_level_channel_sampler_follows_its_likelihood(channel) -> None:
    """Each value's reports (candidates and "other") against the channel's own law, over every report."""
    cands = np.array([2, 5, 11], dtype=np.uint64)
    if channel == "olh":
        level: OLHLevel | HadamardLevel = OLHLevel(cands, 4, 1.0, hash_pool=3)
        every = np.array([[s, y] for s in range(3) for y in range(level.g)])
    else:
        level = HadamardLevel(cands, 4, 1.0)
        every = np.array([[j, b] for j in range(16) for b in range(2)])
    law = np.exp(level.log_likelihood(every))  # (reports, 4 values)
    np.testing.assert_allclose(law.sum(axis=0), 1.0)
    rng = np.random.default_rng(6)
    for x in range(4):
        reports = level.sample(np.full(20_000, x), rng)
        width = int(every[:, 1].max()) + 1  # every report is row j * width + y of ``every``
        counts = np.bincount(reports[:, 0] * width + reports[:, 1], minlength=every.shape[0])
        assert stats.chisquare(counts, 20_000 * law[:, x]).pvalue > ALPHA


# ---------------------------------------------------------------- lumped channels against brute force
def test_hadamard_lumped_channel_equals_brute_force_on_6_bits() -> None:
    eps, length = 1.3, 6
    cands = np.array([3, 17, 40, 41, 63], dtype=np.uint64)
    level = HadamardLevel(cands, length, eps)
    p = math.exp(eps) / (math.exp(eps) + 1)
    j, b = np.meshgrid(np.arange(64), [0, 1], indexing="ij")
    reports = np.stack([j.ravel(), b.ravel()], axis=1)
    # the exact channel of every one of the 64 prefixes, by enumeration of the Hadamard matrix
    u = np.arange(64)
    had = np.array([[bin(x & jj).count("1") % 2 for x in u] for jj in reports[:, 0]])
    exact = np.where(had == reports[:, 1:2], p, 1 - p) / 64  # (128 reports, 64 prefixes)
    others = ~np.isin(u, cands)
    lumped = np.concatenate([exact[:, cands.astype(int)], exact[:, others].mean(axis=1, keepdims=True)], axis=1)
    got = np.exp(level.log_likelihood(reports))
    np.testing.assert_allclose(got, lumped, rtol=1e-12)
    np.testing.assert_allclose(got.sum(axis=0), 1.0)  # a law over the reports for every value, "other" too
    shift, op = level.structured_likelihood(reports)
    np.testing.assert_allclose(np.exp(shift)[:, None] * (op @ np.eye(6)), lumped, rtol=1e-12)


def test_olh_lumped_channel_is_uniform_over_non_candidates_on_6_bits() -> None:
    """P(y | seed, other) = 1/g: over the seeds, the mean channel of the non-candidate prefixes is 1/g.

    Exact in expectation over the hash (a random oracle); checked on 6 bits by enumerating every prefix
    for 4,000 seeds: the mean over seeds of the lumped entry is 1/g within 5 standard errors."""
    eps, length, g_pool = 2.0, 6, 4000
    cands = np.array([1, 2, 30, 50], dtype=np.uint64)
    level = OLHLevel(cands, length, eps, hash_pool=g_pool)
    g, p, q = level.g, level.p, level.q
    seeds = np.arange(g_pool, dtype=np.uint64)
    others = np.setdiff1d(np.arange(64, dtype=np.uint64), cands)
    buckets = olh_bucket(others[None, :], seeds[:, None], g)  # (seeds, non-candidates)
    for y in range(g):
        mean_channel = np.where(buckets == y, p, q).mean(axis=1)  # the exact average per seed
        se = mean_channel.std() / math.sqrt(g_pool)
        assert abs(mean_channel.mean() - 1 / g) < 5 * se + 1e-12
    # and the level channel says exactly that, with the candidates' rows exact
    reports = np.array([[s, y] for s in range(5) for y in range(g)])
    got = np.exp(level.log_likelihood(reports)) * g_pool
    np.testing.assert_allclose(got[:, -1], 1 / g)
    hit = olh_bucket(cands[None, :], reports[:, :1].astype(np.uint64), g) == reports[:, 1:2]
    np.testing.assert_allclose(got[:, :-1], np.where(hit, p, q))
    shift, op = level.structured_likelihood(reports)
    np.testing.assert_allclose(np.exp(shift)[:, None] * (op @ np.eye(5)) * g_pool, got, rtol=1e-12)


def test_complete_level_has_no_other_mass() -> None:
    """When the candidates are every prefix, "other" holds nothing and the level MLE is the full-domain one."""
    level = OLHLevel(np.arange(16, dtype=np.uint64), 4, 1.0, hash_pool=16)
    rng = np.random.default_rng(5)
    values = rng.choice(16, size=5000, p=np.arange(1, 17) / 136)
    reports = level.sample(values, rng)
    uniq, counts = np.unique(reports, axis=0, return_counts=True)
    theta, upper = level_mle(level, uniq, counts)
    assert theta[-1] < 1e-6
    assert np.all(upper >= theta - 1e-12)


# ---------------------------------------------------------------- the open-domain path
def test_open_domain_path_finds_the_full_domain_mle_items() -> None:
    """On 8 bits (enumerable), PEM's level-by-level MLE finds the top-4 of the MLE over all 256 values
    from the same last-group reports (the full-domain channel: candidates = every value, nothing lumped)."""
    d = OpenDomain(bits=8)
    rng = np.random.default_rng(11)
    data = zipf(d, 150_000, rng, exponent=1.3, support=256)
    pem = PEM(d, eps=3.0, k=4, step=2, start_bits=2, hash_pool=256)
    groups = pem.sample(data.values, rng)
    found = pem_heavy_hitters(pem, groups)
    full = pem.level(pem.groups - 1, np.arange(256, dtype=np.uint64))
    obs = Observations.from_counts(full.domain, full, *groups[-1])
    theta = gibu(Likelihood(obs), stop="kkt", accelerate="squarem").theta
    assert set(found.items.tolist()) == set(np.argsort(-theta[:-1])[:4].tolist())
    assert set(found.items.tolist()) == set(data.top(4).tolist())
    np.testing.assert_allclose(np.sort(found.frequency), np.sort(theta[:-1])[-4:], atol=0.01)
    # the confidence-bound rule keeps every item truly above its threshold, with bounds above the estimates
    ucb = pem_heavy_hitters(pem, groups, rule="ucb", threshold=0.03, cap=16)
    assert set(data.items[data.frequency >= 0.04].tolist()) <= set(ucb.items.tolist())
    assert np.all(ucb.upper >= ucb.frequency) and np.all(ucb.upper >= 0.03)
    nothing = pem_heavy_hitters(pem, groups, rule="ucb", threshold=0.99)  # no prefix that frequent: found none
    assert nothing.items.size == 0 and nothing.frequency.size == 0


def test_treehist_finds_the_heavy_items_on_12_bits() -> None:
    d = OpenDomain(bits=12)
    rng = np.random.default_rng(12)
    data = zipf(d, 50_000, rng, exponent=1.5, support=4096)
    th = TreeHist(d, eps=4.0, k=4, step=4)
    found = treehist_heavy_hitters(th, th.sample(data.values, rng))
    score = top_k_score(found.items, found.frequency, data.items, data.frequency, 3)
    assert score.recall == 1.0
    assert score.frequency_error < 0.02


def test_ucb_rule_keeps_what_reaches_the_threshold() -> None:
    freq = np.array([0.3, 0.01, 0.05, 0.0])
    upper = np.array([0.35, 0.06, 0.07, 0.04])
    assert prune(freq, upper, rule="topk", k=2, threshold=0.05, cap=10).tolist() == [0, 2]
    assert prune(freq, upper, rule="ucb", k=2, threshold=0.05, cap=10).tolist() == [0, 2, 1]
    assert prune(freq, upper, rule="ucb", k=2, threshold=0.05, cap=1).tolist() == [0]


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda d: PEM(d, 1.0, k=64, step=4), "step"),  # 32 - 6 = 26 bits: 4 does not divide them
        (lambda d: TreeHist(d, 1.0, step=5), "step"),
        (lambda d: PEM(d, 1.0, k=2**14, step=4, start_bits=8), "step"),  # 2^18 candidates per level
        (lambda d: PEM(d, 0.0), "eps"),
    ],
)
def test_bad_input_names_its_field(make, field) -> None:
    with pytest.raises(ParameterError) as err:
        make(OpenDomain(bits=32))
    assert err.value.field == field and "\n" not in str(err.value)


def test_bad_domain_and_values() -> None:
    with pytest.raises(ParameterError, match="bits"):
        OpenDomain(bits=65)
    with pytest.raises(ParameterError, match="2\\^8"):
        OpenDomain(bits=8).check(np.array([256]))
    assert MAX_CANDIDATES == 1 << 16
    with pytest.raises(MemoryLimitError, match="likelihood of a level"):  # before anything is allocated
        check_candidates(1000, 10**12)


# ---------------------------------------------------------------- metrics
def test_top_k_score_closed_forms() -> None:
    truth = np.array([10, 20, 30, 40], dtype=np.uint64)
    tf = np.array([0.4, 0.3, 0.2, 0.1])
    s = top_k_score(np.array([20, 10, 99], dtype=np.uint64), np.array([0.25, 0.5, 0.1]), truth, tf, 2)
    assert (s.precision, s.recall, s.f1) == (1.0, 1.0, 1.0)
    assert math.isclose(s.frequency_error, (0.1 + 0.05) / 2)
    s = top_k_score(np.array([99, 30], dtype=np.uint64), np.array([0.3, 0.2]), truth, tf, 2)
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    assert math.isclose(s.frequency_error, (0.3 + 0.0) / 2)
    s = top_k_score(np.array([10, 30], dtype=np.uint64), np.array([0.4, 0.2]), truth, tf, 2)
    assert (s.precision, s.recall, s.f1) == (0.5, 0.5, 0.5)


def test_a_flat_word_level_is_solved_by_newton_not_the_squarem_fallback() -> None:
    """TreeHist's words at eps/2: 2 x 10^5 distinct reports, every row 1 +- a small term. A single-precision
    sampled Hessian lost the small terms, Newton's steps failed where half the candidates have no users and the solver fell back to 5,313 SQUAREM passes
    (36 s); in double precision (a cheap formation for 65 values) Newton takes 20."""
    data = zipf(OpenDomain(bits=32), 200_000, np.random.default_rng(0), exponent=1.1, support=1 << 16)
    th = TreeHist(data.domain, 4.0, k=64)
    _, words = th.sample(data.values, np.random.default_rng(1))
    reports, counts = np.unique(words, axis=0, return_counts=True)
    strays = np.random.default_rng(2).integers(0, 2**32, 32, dtype=np.uint64)  # as a search finds: half at zero
    channel = th.words(np.concatenate([data.top(32), strays]))
    likelihood = Likelihood(Observations.from_counts(channel.domain, channel, reports, counts))
    fit = newton_mle(likelihood, tol=1e-6, warm_passes=0, max_iter=5000)
    assert fit.converged and fit.iterations <= 100
