"""Datasets of tuples on product domains: csv-tuples (a CSV file's columns), copula (exact Gaussian copula)
and adult-tuples (UCI Adult's persons, shipped counts)."""

from __future__ import annotations

from functools import reduce
from importlib.resources import files

import ldpsim_plugins.datasets.tuples as tuples
import numpy as np
import pytest
from helpers import make, shared_data
from scipy import stats

from ldpsim import DataError, Integers, ParameterError, Product
from ldpsim.testing import check_dataset


def ints(name: str, low: int, high: int) -> dict:
    return {"name": name, "kind": "integers", "low": low, "high": high}


def cats(name: str, values: list[str]) -> dict:
    return {"name": name, "kind": "categorical", "values": values}


def product(*attributes: dict) -> Product:
    return Product(attributes=list(attributes))


# ------------------------------------------------------------------ csv-tuples
PEOPLE = """id,age,city,pet
1,30,Paris,cat
2,31,Lyon,dog
3,30,Paris,?
4,32, Nice ,cat
5,30,Paris,cat
6,31,?,dog
"""
PEOPLE_DOMAIN = product(ints("age", 30, 32), cats("city", ["Lyon", "Nice", "Paris"]), cats("pet", ["cat", "dog"]))


@pytest.fixture
def people(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text(PEOPLE)
    return path


def csv_tuples(path, domain=PEOPLE_DOMAIN, **params):
    return make("dataset", "csv-tuples", domain, path=str(path), **params)


def test_csv_tuples_counts_the_complete_rows_and_says_how_many_were_dropped(people, rng):
    ds = csv_tuples(people, skip=["?"])
    kept = [(30, "Paris", "cat"), (31, "Lyon", "dog"), (32, "Nice", "cat"), (30, "Paris", "cat")]  # " Nice " stripped
    expected = np.bincount(
        PEOPLE_DOMAIN.index([[a for a, _, _ in kept], [c for _, c, _ in kept], [p for _, _, p in kept]]),
        minlength=PEOPLE_DOMAIN.size,
    )
    assert ds.size == ds.max_users == 4
    np.testing.assert_array_equal(ds.counts, expected)
    np.testing.assert_array_equal(np.bincount(ds.sample(4, rng), minlength=PEOPLE_DOMAIN.size), expected)
    np.testing.assert_array_equal(ds.sample_counts(4, rng), expected)
    assert "4 tuples (age, city, pet)" in ds.description and "2 row(s) holding '?' dropped" in ds.description
    with pytest.raises(DataError, match=r"users: asks for 5 users but the population has 4 records"):
        ds.sample_counts(5, rng)
    assert csv_tuples(people, skip=["?"], replace=True).sample_counts(50, rng).sum() == 50


def test_csv_tuples_reads_the_columns_named_for_the_attributes(people):
    domain = product(cats("where", ["Lyon", "Nice", "Paris", "?"]), ints("years", 30, 32))
    ds = csv_tuples(people, domain, columns=["city", "age"])
    assert ds.size == 6
    # city x age: Paris has 30 three times, ? has 31 once
    cube = ds.counts.reshape(domain.sizes)
    assert cube[2, 0] == 3 and cube[3, 1] == 1 and cube.sum() == 6


def test_csv_tuples_drawing_everyone_gives_the_files_counts_exactly(tmp_path, rng):
    values = np.random.default_rng(7).integers(0, [4, 3, 5], size=(2_000, 3))
    labels = np.array(["a", "b", "c"])
    path = tmp_path / "many.csv"
    rows = [f"{x},{labels[y]},{z - 2}" for x, y, z in values]
    path.write_text("x,y,z\n" + "\n".join(rows) + "\n")
    domain = product(ints("x", 0, 3), cats("y", ["a", "b", "c"]), ints("z", -2, 2))
    ds = csv_tuples(path, domain)
    expected = np.bincount(domain.join(values.T), minlength=domain.size)
    np.testing.assert_array_equal(ds.sample_counts(2_000, rng), expected)
    np.testing.assert_array_equal(np.bincount(ds.sample(2_000, rng), minlength=domain.size), expected)
    half = ds.sample_counts(1_000, rng)
    assert half.sum() == 1_000 and np.all(half <= expected)  # without replacement: never more than the file has
    np.testing.assert_allclose(ds.distribution(), expected / 2_000)
    check_dataset(ds)


@pytest.mark.parametrize(
    ("domain", "params", "error", "message"),
    [
        (
            PEOPLE_DOMAIN,
            {"columns": ["age", "colour", "pet"]},
            DataError,
            r"columns: .* has no column 'colour' for attribute 'city' \(columns: id, age, city, pet\)",
        ),
        (
            PEOPLE_DOMAIN,
            {},
            DataError,
            r"domain: .* line 7: '\?' in column 'city' \(attribute 'city'\) is not one of the attribute's values"
            r".*or list them in skip",
        ),
        (
            product(ints("age", 30, 31), cats("city", ["Lyon", "Nice", "Paris"]), cats("pet", ["cat", "dog"])),
            {"skip": ["?"]},
            DataError,
            r"domain: .* line 5: 32 in column 'age' \(attribute 'age'\) is not in the attribute's values 30..31"
            r".*widen attribute 'age'",
        ),
        (
            product(ints("age", 30, 32), cats("city", ["Lyon", "Paris"]), cats("pet", ["cat", "dog"])),
            {"skip": ["?"]},
            DataError,
            r"domain: .* line 5: 'Nice' in column 'city' \(attribute 'city'\)",
        ),
        (PEOPLE_DOMAIN, {"skip": ["?", "30", "31", "32"]}, DataError, r"skip: .* has no rows left: all 6"),
        (PEOPLE_DOMAIN, {"columns": ["age", "city"]}, ParameterError, r"columns: names 2 columns for 3 attributes"),
        (
            product(ints("age", 30, 32), {"name": "at", "kind": "grid", "rows": 2, "cols": 2}),
            {},
            ParameterError,
            r"domain: .* attribute 'at' is a grid",
        ),
    ],
)
def test_csv_tuples_errors_name_the_column_the_value_and_the_fix(people, domain, params, error, message):
    with pytest.raises(error, match=message) as info:
        csv_tuples(people, domain, **params)
    assert "\n" not in str(info.value)


def test_csv_tuples_refuses_files_without_data_and_bad_numbers(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("age,city,pet\n")
    with pytest.raises(DataError, match="has no data rows"):
        csv_tuples(empty)
    bad = tmp_path / "bad.csv"
    bad.write_text("age,city,pet\n30,Paris,cat\nthirty,Lyon,dog\n")
    with pytest.raises(DataError, match=r"line 3: 'thirty' in column 'age' is not an integer"):
        csv_tuples(bad)
    with pytest.raises(DataError, match=r"file '.*nowhere.csv' not found"):
        csv_tuples(tmp_path / "nowhere.csv")


# ------------------------------------------------------------------ copula
def copula(domain: Product, **params):
    return make("dataset", "copula", domain, **params)


def box_probabilities(laws: list[np.ndarray], rho: float) -> np.ndarray:
    """Every cell's probability from scipy's multivariate normal CDF over the box of its thresholds (scipy's
    quasi-Monte Carlo to 1e-7: 0.15 s a box in three dimensions, so the three-attribute domains are small)."""
    d = len(laws)
    cov = np.full((d, d), rho)
    np.fill_diagonal(cov, 1.0)
    edges = [np.clip(stats.norm.ppf(np.concatenate([[0.0], np.cumsum(law)[:-1], [1.0]])), -12, 12) for law in laws]
    out = np.empty([len(law) for law in laws])
    for cell in np.ndindex(out.shape):
        low = [edges[j][i] for j, i in enumerate(cell)]
        high = [edges[j][i + 1] for j, i in enumerate(cell)]
        out[cell] = stats.multivariate_normal.cdf(
            high, mean=np.zeros(d), cov=cov, lower_limit=low, abseps=1e-7, releps=0, rng=np.random.default_rng(0)
        )
    return out.ravel()


@pytest.mark.parametrize("marginals", [{"marginals": "zipf", "s": 1.3}, {"marginals": "binomial", "p": 0.3}, {}])
def test_copula_at_rho_zero_is_the_product_of_the_marginals(marginals):
    domain = product(ints("a", 0, 3), cats("b", ["x", "y", "z"]), ints("c", 0, 4))
    law = {
        "zipf": lambda k: np.arange(1, k + 1) ** -1.3 / np.sum(np.arange(1, k + 1) ** -1.3),
        "binomial": lambda k: stats.binom.pmf(np.arange(k), k - 1, 0.3),
    }.get(marginals.get("marginals", ""), lambda k: np.full(k, 1 / k))
    expected = reduce(np.multiply.outer, [law(k) for k in domain.sizes]).ravel()
    np.testing.assert_allclose(copula(domain, rho=0.0, **marginals).pmf(), expected, rtol=1e-13, atol=0)


@pytest.mark.parametrize(
    ("sizes", "rho", "marginals"),
    [
        ((4, 3), 0.6, {"marginals": "zipf"}),
        ((3, 5), -0.7, {"marginals": "binomial", "p": 0.3}),
        ((2, 2), 0.97, {}),
        ((2, 3, 2), 0.4, {"marginals": "binomial", "p": 0.3}),
        ((2, 2, 2), 0.85, {"marginals": "zipf", "s": 0.5}),
    ],
)
def test_copula_cells_are_scipys_gaussian_box_probabilities(sizes, rho, marginals):
    domain = product(*(ints(f"a{j}", 0, k - 1) for j, k in enumerate(sizes)))
    ds = copula(domain, rho=rho, **marginals)
    pmf = ds.pmf()
    laws = [ds.marginal_law(k) for k in sizes]
    np.testing.assert_allclose(pmf, box_probabilities(laws, rho), rtol=0, atol=1e-6)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12) and pmf.min() >= 0
    for j, law in enumerate(laws):  # the copula keeps each attribute's law
        np.testing.assert_allclose(domain.marginal(pmf, j), law, atol=1e-12)


def test_copula_dependence_grows_with_rho():
    """P(every attribute takes the same rank) rises with rho, from the independent value at 0."""
    domain = product(*(ints(f"a{j}", 0, 4) for j in range(3)))
    diagonal = domain.join([np.arange(5)] * 3)
    together = [copula(domain, rho=rho).pmf()[diagonal].sum() for rho in (0.0, 0.2, 0.5, 0.8, 0.95, 0.999)]
    assert together[0] == pytest.approx(5 / 125)
    assert np.all(np.diff(together) > 0), together
    assert together[-1] > 0.9  # nearly comonotone
    pair = product(ints("a", 0, 4), ints("b", 0, 4))
    same = pair.join([np.arange(5)] * 2)
    assert copula(pair, rho=-0.5).pmf()[same].sum() < 1 / 5 < copula(pair, rho=0.5).pmf()[same].sum()


def test_copula_chunked_over_nodes_gives_the_same_joint(monkeypatch):
    domain = product(ints("a", 0, 5), ints("b", 0, 6), ints("c", 0, 3))
    whole = copula(domain, rho=0.7, marginals="zipf").pmf()
    monkeypatch.setattr(tuples, "COPULA_TEMP_BYTES", 64)  # one node per chunk
    np.testing.assert_allclose(copula(domain, rho=0.7, marginals="zipf").pmf(), whole, rtol=1e-12, atol=1e-16)


def test_copula_refuses_what_it_cannot_compute():
    three = product(ints("a", 0, 2), ints("b", 0, 2), ints("c", 0, 2))
    with pytest.raises(ParameterError, match=r"rho: a negative rho \(-0.2\) is supported for two attributes only"):
        copula(three, rho=-0.2)
    with pytest.raises(ParameterError, match=r"s: only applies to zipf marginals"):
        copula(three, rho=0.2, s=2.0)
    with pytest.raises(ParameterError, match=r"rho: must be < 1"):
        copula(three, rho=1.0)
    with pytest.raises(ParameterError, match=r"does not work on an integers domain"):
        make("dataset", "copula", Integers(low=0, high=9), rho=0.5)


@pytest.mark.parametrize("rho", [0.0, 0.6, -0.4])
def test_copula_keeps_the_dataset_contract(rho):
    domain = product(ints("a", 0, 3), cats("b", ["x", "y"])) if rho < 0 else PEOPLE_DOMAIN
    check_dataset(copula(domain, rho=rho, marginals="zipf"))


# ------------------------------------------------------------------ adult-tuples
ADULT_ROWS = 48_842  # rows of the shared adult.csv (adult.data + adult.test), counted when the counts were made
AGES = ints("age", 17, 90)
SEX = cats("sex", ["Female", "Male"])
RACES = ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]
WORKCLASSES = [
    "?",
    "Federal-gov",
    "Local-gov",
    "Never-worked",
    "Private",
    "Self-emp-inc",
    "Self-emp-not-inc",
    "State-gov",
    "Without-pay",
]


def adult(domain: Product, **params):
    return make("dataset", "adult-tuples", domain, **params)


def shipped_ages() -> tuple[np.ndarray, np.ndarray]:
    text = (files("ldpsim_plugins.datasets") / "data" / "adult_ages_counts.csv").read_text()
    header, *rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert header == "age,count"
    ages, counts = np.array([row.split(",") for row in rows], dtype=np.int64).T
    return ages, counts


def test_adult_tuples_holds_every_person_and_the_ages_of_adult_ages():
    """adult-ages counts the same 48,842 persons (adult.data + adult.test; its file's age column is adult.csv's,
    row for row, per the shared data's README): the age marginal must be its shipped counts exactly."""
    domain = product(AGES, SEX)
    ds = adult(domain)
    assert ds.size == ds.max_users == int(ds.counts.sum()) == ADULT_ROWS
    ages, counts = shipped_ages()
    np.testing.assert_array_equal(ages, np.arange(17, 91))
    np.testing.assert_array_equal(domain.marginal(ds.counts, 0), counts)
    assert "age, sex of 48,842 persons of UCI Adult" in ds.description
    np.testing.assert_array_equal(ds.sample_counts(ADULT_ROWS, np.random.default_rng(1)), ds.counts)


def test_adult_tuples_marginalizes_onto_the_chosen_columns_consistently():
    full = product(SEX, cats("race", RACES), cats("work", WORKCLASSES))
    joint = adult(full, columns=["sex", "race", "workclass"]).counts
    pair = product(cats("work", WORKCLASSES), SEX)
    two = adult(pair, columns=["workclass", "sex"]).counts
    np.testing.assert_array_equal(two, full.marginal(joint, [2, 0]))
    assert full.marginal(joint, 2)[0] == 2_799  # UCI's '?' workclass kept as a label
    # ages read as labels by a categorical attribute: the same counts in the attribute's order
    labels = [str(a) for a in range(90, 16, -1)]
    as_text = adult(product(cats("age", labels), SEX)).counts
    np.testing.assert_array_equal(product(cats("age", labels), SEX).marginal(as_text, 0), shipped_ages()[1][::-1])


def test_adult_tuples_are_the_shared_adult_csv():
    path = shared_data("adult.csv")
    import pandas as pd

    frame = pd.read_csv(path, dtype=str, na_filter=False)
    assert len(frame) == ADULT_ROWS
    domain = product(cats("race", RACES), cats("education", sorted(frame["education"].unique())))
    table = pd.crosstab(frame["race"], frame["education"]).reindex(index=RACES, columns=domain.parts[1].values)
    np.testing.assert_array_equal(adult(domain).counts, table.to_numpy().ravel())


@pytest.mark.parametrize(
    ("domain", "params", "error", "message"),
    [
        (
            product(AGES, cats("workclass", WORKCLASSES[1:])),
            {},
            DataError,
            r"domain: attribute 'workclass' lacks 1 of the values of column 'workclass' in the data, e.g. '\?'; "
            r"give 'workclass' the values the data has: \?, Federal-gov, .*Without-pay",
        ),
        (
            product(ints("age", 18, 90), SEX),
            {},
            DataError,
            r"domain: attribute 'age' \(18..90, step 1\) lacks 1 of the ages .* use low = 17, high = 90",
        ),
        (product(AGES, ints("sex", 0, 1)), {}, DataError, r"attribute 'sex' is integers .* make 'sex' categorical"),
        (product(AGES, SEX), {"columns": ["age", "gender"]}, ParameterError, r"columns: 'gender' \(attribute 'sex'\)"),
        (product(AGES, SEX), {"columns": ["age"]}, ParameterError, r"columns: names 1 columns for 2 attributes"),
    ],
)
def test_adult_tuples_errors_say_what_the_data_has(domain, params, error, message):
    with pytest.raises(error, match=message):
        adult(domain, **params)


def test_adult_tuples_keeps_the_dataset_contract(rng):
    domain = product(SEX, cats("race", RACES))
    ds = adult(domain)
    check_dataset(ds)
    check_dataset(adult(domain, replace=True))  # with replacement, all records drawn twice differ: not checked
    drawn = adult(domain, replace=True).sample_counts(10 * ADULT_ROWS, rng)  # iid from the persons' law
    assert drawn.sum() == 10 * ADULT_ROWS and np.any(drawn > ds.counts)
    assert stats.chisquare(drawn, 10 * ADULT_ROWS * ds.distribution()).pvalue > 1e-4
