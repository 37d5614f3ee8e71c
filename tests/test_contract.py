"""Every built-in mechanism passes the contract kit third parties use (and a new one cannot be added without);
capabilities, the structured-likelihood size policy and the checked wrappers do what the contract says, and the
kit catches a mechanism that breaks a capability it declares."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import make

import ldpsim
from ldpsim import (
    Capabilities,
    Categorical,
    EstimationError,
    Grid,
    Integers,
    Likelihood,
    Mechanism,
    Observations,
    constant_plus_column,
)
from ldpsim.base.hooks import overrides
from ldpsim.testing import (
    check_hooks,
    check_likely_subset,
    check_mechanism,
    check_named_value_likelihood,
    check_output_count,
    check_structured_likelihood,
    check_unbiased_estimate,
)

LINE = Integers(low=0, high=7)
GRID = Grid(rows=3, cols=4, cell=0.5)
TUPLES = ldpsim.Product(
    attributes=[
        {"name": "a", "kind": "integers", "low": 0, "high": 2},
        {"name": "b", "kind": "categorical", "values": ["x", "y"]},
    ]
)
NUMERIC_TUPLES = ldpsim.Product(
    attributes=[
        {"name": "a", "kind": "integers", "low": 0, "high": 2},
        {"name": "b", "kind": "integers", "low": 10, "high": 30, "step": 10},
    ]
)
EXAMPLES = {
    "krr": (Categorical(values=list("abcde")), {"eps": 1.0}),
    "geometric": (LINE, {"eps": 0.4}),
    "laplace": (Integers(low=0, high=14, step=2), {"eps": 0.3}),
    "exponential": (GRID, {"eps": 1.5}),
    "planar-geometric": (GRID, {"eps": 1.0, "window": [0, 1, 2, 3]}),
    "planar-laplace": (GRID, {"eps": 2.0}),
    "rappor": (Integers(low=0, high=5), {"eps": 1.0}),
    "oue": (Integers(low=0, high=5), {"eps": 2.0}),
    "olh": (LINE, {"eps": 1.5}),
    "subset_selection": (Integers(low=0, high=5), {"eps": 1.0}),
    "adp": (Integers(low=0, high=5), {"eps": 1.0}),  # k-RR (6 < 3 e + 2)
    "hadamard": (LINE, {"eps": 1.0}),
    "blh": (LINE, {"eps": 1.0}),
    "flh": (LINE, {"eps": 1.0, "hashes": 20}),
    "hcms": (LINE, {"eps": 1.0, "hashes": 8, "buckets": 8}),
    "cms": (LINE, {"eps": 1.0, "hashes": 8, "buckets": 8}),
    "she": (Integers(low=0, high=5), {"eps": 1.0}),
    "the": (Integers(low=0, high=5), {"eps": 1.0}),
    "lip": (Integers(low=0, high=2), {"eps": 2.0, "prior": [0.2, 0.3, 0.5]}),
    "lip-binary": (Integers(low=0, high=1), {"eps": 1.0, "prior": [0.4, 0.6]}),
    "matrix": (Categorical(values=["x", "y"]), {"rows": [[0.8, 0.2], [0.3, 0.7]]}),
    "memoized": (LINE, {"eps_permanent": 2.0, "instantaneous": ["krr", "krr"], "eps_instantaneous": [1.0, 1.5]}),
    "l-grr": (Categorical(values=list("abcd")), {"eps_inf": 3.0, "eps_1": 1.0, "rounds": 2}),
    "l-sue": (Integers(low=0, high=2), {"eps_inf": 3.0, "eps_1": 1.0, "rounds": 2}),
    "l-oue": (Integers(low=0, high=2), {"eps_inf": 3.0, "eps_1": 1.0, "rounds": 2}),
    "l-osue": (Integers(low=0, high=2), {"eps_inf": 3.0, "eps_1": 1.0, "rounds": 2}),
    "l-soue": (Integers(low=0, high=2), {"eps_inf": 3.0, "eps_1": 1.0, "rounds": 2}),
    "loloha": (LINE, {"eps_inf": 3.0, "eps_1": 1.0, "rounds": 2}),
    "dbitflip": (LINE, {"eps": 2.0, "buckets": 5, "d": 2, "rounds": 3}),
    "rappor-deployed": (LINE, {"bits": 16, "hashes": 2, "cohorts": 4, "rounds": 3}),
    "duchi": (LINE, {"eps": 1.0}),
    "piecewise": (LINE, {"eps": 1.0}),
    "hybrid": (LINE, {"eps": 1.0}),
    "square_wave": (LINE, {"eps": 1.0}),
    "spl": (TUPLES, {"eps": 2.0}),
    "smp": (TUPLES, {"eps": 1.0, "per_attribute": [{"mechanism": "oue"}, {"mechanism": "krr"}]}),
    "rsfd": (TUPLES, {"eps": 1.0, "local": "oue-z"}),
    "rsrfd": (TUPLES, {"eps": 1.0, "prior": [0.1, 0.2, 0.1, 0.2, 0.3, 0.1]}),
    "duchi-md": (NUMERIC_TUPLES, {"eps": 1.0}),
    "pm-sampling": (NUMERIC_TUPLES, {"eps": 1.0}),
    "hm-sampling": (NUMERIC_TUPLES, {"eps": 1.0}),
    # range protocols over b^h ordered values: level-sampled trees, the level oracle's reports per level
    "hh": (LINE, {"eps": 1.0, "branching": 2}),
    "haar-hrr": (LINE, {"eps": 1.0}),
}


def test_every_built_in_mechanism_has_an_example():
    built_in = {e.name for e in ldpsim.get_registry().entries("mechanism") if e.distribution == "ldpsim"}
    assert built_in == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_built_in_mechanism_meets_the_contract(name):
    domain, params = EXAMPLES[name]
    check_mechanism(make("mechanism", name, domain, **params))


# ------------------------------------------------------------------ capabilities
CAPABILITIES = {
    "krr": {
        "structured_likelihood",
        "likely_subset",
        "output_count",
        "named_value_likelihood",
        "log_matrix",
        "estimate_variance",
        "sample_counts",
        "diagonal_plus_constant",
    },
    "geometric": {"structured_likelihood", "likely_subset", "output_count", "log_matrix"},
    "laplace": {"structured_likelihood", "likely_subset", "output_count", "log_matrix"},
    "exponential": {"structured_likelihood", "output_count", "log_matrix", "diagonal_plus_constant"},
    "planar-geometric": {"structured_likelihood", "likely_subset", "subset_likelihood", "output_count"},
    "planar-laplace": {"structured_likelihood", "likely_subset", "subset_likelihood", "output_count"},
    "rappor": {"structured_likelihood", "unbiased_estimate", "likely_subset", "estimate_variance", "sample_bit_counts"},
    "oue": {"structured_likelihood", "unbiased_estimate", "likely_subset", "estimate_variance", "sample_bit_counts"},
    "olh": {"structured_likelihood", "unbiased_estimate", "estimate_variance"},
    "blh": {"structured_likelihood", "unbiased_estimate", "estimate_variance"},
    "flh": {"structured_likelihood", "unbiased_estimate", "output_count", "estimate_variance"},
    "hcms": {"unbiased_estimate", "output_count", "estimate_variance"},
    "cms": {"structured_likelihood", "unbiased_estimate", "estimate_variance", "sample_bit_counts"},
    "she": {"structured_likelihood", "unbiased_estimate", "estimate_variance"},
    "the": {"structured_likelihood", "unbiased_estimate", "likely_subset", "estimate_variance", "sample_bit_counts"},
    "subset_selection": {
        "structured_likelihood",
        "unbiased_estimate",
        "likely_subset",
        "output_count",
        "estimate_variance",
    },
    # the union of k-RR's and OUE's: a hook the chosen mechanism lacks returns None
    "adp": {
        "structured_likelihood",
        "unbiased_estimate",
        "likely_subset",
        "output_count",
        "named_value_likelihood",
        "log_matrix",
        "estimate_variance",
    },
    "hadamard": {"structured_likelihood", "unbiased_estimate", "output_count", "estimate_variance"},
    "lip": set(),
    "lip-binary": set(),
    "matrix": set(),
    # memoized: one report is the whole sequence (rounds), whose likelihood is a sum over the permanent response
    # every memoized mechanism inherits the hook; it answers (not None) where all stages are k-RR
    "memoized": {"structured_likelihood", "rounds", "likely_subset"},
    "l-grr": {"structured_likelihood", "rounds", "likely_subset"},
    "l-sue": {"structured_likelihood", "rounds", "likely_subset"},
    "l-oue": {"structured_likelihood", "rounds", "likely_subset"},
    "l-osue": {"structured_likelihood", "rounds", "likely_subset"},
    "l-soue": {"structured_likelihood", "rounds", "likely_subset"},
    "loloha": {"structured_likelihood", "rounds", "likely_subset"},
    "rappor-deployed": {"structured_likelihood", "rounds", "likely_subset", "unbiased_estimate"},
    "dbitflip": {"structured_likelihood", "rounds", "likely_subset", "unbiased_estimate"},
    "duchi": {"output_count"},
    "piecewise": {"structured_likelihood", "likely_subset", "output_count"},
    "hybrid": {"output_count"},
    "square_wave": {"structured_likelihood", "likely_subset", "output_count"},
    # tuple protocols: the structured likelihood is the product channel; marginal estimates are their own hooks
    "spl": {"structured_likelihood"},
    # range protocols: the level likelihood (tree sums, each level oracle's operator; Haar by Walsh-Hadamard)
    "hh": {"structured_likelihood"},
    "haar-hrr": {"structured_likelihood"},
    "smp": {"structured_likelihood"},
    "rsfd": {"structured_likelihood"},
    "rsrfd": {"structured_likelihood"},
    # vector mean mechanisms (numeric tuples): duchi-md is a matrix over the cells, PM/HM-sampling tuple protocols
    "duchi-md": {"output_count"},
    "pm-sampling": {"structured_likelihood"},
    "hm-sampling": {"structured_likelihood"},
}
#: mechanisms whose structured likelihood is used on every domain (bit vectors, hashed reports)
ALWAYS_STRUCTURED = {
    "hh",
    "haar-hrr",
    "spl",
    "pm-sampling",
    "hm-sampling",
    "smp",
    "rsfd",
    "rsrfd",
    "rappor",
    "oue",
    "olh",
    "subset_selection",
    "memoized",
    "l-grr",
    "l-sue",
    "l-oue",
    "l-osue",
    "l-soue",
    "loloha",
    "rappor-deployed",
    "dbitflip",
    "the",
    "blh",
    "cms",
}


def test_every_example_has_its_capabilities_listed():
    assert set(CAPABILITIES) == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_built_in_mechanisms_declare_the_capabilities_they_implement(name):
    domain, params = EXAMPLES[name]
    mech = make("mechanism", name, domain, **params)
    assert mech.capabilities.declared == CAPABILITIES[name]
    assert Capabilities.of(type(mech)) == mech.capabilities
    assert mech.structured_min_size == (0 if name in ALWAYS_STRUCTURED else ldpsim.STRUCTURED_MIN_SIZE)


def test_the_base_declares_nothing_and_subclasses_inherit_what_they_override():
    assert Capabilities.of(Mechanism) == Capabilities()
    assert not Capabilities().declared

    class Estimating(Mechanism):
        def _unbiased_estimate(self, reports, counts):
            return None

    class Child(Estimating):
        def _output_count(self):
            return 2

    assert Capabilities.of(Estimating).declared == {"unbiased_estimate"}
    assert Capabilities.of(Child).declared == {"unbiased_estimate", "output_count"}


def test_overrides_compares_what_a_class_defines_not_how_it_is_looked_up():
    class Base:
        def hook(self):
            return None

        @property
        def value(self):
            return 1

        @classmethod
        def make(cls):
            return cls()

    class Same(Base):
        pass

    class Other(Base):
        def hook(self):
            return 1

        @property
        def value(self):
            return 2

        @classmethod
        def make(cls):
            return cls()

    for name in ("hook", "value", "make"):
        assert not overrides(Same, Base, name) and not overrides(Base, Base, name)
        assert overrides(Other, Base, name)


# ------------------------------------------------------------------ size policy
def _domain_of_size(name, size):
    if name.startswith("planar"):
        rows = {ldpsim.STRUCTURED_MIN_SIZE - 1: 7, ldpsim.STRUCTURED_MIN_SIZE: 16, 12: 3}[size]
        return Grid(rows=rows, cols=size // rows)
    return Integers(low=0, high=size - 1)


#: memoized mechanisms take other parameters (eps_inf, eps_1) and use their structured likelihood on
#: every domain: tests/test_longitudinal.py, test_rappor_deployed.py and test_dbitflip.py check them
MEMOIZED = {"memoized", "l-grr", "l-sue", "l-oue", "l-osue", "l-soue", "loloha", "rappor-deployed", "dbitflip"}
# on product domains: tested in test_tuples.py (PM/HM-sampling: test_vector_mean.py)
TUPLE_PROTOCOLS = {"spl", "smp", "rsfd", "rsrfd", "pm-sampling", "hm-sampling"}
# on b^h ordered values, always structured: tested in test_ranges.py (their operators against the dense likelihood)
RANGE_PROTOCOLS = {"hh", "haar-hrr"}
STRUCTURED = sorted(
    n
    for n, caps in CAPABILITIES.items()
    if "structured_likelihood" in caps and n not in MEMOIZED | TUPLE_PROTOCOLS | RANGE_PROTOCOLS
)


@pytest.mark.parametrize("name", STRUCTURED)
def test_the_structured_likelihood_is_used_from_the_size_policy_on(name, rng):
    eps = {"olh": 1.0}.get(name, 1.5)
    for size in (12, ldpsim.STRUCTURED_MIN_SIZE - 1, ldpsim.STRUCTURED_MIN_SIZE):
        domain = _domain_of_size(name, size)
        mech = make("mechanism", name, domain, eps=eps)
        reports = mech.sample(rng.integers(0, domain.size, 50), rng)
        always = name in ALWAYS_STRUCTURED or (name == "adp" and mech.chosen == "oue")  # adp: the chosen's policy
        structured = always or size >= ldpsim.STRUCTURED_MIN_SIZE
        assert (mech.likelihood_operator(reports) is not None) is structured, (name, size)
        assert mech.structured_likelihood(reports) is not None  # whatever the size
        obs = Observations.from_reports(domain, [(mech, reports)])
        assert isinstance(Likelihood(obs).H, np.ndarray) is not structured, (name, size)


def test_an_instance_may_move_the_threshold_either_way(rng):
    small = make("mechanism", "krr", Integers(low=0, high=9), eps=1.0)
    reports = small.sample(rng.integers(0, 10, 100), rng)
    assert small.likelihood_operator(reports) is None
    small.structured_min_size = 0
    shift, op = small.likelihood_operator(reports)
    np.testing.assert_allclose(
        np.exp(shift)[:, None] * (op @ np.eye(10)), small.likelihood(reports), rtol=1e-13, atol=0
    )
    large = make("mechanism", "oue", Integers(low=0, high=9), eps=1.0)
    large.structured_min_size = 11
    assert large.likelihood_operator(large.sample(np.arange(10), rng)) is None


def test_a_mechanism_without_the_capability_has_no_structured_likelihood():
    mech = make("mechanism", "matrix", Categorical(values=["x", "y"]), rows=[[0.8, 0.2], [0.3, 0.7]])
    mech.structured_min_size = 0
    assert mech.structured_likelihood([0, 1]) is None and mech.likelihood_operator([0, 1]) is None
    assert mech.unbiased_estimate([[0]], [3]) is None and mech.likely_subset([[0]]) is None
    assert mech.output_count() is None and mech.named_value_likelihood() is None


# ------------------------------------------------------------------ checked wrappers
def _krr_class():
    return type(make("mechanism", "krr", Integers(low=0, high=3), eps=1.0))


KRR4 = Integers(low=0, high=3)


def test_what_the_hooks_return_is_checked():
    krr = _krr_class()

    class WrongShape(krr):
        def _structured_likelihood(self, reports):
            shift, op = super()._structured_likelihood(reports)
            return shift[:-1], op

    class NotFinite(krr):
        def _unbiased_estimate(self, reports, counts):
            return np.full(self.domain.size, np.nan)

    class Empty(krr):
        def _likely_subset(self, reports):
            return np.zeros(self.domain.size, dtype=bool)

    class NoOutputs(krr):
        def _output_count(self):
            return 0

    class Positive(krr):
        def _named_value_likelihood(self):
            return 0.5, -1.0

    reports = np.array([[0], [2]])
    with pytest.raises(ValueError, match=r"_structured_likelihood returned shapes \(1,\)"):
        WrongShape(KRR4, eps=1.0).structured_likelihood(reports)
    with pytest.raises(ValueError, match="_unbiased_estimate must return 4 finite numbers"):
        NotFinite(KRR4, eps=1.0).unbiased_estimate(reports, [1, 2])
    with pytest.raises(ValueError, match="one per report"):
        NotFinite(KRR4, eps=1.0).unbiased_estimate(reports, [1, 2, 3])
    with pytest.raises(ValueError, match="non-empty mask"):
        Empty(KRR4, eps=1.0).likely_subset(reports)
    with pytest.raises(ValueError, match="positive integer"):
        NoOutputs(KRR4, eps=1.0).output_count()
    with pytest.raises(ValueError, match="two log-probabilities"):
        Positive(KRR4, eps=1.0).named_value_likelihood()


def test_require_outputs_names_the_first_report_that_is_not_an_output():
    mech = make("mechanism", "krr", KRR4, eps=1.0)
    mech.require_outputs(np.array([0, 3]), 4)
    with pytest.raises(EstimationError, match=r"report 4 is not an output of krr\(eps=1.0\) \(outputs are 0..3\)"):
        mech.require_outputs(np.array([1, 4, -1]), 4)


def test_the_former_operator_hook_still_works_with_its_own_threshold():
    krr = _krr_class()
    with pytest.warns(DeprecationWarning, match="_likelihood_operator is deprecated"):

        class Legacy(krr):
            def _likelihood_operator(self, reports):
                return krr._structured_likelihood(self, reports) if self.domain.size >= 3 else None

    assert Legacy.structured_min_size == 0 and Capabilities.of(Legacy).structured_likelihood
    assert Legacy(KRR4, eps=1.0).likelihood_operator([[1]]) is not None
    assert Legacy(Integers(low=0, high=1), eps=1.0).likelihood_operator([[1]]) is None


# ------------------------------------------------------------------ the kit catches broken capabilities
def _broken(name, domain, hook, body, **params):
    """A subclass of built-in ``name`` whose ``hook`` is ``body``."""
    cls = type(make("mechanism", name, domain, **params))
    return type(f"Broken{cls.__name__}", (cls,), {hook: body})(domain, **params)


def test_a_structured_likelihood_that_disagrees_with_the_dense_one_fails():
    def wrong(self, reports):  # r = e^-eps/2 instead of e^-eps
        return np.full(reports.shape[0], 0.0), constant_plus_column(reports[:, 0], self.domain.size, 0.5)

    mech = _broken("krr", KRR4, "_structured_likelihood", wrong, eps=1.0)
    with pytest.raises(AssertionError, match="structured likelihood of report"):
        check_structured_likelihood(mech)
    with pytest.raises(AssertionError, match="structured likelihood of report"):
        check_mechanism(mech)


def test_a_biased_estimate_fails_exactly_on_a_small_matrix():
    rappor = type(make("mechanism", "rappor", KRR4, eps=1.0))

    def biased(self, reports, counts):
        return 1.001 * rappor._unbiased_estimate(self, reports, counts)

    with pytest.raises(AssertionError, match="not the point mass"):
        check_unbiased_estimate(_broken("rappor", KRR4, "_unbiased_estimate", biased, eps=1.0))


def test_a_biased_estimate_fails_the_statistical_test_without_a_matrix():
    olh = type(make("mechanism", "olh", LINE, eps=1.5))

    def unscaled(self, reports, counts):  # divides by p instead of p - 1/g
        v = olh._unbiased_estimate(self, reports, counts)
        return v * self._p_minus_one_over_g / self.p

    with pytest.raises(AssertionError, match="t-test p ="):
        check_unbiased_estimate(_broken("olh", LINE, "_unbiased_estimate", unscaled, eps=1.5))


def test_a_likely_subset_that_leaves_out_a_possible_maximum_fails():
    def first_report_only(self, reports):
        mask = np.zeros(self.domain.size, dtype=bool)
        mask[reports[0, 0]] = True
        return mask

    with pytest.raises(AssertionError, match="outside the likely subset"):
        check_likely_subset(_broken("krr", KRR4, "_likely_subset", first_report_only, eps=1.0))


def test_a_wrong_named_value_likelihood_fails():
    def same(self):
        return math.log(self._keep), math.log(self._keep)

    with pytest.raises(AssertionError, match="named_value_likelihood"):
        check_named_value_likelihood(_broken("krr", KRR4, "_named_value_likelihood", same, eps=1.0))


def test_a_wrong_output_count_fails():
    with pytest.raises(AssertionError, match="declares 5 outputs, its matrix has 4"):
        check_output_count(_broken("krr", KRR4, "_output_count", lambda self: 5, eps=1.0))


def test_overriding_a_checked_wrapper_fails():
    def unchecked(self, reports):
        return self._structured_likelihood(np.asarray(reports))

    with pytest.raises(AssertionError, match="overrides structured_likelihood"):
        check_hooks(_broken("krr", KRR4, "structured_likelihood", unchecked, eps=1.0))


# ------------------------------------------------------------------ the core calls only the wrappers
ROOT = Path(__file__).resolve().parents[1]
HOOKS = (
    "_matrix|_log_likelihood|_structured_likelihood|_likelihood_operator|_unbiased_estimate|_likely_subset"
    "|_output_count|_named_value_likelihood|_require_outputs"
)


def test_the_core_calls_no_mechanism_hook_and_detects_no_override_by_identity():
    for path in sorted((ROOT / "ldpsim").rglob("*.py")):
        if path.name in ("mechanism.py", "capabilities.py"):
            continue  # the wrappers themselves
        text = path.read_text()
        assert not re.search(rf"\.({HOOKS})\(", text), path
        assert not re.search(r"\)\._\w+ is (not )?\w+\._\w+", text), path


def test_plugins_leave_the_size_policy_to_the_base():
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        text = path.read_text()
        assert "STRUCTURED_MIN_SIZE" not in text and "_require_outputs" not in text, path
        assert "def structured_likelihood" not in text and "_likelihood_operator" not in text, path
