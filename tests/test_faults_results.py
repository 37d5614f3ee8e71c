"""Hostile input to results files, scenario parsing, ``ldpsim new`` and (metric, estimator) pairs (issue 34).

Each test reproduces one fault and asserts a one-line refusal with exit code 2 (or an ``LdpsimError``):
no traceback, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import ldpsim
from ldpsim.base.memory import MemoryLimitError
from ldpsim.output.cli import app
from ldpsim.output.cli_plugins import MAX_NAME
from ldpsim.results.io import open_results, save_results
from ldpsim.running.scenario import load_scenario
from ldpsim.running.schema import MAX_DEPTH

runner = CliRunner()

SMALL = {
    "name": "small",
    "seed": 5,
    "users": 200,
    "repetitions": 2,
    "domain": {"kind": "integers", "low": 0, "high": 3},
    "dataset": {"name": "uniform"},
    "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
    "estimators": ["inv-p"],
    "metrics": ["tv"],
}


def one_line_refusal(done, *needles: str) -> str:
    """The refusal's text, after asserting exit code 2, one line on stderr, no traceback, and ``needles`` in it."""
    assert done.exit_code == 2, (done.exit_code, done.output, done.exception)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def two_results(tmp_path_factory) -> tuple[Path, Path]:
    """Two genuine results files of one scenario run with different seeds (mergeable)."""
    folder = tmp_path_factory.mktemp("results")
    first, second = (ldpsim.run_scenario({**SMALL, "seed": seed}, executor="serial") for seed in (5, 6))
    second.attrs["code_sha256"] = first.attrs["code_sha256"]  # one code, even if a source file changed meanwhile
    return save_results(first, folder / "r5.nc"), save_results(second, folder / "r6.nc")


# --- 1. a results file whose header declares more than fits ---------------------------------------


def crafted(path: Path, *, coordinate: bool = False) -> Path:
    """A netCDF4 file of a few kilobytes whose header declares 10^4 x 10^10 doubles (800 TB, never written).

    With ``coordinate``, the huge variable is the dimension's coordinate, which xarray loads on opening.
    """
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("estimator", 10**4)
        nc.createDimension("rep", 10**10)
        if coordinate:
            nc.createVariable("rep", "f8", ("rep",), chunksizes=(1 << 16,))
        else:
            nc.createVariable("estimate", "f8", ("estimator", "rep"), chunksizes=(1, 1 << 16), fill_value=np.nan)
        nc.setncattr("ldpsim_version", "0.2.0")
    assert path.stat().st_size < 100_000
    return path


@pytest.mark.parametrize(
    "command", [["show"], ["plot", "-o", "{tmp}/f.png"], ["check", "estimate"], ["merge", "-o", "{tmp}/m.nc"]]
)
def test_a_results_file_declaring_a_huge_variable_is_refused_from_its_header(command, tmp_path, two_results):
    big = crafted(tmp_path / "big.nc")
    args = [part.format(tmp=tmp_path) for part in command] + [str(big)]
    if command[0] == "merge":
        args.append(str(two_results[0]))
    done = runner.invoke(app, args)
    line = one_line_refusal(done, "'estimate'", "10,000 x 10,000,000,000 float64 values", "800.0 TB")
    assert "more than the" in line and "this machine can give" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.nc"]  # nothing written


def test_a_huge_coordinate_is_refused_before_xarray_loads_it(tmp_path):
    big = crafted(tmp_path / "coord.nc", coordinate=True)
    with pytest.raises(MemoryLimitError, match=r"variable 'rep' holds 10,000,000,000 float64 values, 80.0 GB"):
        open_results(big)


def test_a_merge_over_a_crafted_output_is_refused_without_reading_it(tmp_path, two_results):
    target = crafted(tmp_path / "out.nc", coordinate=True)
    done = runner.invoke(app, ["merge", *map(str, two_results), "-o", str(target)])
    one_line_refusal(done, "exists and is not an ldpsim results file")


def test_genuine_results_still_open_show_and_merge(tmp_path, two_results):
    assert open_results(two_results[0]).sizes["rep"] == 2
    assert runner.invoke(app, ["show", str(two_results[0])]).exit_code == 0
    done = runner.invoke(app, ["merge", *map(str, two_results), "-o", str(tmp_path / "m.nc")])
    assert done.exit_code == 0, done.output
    assert open_results(tmp_path / "m.nc").sizes["rep"] == 4


# --- 2. scenarios nested too deep ------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("depth", "message"),
    [(5000, "lists or tables nested too deeply to read"), (MAX_DEPTH + 8, f"more than {MAX_DEPTH} levels deep")],
    ids=["past the parser's recursion", "past the limit"],
)
def test_a_scenario_nested_deeply_is_one_line(depth, message, tmp_path):
    scenario = tmp_path / "deep.toml"
    scenario.write_text(f"x = {nested(depth)}\n")
    done = runner.invoke(app, ["run", str(scenario), "--dry-run"])
    one_line_refusal(done, message, f"at most {MAX_DEPTH} levels")


@pytest.mark.parametrize("depth", [5000, MAX_DEPTH + 8])
def test_an_override_nested_deeply_is_one_line(depth, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(json_to_toml(SMALL))
    done = runner.invoke(app, ["run", str(scenario), "--dry-run", "--set", f"users={nested(depth)}"])
    one_line_refusal(done, "users", "levels")


def json_to_toml(doc: dict) -> str:
    """SMALL as TOML (inline tables are TOML; its values are all JSON-compatible)."""
    lines = []
    for key, value in doc.items():
        text = json.dumps(value)
        if isinstance(value, dict):
            text = "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in value.items()) + " }"
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def _inline(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value)


def test_a_mapping_nested_deeply_or_holding_itself_is_a_scenario_error():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ldpsim.ScenarioError, match=f"x: nests tables and lists more than {MAX_DEPTH} levels"):
        load_scenario({**SMALL, "x": deep})
    cycle: dict = dict(SMALL)
    cycle["dataset"] = {"name": "uniform", "self": cycle}
    with pytest.raises(ldpsim.ScenarioError, match="dataset: nests"):
        load_scenario(cycle)


def test_the_shipped_scenarios_nest_far_below_the_limit():
    import tomllib

    def depth(node) -> int:
        if isinstance(node, dict):
            return 1 + max(map(depth, node.values()), default=0)
        if isinstance(node, list):
            return 1 + max(map(depth, node), default=0)
        return 0

    scenarios = Path(__file__).resolve().parents[1] / "scenarios"
    assert max(depth(tomllib.loads(p.read_text())) for p in scenarios.glob("*.toml")) <= MAX_DEPTH // 4


def test_a_results_file_with_a_deeply_nested_scenario_is_one_line(tmp_path, two_results):
    ds = open_results(two_results[0])
    ds.attrs["resolved_scenario"] = nested(100_000)  # JSON the json module cannot read without recursing
    evil = tmp_path / "evil.nc"
    ds.to_netcdf(evil)
    one_line_refusal(runner.invoke(app, ["check", "estimate", str(evil)]), "no resolved scenario")
    done = runner.invoke(app, ["merge", str(evil), str(two_results[1]), "-o", str(tmp_path / "m.nc")])
    one_line_refusal(done, "records no resolved scenario")


# --- 3. ldpsim new: names that are no file name or TOML string ------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "no scenario name given"),
        ('x"y', "the scenario name 'x\"y' has '\"'"),
        ("a\nname = 'evil'", "has '\\n'"),
        ("a" * 300, f"the scenario name is 300 characters long, more than {MAX_NAME}"),
        (".toml", "names no scenario"),
        ("sub/", "names no scenario"),
        (".hidden", "starts with '.'"),
        ("x\\y", "has '\\\\'"),
        ("a b", "has ' '"),
        ("\x1b[31mred", "has '\\x1b'"),
        ("caf\u00e9", "has '\u00e9'"),
    ],
    ids=["empty", "quote", "newline", "300 characters", ".toml", "folder", "hidden", "backslash", "space", "ANSI", "non-ASCII"],
)  # fmt: skip
def test_new_refuses_a_name_that_is_not_a_plain_word(name, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    line = one_line_refusal(runner.invoke(app, ["new", name]), "NAME: ", message)
    assert "1-100 letters (a-z, A-Z), digits, '-', '_' or '.', starting with a letter or digit" in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["sub"]  # nothing written


def test_new_takes_a_plain_word_of_up_to_100_characters_into_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my runs").mkdir()
    for name in ["v1.2_final-B", "9" * MAX_NAME]:
        done = runner.invoke(app, ["new", f"my runs/{name}"])
        assert done.exit_code == 0, done.output
        scenario = load_scenario(tmp_path / "my runs" / f"{name}.toml")
        assert scenario.name == name
        assert f"ldpsim run 'my runs/{name}.toml' --dry-run" in (tmp_path / "my runs" / f"{name}.toml").read_text()


def test_new_documents_its_rule_for_names():
    done = runner.invoke(app, ["new", "--help"], terminal_width=200)
    assert "1-100 letters (a-z, A-Z), digits, '-', '_' or '.', starting with a letter or digit" in " ".join(
        done.output.replace("│", " ").split()
    )


# --- 4. metrics score only the estimates they can --------------------------------------------------

NUMERIC = {
    "name": "numeric",
    "seed": 1,
    "users": 500,
    "domain": {"kind": "integers", "low": 0, "high": 9},
    "dataset": {"name": "uniform"},
    "cohorts": {"all": {"reports": [{"mechanism": "piecewise", "eps": 1.0}]}},
    "estimators": ["ibu", "numeric-mean"],
    "metrics": ["mean"],
}


@pytest.mark.parametrize("metric", ["tv", "emd", "l2", "linear"])
def test_a_distance_cannot_score_numeric_mean(metric):
    spec = {metric: {"weights": list(range(10))}} if metric == "linear" else [metric]
    with pytest.raises(
        ldpsim.ScenarioError,
        match=rf"metrics.{metric}: {metric} cannot score estimator 'numeric-mean': numeric-mean estimates a mean, "
        rf"{metric} scores only distribution estimates; .* score numeric-mean with mean and use {metric} with ",
    ):
        load_scenario({**NUMERIC, "metrics": spec})


def test_the_mean_metric_scores_numeric_mean_and_distributions():
    ds = ldpsim.run_scenario(NUMERIC, executor="serial")
    assert np.isfinite(ds["mean"].values).all() and list(ds["estimator"].values) == ["ibu", "numeric-mean"]


TUPLES = {
    "name": "tuples",
    "seed": 2,
    "users": 500,
    "domain": {
        "kind": "product",
        "attributes": [{"name": f"x{i}", "kind": "integers", "low": 0, "high": 3} for i in (1, 2)],
    },
    "dataset": {"name": "uniform"},
    "cohorts": {"all": {"reports": [{"mechanism": "duchi-md", "eps": 1.0}]}},
    "estimators": ["vector-mean"],
    "metrics": ["vector-mean-mse"],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metrics": ["vector-mean-mse", "marginal-tv"]}, "marginal-tv cannot score estimator 'vector-mean'"),
        ({"estimators": ["vector-mean", "ibu"]}, "vector-mean-mse cannot score estimator 'ibu': ibu estimates a "
         "distribution, vector-mean-mse scores only vector-mean estimates"),
    ],
    ids=["a distance of vector-mean", "vector-mean-mse of a distribution"],
)  # fmt: skip
def test_vector_mean_and_its_metric_pair_only_with_each_other(change, message):
    assert load_scenario(TUPLES).metric_labels == ("vector-mean-mse",)
    with pytest.raises(ldpsim.ScenarioError, match=message):
        load_scenario({**TUPLES, **change})


def test_the_shipped_numeric_scenarios_score_numeric_mean_by_the_mean_only():
    scenarios = Path(__file__).resolve().parents[1] / "scenarios"
    split = load_scenario(scenarios / "numeric-mean.toml")
    assert split.estimator_labels == ("numeric-mean",) and split.metric_labels == ("mean",)
    assert "numeric-mean" not in load_scenario(scenarios / "numeric-mechanisms.toml").estimator_labels


def test_the_contract_checks_the_declarations():
    from ldpsim.testing import check_estimator, check_metric

    class Loose(ldpsim.Metric):
        name = "loose"
        scores = "distribution"  # a string, not a tuple: "mean" in it would be a substring test

        def _compute(self, estimate, truth, domain):
            return 0.0

    with pytest.raises(AssertionError, match="Loose.scores must be None"):
        check_metric(Loose())

    class Nameless(ldpsim.Estimator):
        name = "nameless"
        gives = ""

        def _estimate(self, observations):
            return np.full(observations.domain.size, 1 / observations.domain.size)

    with pytest.raises(AssertionError, match="Nameless.gives must name"):
        check_estimator(Nameless())


# --- 5. fuzz: hostile names for new, hostile files for merge -------------------------------------


def test_fuzzed_names_for_new_are_written_or_refused_on_one_line(tmp_path, monkeypatch):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    monkeypatch.chdir(tmp_path)
    alphabet = st.sampled_from(list("aZ9._-/\\\"' \n\t\r\x00\x1b[]{}=#$\u00e9\u2028") + ["..", ".toml", "a" * 60])

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.lists(alphabet, max_size=6).map("".join))
    def check(name: str) -> None:
        before = set(tmp_path.rglob("*"))
        done = runner.invoke(app, ["new", name])
        assert done.exit_code in (0, 2), (name, done.output, done.exception)
        assert "Traceback" not in done.output and len(done.stderr.strip().splitlines()) == 1, (name, done.stderr)
        written = set(tmp_path.rglob("*")) - before
        if done.exit_code == 0:
            (path,) = written
            assert load_scenario(path).name == path.stem  # the file parses, its name is the name
            path.unlink()
        else:
            assert not written

    check()


_HOSTILE_ATTRS = [
    ("resolved_scenario", "not json"), ("resolved_scenario", "[1, 2]"), ("resolved_scenario", "{}"),
    ("resolved_scenario", nested(3000)), ("resolved_scenario", 7), ("seed", "x"), ("seed", 2**40),
    ("code_sha256", "other"), ("history", 5), ("wall_seconds", "slow"), ("repetitions", -1),
    ("ldpsim_version", None), ("plugins", "{"), ("overrides", "nope"),
]  # fmt: skip


def _hostile(ds: xr.Dataset, how: tuple) -> xr.Dataset:
    kind, *rest = how
    ds = ds.copy()
    if kind == "attr":
        name, value = rest
        if value is None:
            ds.attrs.pop(name, None)
        else:
            ds.attrs[name] = value
    elif kind == "drop":
        ds = ds.drop_vars([rest[0]], errors="ignore")
    elif kind == "seed":
        ds = ds.assign_coords(seed=("rep", np.full(ds.sizes["rep"], rest[0], dtype=float)))
    elif kind == "rep":
        ds = ds.isel(rep=slice(0, rest[0]))
    return ds


_CHANGES = [
    *(("attr", *a) for a in _HOSTILE_ATTRS),
    *(("drop", v) for v in ("tv", "estimate", "truth", "seed", "seed_rep", "estimator")),
    *(("seed", s) for s in (np.nan, -1.0, 1e30)),
    ("rep", 1),
]


def test_fuzzed_files_for_merge_are_merged_or_refused_on_one_line(tmp_path, two_results):
    """Every change above once (hypothesis' explicit examples), then random combinations of up to three."""
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    genuine = [open_results(p) for p in two_results]

    def check(changes) -> None:
        files = [ds.copy() for ds in genuine]
        for which, how in changes:
            files[which] = _hostile(files[which], how)
        paths = [tmp_path / "a.nc", tmp_path / "b.nc"]
        for ds, path in zip(files, paths):
            path.unlink(missing_ok=True)
            ds.to_netcdf(path)
        out = tmp_path / "out.nc"
        out.unlink(missing_ok=True)
        done = runner.invoke(app, ["merge", *map(str, paths), "-o", str(out)])
        assert done.exit_code in (0, 2), (changes, done.output, done.exception)
        assert "Traceback" not in done.output and len(done.stderr.strip().splitlines()) == 1, (changes, done.stderr)
        assert out.exists() == (done.exit_code == 0)

    fuzzed: Any = check
    for change in _CHANGES:
        fuzzed = example([(1, change)])(fuzzed)
    fuzzed = given(st.lists(st.tuples(st.sampled_from([0, 1]), st.sampled_from(_CHANGES)), min_size=1, max_size=3))(
        fuzzed
    )
    settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))(fuzzed)()


def test_show_displays_a_files_texts_without_interpreting_them(tmp_path, two_results):
    """A results file is data: escape sequences and rich markup in its texts are shown inert."""
    ds = open_results(two_results[0]).load()
    ds.attrs["title"] = "t\x1b[2Jcleared"
    ds.attrs["history"] = "line\x1b]0;pwned\x07"
    ds = ds.assign_coords(estimator=["[red]inv-p\x1b[31m"])
    path = save_results(ds, tmp_path / "hostile.nc")
    done = runner.invoke(app, ["show", str(path)], terminal_width=200)
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.output and "\x07" not in done.output
    assert "t\\x1b[2Jcleared" in done.output and "[red]inv-p\\x1b[31m" in done.output
