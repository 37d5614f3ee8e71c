"""Scenarios: validation with one-line errors, overrides, sweeps, shares, seeds."""

from __future__ import annotations

import copy
import dataclasses
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ldpsim
from ldpsim import LdpsimError
from ldpsim.running.build import Builder, _apportion
from ldpsim.running.paths import parse_override, parse_path, related, set_path, show_path
from ldpsim.running.runner import run_task, tasks
from ldpsim.running.scenario import load_scenario

BASE = {
    "name": "t",
    "seed": 11,
    "users": 3000,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 9},
    "dataset": {"name": "binomial", "p": 0.5},
    "cohorts": {"all": {"share": 1, "reports": [{"mechanism": "krr", "eps": 1.0}]}},
    "estimators": ["ibu", "inv-p"],
    "metrics": ["tv"],
}


def scenario(**changes):
    doc = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = doc
        parts = path.split("__")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DELETE:
            del node[parts[-1]]
        else:
            node[parts[-1]] = value
    return doc


DELETE = object()
MIXED = {
    "krr": {"share": "1/2", "reports": [{"mechanism": "krr", "eps": 1.0}]},
    "geo": {"share": "1/3", "reports": [{"mechanism": "geometric", "eps": 0.1}]},
    "twice": {"share": "1/6", "reports": [{"mechanism": "krr", "eps": 0.5, "repeat": 2}]},
}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"repetiton": 3}, r"unknown field 'repetiton'; did you mean 'repetitions'\?"),
        ({"dataset": DELETE}, r"missing field 'dataset'; add dataset"),
        (
            {"cohorts__all__reports": [{"mechanism": "krr", "eps": -1.0}]},
            r"^cohorts\.all\.reports\[0\]\.eps: must be > 0, got -1.0; choose eps > 0$",
        ),
        (
            {"cohorts__all__reports": [{"mechanism": "krr", "eps": "high"}]},
            r"cohorts\.all\.reports\[0\]\.eps: expected a number, got 'high'",
        ),
        (
            {"cohorts__all__reports": [{"mechanism": "krrr", "eps": 1}]},
            r"cohorts\.all\.reports\[0\]\.mechanism: unknown mechanism 'krrr'; did you mean 'krr'\?",
        ),
        (
            {"cohorts__all__reports": [{"mechanism": "krr", "epsilon": 1}]},
            r"cohorts\.all\.reports\[0\]\.epsilon: mechanism 'krr' has no parameter 'epsilon'; did you mean 'eps'\?",
        ),
        (
            {"cohorts__all__reports": [{"mechanism": "krr"}]},
            r"cohorts\.all\.reports\[0\]\.eps: mechanism 'krr' needs parameter 'eps'; add eps: float > 0",
        ),
        (
            {"cohorts__all__reports": [{"mechanism": "krr", "eps": 1, "repeat": 0}]},
            r"cohorts\.all\.reports\[0\]\.repeat: must be a positive integer",
        ),
        ({"cohorts__all__reports": []}, r"cohorts\.all\.reports: needs a non-empty list of reports"),
        ({"cohorts__all__shares": 1}, r"cohorts\.all: unknown field 'shares'; did you mean 'share'\?"),
        ({"dataset__p": 1.5}, r"^dataset\.p: must be <= 1, got 1.5; choose p <= 1$"),
        ({"dataset__name": "binomal"}, r"dataset\.name: unknown dataset 'binomal'; did you mean 'binomial'\?"),
        (
            {"dataset": {"name": "csv", "path": "nowhere.csv", "column": "x"}},
            r"dataset\.path: file '.*nowhere.csv' not found",
        ),
        ({"estimators": ["ibuu"]}, r"estimators\.ibuu\.name: unknown estimator 'ibuu'; did you mean 'ibu'\?"),
        ({"estimators": {"fast": {"name": "ibu", "max_iter": -5}}}, r"estimators\.fast\.max_iter: must be >= 0"),
        ({"metrics": ["tv", "tv"]}, r"metrics: lists a name twice"),
        ({"users": -5}, r"users: must be a positive integer, got -5"),
        ({"users": DELETE}, r"missing field 'users'; add users = <count>"),
        ({"seed": -1}, r"seed: must be an integer in 0\.\.\d+, got -1"),
        ({"domain__kind": "interval"}, r"domain\.kind: unknown kind 'interval'; did you mean 'integers'\?"),
        ({"domain__high": -3}, r"domain\.high: high \(-3\) must exceed low \(0\)"),
        (
            {
                "cohorts": {
                    "a": {"share": 0.5, "reports": [{"mechanism": "krr", "eps": 1}]},
                    "b": {"share": 0.4, "reports": [{"mechanism": "krr", "eps": 1}]},
                }
            },
            r"cohorts: shares sum to 0\.9, not 1",
        ),
        (
            {"cohorts": {"a": {"share": "half", "reports": [{"mechanism": "krr", "eps": 1}]}}},
            r"cohorts\.a\.share: 'half' is not a number or fraction",
        ),
        (
            {
                "cohorts": {
                    "a": {"reports": [{"mechanism": "krr", "eps": 1}]},
                    "b": {"share": 0.5, "reports": [{"mechanism": "krr", "eps": 1}]},
                }
            },
            r"cohorts\.a\.share: is missing",
        ),
        (
            {"cohorts__all__reports": [{"mechanism": "matrix", "rows": [[1, 0]] * 9 + [[0.5, 0.4]]}]},
            r"cohorts\.all\.reports\[0\]\.rows: row 9 sums to 0\.9, not 1",
        ),
        (
            {
                "cohorts__all__reports": [{"mechanism": "geometric", "eps": 1}],
                "domain": {"kind": "categorical", "values": list("abcdefghij")},
                "dataset": {"name": "uniform"},
            },
            r"cohorts\.all\.reports\[0\]\.domain: mechanism 'geometric' does not work on a categorical domain",
        ),
        (
            {"sweep": {"eps": {"path": "cohorts.all.reports.0.eps", "values": [1, -1]}}},
            r"eps: must be > 0, got -1.0 \(at sweep point eps=-1\)",
        ),
        (
            {"sweep": {"eps": {"path": "cohorts.all.report.0.eps", "values": [1]}}},
            r"'cohorts.all.report.0.eps' does not exist: no field 'report'; did you mean 'reports'\?",
        ),
        ({"sweep": {"rep": {"path": "users", "values": [1]}}}, r"sweep\.rep: axis name 'rep' is reserved"),
        ({"sweep": {"k": {"path": "domain.high", "values": [5, 9]}}}, r"sweep\.k\.path: cannot sweep 'domain.high'"),
        ({"sweep": {"m": {"path": "metrics.tv.name", "values": ["l1"]}}}, r"sweep\.m\.path: cannot sweep 'metrics"),
        ({"sweep": {"m": {"path": "metrics.tv", "values": [{}]}}}, r"sweep\.m\.path: cannot sweep 'metrics.tv'"),
        (
            {"sweep": {"d": {"path": "dataset", "values": [{"name": "binomial"}, {"name": "binomial", "p": 0.2}]}}},
            r"sweep\.d: values are tables or lists; add labels",
        ),
        (
            {"sweep": {"n": {"path": "users", "values": [10, 20], "labels": ["a"]}}},
            r"sweep\.n\.labels: needs one label per value",
        ),
    ],
)
def test_bad_scenarios_get_one_line_naming_field_and_fix(changes, message):
    with pytest.raises(LdpsimError, match=message) as info:
        load_scenario(scenario(**changes))
    assert "\n" not in str(info.value)


def test_toml_syntax_errors_give_the_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nseed = 1\nusers = = 5\n')
    with pytest.raises(LdpsimError, match=r"invalid TOML: .*\(at line 3, column \d+\)"):
        load_scenario(path)


def test_a_key_that_toml_put_into_the_previous_table_is_explained(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'estimators = ["ibu"]\nusers = 10\n[domain]\nkind = "integers"\nlow = 0\nhigh = 3\n'
        '[dataset]\nname = "uniform"\n[cohorts.a]\nreports = [{mechanism = "krr", eps = 1}]\nmetrics = ["tv"]\n'
    )
    with pytest.raises(LdpsimError, match=r"missing field 'metrics': it sits inside \[cohorts\.a\]; in TOML every key"):
        load_scenario(path)


def test_missing_scenario_file():
    with pytest.raises(LdpsimError, match="scenario file 'nope.toml' not found"):
        load_scenario("nope.toml")


def test_defaults_and_generated_seed():
    loaded = load_scenario(scenario(seed=DELETE, repetitions=DELETE))
    assert loaded.repetitions == 1
    assert 0 <= loaded.seed < 2**63
    assert f'"seed": {loaded.seed}' in loaded.resolved_json()  # recorded, so the run can be repeated


def test_overrides_reach_any_field():
    loaded = load_scenario(
        scenario(),
        ["users=500", "cohorts.all.reports.0.eps=2.5", "estimators.ibu.delta=0.001", "description=hello world"],
    )
    assert loaded.document["users"] == 500
    assert loaded.document["cohorts"]["all"]["reports"][0]["eps"] == 2.5
    assert loaded.document["estimators"]["ibu"] == {"delta": 0.001}
    assert loaded.document["description"] == "hello world"
    assert loaded.overrides == (
        "users=500",
        "cohorts.all.reports.0.eps=2.5",
        "estimators.ibu.delta=0.001",
        'description="hello world"',
    )
    with pytest.raises(
        LdpsimError, match="'cohorts.al.reports.0.eps' does not exist: no field 'al'; did you mean 'all'"
    ):
        load_scenario(scenario(), ["cohorts.al.reports.0.eps=2"])
    with pytest.raises(LdpsimError, match="--set: 'users' is not KEY=VALUE"):
        load_scenario(scenario(), ["users"])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a=1", 1),
        ("a=1e3", 1000.0),
        ("a=true", True),
        ("a=[1, 2]", [1, 2]),
        ("a=uniform", "uniform"),
        ('a="x y"', "x y"),
        ("a.b.0=1/3", "1/3"),
    ],
)
def test_parse_override(text, value):
    assert parse_override(text)[1] == value


def test_sweeps_form_a_grid():
    doc = scenario(
        sweep={
            "eps": {"path": "cohorts.all.reports.0.eps", "values": [0.5, 1, 2]},
            "data": {"path": "dataset", "values": [{"name": "binomial", "p": 0.2}, {"name": "uniform"}]},
        }
    )
    loaded = load_scenario(doc)
    assert loaded.shape == (3, 2)
    points = list(loaded.points())
    assert [p.index for p in points] == [(i, j) for i in range(3) for j in range(2)]
    assert points[3].coords == {"eps": 1, "data": "uniform"}
    assert points[3].document["cohorts"]["all"]["reports"][0]["eps"] == 1
    assert points[3].document["dataset"] == {"name": "uniform"}


def test_one_axis_can_set_several_fields():
    cohorts = {name: copy.deepcopy(c) for name, c in MIXED.items()}
    doc = scenario(
        cohorts=cohorts,
        sweep={"eps": {"path": ["cohorts.krr.reports.0.eps", "cohorts.twice.reports.0.eps"], "values": [1, 3]}},
    )
    last = list(load_scenario(doc).points())[-1].document
    assert last["cohorts"]["krr"]["reports"][0]["eps"] == 3 and last["cohorts"]["twice"]["reports"][0]["eps"] == 3


def test_a_parameter_of_a_labelled_estimator_can_follow_a_sweep():
    # the labels (the results' estimator dim) stay fixed; each point builds its own variant
    doc = scenario(
        estimators={"ibu": {"delta": 0.1}},
        sweep={"eps": {"path": ["cohorts.all.reports.0.eps", "estimators.ibu.delta"], "values": [0.5, 2]}},
    )
    loaded = load_scenario(doc)
    deltas = [loaded.builder.setup(p, loaded.axes).estimators["ibu"].delta for p in loaded.points()]
    assert deltas == [0.5, 2]


def test_cohorts_get_exact_shares_and_expand_repeats():
    loaded = load_scenario(scenario(cohorts=MIXED, users=600))
    setup = Builder(loaded.base_dir).setup(next(loaded.points()))
    assert [(c.name, c.users, len(c.plan)) for c in setup.cohorts] == [
        ("krr", 300, 1),
        ("geo", 200, 1),
        ("twice", 100, 2),
    ]
    assert setup.cohorts[2].plan[0] is setup.cohorts[2].plan[1]


@given(st.integers(1, 10**7), st.lists(st.integers(0, 50), min_size=1, max_size=8).filter(lambda w: sum(w) > 0))
def test_apportion_is_exact_and_fair(users, weights):
    shares = [Fraction(w, sum(weights)) for w in weights]
    counts = _apportion(users, shares)
    assert sum(counts) == users
    assert all(abs(c - users * s) < 1 for c, s in zip(counts, shares))


def _run(doc, **kw):
    return ldpsim.run_scenario(doc, **kw)


def test_same_scenario_same_numbers_whatever_the_workers():
    doc = scenario(cohorts=MIXED, sweep={"eps": {"path": "cohorts.krr.reports.0.eps", "values": [0.5, 2]}})
    one = _run(doc)
    two = _run(doc, jobs=2)
    for var in ("tv", "estimate", "truth", "iterations", "loglik"):
        np.testing.assert_array_equal(one[var].values, two[var].values)


def test_task_results_do_not_depend_on_execution_order():
    loaded = load_scenario(scenario(cohorts=MIXED))
    todo = tasks(loaded)
    forward = {t.key: run_task(t) for t in todo}
    backward = {t.key: run_task(t) for t in reversed(todo)}
    for key in forward:
        np.testing.assert_array_equal(forward[key]["estimate"], backward[key]["estimate"])
    assert not np.array_equal(forward[(0,)]["truth"], forward[(1,)]["truth"])  # repetitions differ


def test_more_repetitions_keep_the_earlier_ones():
    few = _run(scenario(repetitions=2))
    more = _run(scenario(repetitions=4))
    np.testing.assert_array_equal(few["estimate"].values, more["estimate"].isel(rep=slice(0, 2)).values)


def test_a_different_seed_gives_different_numbers():
    assert not np.array_equal(_run(scenario())["truth"].values, _run(scenario(seed=12))["truth"].values)


def test_keyword_overrides_in_python():
    ds = ldpsim.run_scenario(scenario(), users=700, cohorts__all__reports__0__eps=3.0, set=["repetitions=1"])
    assert int(ds["users"]) == 700 and ds.sizes["rep"] == 1
    assert '"eps": 3.0' in ds.attrs["resolved_scenario"]


def test_users_default_to_the_size_of_a_file_dataset(tmp_path):
    (tmp_path / "ages.csv").write_text("age\n3\n4\n4\n5\n9\n9\n9\n")
    path = tmp_path / "s.toml"
    path.write_text(
        'seed = 1\nestimators = ["ibu"]\nmetrics = ["tv"]\n'
        '[domain]\nkind = "integers"\nlow = 0\nhigh = 9\n'
        '[dataset]\nname = "csv"\npath = "ages.csv"\ncolumn = "age"\n'
        '[cohorts.all]\nreports = [{ mechanism = "krr", eps = 2 }]\n'
    )
    ds = ldpsim.run_scenario(path)
    assert int(ds["users"]) == 7  # relative data paths resolve against the scenario's folder
    np.testing.assert_allclose(ds["truth"].isel(rep=0).values, np.bincount([3, 4, 4, 5, 9, 9, 9], minlength=10) / 7)


def test_cohorts_with_their_own_dataset():
    doc = scenario(
        users=4000,
        domain={"kind": "integers", "low": 0, "high": 3},
        cohorts={
            "young": {
                "share": 0.5,
                "dataset": {"name": "pmf", "p": [0.7, 0.3, 0, 0]},
                "reports": [{"mechanism": "krr", "eps": 2.0}],
            },
            "old": {
                "share": 0.5,
                "dataset": {"name": "pmf", "p": [0, 0, 0.4, 0.6]},
                "reports": [{"mechanism": "krr", "eps": 2.0}],
            },
        },
    )
    ds = ldpsim.run_scenario(doc)
    truth = ds["truth"].isel(rep=0).values
    np.testing.assert_allclose(truth, [0.35, 0.15, 0.2, 0.3], atol=0.03)  # the mixture, not the scenario's binomial
    assert float(ldpsim.scores(ds).sel(estimator="ibu").max()) < 0.05


def test_a_distribution_parameter_can_come_from_the_dataset():
    loaded = load_scenario(scenario(estimators={"ibu": {"start": "dataset"}}))
    setup = Builder(loaded.base_dir).setup(next(loaded.points()))
    expected = ldpsim.get_registry().create("dataset", "binomial", setup.domain, p=0.5).distribution()
    np.testing.assert_allclose(setup.estimators["ibu"].start, expected)
    # A file dataset's distribution is its empirical one; a zero is refused as IBU start.
    with pytest.raises(
        LdpsimError, match=r"estimators\.ibu\.start: is zero at index 0; an EM update never raises a zero"
    ):
        load_scenario(
            scenario(
                dataset={"name": "csv", "path": "tests/data/people.csv", "column": "age"},
                domain={"kind": "integers", "low": 0, "high": 99},
                estimators={"ibu": {"start": "dataset"}},
                users=DELETE,
            ),
            base_dir=Path(__file__).parents[1],
        )


def test_a_dataset_without_a_known_distribution_cannot_be_a_prior():
    class Opaque(ldpsim.Dataset):
        """Values from somewhere."""

        name = "opaque"

        def _sample(self, n, rng):
            return rng.integers(0, self.domain.size, n)

    plugin = types.ModuleType("opaque_plugin")
    plugin.register_datasets = ldpsim.hookimpl(lambda register: register(Opaque))
    registry = ldpsim.Registry.from_entry_points()
    registry.add(plugin, name="opaque")
    with pytest.raises(
        LdpsimError,
        match=r"estimators\.ibu\.start: is \"dataset\" but the dataset's distribution is unknown; give the distribution",
    ):
        load_scenario(scenario(dataset={"name": "opaque"}, estimators={"ibu": {"start": "dataset"}}), registry=registry)


def test_a_data_file_edited_between_two_runs_is_read_again(tmp_path):
    (tmp_path / "a.csv").write_text("age\n1\n1\n1\n")
    doc = scenario(
        users=DELETE,
        domain={"kind": "integers", "low": 0, "high": 3},
        dataset={"name": "csv", "path": "a.csv", "column": "age"},
    )
    first = load_scenario(doc, base_dir=tmp_path)
    np.testing.assert_array_equal(ldpsim.running.runner.execute(first)["truth"].isel(rep=0).values, [0, 1, 0, 0])
    (tmp_path / "a.csv").write_text("age\n3\n3\n3\n")
    for jobs in (1, 2):
        again = ldpsim.running.runner.execute(load_scenario(doc, base_dir=tmp_path), jobs=jobs)
        np.testing.assert_array_equal(again["truth"].isel(rep=0).values, [0, 0, 0, 1])


def test_more_users_than_records_is_refused_before_the_run_naming_the_parameter_that_lifts_it():
    people = {"name": "csv", "path": "tests/data/people.csv", "column": "age"}
    base = Path(__file__).parents[1]
    doc = scenario(users=7, domain={"kind": "integers", "low": 20, "high": 60}, dataset=people)
    with pytest.raises(
        LdpsimError,
        match=r"^users: asks for 7 users but the dataset has 6 records; "
        r"use at most 6 users or set dataset\.replace = true$",
    ):
        load_scenario(doc, base_dir=base)
    assert load_scenario(doc, ["dataset.replace=true"], base_dir=base).builder is not None


def test_a_dataset_without_a_way_past_its_records_gets_no_hint_about_one():
    class Fixed(ldpsim.Dataset):
        """Five records."""

        name = "fixed"

        @property
        def size(self):
            return 5

        def _sample(self, n, rng):
            return rng.integers(0, self.domain.size, n)

    plugin = types.ModuleType("fixed_plugin")
    plugin.register_datasets = ldpsim.hookimpl(lambda register: register(Fixed))
    registry = ldpsim.Registry.from_entry_points()
    registry.add(plugin, name="fixed")
    assert load_scenario(scenario(users=DELETE, dataset={"name": "fixed"}), registry=registry).builder is not None
    with pytest.raises(
        LdpsimError, match=r"^users: asks for 6 users but the dataset has 5 records; use at most 5 users$"
    ):
        load_scenario(scenario(users=6, dataset={"name": "fixed"}), registry=registry)


def test_the_scenario_keeps_the_instances_validation_built():
    loaded = load_scenario(scenario(sweep={"eps": {"path": "cohorts.all.reports.0.eps", "values": [1, 2]}}))
    first, second = (loaded.builder.setup(p) for p in loaded.points())
    assert first.dataset is second.dataset  # identical specifications share one instance
    assert first.cohorts[0].plan[0] is not second.cohorts[0].plan[0]
    again = loaded.builder.setup(next(loaded.points()))
    assert again.cohorts[0].plan[0] is first.cohorts[0].plan[0]  # built at load time, reused by the run
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.builder = None


@pytest.mark.parametrize(
    ("path", "parts", "shown"),
    [
        ("users", ["users"], "users"),
        ("cohorts.a.reports.0.eps", ["cohorts", "a", "reports", 0, "eps"], "cohorts.a.reports[0].eps"),
        ("cohorts.a.reports[0].eps", ["cohorts", "a", "reports", 0, "eps"], "cohorts.a.reports[0].eps"),
    ],
)
def test_field_paths_parse_and_print_back(path, parts, shown):
    assert parse_path(path) == parts
    assert show_path(parts) == shown


def test_set_path_refuses_what_does_not_exist():
    doc = {"a": {"b": [1, 2]}}
    set_path(doc, "a.b[1]", 5)
    set_path(doc, "a.c", 3)  # a new key in an existing table
    assert doc == {"a": {"b": [1, 5], "c": 3}}
    with pytest.raises(LdpsimError, match=r"^a\.b: has no item 2; 'a\.b\.2' must index 0\.\.1$"):
        set_path(doc, "a.b.2", 0)
    with pytest.raises(LdpsimError, match=r"^'x\.y' does not exist: no field 'x'; choose one of: a$"):
        set_path(doc, "x.y", 0)
    with pytest.raises(LdpsimError, match=r"'a\.\.b' is not a valid field path"):
        set_path(doc, "a..b", 0)


def test_related_paths_are_those_on_one_branch():
    assert related("cohorts.a", "cohorts.a.reports.0.eps")
    assert related("cohorts.a.reports[0].eps", "cohorts.a")
    assert not related("cohorts.a", "cohorts.b.reports.0.eps")


def test_a_points_repetitions_share_one_setup_and_each_point_gets_its_own():
    """The builder finds a point's setup by its document object first (no serialization per run)."""
    doc = scenario(sweep={"eps": {"path": "cohorts.all.reports.0.eps", "values": [0.5, 2.0]}})
    loaded = load_scenario(doc)
    builder = Builder(loaded.base_dir)
    first, second = list(loaded.points())
    one = builder.setup(first)
    assert builder.setup(first) is one  # the same point object: another repetition
    assert builder.setup(copy.deepcopy(first)) is one  # an equal document (a worker's copy)
    other = builder.setup(second)
    assert other is not one and other.cohorts[0].plan[0].eps == 2.0 and one.cohorts[0].plan[0].eps == 0.5


_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5))
_DOCUMENTS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=30,
)


@given(doc=st.dictionaries(st.text(max_size=4), _DOCUMENTS, max_size=5))
def test_a_points_document_is_an_equal_copy_sharing_no_table_or_array(doc):
    from ldpsim.running.sweep import _copied

    copied = _copied(doc)
    assert copied == copy.deepcopy(doc)

    def containers(value, found):
        if isinstance(value, (dict, list)):
            found.append(value)
            for item in value.values() if isinstance(value, dict) else value:
                containers(item, found)
        return found

    mine = {id(c) for c in containers(copied, [])}
    assert not mine & {id(c) for c in containers(doc, [])}  # editing a point never edits the scenario
    odd = {"when": np.arange(3)}  # not a TOML value: copied by copy.deepcopy
    assert _copied(odd)["when"] is not odd["when"] and np.array_equal(_copied(odd)["when"], odd["when"])
