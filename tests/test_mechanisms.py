"""Built-in mechanisms: the plugin contract, closed forms from 001, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from hypothesis import given
from hypothesis import strategies as st

from ldpsim import Categorical, Grid, Integers, ParameterError, ldp_level
from ldpsim.testing import check_mechanism, check_parameters

DOMAINS = {
    "line": Integers(low=0, high=9),
    "wide": Integers(low=-20, high=40, step=3),
    "labels": Categorical(values=["a", "b", "c", "d"]),
    "grid": Grid(rows=3, cols=4, cell=0.5),
}
CASES = [
    ("krr", "line", {"eps": 1.0}),
    ("krr", "labels", {"eps": 0.2}),
    ("krr", "grid", {"eps": 3.0}),
    ("krr", "wide", {"eps": 8.0}),
    ("geometric", "line", {"eps": 0.1}),
    ("geometric", "line", {"eps": 2.0}),
    ("geometric", "wide", {"eps": 0.05}),
    (
        "matrix",
        "labels",
        {"rows": [[0.7, 0.1, 0.1, 0.1], [0.2, 0.6, 0.1, 0.1], [0, 0, 1, 0], [0.25, 0.25, 0.25, 0.25]]},
    ),
    ("matrix", "labels", {"rows": [[0.5, 0.5], [0.1, 0.9], [0.3, 0.7], [1, 0]], "outputs": ["yes", "no"]}),
]


@pytest.mark.parametrize(("name", "domain", "params"), CASES)
def test_contract(name, domain, params):
    check_mechanism(make("mechanism", name, DOMAINS[domain], **params))


@pytest.mark.parametrize(("name", "domain", "params"), [c for c in CASES if c[0] != "matrix"])
def test_parameters_are_validated(registry, name, domain, params):
    check_parameters(registry.get("mechanism", name).cls, DOMAINS[domain], params)


def test_the_contract_catches_a_sampler_that_disagrees_with_its_matrix():
    from plugins_under_test import BiasedKRR

    with pytest.raises(AssertionError, match="do not follow its likelihood"):
        check_mechanism(BiasedKRR(DOMAINS["line"], eps=1.0))


def test_the_contract_catches_a_wrong_privacy_claim():
    from plugins_under_test import OverclaimingKRR

    with pytest.raises(AssertionError, match="claims 0.5-LDP but its matrix gives eps = 1"):
        check_mechanism(OverclaimingKRR(DOMAINS["line"], eps=1.0))


@given(k=st.integers(2, 40), eps=st.floats(0.01, 20))
def test_krr_is_eq_20_of_001(k, eps):
    m = make("mechanism", "krr", Integers(low=0, high=k - 1), eps=eps).matrix
    np.testing.assert_allclose(np.diag(m), math.exp(eps) / (k - 1 + math.exp(eps)), rtol=1e-12)
    np.testing.assert_allclose(m[~np.eye(k, dtype=bool)], 1 / (k - 1 + math.exp(eps)), rtol=1e-12)
    np.testing.assert_allclose(m.sum(axis=1), 1, atol=1e-12)
    assert ldp_level(np.log(m).T) == pytest.approx(eps, rel=1e-9)


@given(low=st.integers(-50, 50), k=st.integers(2, 30), eps=st.floats(0.001, 5))
def test_truncated_geometric_is_eqs_22_23_of_001(low, k, eps):
    domain = Integers(low=low, high=low + k - 1)
    m = make("mechanism", "geometric", domain, eps=eps).matrix
    z = np.arange(k)
    c = np.where((z == 0) | (z == k - 1), 1, 1 - math.exp(-eps)) / (1 + math.exp(-eps))
    expected = c[None, :] * np.exp(-eps * np.abs(z[None, :] - z[:, None]))
    np.testing.assert_allclose(m, expected, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(m.sum(axis=1), 1, atol=1e-12)


def test_geometric_eps_is_per_unit_of_distance():
    # With step 3, neighbouring values are 3 apart: the ratio of neighbours is e^(3 eps).
    m = make("mechanism", "geometric", DOMAINS["wide"], eps=0.05).matrix
    assert m[5, 5] / m[6, 5] == pytest.approx(math.exp(0.15))


def test_geometric_needs_an_integers_domain():
    with pytest.raises(ParameterError, match="does not work on a categorical domain"):
        make("mechanism", "geometric", DOMAINS["labels"], eps=1.0)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[0.5, 0.5], [0.2, 0.7], [1, 0], [0, 1]], r"rows: row 1 sums to 0.9, not 1"),
        ([[0.5, 0.5], [1.2, -0.2], [1, 0], [0, 1]], r"rows: entry \(1, 1\) is negative"),
        ([[0.5, 0.5], [1, 0], [0, 1]], r"rows: has 3 rows but the domain has 4 values"),
        ([[0.5, 0.5], [1, 0, 0], [1, 0], [0, 1]], r"rows: rows have different lengths"),
        ("0.5, 0.5", r"rows: expected a list of rows"),
    ],
)
def test_matrix_rows_are_checked(rows, message):
    with pytest.raises(ParameterError, match=message):
        make("mechanism", "matrix", DOMAINS["labels"], rows=rows)


def test_matrix_claims_exactly_the_ldp_level_it_has():
    rows = [[0.5, 0.5], [0.1, 0.9], [0.3, 0.7], [0.25, 0.75]]
    mech = make("mechanism", "matrix", DOMAINS["labels"], rows=rows)
    assert mech.privacy.eps == pytest.approx(math.log(5))  # column 0: 0.5 / 0.1
    assert mech.output_labels() == ["0", "1"]
    zero = make("mechanism", "matrix", DOMAINS["labels"], rows=[[1, 0], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
    assert math.isinf(zero.privacy.eps)


@pytest.mark.parametrize("eps", [0.0, -1.0])
def test_eps_must_be_positive(eps):
    with pytest.raises(ParameterError, match=r"eps: must be > 0, got"):
        make("mechanism", "krr", DOMAINS["line"], eps=eps)


def test_sampling_needs_an_explicit_generator():
    mech = make("mechanism", "krr", DOMAINS["line"], eps=1.0)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        mech.sample(np.arange(3), 42)


def test_krr_reports_the_truth_at_the_right_rate(rng):
    mech = make("mechanism", "krr", DOMAINS["line"], eps=1.0)
    values = rng.integers(0, 10, 200_000)
    kept = (mech.sample(values, rng)[:, 0] == values).mean()
    p = math.e / (9 + math.e)
    assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / 200_000)
