"""Memoized longitudinal protocols: whole-sequence likelihoods, samplers, privacy over time, round hooks.

The references are computed here from the definitions, independently of ldpsim.model.memoized:
``P(y_1..y_tau | x) = sum_z A1(z | x) prod_t A2_t(y_t | z)`` summed naively over every permanent
response z (every permanent bit vector for the unary protocols).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpsim import Integers, Likelihood, MemoizedMechanism, Observations, ParameterError, gibu, ldp_level
from ldpsim.testing import check_mechanism

UNARY = ["l-sue", "l-oue", "l-osue", "l-soue"]
#: LOLOHA's optimal g at (eps_inf, eps_1) = (4, 1), (2, 1), (8, 2), (1, 0.5), from multi-freq-ldpy 0.2.5's L-OLH
LOLOHA_G = [3, 3, 8, 2]
PROTOCOLS = ["l-grr", *UNARY, "loloha"]


def line(k: int) -> Integers:
    return Integers(low=0, high=k - 1)


def krr_matrix(k: int, eps: float) -> np.ndarray:
    m = np.full((k, k), 1.0 / (k - 1 + math.exp(eps)))
    np.fill_diagonal(m, math.exp(eps) / (k - 1 + math.exp(eps)))
    return m


def brute_grr(a1: np.ndarray, a2s: list[np.ndarray], reports: np.ndarray) -> np.ndarray:
    """(D, k) P(sequence | x) by the sum over z, one round at a time."""
    out = np.zeros((reports.shape[0], a1.shape[0]))
    for d, seq in enumerate(reports):
        for z in range(a1.shape[1]):
            out[d] += a1[:, z] * np.prod([a2[z, y] for a2, y in zip(a2s, seq)])
    return out


def decode(word: int, k: int) -> list[int]:
    return [(word >> j) & 1 for j in range(k)]


def brute_unary(mech, reports: np.ndarray) -> np.ndarray:
    """(D, k) P(sequence | x) summed over every permanent bit vector (k <= 62: one word per round)."""
    k = mech.domain.size
    p1, q1 = mech.p1, mech.q1
    out = np.zeros((reports.shape[0], k))
    for d, seq in enumerate(reports):
        rounds = [decode(int(w), k) for w in seq]
        for z in itertools.product([0, 1], repeat=k):
            inst = 1.0
            for (p2, q2), bits in zip(mech.flips, rounds):
                for zj, yj in zip(z, bits):
                    pr = p2 if zj else q2
                    inst *= pr if yj else 1 - pr
            for x in range(k):
                perm = np.prod([(p1 if j == x else q1) if zj else 1 - (p1 if j == x else q1) for j, zj in enumerate(z)])
                out[d, x] += perm * inst
    return out


def sampled(mech, per_value: int = 30, seed: int = 1) -> np.ndarray:
    values = np.arange(mech.domain.size).repeat(per_value)
    return np.unique(mech.sample(values, np.random.default_rng(seed)), axis=0)


# ------------------------------------------------------------------ likelihoods
@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(2, 6),
    tau=st.integers(1, 5),
    eps_inf=st.floats(0.2, 6.0),
    frac=st.floats(0.1, 0.9),
    switch=st.booleans(),
)
def test_grr_structured_and_dense_equal_the_sum_over_z(k, tau, eps_inf, frac, switch):
    eps2 = [eps_inf * frac * (1 + (t % 2) * switch) for t in range(tau)]
    a1 = krr_matrix(k, eps_inf)
    stages = [make("mechanism", "krr", line(k), eps=e) for e in eps2]
    mech = MemoizedMechanism.compose(make("mechanism", "krr", line(k), eps=eps_inf), stages)
    reports = sampled(mech)
    expected = brute_grr(a1, [krr_matrix(k, e) for e in eps2], reports)
    assert np.allclose(np.exp(mech.log_likelihood(reports)), expected, rtol=1e-10, atol=0)
    shift, op = mech.structured_likelihood(reports)
    got = np.exp(shift)[:, None] * (op @ np.eye(k))
    assert np.allclose(got, expected, rtol=1e-10, atol=0)
    w = np.random.default_rng(0).random(reports.shape[0])
    assert np.allclose(np.exp(shift) * w @ (op @ np.eye(k)), op.T @ (np.exp(shift) * w) @ np.eye(k))


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(UNARY), k=st.integers(2, 4), tau=st.integers(1, 3), eps_inf=st.floats(0.5, 5.0))
def test_unary_likelihood_equals_the_sum_over_permanent_vectors(name, k, tau, eps_inf):
    mech = make("mechanism", name, line(k), eps_inf=eps_inf, eps_1=eps_inf / 3, rounds=tau)
    reports = sampled(mech, per_value=10)
    expected = brute_unary(mech, reports)
    assert np.allclose(np.exp(mech.log_likelihood(reports)), expected, rtol=1e-10, atol=0)
    shift, h = mech.structured_likelihood(reports)
    assert np.allclose(np.exp(shift)[:, None] * h, expected, rtol=1e-10, atol=0)


def test_dense_fallback_with_a_matrix_permanent_stage():
    # a permanent stage with 3 outputs on 4 values, then k-RR on the outputs: only the dense form applies
    rows = [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]]
    permanent = make("mechanism", "matrix", line(4), rows=rows)
    outputs = Integers(low=0, high=2)
    stages = [make("mechanism", "krr", outputs, eps=1.0), make("mechanism", "krr", outputs, eps=2.0)]
    mech = MemoizedMechanism.compose(permanent, stages)
    reports = np.array(list(itertools.product(range(3), repeat=2)))
    expected = brute_grr(np.array(rows), [krr_matrix(3, 1.0), krr_matrix(3, 2.0)], reports)
    assert np.allclose(np.exp(mech.log_likelihood(reports)), expected, rtol=1e-12)
    assert np.allclose(expected.sum(axis=0), 1.0)
    shift, op = mech.structured_likelihood(reports)  # k-RR instantaneous stages: structured through A1
    assert np.allclose(np.exp(shift)[:, None] * (op @ np.eye(4)), expected, rtol=1e-10)


def test_long_sequences_do_not_underflow():
    mech = make("mechanism", "l-grr", line(50), eps_inf=8.0, eps_1=4.0, rounds=400)
    reports = mech.sample(np.array([3, 7]), np.random.default_rng(0))
    log_p = mech.log_likelihood(reports)
    assert np.all(np.isfinite(log_p)) and log_p[0].argmax() == 3 and log_p[1].argmax() == 7
    shift, op = mech.structured_likelihood(reports)
    assert np.allclose(shift[:, None] + np.log(op @ np.eye(50)), log_p, rtol=1e-9)


# ----------------------------------------------------------------- contract, samplers
@pytest.mark.parametrize("name", PROTOCOLS)
def test_protocols_pass_the_mechanism_contract(name):
    # the sampler's chi-square test per value inside check_mechanism: false alarm 1e-4 at seed 0
    check_mechanism(make("mechanism", name, line(3), eps_inf=3.0, eps_1=1.0, rounds=2), samples=20_000)


def test_generic_memoized_passes_the_contract_with_switching_stages():
    mech = make(
        "mechanism", "memoized", line(3), eps_permanent=2.5, instantaneous=["krr", "krr"], eps_instantaneous=[1.0, 2.0]
    )
    assert mech.rounds == 2
    check_mechanism(mech, samples=20_000)


def test_sampler_follows_the_two_stage_law():
    # chi-square on whole sequences of 3 rounds, k = 3 (27 sequences), 60 000 users of value 1:
    # false-alarm rate 1e-3 at this fixed seed
    from scipy.stats import chisquare

    k, tau = 3, 3
    mech = make("mechanism", "l-grr", line(k), eps_inf=2.0, eps_1=0.7, rounds=tau)
    reports = mech.sample(np.full(60_000, 1), np.random.default_rng(12345))
    index = np.ravel_multi_index(tuple(reports.T), (k,) * tau)
    observed = np.bincount(index, minlength=k**tau)
    a2 = mech.instantaneous_stages[0].matrix
    sequences = np.array(list(itertools.product(range(k), repeat=tau)))
    expected = brute_grr(krr_matrix(k, 2.0), [a2] * tau, sequences)[:, 1] * 60_000
    assert chisquare(observed, expected).pvalue > 1e-3


# ------------------------------------------------------------------ privacy over time
@pytest.mark.parametrize("name", [p for p in PROTOCOLS if p != "loloha"])
def test_eps_tau_enumerated_equals_closed_form_and_grows_to_eps_inf(name):
    k = 3 if name == "l-grr" else 2
    last = 0.0
    for tau in range(1, 5):
        mech = make("mechanism", name, line(k), eps_inf=3.0, eps_1=1.0, rounds=tau)
        enumerated, closed = mech.eps_tau_enumerated(), mech.eps_tau_closed()
        assert enumerated is not None and closed is not None
        assert math.isclose(enumerated, closed, rel_tol=1e-9)
        assert last < closed < 3.0
        last = closed
    levels = make("mechanism", name, line(k), eps_inf=3.0, eps_1=1.0, rounds=1).privacy_over_time
    assert math.isclose(levels.eps_1, 1.0, rel_tol=1e-9) and math.isclose(levels.eps_tau, 1.0, rel_tol=1e-9)
    assert math.isclose(levels.eps_inf, 3.0, rel_tol=1e-9)
    far = make("mechanism", name, line(k), eps_inf=3.0, eps_1=1.0, rounds=400)
    assert far.privacy_over_time.method == "closed form" and far.privacy_over_time.eps_tau > 3.0 - 1e-3


def test_published_l_grr_is_more_private_than_its_eps_1():
    exact = make("mechanism", "l-grr", line(10), eps_inf=4.0, eps_1=1.0)
    published = make("mechanism", "l-grr", line(10), eps_inf=4.0, eps_1=1.0, published=True)
    assert math.isclose(exact.privacy_over_time.eps_1, 1.0, rel_tol=1e-9)
    assert math.isclose(published.privacy_over_time.eps_1, 0.9195739705935759, rel_tol=1e-9)
    assert math.isclose(published.instantaneous_p(), 0.23995684026661565, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("name", "p2", "q2"),  # multi-freq-ldpy 0.2.5's closed forms at eps_inf = 4, eps_1 = 1
    [
        ("l-sue", 0.6607934229066844, 0.3392065770933156),
        ("l-oue", 0.5, 0.14158355547029472),
        ("l-osue", 0.7396804649632878, 0.26031953503671224),
        ("l-soue", 0.5, 0.20751219154083256),
    ],
)
def test_unary_parameters_match_the_published_closed_forms(name, p2, q2):
    mech = make("mechanism", name, line(5), eps_inf=4.0, eps_1=1.0)
    assert np.allclose(mech.flips[0], (p2, q2), rtol=1e-9)


# ------------------------------------------------------------------------ round hooks
@pytest.mark.parametrize("name", PROTOCOLS)
def test_prefixes_and_round_channels(name):
    mech = make("mechanism", name, line(4), eps_inf=3.0, eps_1=1.0, rounds=3)
    reports = sampled(mech)
    for t in (1, 2):
        prefix = mech.prefix(t)
        cols = reports[:, : t * mech.round_width]
        assert prefix.rounds == t and prefix.report_width == cols.shape[1]
        # marginalizing the later rounds: P(first t | x) from the prefix equals the t-round likelihood
        assert np.all(np.isfinite(prefix.log_likelihood(cols)))
    assert mech.prefix(3) is mech
    assert mech.round_columns(2) == slice(2 * mech.round_width, 3 * mech.round_width)
    channel = mech.round_channel(0)
    one = mech.prefix(1).log_likelihood(reports[:, mech.round_columns(0)])
    assert np.allclose(channel.log_likelihood(reports[:, mech.round_columns(0)]), one)
    if channel.matrix is not None:
        assert np.allclose(channel.matrix.sum(axis=1), 1.0)
        assert math.isclose(ldp_level(np.log(channel.matrix).T), 1.0, rel_tol=1e-9)


def test_l_grr_round_channel_keeps_the_k_minus_2_term():
    k = 5
    mech = make("mechanism", "l-grr", line(k), eps_inf=3.0, eps_1=1.0)
    p1 = math.exp(3.0) / (math.exp(3.0) + k - 1)
    q1 = (1 - p1) / (k - 1)
    p2 = mech.instantaneous_p()
    q2 = (1 - p2) / (k - 1)
    m = mech.round_channel(0).matrix
    assert math.isclose(m[0, 0], p1 * p2 + (k - 1) * q1 * q2, rel_tol=1e-12)
    assert math.isclose(m[0, 1], q1 * p2 + p1 * q2 + (k - 2) * q1 * q2, rel_tol=1e-12)


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("l-grr", {"eps_inf": 1.0, "eps_1": 1.0}, "eps_1"),
        ("l-oue", {"eps_inf": 1.0, "eps_1": 2.0}, "eps_1"),
        ("l-grr", {"eps_inf": 2.0, "eps_1": 1.0, "rounds": 0}, "rounds"),
        ("loloha", {"eps_inf": 2.0, "eps_1": 1.0, "g": 1}, "g"),
        ("loloha", {"eps_inf": 2.0, "eps_1": 2.5}, "eps_1"),
        ("memoized", {"eps_permanent": 1.0, "eps_instantaneous": [1.0, 2.0], "rounds": 3}, "eps_instantaneous"),
    ],
)
def test_bad_input_names_the_field(name, params, field):
    with pytest.raises(ParameterError) as info:
        make("mechanism", name, line(4), **params)
    assert info.value.field == field and info.value.hint


def test_stage_outputs_must_match_inputs():
    permanent = make("mechanism", "krr", line(4), eps=1.0)
    with pytest.raises(ParameterError) as info:
        MemoizedMechanism.compose(permanent, [make("mechanism", "krr", line(3), eps=1.0)])
    assert info.value.field == "instantaneous"


# ---------------------------------------------------------------- estimation
def test_gibu_on_whole_sequences_is_the_mle_and_beats_per_round_inversion():
    k, tau, n = 8, 5, 40_000
    mech = make("mechanism", "l-grr", line(k), eps_inf=2.0, eps_1=0.5, rounds=tau)
    truth = np.arange(1, k + 1) / np.arange(1, k + 1).sum()
    values = np.random.default_rng(3).choice(k, size=n, p=truth)
    reports = mech.sample(values, np.random.default_rng(4))
    obs = Observations.from_reports(mech.domain, [(mech, reports)])
    result = gibu(Likelihood.of(obs), stop="kkt", tol=1e-8, max_iter=100_000)
    assert result.kkt <= 1e-8  # the KKT certificate: the MLE of the whole-sequence likelihood
    tv = 0.5 * np.abs(result.theta - truth).sum()
    # what the peers do: invert each round's composite channel, then average the rounds' estimates
    per_round = [
        np.bincount(reports[:, t], minlength=k) / n @ np.linalg.inv(mech.round_channel(t).matrix) for t in range(tau)
    ]
    tv_inv = 0.5 * np.abs(np.mean(per_round, axis=0) - truth).sum()
    assert tv < 0.05 and tv < tv_inv


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 400),
    width=st.integers(1, 12),
    high=st.sampled_from([2, 7, 100, 10**6, 2**40]),
    seed=st.integers(0, 2**32 - 1),
)
def test_grouping_wide_rows_matches_numpy_unique(rows, width, high, seed):
    # sequences of many rounds span more than 62 bits: grouped through several packed keys
    from ldpsim.estimation.observations import sum_equal_rows, unique_rows

    rng = np.random.default_rng(seed)
    reports = rng.integers(-high // 3, high, size=(rows, width))
    reports = reports[rng.integers(0, rows, size=rows)]  # repeats
    expected = np.unique(reports, axis=0, return_counts=True)
    got = unique_rows(reports)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    counts = rng.integers(1, 50, size=rows)
    uniq, inverse = np.unique(reports, axis=0, return_inverse=True)
    summed = sum_equal_rows(reports, counts)
    assert np.array_equal(summed[0], uniq)
    assert np.array_equal(summed[1], np.bincount(inverse.ravel(), weights=counts, minlength=len(uniq)).astype(np.int64))


def test_check_mechanism_prints_the_three_levels_and_refuses_bad_input():
    from typer.testing import CliRunner

    from ldpsim.output.cli import app

    runner = CliRunner()
    args = ["check", "mechanism", "l-grr", "-d", "integers:0..9", "-p", "eps_inf=4", "-p", "eps_1=1", "--users", "0"]
    result = runner.invoke(app, [*args, "-p", "rounds=5", "-p", "published=true"])
    assert result.exit_code == 0
    assert "eps_1 = 0.919574 (one report), eps_5 = 3.70974 (all 5 reports, closed form), eps_inf = 4" in result.stdout
    assert "parameters  eps_inf = 4, eps_1 = 1" in result.stdout
    # 10^5 report sequences are finitely many, not unbounded: the identity line says so
    assert "unbounded outputs" not in result.stdout and "finitely many report sequences" in result.stdout
    bad = runner.invoke(app, [*args, "-p", "rounds=0"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --param rounds: must be >= 1")
    assert bad.stderr.count("\n") == 1


def test_the_scenario_records_privacy_over_time_per_cohort():
    from pathlib import Path

    import ldpsim

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "longitudinal.toml"
    ds = ldpsim.run_scenario(
        scenario,
        users=3000,
        repetitions=1,
        sweep__protocol__labels=["l-grr"],
        sweep__protocol__values=[{"mechanism": "l-grr", "eps_inf": 2.0, "eps_1": 1.0, "rounds": 10}],
    )
    levels = ds["privacy_over_time"].sel(protocol="l-grr", cohort="everyone")
    assert list(levels["privacy_level"].values) == ["eps_1", "eps_tau", "eps_inf"]
    eps_1, eps_tau, eps_inf = levels.values
    assert math.isclose(eps_1, 1.0, rel_tol=1e-9) and 1.0 < eps_tau < eps_inf and math.isclose(eps_inf, 2.0)
    plain = ldpsim.run_scenario(
        scenario,
        users=3000,
        repetitions=1,
        sweep__protocol__labels=["krr"],
        sweep__protocol__values=[{"mechanism": "krr", "eps": 1.0}],
    )
    assert "privacy_over_time" not in plain  # scenarios without memoized mechanisms keep their variables


@pytest.mark.parametrize("name", PROTOCOLS)
def test_estimation_uses_the_structured_likelihood_on_every_domain(name):
    mech = make("mechanism", name, line(5), eps_inf=3.0, eps_1=1.0, rounds=3)
    reports = sampled(mech, per_value=5)
    assert mech.structured_min_size == 0 and mech.likelihood_operator(reports) is not None


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("l-grr", {"eps_inf": 2.0, "eps_1": 0.8, "rounds": 3}),
        ("memoized", {"eps_permanent": 2.0, "instantaneous": ["krr"] * 3, "eps_instantaneous": [0.5, 1.0, 1.5]}),
    ],
)
def test_a_prefix_is_the_marginal_of_the_first_rounds(name, params):
    k = 3
    mech = make("mechanism", name, line(k), **params)
    full = np.exp(mech.log_likelihood(np.array(list(itertools.product(range(k), repeat=3)))))
    for t in (1, 2):
        prefix = mech.prefix(t)
        heads = np.array(list(itertools.product(range(k), repeat=t)))
        marginal = full.reshape(k**t, k ** (3 - t), k).sum(axis=1)  # sum over the later rounds' reports
        assert np.allclose(np.exp(prefix.log_likelihood(heads)), marginal, rtol=1e-12)
        assert np.allclose(np.exp(mech.round_channel(t).log_likelihood(np.arange(k)[:, None])).sum(axis=0), 1.0)


def test_loloha_is_l_grr_on_the_hash_values():
    from ldpsim_plugins.mechanisms.longitudinal import PRIME, loloha_g

    k, g, tau = 6, 3, 3
    mech = make("mechanism", "loloha", line(k), eps_inf=2.5, eps_1=1.0, rounds=tau, g=g)
    inner = make("mechanism", "l-grr", line(g), eps_inf=2.5, eps_1=1.0, rounds=tau)
    reports = sampled(mech, per_value=20)
    seeds = reports[:, 0]
    assert np.all(reports[:, ::2] == seeds[:, None])  # one hash function per user, sent every round
    a, b = seeds // PRIME, seeds % PRIME
    hashed = (a[:, None] * np.arange(k)[None, :] + b[:, None]) % PRIME % g
    expected = brute_grr(krr_matrix(g, 2.5), [inner.instantaneous_stages[0].matrix] * tau, reports[:, 1::2])
    expected = np.take_along_axis(expected, hashed, axis=1) / ((PRIME - 1) * PRIME)
    assert np.allclose(np.exp(mech.log_likelihood(reports)), expected, rtol=1e-10, atol=0)
    levels, reference = mech.privacy_over_time, inner.privacy_over_time
    assert (levels.eps_1, levels.eps_tau, levels.eps_inf) == (reference.eps_1, reference.eps_tau, reference.eps_inf)
    # the paper's optimal g (multi-freq-ldpy 0.2.5's L-OLH gives these)
    assert [loloha_g(4.0, 1.0), loloha_g(2.0, 1.0), loloha_g(8.0, 2.0), loloha_g(1.0, 0.5)] == LOLOHA_G


@settings(max_examples=15)
@given(
    name=st.sampled_from(["l-grr", "l-oue", "l-sue", "l-osue"]),
    k=st.integers(6, 12),
    rounds=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_the_mle_on_the_likely_subset_is_the_mle(name, k, rounds, seed):
    """004 Thm. 8.1 for memoized protocols: values no sequence reports are outside every MLE's support."""
    domain = Integers(low=0, high=k - 1)
    mech = make("mechanism", name, domain, eps_inf=4.0, eps_1=2.0, rounds=rounds)
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, 60)  # few users on few values: some values are never reported
    obs = Observations.from_reports(domain, [(mech, mech.sample(values, rng))])
    mask = obs.likely_subset()
    assert mask is not None and mask.any()
    restricted = make("estimator", "mle").estimate(obs)
    whole = make("estimator", "mle", likely=False).estimate(obs)
    assert np.all(restricted.distribution[~mask] == 0)
    assert restricted.loglik >= whole.loglik - 1e-5 * obs.n
    full = Likelihood.of(obs)  # certified on the whole domain too: no value left out would raise L
    assert full.certificate(full.gradient(restricted.distribution))[0] <= 1e-5


# ------------------------------------------------------------------ likely subset
@settings(max_examples=10, deadline=None)
@given(
    k=st.integers(3, 9),
    tau=st.integers(1, 4),
    eps_inf=st.floats(0.5, 5.0),
    frac=st.floats(0.1, 0.9),
    switch=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_likely_subset_of_memoized_grr_gives_the_full_mle(k, tau, eps_inf, frac, switch, seed):
    # few users holding two values: many values are never reported, so the subset is a real restriction
    stages = [make("mechanism", "krr", line(k), eps=eps_inf * frac * (1 + (t % 2) * switch)) for t in range(tau)]
    mech = MemoizedMechanism.compose(make("mechanism", "krr", line(k), eps=eps_inf), stages)
    reports = mech.sample(np.array([0, 0, 0, 1, 1]), np.random.default_rng(seed))
    mask = mech.likely_subset(reports)
    assert mask is not None and np.array_equal(mask, np.isin(np.arange(k), reports))
    obs = Observations.from_reports(mech.domain, [(mech, reports)])
    full = Likelihood.of(obs)
    restricted = gibu(Likelihood.of(obs, support=mask), stop="kkt", tol=1e-8, accelerate="squarem", max_iter=200_000)
    theta = Likelihood.of(obs, support=mask).expand(restricted.theta)
    # KKT on the whole domain at the restricted MLE: it is an MLE of the unrestricted likelihood
    kkt, gap = full.certificate(full.gradient(theta))
    assert kkt <= 1e-7
    unrestricted = gibu(full, stop="kkt", tol=1e-8, accelerate="squarem", max_iter=200_000)
    assert full.loglik(theta) >= full.loglik(unrestricted.theta) - 1e-6  # both within n log(1 + 1e-8) of the MLE


def test_likely_subset_is_unknown_without_k_rr_stages():
    dense = MemoizedMechanism.compose(
        make("mechanism", "matrix", line(3), rows=krr_matrix(3, 2.0).tolist()),
        [make("mechanism", "krr", line(3), eps=1.0)],
    )
    reports = dense.sample(np.zeros(4, dtype=int), np.random.default_rng(0))
    assert dense.likely_subset(reports) is None


def test_loloha_round_channel_has_an_unbiased_estimate():
    from ldpsim.testing import check_unbiased_estimate

    mech = make("mechanism", "loloha", line(6), eps_inf=2.5, eps_1=1.0, rounds=3)
    channel = mech.round_channel(1)
    assert channel.capabilities.unbiased_estimate
    check_unbiased_estimate(channel, samples=40_000, seed=3)
    # and on reports of one value: the estimate concentrates there (C_x / n -> p for it, 1/g elsewhere)
    reports = channel.sample(np.full(50_000, 2), np.random.default_rng(7))
    estimate = channel.unbiased_estimate(reports, np.ones(reports.shape[0]))
    assert abs(estimate[2] - 1.0) < 0.1 and np.abs(np.delete(estimate, 2)).max() < 0.1


def test_sampler_with_switching_stages_follows_the_two_stage_law():
    # one vectorized draw per distinct stage for all its rounds (rounds 1 and 3 share one): the sequences'
    # law is still sum_z A1(z|x) prod_t A2_t(y_t|z); chi-square over the 27 sequences, false-alarm rate 1e-3
    from scipy.stats import chisquare

    k, eps2 = 3, [1.0, 2.0, 1.0]
    stages = [make("mechanism", "krr", line(k), eps=e) for e in eps2]
    mech = MemoizedMechanism.compose(make("mechanism", "krr", line(k), eps=1.5), stages)
    reports = mech.sample(np.full(60_000, 2), np.random.default_rng(2024))
    observed = np.bincount(np.ravel_multi_index(tuple(reports.T), (k,) * 3), minlength=k**3)
    sequences = np.array(list(itertools.product(range(k), repeat=3)))
    expected = brute_grr(krr_matrix(k, 1.5), [krr_matrix(k, e) for e in eps2], sequences)[:, 2] * 60_000
    assert chisquare(observed, expected).pvalue > 1e-3
