"""Central guarantees after a shuffler: published values, brute force on small n, monotonicity, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ldpsim
from ldpsim import ParameterError, get_registry, parse_domain
from ldpsim.output.cli import app
from ldpsim.running.plan_shuffle import plan_shuffled
from ldpsim.theory.shuffle import (
    PAPER_PAIR,
    as_printed_eps,
    dominating_delta,
    general_variation_ratio,
    largest_eps0,
    shuffle_guarantee,
    variation_ratio,
)

runner = CliRunner()


def krr(k: int, eps: float) -> ldpsim.Mechanism:
    return get_registry().create("mechanism", "krr", parse_domain(f"integers:0..{k - 1}"), eps=eps)


# ------------------------------------------------------------------ published values
def test_clones_matches_the_authors_example():
    """apple/ml-shuffling-amplification README (commit 993d285): n = 100,000 users of 4-LDP, delta = 1e-6:
    "eps between 0.1675385583317841 and 0.172790550755978" (their lower and upper numerical bounds)."""
    eps = shuffle_guarantee(4.0, 100_000, 1e-6, "clones").eps
    assert 0.1675385583317841 <= eps <= 0.172790550755978


def test_clones_closed_form_is_the_theorem():
    """FMT21 Thm. 3.1: log(1 + (e^4 - 1)/(e^4 + 1) (8 sqrt(e^4 log(4e6) / 1e5) + 8 e^4 / 1e5)) = 0.53464 by hand.
    The authors' code prints 0.5378 for this example: it divides by 1 + e^-(eps0 + eps) instead of 1 + e^-eps0,
    a looser step of the proof; ours is never above it."""
    eps = shuffle_guarantee(4.0, 100_000, 1e-6, "clones-closed").eps
    assert eps == pytest.approx(0.53464, abs=2e-5)
    assert eps <= 0.5378040242374512
    # outside the regime eps0 <= log(n / (16 log(4/delta))) the closed form gives eps0 and says why
    outside = shuffle_guarantee(8.0, 10_000, 1e-6, "clones-closed")
    assert outside.eps == 8.0 and "regime" not in outside.note and "needs eps0" in outside.note


@pytest.mark.parametrize(
    ("eps0", "n", "delta", "k", "low", "high"),
    [
        # wangsw/PrivacyAmplification (commit 34ca048) amplificationLB / amplificationUB, T = 30
        (1.0, 1000, 1e-5, None, 0.1250400599092245, 0.12504007201641798),
        (3.0, 10_000, 1e-6, None, 0.22607897780835629, 0.22608039155602455),
        (3.0, 10_000, 1e-6, 10, 0.18975073378533125, 0.18975192960351706),
        (1.0, 10_000, 1e-6, 4, 0.03425598982721567, 0.03425625432282686),
    ],
)
def test_variation_ratio_matches_the_authors_code(eps0, n, delta, k, low, high):
    """The general (p, beta, q) of eps0 and k-RR's own (the paper's pair as printed), against the authors' lower
    and upper bounds (their code sums the same divergence with scipy's expect; ours is within 1e-4 of both)."""
    eps = shuffle_guarantee(eps0, n, delta).eps if k is None else as_printed_eps(krr(k, eps0), n, delta)
    assert low * (1 - 1e-4) <= eps <= high * (1 + 1e-4)


def test_krr_parameters_are_the_papers_table():
    """Wang et al. 2024 (README table of wangsw/PrivacyAmplification): k-RR has p = q = e^eps,
    beta = (e^eps - 1)/(e^eps + k - 1); the matrix gives exactly those."""
    for k, eps in ((2, 1.0), (5, 2.0), (20, 0.5)):
        vr = variation_ratio(krr(k, eps))
        e = math.exp(eps)
        assert vr.source == "matrix"
        assert vr.p == pytest.approx(e, rel=1e-12) and vr.q == pytest.approx(e, rel=1e-9)
        assert vr.beta == pytest.approx((e - 1) / (e + k - 1), rel=1e-12)


def test_oue_beta_is_half_the_general_one():
    """OUE's rows differ in two bits (1/2 vs 1/(e^eps+1)): TV = (1/2)(e^eps - 1)/(e^eps + 1), by hand."""
    oue = get_registry().create("mechanism", "oue", parse_domain("integers:0..3"), eps=1.5)
    assert variation_ratio(oue).beta == pytest.approx(0.5 * math.tanh(0.75), rel=1e-12)


# ------------------------------------------------------------------ brute force
def shuffled_histogram(matrix: np.ndarray, values: list[int]) -> np.ndarray:
    """The exact law of the report counts of users holding ``values`` (one report each), by enumeration."""
    k_out = matrix.shape[1]
    law = np.zeros((len(values) + 1,) * k_out)
    law[(0,) * k_out] = 1.0
    for x in values:
        new = np.zeros_like(law)
        for z in range(k_out):
            shift = [slice(None)] * k_out
            src = [slice(None)] * k_out
            shift[z], src[z] = slice(1, None), slice(None, -1)
            new[tuple(shift)] += matrix[x, z] * law[tuple(src)]
        law = new
    return law


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("eps0", [0.7, 2.0])
def test_bounds_dominate_the_exact_divergence_on_small_n(k, eps0):
    """The exact hockey-stick divergence of the shuffled counts of two neighbouring datasets (k-RR, n = 6,
    every assignment of the other users' values) never exceeds either numerical bound's delta."""
    n = 6
    mech = krr(k, eps0)
    m = mech.matrix
    assert m is not None
    vr = variation_ratio(mech)
    for others in itertools.combinations_with_replacement(range(k), n - 1):
        h0 = shuffled_histogram(m, [0, *others])
        h1 = shuffled_histogram(m, [1, *others])
        for eps in (0.0, 0.1, 0.3, 0.6, 1.0, 1.5):
            exact = max(np.maximum(h0 - math.exp(eps) * h1, 0).sum(), np.maximum(h1 - math.exp(eps) * h0, 0).sum())
            for bound, params in (
                ("variation-ratio", vr),
                ("variation-ratio", general_variation_ratio(eps0)),
                ("clones", general_variation_ratio(eps0)),
            ):
                assert exact <= dominating_delta(eps, n, params, bound) + 1e-12, (others, eps, bound)
        g = shuffle_guarantee(mech, n, 0.05)
        exact = np.maximum(h0 - math.exp(g.eps) * h1, 0).sum()
        assert exact <= 0.05


def test_the_papers_pair_fails_for_krr_with_three_values():
    """Counterexample to Wang et al.'s pair with k-RR's own beta = (e^eps - 1)/(e^eps + k - 1) (their table):
    k = 3, eps0 = 0.7, n = 2, datasets (0, 0) and (1, 0). By hand, with a = e^0.7/(e^0.7 + 2) and b = 1/(e^0.7 + 2):
    P0({0, 0}) = a^2, P1({0, 0}) = a b, so D_{e^0.6} >= a^2 - e^0.6 a b = 0.023954, above the pair's 0.011895."""
    a, b = math.exp(0.7) / (math.exp(0.7) + 2), 1 / (math.exp(0.7) + 2)
    exact = a * a - math.exp(0.6) * a * b
    assert exact == pytest.approx(0.023954, abs=1e-6)
    vr = variation_ratio(krr(3, 0.7))
    assert dominating_delta(0.6, 2, vr, PAPER_PAIR) == pytest.approx(0.011895, abs=1e-6)
    assert dominating_delta(0.6, 2, vr, "variation-ratio") >= exact


def test_binary_rr_bound_is_tight_on_its_worst_dataset():
    """Wang et al.'s bound is tight for binary RR: some dataset of the others attains it (n = 6, within 1e-9)."""
    n, eps0 = 6, 1.0
    mech = krr(2, eps0)
    m = mech.matrix
    assert m is not None
    for eps in (0.2, 0.5):
        exact = max(
            np.maximum(shuffled_histogram(m, [0, *o]) - math.exp(eps) * shuffled_histogram(m, [1, *o]), 0).sum()
            for o in itertools.combinations_with_replacement(range(2), n - 1)
        )
        assert exact <= dominating_delta(eps, n, variation_ratio(mech)) + 1e-12
        assert dominating_delta(eps, n, variation_ratio(mech)) <= exact * 1.5


# ------------------------------------------------------------------ laws
@settings(max_examples=15, deadline=None)
@given(
    eps0=st.floats(0.2, 6.0),
    n=st.integers(10, 50_000),
    factor=st.integers(2, 20),
    bound=st.sampled_from(["clones", "variation-ratio", "clones-closed"]),
)
def test_more_users_never_weaken_the_guarantee(eps0, n, factor, bound):
    small = shuffle_guarantee(eps0, n, 1e-6, bound).eps
    large = shuffle_guarantee(eps0, n * factor, 1e-6, bound).eps
    assert large <= small * (1 + 1e-5) and small <= eps0 * (1 + 1e-9)


@settings(max_examples=15, deadline=None)
@given(eps0=st.floats(0.2, 6.0), step=st.floats(0.05, 2.0), n=st.integers(100, 50_000))
def test_larger_eps0_never_strengthens_the_guarantee(eps0, step, n):
    for bound in ("clones", "variation-ratio"):
        assert shuffle_guarantee(eps0, n, 1e-6, bound).eps <= shuffle_guarantee(eps0 + step, n, 1e-6, bound).eps * (
            1 + 1e-5
        )


@settings(max_examples=10, deadline=None)
@given(k=st.integers(2, 30), eps0=st.floats(0.3, 5.0), n=st.integers(100, 100_000))
def test_krr_own_parameters_are_never_looser(k, eps0, n):
    """k-RR's guarantee by its own matrix is at most the general eps0 bound's, itself at most the clones'."""
    own = shuffle_guarantee(krr(k, eps0), n, 1e-6).eps
    general = shuffle_guarantee(eps0, n, 1e-6).eps
    clones = shuffle_guarantee(eps0, n, 1e-6, "clones").eps
    assert own <= general * (1 + 1e-5) and general <= clones * (1 + 1e-5)


def test_metric_and_lip_mechanisms_get_their_own_parameters():
    """Any mechanism with a matrix: p is its LDP level (geometric: eps per unit times the range)."""
    geo = get_registry().create("mechanism", "geometric", parse_domain("integers:0..4"), eps=0.5)
    vr = variation_ratio(geo)
    assert vr.source == "matrix" and vr.eps0 == pytest.approx(0.5 * 4, rel=1e-9)
    assert 0 < vr.beta < math.tanh(vr.eps0 / 2) and 1 <= vr.q <= vr.p
    g = shuffle_guarantee(geo, 10_000, 1e-6)
    assert g.eps <= shuffle_guarantee(vr.eps0, 10_000, 1e-6).eps


def test_largest_eps0_inverts_the_bound():
    eps0 = largest_eps0(0.5, 100_000, 1e-8)
    assert shuffle_guarantee(eps0, 100_000, 1e-8).eps <= 0.5
    assert shuffle_guarantee(eps0 * 1.01, 100_000, 1e-8).eps > 0.5


def test_plan_shuffled_reports_the_error_at_that_eps0():
    answer = plan_shuffled("krr", "integers:0..9", central_eps=1.0, users=100_000, delta=1e-8, error="halfwidth")
    assert answer.guarantee.eps <= 1.0 and answer.plan.eps == answer.eps0
    assert answer.eps0 == pytest.approx(largest_eps0(1.0, 100_000, 1e-8, mechanism_at=lambda e: krr(10, e)))


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("args", "expected"),
    [((0.0, 100, 1e-6), "eps0"), ((1.0, 1, 1e-6), "users"), ((1.0, 100, 0.0), "delta"), ((1.0, 100, 1.0), "delta")],
)
def test_bad_input_is_one_parameter_error(args, expected):
    with pytest.raises(ParameterError, match=expected):
        shuffle_guarantee(*args)


def one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--shuffle", "1"], "--shuffle: users must be an integer >= 2"),
        (["--shuffle", "100", "--delta", "1"], "--delta: delta must be in (0, 1)"),
        (["--shuffle", "100", "--delta", "0"], "--delta: delta must be in (0, 1)"),
    ],
)
def test_check_mechanism_bad_shuffle_is_one_line(extra, expected):
    line = one_line_error(["check", "mechanism", "krr", "-d", "integers:0..3", "-p", "eps=1", "--users", "0", *extra])
    assert expected in line


def test_check_mechanism_prints_each_bound():
    result = runner.invoke(
        app, ["check", "mechanism", "krr", "-d", "integers:0..3", "-p", "eps=1", "--users", "0", "--shuffle", "10000"]
    )
    assert result.exit_code == 0, result.output
    for bound in ("clones-closed:", "clones:", "variation-ratio:", "beta = 0.3005"):
        assert bound in result.output


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--central-eps", "1", "--shuffle", "1"], "--shuffle: users must be an integer >= 2"),
        (["--central-eps", "0", "--shuffle", "100"], "--central-eps"),
        (["--central-eps", "1", "--shuffle", "100", "--delta", "2"], "--delta"),
        (["--central-eps", "1"], "--shuffle"),
        (["--central-eps", "1", "--shuffle", "100", "--eps", "1"], "--eps"),
        (["--central-eps", "1", "--shuffle", "100", "--bound", "x"], "--bound: unknown bound"),
    ],
)
def test_plan_bad_shuffle_is_one_line(extra, expected):
    assert expected in one_line_error(["plan", "krr", "-d", "integers:0..3", *extra])


# ------------------------------------------------------------------ scenarios
def shuffled_scenario(**cohort: object) -> dict:
    return {
        "name": "shuffled",
        "seed": 1,
        "users": 5_000,
        "repetitions": 1,
        "estimators": ["inv-p"],
        "metrics": ["tv"],
        "domain": {"kind": "integers", "low": 0, "high": 3},
        "dataset": {"name": "uniform"},
        "cohorts": {
            "a": {"share": 0.6, "reports": [{"mechanism": "krr", "eps": 3.0}], **cohort},
            "b": {"share": 0.4, "reports": [{"mechanism": "oue", "eps": 1.0}]},
        },
    }


def test_results_record_each_shuffled_cohorts_central_guarantee():
    ds = ldpsim.run_scenario(shuffled_scenario(shuffled=True, delta=1e-8))
    eps = ds["central_eps"].sel(cohort="a").item()
    assert eps == pytest.approx(shuffle_guarantee(krr(4, 3.0), 3_000, 1e-8).eps, rel=1e-12)
    assert ds["central_delta"].sel(cohort="a").item() == 1e-8
    assert math.isnan(ds["central_eps"].sel(cohort="b").item())  # not shuffled
    assert "central_eps" not in ldpsim.run_scenario(shuffled_scenario())  # no shuffled cohort: no variable


@pytest.mark.parametrize(
    ("cohort", "message"),
    [
        ({"shuffled": "yes"}, r"cohorts\.a\.shuffled: must be true or false"),
        ({"shuffled": True, "delta": 1.0}, r"cohorts\.a\.delta: must be in \(0, 1\)"),
        ({"delta": 1e-6}, r"cohorts\.a\.delta: is the central delta of a shuffled cohort"),
        (
            {"shuffled": True, "reports": [{"mechanism": "krr", "eps": 1.0, "repeat": 2}]},
            r"cohorts\.a\.shuffled: a shuffled cohort's users send one report each",
        ),
    ],
)
def test_bad_shuffled_cohorts_are_one_line(cohort, message):
    with pytest.raises(ldpsim.LdpsimError, match=message) as info:
        ldpsim.load_scenario(shuffled_scenario(**cohort))
    assert "\n" not in str(info.value)


def test_the_shipped_scenario_plans_equal_central_eps():
    """scenarios/shuffle-central-eps.toml: its first three points meet central eps 0.5 (the planner's eps0)."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scenarios" / "shuffle-central-eps.toml"
    scenario = ldpsim.load_scenario(path)
    assert scenario is not None
    assert largest_eps0(0.5, 100_000, 1e-8) == pytest.approx(6.201, abs=1e-3)


def test_the_pair_is_not_monotone_in_beta_so_only_uniform_parameters_are_used():
    """More beta means more clones too: at p = e^6, q = 1, n = 1000, eps = 0.2 the pair's delta falls from beta
    0.0352 to 0.0605. So the largest beta over pairs of values bounds no other pair's, and a mechanism's own
    (beta, q) count only where every pair of values shares them (k-RR, OUE); the general pair otherwise."""
    p = math.exp(6)
    low = dominating_delta(0.2, 1000, ldpsim.VariationRatio(p, 0.0352, 1.0, "test"))
    high = dominating_delta(0.2, 1000, ldpsim.VariationRatio(p, 0.0605, 1.0, "test"))
    assert high < low
    assert variation_ratio(krr(5, 1.0)).uniform
    geo = get_registry().create("mechanism", "geometric", parse_domain("integers:0..4"), eps=0.5)
    vr = variation_ratio(geo)
    assert not vr.uniform
    used = shuffle_guarantee(geo, 10_000, 1e-6).params
    assert used is not None and used.beta == pytest.approx(math.tanh(vr.eps0 / 2))


@pytest.mark.parametrize("eps0", [40.0, 50.0, 200.0, 700.0])
def test_a_large_eps0_is_not_amplified_by_a_rounding_error(eps0):
    """Among 10^6 users almost no report is a clone of another at eps0 >= 40 (n 2 / e^eps0 < 1e-11), so the
    central eps is eps0 to within its delta. With 1 + e^eps == e^eps in doubles (eps > 36.7) the outcome
    threshold once fell above every outcome: eps0 = 50 came out as a central eps of 37, eps0 = 700 as 9.8."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warnings reach the user either
        for bound in ("clones", "variation-ratio"):
            assert shuffle_guarantee(eps0, 10**6, 1e-6, bound).eps == pytest.approx(eps0, rel=1e-3)
