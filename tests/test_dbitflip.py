"""dBitFlipPM: the likelihood against the definition summed over the sampled buckets, the sampler
against that law, its levels, the unbiased estimate and the refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from scipy.stats import chisquare

from ldpsim import EstimationError, Integers, ParameterError
from ldpsim.testing import check_mechanism


def mech(k: int = 4, **params):
    return make("mechanism", "dbitflip", Integers(low=0, high=k - 1), **params)


def all_reports(m) -> np.ndarray:
    rows = []
    for chosen in itertools.combinations(range(m.buckets), m.d):
        for bits in itertools.product([0, 1], repeat=m.d):
            rows.append(list(chosen) + list(bits))
    return np.tile(np.array(rows, dtype=np.int64), m.rounds)


def brute(m, reports: np.ndarray) -> np.ndarray:
    """(D, k) P(report | x) from the definition: a uniform d-subset, each bit [x's bucket] flipped."""
    k, b, d = m.domain.size, m.buckets, m.d
    flip = 1 / (math.exp(m.eps / 2) + 1)
    out = np.zeros((reports.shape[0], k))
    for r, row in enumerate(reports):
        chosen, bits = row[:d], row[d : 2 * d]
        for x in range(k):
            bucket = math.floor(x * b / k)
            out[r, x] = math.prod(flip if bit != (j == bucket) else 1 - flip for j, bit in zip(chosen, bits))
            out[r, x] /= math.comb(b, d)
    return out


@pytest.mark.parametrize(
    ("k", "params"),
    [
        (4, dict(eps=1.0, d=1, rounds=1)),
        (5, dict(eps=2.0, buckets=3, d=2, rounds=3)),
        (6, dict(eps=0.7, buckets=6, d=6, rounds=2)),
        (7, dict(eps=3.0, buckets=4, d=3, rounds=1)),
    ],
)
def test_likelihood_is_the_definition(k, params):
    m = mech(k, **params)
    reports = all_reports(m)
    want = brute(m, reports)
    assert np.allclose(want.sum(axis=0), 1.0)
    assert np.allclose(np.exp(m.log_likelihood(reports)), want, rtol=1e-12, atol=0)
    check_mechanism(m)


def test_sampler_follows_the_law_and_memoizes():
    """Chi-square of 100,000 responses of each value; false alarm 1e-3 per value."""
    m = mech(5, eps=1.5, buckets=4, d=2, rounds=3)
    reports = all_reports(m)
    law = brute(m, reports)
    index = {tuple(r): i for i, r in enumerate(reports)}
    n = 100_000
    for x in range(5):
        drawn = m.sample(np.full(n, x), np.random.default_rng(np.random.SeedSequence([2017, x])))
        assert np.all(drawn[:, :4] == drawn[:, 4:8]) and np.all(drawn[:, :4] == drawn[:, 8:])
        rows, seen = np.unique(drawn, axis=0, return_counts=True)
        observed = np.zeros(len(reports))
        observed[[index[tuple(r)] for r in rows]] = seen
        assert chisquare(observed, n * law[:, x]).pvalue > 1e-3


def test_levels_and_a_changed_response():
    m = mech(8, eps=2.0, d=2, rounds=5)
    levels = m.privacy_over_time
    assert levels.eps_1 == levels.eps_tau == levels.eps_inf == m.privacy.eps == 2.0
    exact = np.log(brute(m, all_reports(m)))
    assert float(np.max(exact.max(axis=1) - exact.min(axis=1))) == pytest.approx(2.0)  # d = 2 reaches it
    report = all_reports(m)[:1].copy()
    report[0, -1] ^= 1  # the last round's bit differs from the first's
    with pytest.raises(EstimationError):
        m.log_likelihood(report)


def test_unbiased_estimate():
    m = mech(6, eps=2.0, d=2, rounds=2)
    theta = np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    n = 200_000
    values = np.random.default_rng(np.random.SeedSequence(3)).choice(6, size=n, p=theta)
    reports = m.sample(values, np.random.default_rng(np.random.SeedSequence(4)))
    distinct, counts = np.unique(reports, axis=0, return_counts=True)
    assert np.abs(m.unbiased_estimate(distinct, counts) - theta).max() < 0.02  # standard error about 0.005
    assert m.round_channel(1).rounds == 1
    coarse = mech(6, eps=2.0, buckets=3)
    assert coarse.unbiased_estimate(np.array([[0, 1]]), np.array([1])) is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (dict(eps=1.0, buckets=5), "buckets"),
        (dict(eps=1.0, buckets=3, d=4), "d"),
        (dict(eps=1.0, d=0), "d"),
        (dict(eps=1.0, rounds=0), "rounds"),
        (dict(eps=-1.0), "eps"),
    ],
)
def test_bad_parameters_are_refused_in_one_line(params, field):
    with pytest.raises(ParameterError) as info:
        mech(4, **params)
    assert info.value.field == field
    assert "\n" not in str(info.value)
