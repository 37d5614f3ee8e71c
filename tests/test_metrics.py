"""Metrics against closed forms and independent implementations."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.stats import wasserstein_distance

import ldpsim
from ldpsim import Categorical, Grid, Integers

dists = st.integers(2, 25).flatmap(
    lambda k: st.tuples(*[st.lists(st.floats(0, 1), min_size=k, max_size=k).filter(lambda x: sum(x) > 0.01)] * 2)
)


def normalized(x):
    x = np.asarray(x, float)
    return x / x.sum()


@given(dists)
def test_tv_l1_l2(pair):
    p, q = map(normalized, pair)
    domain = Integers(low=0, high=len(p) - 1)
    assert make("metric", "tv")(p, q, domain) == pytest.approx(0.5 * np.abs(p - q).sum())
    assert make("metric", "l1")(p, q, domain) == pytest.approx(np.abs(p - q).sum())
    assert make("metric", "l2")(p, q, domain) == pytest.approx(np.linalg.norm(p - q))
    assert 0 <= make("metric", "tv")(p, q, domain) <= 1 + 1e-12


@given(dists, st.integers(1, 5), st.integers(-10, 10))
def test_emd_1d_is_scipys_wasserstein(pair, step, low):
    p, q = map(normalized, pair)
    domain = Integers(low=low, high=low + step * (len(p) - 1), step=step)
    values = domain.values.astype(float)
    expected = wasserstein_distance(values, values, p, q)
    assert make("metric", "emd")(p, q, domain) == pytest.approx(expected, abs=1e-9)


def test_emd_on_a_grid_is_the_optimal_transport_linear_program(rng):
    grid = Grid(rows=3, cols=4, cell=0.5)
    for _ in range(5):
        p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12) * 0.3)
        d = grid.distances
        # min sum T_ij d_ij  s.t. rows of T sum to p, columns to q, T >= 0 (an independent solver)
        a_eq = np.vstack([np.kron(np.eye(12), np.ones(12)), np.kron(np.ones(12), np.eye(12))])
        lp = linprog(d.ravel(), A_eq=a_eq, b_eq=np.concatenate([p, q]), bounds=(0, None), method="highs")
        assert make("metric", "emd")(p, q, grid) == pytest.approx(lp.fun, rel=1e-7, abs=1e-10)


def test_emd_moving_all_mass_one_cell_costs_the_cell_size():
    grid = Grid(rows=2, cols=2, cell=0.5)
    assert make("metric", "emd")([1, 0, 0, 0], [0, 0, 0, 1], grid) == pytest.approx(0.5 * np.sqrt(2))
    line = Integers(low=0, high=30, step=10)
    assert make("metric", "emd")([1, 0, 0, 0], [0, 0, 0, 1], line) == pytest.approx(30)


def test_emd_on_categories_is_tv():
    domain = Categorical(values=list("abc"))
    p, q = [0.5, 0.5, 0], [0, 0.25, 0.75]
    assert make("metric", "emd")(p, q, domain) == pytest.approx(0.75)


def test_metric_checks_lengths():
    with pytest.raises(ValueError, match="needs two vectors of length 3"):
        make("metric", "tv")([0.5, 0.5], [0.5, 0.5], Categorical(values=list("abc")))


def test_a_metric_checks_each_domain_once_and_again_after_a_parameter_changes():
    """The domain check is remembered per domain (a sweep scores thousands of estimates on one), never
    across domains or a changed parameter: an unsuitable domain is refused whenever it comes."""
    metric = make("metric", "avg-mse", users=10)
    numbers, letters = Integers(low=0, high=2), Categorical(values=list("abc"))
    p, q = [0.5, 0.5, 0], [0, 0.25, 0.75]
    assert metric(p, q, numbers) == pytest.approx(10 * (0.5 - 1.75) ** 2)
    with pytest.raises(ldpsim.ParameterError, match="needs numeric values"):
        metric(p, q, letters)  # another domain: checked
    assert metric(p, q, numbers) == pytest.approx(10 * (0.5 - 1.75) ** 2)
    metric.weights = np.ones(2)  # now unsuitable for the domain it was checked on
    with pytest.raises(ldpsim.ParameterError, match="has 2 entries, the domain has 3 values"):
        metric(p, q, numbers)
    metric.weights = np.ones(3)
    assert metric(p, q, numbers) == pytest.approx(10 * (1 - 1) ** 2)


def test_emd_is_in_the_grids_distance_unit_and_tv_is_unitless():
    from ldpsim.results.labels import metric_units

    registry = ldpsim.get_registry()
    km = ldpsim.Grid(rows=2, cols=3, cell=0.5, unit="km")
    assert metric_units(registry.create("metric", "emd"), km) == "km"
    assert metric_units(registry.create("metric", "tv"), km) == ""


def test_a_value_unit_reaches_the_mean_and_emd_errors_and_squares_with_them():
    """An integer domain's unit (adult ages: years) is the unit of the mean's error, of EMD, and, squared, of the
    mean's squared error; a unit-less domain keeps its specification (and results files) as before."""
    from ldpsim.results.labels import metric_units

    years = ldpsim.make_domain({"kind": "integers", "low": 17, "high": 90, "unit": "years"})
    assert years.spec()["unit"] == "years" and ldpsim.make_domain(years.spec()) == years
    assert "unit" not in ldpsim.make_domain({"kind": "integers", "low": 0, "high": 3}).spec()
    registry = ldpsim.get_registry()
    units = {
        label: metric_units(registry.create("metric", name, **params), years)
        for label, name, params in [("mean", "mean", {}), ("mse", "mean", {"squared": True}), ("emd", "emd", {})]
    }
    assert units == {"mean": "years", "mse": "years²", "emd": "years"}
    assert metric_units(registry.create("metric", "mean"), ldpsim.Integers(low=0, high=3)) == ""
