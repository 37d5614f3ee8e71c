"""CMS/HCMS channels over a candidate dictionary: rows against brute force, samplers, the dictionary decoder."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from ldpsim_plugins.estimators.sketch_dictionary import dictionary_heavy_hitters, dictionary_mle
from ldpsim_plugins.mechanisms import sketch_channels
from ldpsim_plugins.mechanisms.sketch_channels import (
    CMSLevel,
    HCMSLevel,
    SketchHashes,
    cms_reports,
    pack_bits,
    set_bits,
)
from scipy import stats

from ldpsim import Categorical, Likelihood, MemoryLimitError, Observations, ParameterError, gibu

#: every seeded chi-square test below rejects at this level: a false alarm once in 10^4 runs each
ALPHA = 1e-4


class TableFamily:
    """A hash family given by its table ``h_j(x) = table[j, x]`` (x a small integer)."""

    def __init__(self, table: np.ndarray, buckets: int):
        self.table = np.asarray(table, dtype=np.int64)
        self.hashes, self.buckets = self.table.shape[0], buckets

    def bucket(self, j: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(j, dtype=np.int64), np.asarray(x, dtype=np.int64)]


def balanced_family(d: int, m: int, candidates: int, rounds: int) -> TableFamily:
    """Candidates 0..c-1 hashed arbitrarily; the ``rounds * m`` non-candidates fill every bucket of every hash
    equally (``h_j(u) = (u + j) mod m``): the uniform-bucket row of "other" is then exactly their mean."""
    rng = np.random.default_rng(5)
    table = np.empty((d, candidates + rounds * m), dtype=np.int64)
    table[:, :candidates] = rng.integers(0, m, size=(d, candidates))
    u = np.arange(rounds * m)
    table[:, candidates:] = (u[None, :] + np.arange(d)[:, None]) % m
    return TableFamily(table, m)


def cms_law(j: int, bits: tuple[int, ...], bucket: int, eps: float, d: int) -> float:
    """P(j, v | a value hashed to ``bucket`` by h_j), from the definition: every bit flipped w.p. f."""
    f = 1 / (math.exp(eps / 2) + 1)
    return math.prod((1 - f) if b == (i == bucket) else f for i, b in enumerate(bits)) / d


def hcms_law(coef: int, y: int, bucket: int, eps: float, d: int, m: int) -> float:
    p = math.exp(eps) / (math.exp(eps) + 1)
    return (p if y == bin(coef & bucket).count("1") % 2 else 1 - p) / (d * m)


def all_cms_reports(d: int, m: int) -> tuple[np.ndarray, list[tuple[int, tuple[int, ...]]]]:
    outs = [(j, bits) for j in range(d) for bits in itertools.product((0, 1), repeat=m)]
    packed = pack_bits(np.array([b for _, b in outs], dtype=bool))
    return np.concatenate([np.array([[j] for j, _ in outs]), packed], axis=1), outs


def all_hcms_reports(d: int, m: int) -> np.ndarray:
    return np.array([(j, coef, y) for j in range(d) for coef in range(m) for y in (0, 1)], dtype=np.int64)


@pytest.mark.parametrize("oracle", ["cms", "hcms"])
def test_rows_equal_brute_force(oracle: str) -> None:
    d, m, c, rounds, eps = 3, 4, 3, 2, 1.3
    family = balanced_family(d, m, c, rounds)
    candidates = np.arange(c, dtype=np.uint64)
    others = range(c, c + rounds * m)
    if oracle == "cms":
        channel: CMSLevel | HCMSLevel = CMSLevel(candidates, eps, family)
        reports, outs = all_cms_reports(d, m)

        def law(i: int, x: int) -> float:
            j, bits = outs[i]
            return cms_law(j, bits, int(family.table[j, x]), eps, d)
    else:
        channel = HCMSLevel(candidates, eps, family)
        reports = all_hcms_reports(d, m)

        def law(i: int, x: int) -> float:
            j, coef, y = (int(v) for v in reports[i])
            return hcms_law(coef, y, int(family.table[j, x]), eps, d, m)

    brute = np.array(
        [[law(i, x) for x in range(c)] + [np.mean([law(i, u) for u in others])] for i in range(reports.shape[0])]
    )
    assert np.allclose(brute.sum(axis=0), 1.0)  # every row of the channel is a law over the reports
    assert np.allclose(channel.likelihood(reports), brute, rtol=1e-12, atol=0)
    shift, op = channel.structured_likelihood(reports)
    assert np.allclose(np.exp(shift)[:, None] * (op @ np.eye(c + 1)), brute, rtol=1e-12, atol=0)
    w = np.random.default_rng(1).random(reports.shape[0])
    # rtol 1e-6: HCMS's dense path multiplies in float32
    assert np.allclose(op.T @ w, (brute / np.exp(shift)[:, None]).T @ w, rtol=1e-6)
    # a complete dictionary: the candidates' rows unchanged, "other" impossible
    whole = type(channel)(candidates, eps, family, complete=True)
    assert np.allclose(whole.likelihood(reports), np.c_[brute[:, :c], np.zeros(reports.shape[0])], rtol=1e-12, atol=0)
    shift, op = whole.structured_likelihood(reports)
    assert np.allclose(np.exp(shift)[:, None] * (op @ np.eye(c + 1)), whole.likelihood(reports), rtol=1e-12, atol=0)


@pytest.mark.parametrize("oracle", ["cms", "hcms"])
def test_sampler_follows_law(oracle: str) -> None:
    family = SketchHashes(2, 4, seed=7)
    candidates = np.array([11, 2**40 + 3], dtype=np.uint64)
    eps = 1.5
    cls = CMSLevel if oracle == "cms" else HCMSLevel
    channel = cls(candidates, eps, family)
    reports = all_cms_reports(2, 4)[0] if oracle == "cms" else all_hcms_reports(2, 4)
    law = channel.likelihood(reports)  # (outputs, c + 1), columns sum to 1 (checked above on brute force)
    rng = np.random.default_rng(11)
    n = 40_000
    for value in range(3):  # both candidates, then "other" (random keys: a uniform bucket per hash)
        drawn = channel.sample(np.full(n, value), rng)
        index = {tuple(r): i for i, r in enumerate(reports.tolist())}
        observed = np.bincount([index[tuple(r)] for r in drawn.tolist()], minlength=reports.shape[0])
        assert stats.chisquare(observed, n * law[:, value]).pvalue > ALPHA


def test_structured_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    family = SketchHashes(64, 32, seed=1)
    candidates = rng.integers(0, 2**32, size=40, dtype=np.uint64)
    theta = rng.dirichlet(np.ones(41))
    w = rng.random(3000)
    for cls in (CMSLevel, HCMSLevel):
        channel = cls(candidates, 2.0, family)
        reports = channel.sample(rng.integers(0, 41, size=3000), rng)
        dense = channel.likelihood(reports)
        shift, op = channel.structured_likelihood(reports)
        assert np.allclose(np.exp(shift) * (op @ theta), dense @ theta, rtol=1e-6)  # float32 for HCMS
        assert np.allclose(op.T @ w, (dense / np.exp(shift)[:, None]).T @ w, rtol=1e-6)
        if cls is HCMSLevel:  # the transform path as well as the dense float32 one
            monkeypatch.setattr(sketch_channels, "DENSE_FACTOR", 0.0)
            shift, op = channel.structured_likelihood(reports)
            assert np.allclose(np.exp(shift) * (op @ theta), dense @ theta, rtol=1e-9)
            assert np.allclose(op.T @ w, (dense / np.exp(shift)[:, None]).T @ w, rtol=1e-9)
        # hit scores of any values: the compiled loop and numpy's blocks give the candidates' columns
        hits = (dense / np.exp(shift)[:, None] - channel.r) / (1 - channel.r)
        for pairs in (1, 1 << 62):
            monkeypatch.setattr(sketch_channels, "KERNEL_MIN_PAIRS", pairs)
            assert np.allclose(channel.hit_scores(candidates, reports, w[None, :])[0], w @ hits[:, :40])


def test_cms_sampler_packs_like_registered_cms() -> None:
    # the Bernoulli-process flips: share of set bits per report is 1 + (m - 1) f on average (5 sd, < 10^-6)
    family = SketchHashes(8, 100, seed=2)
    rng = np.random.default_rng(4)
    n, eps = 20_000, 2.0
    reports = cms_reports(np.zeros(n, dtype=np.uint64), family, eps, rng)
    rows, cols = set_bits(reports[:, 1:], 100)
    f = 1 / (math.exp(eps / 2) + 1)
    mean, sd = 1 - f + 99 * f, math.sqrt((99 * f * (1 - f) + f * (1 - f)) / n)
    assert abs(rows.size / n - mean) < 5 * sd
    hit = family.bucket(reports[:, 0], np.zeros(n, dtype=np.uint64))
    set_at_hit = np.zeros(n, dtype=bool)
    set_at_hit[rows[cols == hit[rows]]] = True
    assert abs(set_at_hit.mean() - (1 - f)) < 5 * math.sqrt(f * (1 - f) / n)


def test_dictionary_matches_full_domain_mle() -> None:
    """On an enumerable domain, the dictionary path over the registered ``cms``'s own reports and hash table
    finds the full-domain MLE's items (and, with every value a candidate, its estimate)."""
    k, eps = 32, 4.0
    domain = Categorical(values=[str(i) for i in range(k)])
    cms = make("mechanism", "cms", domain, eps=eps, hashes=16, buckets=16, family_seed=3)
    truth = np.r_[0.3, 0.2, 0.12, 0.08, np.full(k - 4, 0.3 / (k - 4))]
    rng = np.random.default_rng(9)
    values = rng.choice(k, size=10_000, p=truth)
    reports = cms.sample(values, rng)
    full = gibu(Likelihood(Observations.from_reports(domain, [(cms, reports)])), stop="kkt", tol=1e-7).theta
    family = TableFamily(cms.table, 16)
    uniq, counts = np.unique(reports, axis=0, return_counts=True)
    every = dictionary_mle("cms", np.arange(k, dtype=np.uint64), eps, family, uniq, counts, tol=1e-7, complete=True)
    assert np.allclose(every.frequency, full, atol=1e-4) and every.other == 0
    top = np.argsort(-full)[:4]
    found = dictionary_heavy_hitters("cms", np.arange(12, dtype=np.uint64), eps, family, reports, k=4)
    assert set(found.items.tolist()) == set(top.tolist())


def test_working_set_certifies_the_whole_dictionary() -> None:
    family = SketchHashes(128, 64, seed=4)
    rng = np.random.default_rng(2)
    dictionary = rng.choice(2**32, size=300, replace=False).astype(np.uint64)
    truth = np.r_[0.25, 0.15, 0.1, np.full(297, 0.5 / 297)]
    values = dictionary[rng.choice(300, size=15_000, p=truth)]
    reports, counts = np.unique(cms_reports(values, family, 6.0, rng), axis=0, return_counts=True)
    small = dictionary_mle("cms", dictionary, 6.0, family, reports, counts, work=16, bounds=False)
    whole = dictionary_mle("cms", dictionary, 6.0, family, reports, counts, work=300, bounds=False)
    assert small.certified and small.rounds > 1  # 16 candidates cannot hold the MLE's mass: the set grew
    assert np.allclose(small.frequency, whole.frequency, atol=2e-3)
    assert set(np.argsort(-small.frequency)[:3].tolist()) == {0, 1, 2}


def test_bad_input_one_line() -> None:
    family = SketchHashes(65536, 1024, seed=0)
    rng = np.random.default_rng(0)
    reports = cms_reports(np.zeros(20_000, dtype=np.uint64), family, 8.0, rng)
    with pytest.raises(MemoryLimitError) as err:  # ~17,000 used hashes x 2^20 candidates of bucket cells
        CMSLevel(np.arange(1 << 20, dtype=np.uint64), 8.0, family).structured_likelihood(reports)
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match="oracle"):
        dictionary_mle("rappor", np.arange(4, dtype=np.uint64), 1.0, family, reports, np.ones(20_000))
    with pytest.raises(ParameterError, match="buckets"):
        HCMSLevel(np.arange(4, dtype=np.uint64), 1.0, SketchHashes(4, 24))
    with pytest.raises(ParameterError, match="hashes"):
        SketchHashes(0, 8)
