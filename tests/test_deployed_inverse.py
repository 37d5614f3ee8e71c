"""Structured inverses (issue 31): k-RR's matrix ``a I + b 11^T`` inverted in closed form equals the dense solve."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpsim import Categorical, Integers, Mechanism, Observations, Privacy, unbiased_estimate
from ldpsim.base.errors import ContractError
from ldpsim.estimation.unbiased import inversion_bytes, plan_moments


def _krr(k: int, eps: float) -> Mechanism:
    return make("mechanism", "krr", Categorical(values=[str(i) for i in range(k)]), eps=eps)


def _dense_moments(m: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n Cov[v], n Var[v | values], mean) of ``v = q A^+`` from the definitions, through the pseudo-inverse."""
    lam = theta @ m
    pinv = np.linalg.pinv(m.T)
    second = (pinv * lam) @ pinv.T
    mean = pinv @ lam
    r = pinv @ m.T
    return second - np.outer(mean, mean), np.diag(second - (r * theta) @ r.T), mean


@settings(max_examples=40)
@given(st.integers(2, 120), st.floats(0.3, 8.0), st.integers(0, 2**32 - 1))
def test_krr_closed_form_inverse_equals_the_dense_solve(k: int, eps: float, seed: int) -> None:
    mech = _krr(k, eps)
    a, b = mech.diagonal_plus_constant()
    np.testing.assert_allclose(mech.matrix, a * np.eye(k) + b, rtol=0, atol=1e-15)  # the declared structure
    rng = np.random.default_rng(seed)
    reports = rng.integers(0, k, size=int(rng.integers(1, 5 * k)))
    obs = Observations.from_reports(mech.domain, [(mech, reports[:, None])])
    q = np.bincount(reports, minlength=k) / reports.size
    dense, *_ = np.linalg.lstsq(mech.matrix.T, q, rcond=None)
    cond = 1 / a  # the matrix's condition number (its eigenvalues are a and a + k b = 1): the dense solve's error
    np.testing.assert_allclose(unbiased_estimate(obs), dense, rtol=0, atol=1e-14 * cond)


@settings(max_examples=25)
@given(st.integers(2, 60), st.floats(0.3, 6.0), st.integers(0, 2**32 - 1))
def test_krr_closed_form_moments_equal_the_pseudo_inverse(k: int, eps: float, seed: int) -> None:
    mech = _krr(k, eps)
    theta = np.random.default_rng(seed).dirichlet(np.ones(k))
    moments = plan_moments((mech,), theta)
    assert moments is not None and moments.covariance is not None and moments.given is not None
    cov, given_var, mean = _dense_moments(mech.matrix, theta)
    scale = (1 / mech.diagonal_plus_constant()[0]) ** 2  # entries of the covariance grow as 1 / a^2
    np.testing.assert_allclose(moments.covariance, cov, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(moments.given, given_var, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(moments.bias, mean - theta, rtol=0, atol=1e-12)


def test_krr_inversion_needs_no_matrix_memory() -> None:
    """The run's memory preflight counts no matrix for a structured inverse (k = 10^6 is estimated in O(k))."""
    assert inversion_bytes((_krr(1_000_000, 1.0),)) is None
    assert inversion_bytes((_krr(8, 1.0), _krr(8, 1.0))) is not None  # a joint plan still inverts its matrix


class _Broken(Mechanism):
    name = "broken-structure"

    @property
    def privacy(self) -> Privacy:
        return Privacy("none")

    def _matrix(self) -> np.ndarray:
        return np.full((3, 3), 1 / 3)

    def _diagonal_plus_constant(self) -> tuple[float, float]:
        return 0.5, 0.5  # rows would sum to 2


def test_a_structure_whose_rows_do_not_sum_to_one_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="_diagonal_plus_constant"):
        _Broken(Categorical(values=["a", "b", "c"])).diagonal_plus_constant()


@settings(max_examples=25)
@given(st.integers(2, 80), st.floats(0.1, 30.0))
def test_the_exponential_mechanism_on_categories_declares_krr_at_half_eps(k: int, eps: float) -> None:
    """On categories the exponential mechanism is k-RR at eps/2; declared, it is inverted in O(k). Ordered
    domains have rows that are not constant off the diagonal: no structure there."""
    mech = make("mechanism", "exponential", Categorical(values=[str(i) for i in range(k)]), eps=eps)
    a, b = mech.diagonal_plus_constant()
    np.testing.assert_allclose(mech.matrix, a * np.eye(k) + b, rtol=0, atol=1e-15)
    np.testing.assert_allclose((a, b), _krr(k, eps / 2).diagonal_plus_constant(), rtol=1e-12)
    assert make("mechanism", "exponential", Integers(low=0, high=k), eps=eps).diagonal_plus_constant() is None
