"""Mechanism parameters that overflow, hang or exhaust memory are refused in one line (issue 34).

Every built-in mechanism, with its float parameters at extreme levels (1e-12 .. 1e308) and its integer
ones at 10^9 or 10^18, either works (privacy level and a tiny sample) or raises an ``LdpsimError`` up
front: never an OverflowError, a root finder's ValueError or a MemoryError, and never slowly.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st
from test_contract import EXAMPLES

from ldpsim import MAX_ROUNDS, Integers, LdpsimError, MemoizedMechanism, ParameterError, get_registry
from ldpsim.base import memory
from ldpsim.base.errors import ContractError

#: a RuntimeWarning (an invalid cast, an overflow) is how a silently wrong number shows: an error here
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

#: the levels a float parameter is pushed to: a probability's ends, tiny, subnormal, the numeric mechanisms' cap,
#: where exp overflows, the exponential ones' cap, the float maximum
EXTREME_FLOATS = (0.0, 1.0, 1e-12, 1e-300, 5e-324, 20.0, 300.0, 700.0, 1e308)
#: the sizes an integer parameter is pushed to
EXTREME_INTS = (10**9, 10**18)
#: integer parameters that are seeds, not sizes
SEEDS = {"hash_seed", "family_seed", "seed"}
#: a refusal must come before any real work: well under the 2 s a test may take
SECONDS = 1.5
TEN = Integers(low=0, high=9)


@pytest.fixture(autouse=True, scope="module")
def one_gib_free():
    """A machine with 1 GiB available, whatever this one has: the memory refusals are the same everywhere, and
    no example allocates gigabytes where require_memory would let it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory, "available_memory", lambda: 1 << 30)
        yield


def _sized_parameters(name: str) -> dict[str, tuple]:
    """The mechanism's float and size parameters, each with the extremes it is pushed to."""
    (entry,) = [e for e in get_registry().entries("mechanism") if e.name == name]
    out: dict[str, tuple] = {}
    for key, param in entry.cls.parameters().items():
        if "float" in param.kinds:
            out[key] = EXTREME_FLOATS
        elif "int" in param.kinds and key not in SEEDS:
            out[key] = EXTREME_INTS
    return out


#: read once, outside the strategy (loading the plugins is no part of drawing an example)
SIZED = {name: _sized_parameters(name) for name in EXAMPLES}


@st.composite
def extreme_mechanism(draw):
    name = draw(st.sampled_from(sorted(EXAMPLES)))
    domain, base = EXAMPLES[name]
    params = dict(base)
    for key, values in SIZED[name].items():
        if draw(st.booleans()):
            params[key] = draw(st.sampled_from(values))
    return name, domain, params


def build_and_use(name: str, domain, params: dict) -> None:
    """Construct, ask for the privacy level and a tiny sample; an LdpsimError is an acceptable answer.

    Any other exception propagates and fails the test, as does a ContractError: the contract wrapper's name for
    a plugin that raised something other than an LdpsimError."""
    try:
        mech = make("mechanism", name, domain, **params)
        eps = mech.privacy.eps
        assert not math.isnan(eps), f"{name}({params}) claims a NaN level"
        reports = mech.sample(np.arange(min(3, domain.size)), np.random.default_rng(0))
        assert reports.shape[0] == min(3, domain.size)
    except ContractError:  # a built-in plugin that raised something else: the fault this file is about
        raise
    except LdpsimError:
        pass


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_parameter_at_each_extreme_works_or_is_refused(name):
    """One parameter at a time, every extreme: deterministic, and what each item of issue 34 was."""
    domain, base = EXAMPLES[name]
    for key, values in SIZED[name].items():
        for value in values:
            start = time.perf_counter()
            build_and_use(name, domain, {**base, key: value})
            assert time.perf_counter() - start < SECONDS, f"{name} with {key} = {value} took too long"


@settings(max_examples=100)  # the profile's deadline=None: the test times each example itself
@given(case=extreme_mechanism())
def test_extreme_parameters_work_or_are_refused_in_one_line(case):
    name, domain, params = case
    start = time.perf_counter()
    build_and_use(name, domain, params)
    assert time.perf_counter() - start < SECONDS, f"{name}({params}) took {time.perf_counter() - start:.1f} s"


# ------------------------------------------------------------------ the items of issue 34
@pytest.mark.parametrize("name", ["memoized", "l-grr", "l-sue", "l-osue", "loloha", "dbitflip", "rappor-deployed"])
def test_every_memoized_mechanism_caps_its_rounds(name):
    domain, base = EXAMPLES[name]
    params = {**base, "rounds": 10**9}
    if name == "memoized":
        params = {"eps_permanent": 2.0, "eps_instantaneous": 1.0, "rounds": 10**9}
    start = time.perf_counter()
    with pytest.raises(ParameterError, match=f"rounds.*{MAX_ROUNDS}"):
        make("mechanism", name, domain, **params)
    assert time.perf_counter() - start < SECONDS


def test_a_composition_of_too_many_rounds_is_refused():
    krr = make("mechanism", "krr", TEN, eps=2.0)
    with pytest.raises(ParameterError, match=f"{MAX_ROUNDS + 1:,} rounds, more than the {MAX_ROUNDS:,}"):
        MemoizedMechanism.compose(krr, [krr] * (MAX_ROUNDS + 1))
    assert MemoizedMechanism.compose(krr, [krr] * 3).rounds == 3


@pytest.mark.parametrize("eps_inf", [40.0, 300.0, 700.0])
def test_loloha_at_a_large_eps_inf_has_the_limit_g(eps_inf):
    from ldpsim_plugins.mechanisms.longitudinal import loloha_g

    # g tends to e^eps_1 + 1 as eps_inf grows: 4 for eps_1 = 1 (the paper's form overflowed from eps_inf ~ 178,
    # and gave 2 from eps_inf ~ 40, its cancellation noise)
    assert loloha_g(eps_inf, 1.0) == 4
    mech = make("mechanism", "loloha", TEN, eps_inf=eps_inf, eps_1=1.0)
    assert mech.g == 4 and mech.privacy.eps == pytest.approx(eps_inf)
    assert mech.sample(np.arange(3), np.random.default_rng(0)).shape == (3, 2)


def test_loloha_g_keeps_the_paper_values_and_survives_tiny_eps():
    from ldpsim_plugins.mechanisms.longitudinal import loloha_g

    assert [loloha_g(4.0, 1.0), loloha_g(2.0, 1.0), loloha_g(8.0, 2.0), loloha_g(1.0, 0.5)] == [
        3,
        3,
        8,
        2,
    ]  # multi-freq-ldpy's
    assert loloha_g(1e-12, 5e-13) == 2  # the paper's form took the root of a rounded negative here


def test_loloha_with_too_many_hash_values_is_refused():
    with pytest.raises(ParameterError, match="g = about 10.18 hash values"):
        make("mechanism", "loloha", TEN, eps_inf=4.0, eps_1=1.0, g=10**18)
    with pytest.raises(ParameterError, match="g = about 10.302 hash values"):
        make("mechanism", "loloha", TEN, eps_inf=699.0, eps_1=698.0)  # the default g is e^698
    with pytest.raises(LdpsimError, match=r"the dense 3,205,894 x 3,205,894 channel of loloha .* smaller eps_1"):
        make("mechanism", "loloha", TEN, eps_inf=20.0, eps_1=15.0)


@pytest.mark.parametrize("name", ["l-sue", "l-oue", "l-osue", "l-soue"])
def test_l_ue_solves_a_tiny_eps_1(name):
    mech = make("mechanism", name, TEN, eps_inf=2.0, eps_1=1e-12)
    assert mech.one_report_level() == pytest.approx(1e-12, rel=1e-3)
    assert mech.sample(np.arange(3), np.random.default_rng(0)).shape[0] == 3
    with pytest.raises(ParameterError, match="eps_1 = 1e-14 is below the 1e-12"):
        make("mechanism", name, TEN, eps_inf=2.0, eps_1=1e-14)


@pytest.mark.parametrize("field", ["bits", "cohorts"])
def test_rappor_deployed_refuses_huge_filters_before_allocating(field):
    start = time.perf_counter()
    with pytest.raises(LdpsimError, match=r"Bloom filters of rappor-deployed .* would need .*; use fewer bits"):
        make("mechanism", "rappor-deployed", TEN, **{field: 10**9})
    assert time.perf_counter() - start < SECONDS


def test_cms_refuses_reports_of_a_billion_bits():
    with pytest.raises(ParameterError, match="buckets: 1,000,000,000 buckets, more than the 16,777,216"):
        make("mechanism", "cms", TEN, eps=1.0, buckets=10**9)


def test_the_refuses_an_eps_too_small_for_its_threshold():
    with pytest.raises(ParameterError, match="eps = 1e-300 is below the 1e-100"):
        make("mechanism", "the", TEN, eps=1e-300)
    assert make("mechanism", "the", TEN, eps=1e-300, threshold=0.7).theta == 0.7


def test_planar_geometric_refuses_an_underflowing_eps():
    domain, _ = EXAMPLES["planar-geometric"]
    with pytest.raises(ParameterError, match="spreads the noise over more than"):
        make("mechanism", "planar-geometric", domain, eps=1e-300)


@pytest.mark.parametrize(
    ("name", "pool"), [("cms", "a sketch's family"), ("hcms", "a sketch's family"), ("flh", "FLH's pool")]
)
def test_hash_pools_are_capped(name, pool):
    domain, base = EXAMPLES[name]
    with pytest.raises(ParameterError, match=f"hashes: 10,000,000 hash functions, more than the 1,048,576 {pool}"):
        make("mechanism", name, domain, **{**base, "hashes": 10**7})


def test_hcms_counts_the_temporaries_of_its_matrix():
    # 8 values x 2^16 hashes x 8 buckets: a 67 MB matrix, but 168 MB at the peak of building it
    mech = make("mechanism", "hcms", Integers(low=0, high=7), eps=1.0, hashes=1 << 16, buckets=8)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory, "available_memory", lambda: 150_000_000)
        with pytest.raises(LdpsimError, match="coefficients of hcms would need 167.8 MB"):
            mech.sample(np.arange(3), np.random.default_rng(0))


def test_planar_laplace_clips_its_offsets_and_refuses_a_zero_scale():
    domain, _ = EXAMPLES["planar-laplace"]
    far = make("mechanism", "planar-laplace", domain, eps=1e-300)  # a radius of ~1e300 cells: cast to int64
    reports = far.sample(np.arange(domain.size), np.random.default_rng(0))
    assert reports.min() >= 0 and reports.max() < domain.size
    with pytest.raises(ParameterError, match="rounds to 0: the noise has no scale"):
        make("mechanism", "planar-laplace", domain, eps=5e-324)


def test_piecewise_refuses_a_subnormal_eps():
    with pytest.raises(ParameterError, match="eps = 4.94066e-324 is below the 1e-300"):
        make("mechanism", "piecewise", TEN, eps=5e-324)


def test_square_wave_refuses_a_band_too_narrow_for_doubles():
    with pytest.raises(ParameterError, match="too narrow for doubles.*give eps <= 18"):
        make("mechanism", "square_wave", Integers(low=0, high=7), eps=20.0).sample(
            np.arange(3), np.random.default_rng(0)
        )
    assert make("mechanism", "square_wave", TEN, eps=20.0, b=0.1).matrix is not None


@pytest.mark.parametrize(("p", "q"), [(0.0, 0.75), (0.5, 0.0), (0.0, 1.0), (1.0, 0.0)])
def test_rappor_deployed_takes_certain_round_bits(p, q):
    mech = make("mechanism", "rappor-deployed", TEN, p=p, q=q, rounds=3)
    levels = mech.privacy_over_time
    assert all(math.isfinite(level) for level in (levels.eps_1, levels.eps_tau, levels.eps_inf))
    reports = mech.sample(np.arange(10).repeat(5), np.random.default_rng(0))
    assert np.isfinite(mech.log_likelihood(reports)).any(axis=1).all()


def test_rappor_deployed_refuses_an_f_whose_half_underflows():
    with pytest.raises(ParameterError, match="f: f = 4.94066e-324 is not strictly between 0 and 1"):
        make("mechanism", "rappor-deployed", TEN, f=5e-324)


def test_rappor_deployed_refuses_rounds_of_bits_one_user_cannot_hold():
    with pytest.raises(LdpsimError, match="sampling one user's 1,000 rounds of 1,000,000 bits"):
        make("mechanism", "rappor-deployed", TEN, bits=10**6, cohorts=1, rounds=1000)


def test_l_grr_refuses_an_eps_inf_that_rounds_away():
    with pytest.raises(ParameterError, match="eps_inf: eps_inf = 1e-20 is too small for doubles"):
        make("mechanism", "l-grr", TEN, eps_inf=1e-20, eps_1=1e-21)
