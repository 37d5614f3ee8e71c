"""Observations held in parts (issue 31): the passes, the Newton products and the MLE are the merged ones'."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make

from ldpsim import HeldObservations, Integers, Likelihood, Observations, newton_mle
from ldpsim.estimation.held import HeldSolver
from ldpsim.estimation.interior_point import Solver
from ldpsim.plugin.executor import KeptHere
from ldpsim.theory.sampling import sample_cohort

DOMAIN = Integers(low=0, high=31)


def parts_of(users: list[int], seed: int = 1, mech_name: str = "oue") -> list[Observations]:
    mech = make("mechanism", mech_name, DOMAIN, eps=1.0)
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, 33) ** 1.1
    parts = []
    for s, n in enumerate(users):
        if not n:
            parts.append(Observations(DOMAIN, []))
            continue
        reports, counts = sample_cohort(
            (mech,), rng.multinomial(n, weights / weights.sum()), [np.random.default_rng(s)]
        )
        parts.append(Observations.from_counts(DOMAIN, mech, reports, counts))
    return parts


def merged_of(parts: list[Observations]) -> Observations:
    return Observations(DOMAIN, [g for p in parts for g in p.groups])


@pytest.fixture(scope="module")
def three():
    parts = parts_of([3000, 0, 5000, 2000])  # one part without reports
    return parts, merged_of(parts), HeldObservations(DOMAIN, KeptHere(parts))


def test_held_passes_sum_the_parts_to_the_merged_likelihoods(three):
    _, merged, held = three
    whole, parts = Likelihood.of(merged), Likelihood.of(held)
    assert held.n == merged.n == 10_000 and held.n_distinct >= merged.n_distinct
    assert parts.constant == pytest.approx(whole.constant, rel=1e-12)
    theta = np.random.default_rng(4).dirichlet(np.ones(32))
    (a, ga), (b, gb) = whole.em_parts(theta), parts.em_parts(theta)
    assert b == pytest.approx(a, rel=1e-12)
    np.testing.assert_allclose(gb, ga, rtol=1e-11)
    np.testing.assert_allclose(parts.certify(theta), whole.certify(theta), rtol=1e-9)


def test_the_held_solver_sums_the_parts_products_to_the_merged_solvers(three):
    """With every row in each part's Hessian (small parts: dense), f, the gradient, L and the Hessian B are the
    merged solver's dense ones, to round-off."""
    _, merged, held = three
    whole = Likelihood.of(merged)
    dense = np.asarray(whole.H @ np.eye(32))
    reference = Solver(whole, dense)
    solver = HeldSolver.of(Likelihood.of(held))
    assert solver is not None and solver.sample is not None and solver.sample.every_row
    x = np.random.default_rng(5).dirichlet(np.ones(32)) * 1.3
    mine, theirs = solver.point(x), reference.point(x)
    assert mine.f == pytest.approx(theirs.f, rel=1e-12)
    solver.complete(mine)
    reference.complete(theirs)
    np.testing.assert_allclose(mine.grad, theirs.grad, rtol=1e-11)
    assert mine.loglik == pytest.approx(theirs.loglik, rel=1e-12) and mine.kkt == pytest.approx(theirs.kkt)
    np.testing.assert_allclose(solver.hessian(mine), reference.hessian(theirs), rtol=1e-10)


def test_a_held_mle_takes_newton_steps_to_the_merged_mle(three):
    """Newton on the parts takes about the merged run's passes (SQUAREM takes hundreds here) to the same MLE:
    L within the certificate, n log(1 + tol)."""
    _, merged, held = three
    mle = make("estimator", "mle")
    whole, parts = mle.estimate(merged), mle.estimate(held)
    em = newton_mle(Likelihood.of(held), hessian="cg")  # cg: not offered on parts, SQUAREM instead
    assert whole.kkt < 1e-6 and parts.kkt < 1e-6 and em.kkt < 1e-6
    assert parts.iterations <= whole.iterations + 5 < em.iterations
    assert abs(parts.loglik - whole.loglik) <= merged.n * math.log1p(1e-6)
    np.testing.assert_allclose(parts.distribution, whole.distribution, atol=1e-3)


def test_parts_too_large_for_a_dense_hessian_form_sampled_ones(monkeypatch):
    """Parts past the dense Hessian's budget (budgets set to 0 here) form theirs from a sample of their rows, as
    the solver does for a large likelihood alone: the Newton steps are inexact, the certificate still holds."""
    from ldpsim.estimation import hessian_rows

    monkeypatch.setattr(hessian_rows, "DENSE_MAX_FLOPS", 0)
    monkeypatch.setattr(hessian_rows, "SAMPLED_FORM_FLOPS", 0)  # 16 rows a value: 512 of 20,000
    held = HeldObservations(DOMAIN, KeptHere(parts_of([20_000, 20_000], seed=2)))
    solver = HeldSolver.of(Likelihood.of(held))
    assert solver is not None and solver.sample is not None and not solver.sample.every_row
    result = newton_mle(Likelihood.of(held))
    assert result.kkt < 1e-6 and result.converged and result.iterations < 60
