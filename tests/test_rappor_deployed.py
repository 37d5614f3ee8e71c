"""RAPPOR as deployed: the per-bit likelihood against the sum over every permanent filter, the sampler
against that law, the paper's privacy levels, the unbiased estimate and the refusals.

The references below are computed from the definitions (Erlingsson et al. 2014, Sec. 3), not from
the plugin's factorization: P(report | x) = P(cohort) sum_{B'} P(B' | B(c, x)) prod_t P(S_t | B').
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from scipy.stats import chisquare

from ldpsim import Integers, ParameterError
from ldpsim.testing import check_mechanism


def mech(k: int = 4, **params):
    return make("mechanism", "rappor-deployed", Integers(low=0, high=k - 1), **params)


def all_reports(m, tau: int) -> np.ndarray:
    """Every report sequence of a small mechanism: (cohort, word) per round, the cohort repeated."""
    rows = []
    for c in range(m.cohorts):
        for words in itertools.product(range(1 << m.bits), repeat=tau):
            rows.append([v for w in words for v in (c, w)])
    return np.array(rows, dtype=np.int64)


def brute(m, reports: np.ndarray) -> np.ndarray:
    """(D, k) P(report | x) summed over every permanent filter B'."""
    bits, f, p, q = m.bits, m.f, m.p, m.q
    out = np.zeros((reports.shape[0], m.domain.size))
    for d, row in enumerate(reports):
        c = row[0]
        rounds = [[(int(w) >> j) & 1 for j in range(bits)] for w in row[1::2]]
        for x in range(m.domain.size):
            bloom = m.bloom[c, x]
            total = 0.0
            for perm in itertools.product([0, 1], repeat=bits):
                a1 = math.prod((1 - f / 2) if perm[j] == bloom[j] else f / 2 for j in range(bits))
                a2 = math.prod(
                    (q if perm[j] else p) if s[j] else (1 - q if perm[j] else 1 - p)
                    for s in rounds
                    for j in range(bits)
                )
                total += a1 * a2
            out[d, x] = total / m.cohorts
    return out


@pytest.mark.parametrize(
    ("k", "params"),
    [
        (4, dict(bits=3, hashes=2, cohorts=2, rounds=2)),
        (5, dict(bits=4, hashes=3, cohorts=1, rounds=1, f=0.3, p=0.2, q=0.9)),
        (3, dict(bits=2, hashes=1, cohorts=3, rounds=3, f=0.8, p=0.7, q=0.1)),
        (3, dict(bits=1, hashes=1, cohorts=2, rounds=2)),
    ],
)
def test_likelihood_is_the_sum_over_permanent_filters(k, params):
    m = mech(k, **params)
    reports = all_reports(m, m.rounds)
    want = brute(m, reports)
    assert np.allclose(np.exp(m.log_likelihood(reports)), want, rtol=1e-10, atol=0)
    assert np.allclose(want.sum(axis=0), 1.0)  # the enumeration is every report
    check_mechanism(m)


def test_sampler_follows_the_two_stage_law():
    """Chi-square of 200,000 reports of each value against the brute-force law; false alarm 1e-3 per value."""
    m = mech(3, bits=3, hashes=2, cohorts=2, rounds=2, f=0.4, p=0.3, q=0.8)
    reports = all_reports(m, 2)
    law = brute(m, reports)
    index = {tuple(r): i for i, r in enumerate(reports)}
    n = 200_000
    for x in range(3):
        drawn = m.sample(np.full(n, x), np.random.default_rng(np.random.SeedSequence([2014, x])))
        _, seen = np.unique(drawn, axis=0, return_counts=True)
        observed = np.zeros(len(reports))
        observed[[index[tuple(r)] for r in np.unique(drawn, axis=0)]] = seen
        assert chisquare(observed, n * law[:, x]).pvalue > 1e-3


def test_privacy_levels_are_the_papers():
    # The paper's Table 1 setting: h = 2, f = 0.5, p = 0.5, q = 0.75: eps_inf = 4 ln 3, eps_1 = 1.0743
    m = mech(10, bits=16, hashes=2, f=0.5, p=0.5, q=0.75, rounds=5)
    levels = m.privacy_over_time
    assert levels.eps_inf == pytest.approx(4 * math.log(3))
    assert levels.eps_1 == pytest.approx(1.0743, abs=1e-4)
    assert levels.eps_1 < levels.eps_tau < levels.eps_inf
    assert mech(10, bits=16, rounds=1).privacy_over_time.eps_tau == pytest.approx(levels.eps_1)
    assert mech(10, bits=16, rounds=400).privacy_over_time.eps_tau == pytest.approx(levels.eps_inf, rel=1e-6)


def test_eps_tau_bounds_the_exact_level_of_disjoint_filters():
    """With one hash and a value per bit the filters are disjoint: the enumerated level equals the bound."""
    m = mech(2, bits=2, hashes=1, cohorts=1, rounds=2, f=0.4, p=0.3, q=0.8, hash_seed=1)
    if m.bloom[0, 0].tolist() == m.bloom[0, 1].tolist():
        pytest.skip("the seed's hashes collide")
    log_p = np.log(brute(m, all_reports(m, 2)))
    exact = float(np.max(np.abs(log_p[:, 0] - log_p[:, 1])))
    assert exact == pytest.approx(m.privacy_over_time.eps_tau)


def test_unbiased_estimate_and_round_channel():
    m = mech(6, bits=16, hashes=2, cohorts=4, rounds=3)
    theta = np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    n = 200_000
    values = np.random.default_rng(np.random.SeedSequence(7)).choice(6, size=n, p=theta)
    reports = m.sample(values, np.random.default_rng(np.random.SeedSequence(8)))
    distinct, counts = np.unique(reports, axis=0, return_counts=True)
    estimate = m.unbiased_estimate(distinct, counts)
    assert np.abs(estimate - theta).max() < 0.02  # standard error about 0.004
    channel = m.round_channel(2)
    assert channel.rounds == 1 and channel.report_width == m.round_width
    assert mech(6, bits=2, hashes=1, cohorts=1).unbiased_estimate(distinct[:1, :2], counts[:1]) is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (dict(bits=0), "bits"),
        (dict(bits=4, hashes=5), "hashes"),
        (dict(f=0.0), "f"),
        (dict(f=1.0), "f"),
        (dict(p=-0.1), "p"),
        (dict(q=1.5), "q"),
        (dict(p=0.6, q=0.6), "q"),
    ],
)
def test_bad_parameters_are_refused_in_one_line(params, field):
    with pytest.raises(ParameterError) as info:
        mech(4, **params)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_the_longitudinal_scenario_runs_rappor_and_dbitflip():
    """Both run in the shipped sweep: whole-sequence MLE and the per-round baselines after every round."""
    from pathlib import Path

    import ldpsim

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "longitudinal.toml"
    ds = ldpsim.run_scenario(scenario, users=2000, repetitions=1)
    levels = ds["privacy_over_time"].sel(cohort="everyone")
    rappor = levels.sel(protocol="rappor-deployed").values
    assert rappor[0] == pytest.approx(1.0, abs=1e-6) and rappor[2] == pytest.approx(2.0, abs=1e-6)
    assert list(levels.sel(protocol="dbitflip").values) == [2.0, 2.0, 2.0]
    assert bool(np.isfinite(ds["tv"].sel(protocol=["rappor-deployed", "dbitflip"])).all())
