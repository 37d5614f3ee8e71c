"""Datasets: distributions against scipy, CSV reading and its errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make
from scipy import stats

import ldpsim
from ldpsim import Categorical, DataError, Grid, Integers, ParameterError

DATA = __import__("pathlib").Path(__file__).parent / "data"


@pytest.mark.parametrize("p", [0.0, 0.13, 0.5, 0.9, 1.0])
def test_binomial_pmf_is_scipys(p):
    domain = Integers(low=0, high=99)
    np.testing.assert_allclose(
        make("dataset", "binomial", domain, p=p).pmf(), stats.binom.pmf(np.arange(100), 99, p), atol=1e-14
    )


def test_binomial_samples_follow_the_pmf(rng):
    ds = make("dataset", "binomial", Integers(low=10, high=29), p=0.3)
    values = ds.sample(200_000, rng)
    counts = np.bincount(values, minlength=20)
    expected = 200_000 * ds.pmf()
    keep = expected > 5
    assert stats.chisquare(counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum()).pvalue > 1e-4


def test_uniform_on_a_sub_range(rng):
    ds = make("dataset", "uniform", Integers(low=0, high=99), low=20, high=39)
    pmf = ds.pmf()
    assert np.all(pmf[20:40] == pytest.approx(1 / 20)) and pmf[:20].sum() == 0 and pmf[40:].sum() == 0
    values = ds.sample(10_000, rng)
    assert values.min() >= 20 and values.max() <= 39


def test_uniform_range_outside_the_domain_is_refused():
    with pytest.raises(ParameterError, match=r"low: the range 200..300 holds no value"):
        make("dataset", "uniform", Integers(low=0, high=99), low=200, high=300)
    with pytest.raises(ParameterError, match="low: only applies to integers domains"):
        make("dataset", "uniform", Grid(rows=2, cols=2), low=0)


def test_zipf_pmf():
    pmf = make("dataset", "zipf", Categorical(values=list("abcde")), s=2.0).pmf()
    np.testing.assert_allclose(pmf / pmf[0], 1 / np.arange(1, 6) ** 2)
    assert pmf.sum() == pytest.approx(1)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_binomial_p_must_be_a_probability(p):
    with pytest.raises(ParameterError, match=r"p: must be (>=|<=)"):
        make("dataset", "binomial", Integers(low=0, high=9), p=p)


def test_csv_reads_one_column_in_order(rng):
    ds = make("dataset", "csv", Integers(low=20, high=60), path=str(DATA / "people.csv"), column="age")
    assert ds.size == 6
    np.testing.assert_array_equal(ds.sample(6, rng), np.array([39, 50, 38, 53, 28, 37]) - 20)
    sub = ds.sample(4, rng)
    assert len(set(sub.tolist())) == 4  # without replacement


def test_csv_categorical_column(rng):
    ds = make(
        "dataset", "csv", Categorical(values=["Lyon", "Nice", "Paris"]), path=str(DATA / "people.csv"), column="city"
    )
    np.testing.assert_array_equal(np.bincount(ds.sample(6, rng), minlength=3), [2, 1, 3])


def test_csv_with_replacement_can_draw_more_users(rng):
    ds = make("dataset", "csv", Integers(low=20, high=60), path=str(DATA / "people.csv"), column="age", replace=True)
    assert ds.sample(50, rng).shape == (50,)


@pytest.mark.parametrize(
    ("params", "domain", "message"),
    [
        ({"path": "missing.csv", "column": "age"}, Integers(low=0, high=99), r"path: file '.*missing.csv' not found"),
        (
            {"column": "height"},
            Integers(low=0, high=99),
            r"column: .* has no column 'height' \(columns: id, age, city\)",
        ),
        ({"column": "city"}, Integers(low=0, high=99), r"path: .* line 2: 'Paris' in column 'city' is not an integer"),
        ({"column": "age"}, Integers(low=40, high=99), r"has 4 value\(s\) outside the domain 40..99"),
        ({"column": "city"}, Categorical(values=["Paris", "Lyon"]), r"1 label\(s\) not in the domain, e.g. 'Nice'"),
    ],
)
def test_csv_errors_name_the_problem(params, domain, message):
    params = {"path": str(DATA / "people.csv"), **params}
    with pytest.raises(DataError, match=message):
        make("dataset", "csv", domain, **params)


def test_csv_with_a_hole(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("age\n30\n\n31\n,\n")
    with pytest.raises(DataError, match="line 5"):
        make("dataset", "csv", Integers(low=0, high=99), path=str(bad), column="age")


def test_csv_binary_garbage(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DataError, match="not a readable CSV file"):
        make("dataset", "csv", Integers(low=0, high=99), path=str(bad), column="age")


def test_csv_more_users_than_rows_is_refused(rng):
    ds = make("dataset", "csv", Integers(low=20, high=60), path=str(DATA / "people.csv"), column="age")
    with pytest.raises(DataError, match="asks for 7 users but .* has 6 rows"):
        ds.sample(7, rng)


def test_max_users_is_the_record_count_unless_drawing_with_replacement():
    people = {"path": str(DATA / "people.csv"), "column": "age"}
    assert make("dataset", "csv", Integers(low=20, high=60), **people).max_users == 6
    assert make("dataset", "csv", Integers(low=20, high=60), replace=True, **people).max_users is None
    adult = make("dataset", "adult-ages", Integers(low=17, high=90))
    assert adult.max_users == adult.size == 48_842
    assert make("dataset", "adult-ages", Integers(low=17, high=90), replace=True).max_users is None
    assert make("dataset", "binomial", Integers(low=0, high=9), p=0.5).max_users is None  # generative: no limit


def test_the_parameter_a_dataset_names_to_lift_its_limit_is_one_of_its_bool_parameters():
    """``unlimited_by`` is quoted in an error hint (``set dataset.replace = true``): it must be true of the plugin."""
    registry = ldpsim.get_registry()
    named = [entry.cls for entry in registry.entries("dataset") if entry.cls.unlimited_by is not None]
    assert {cls.name for cls in named} >= {"csv", "adult-ages", "gowalla"}
    for cls in named:
        param = cls.parameters().get(cls.unlimited_by)
        assert param is not None and param.kinds == ("bool",), f"{cls.name}.unlimited_by names no bool parameter"
