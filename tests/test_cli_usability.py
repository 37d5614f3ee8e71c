"""Command-line details a user meets: summary formats, value syntax, grid wording, progress, start-up."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import ldpsim
from ldpsim.base.errors import ScenarioError
from ldpsim.output.cli import app
from ldpsim.running.paths import parse_override

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
runner = CliRunner()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from ldpsim.results.io import save_results

    path = tmp_path_factory.mktemp("formats") / "q.nc"
    return save_results(ldpsim.run_scenario(QUICKSTART, users=500, repetitions=2), path)


def test_show_prints_the_summary_as_csv_json_or_markdown(results):
    from ldpsim.results.summary import summarize

    rows = summarize(ldpsim.results.io.open_results(results))
    done = runner.invoke(app, ["show", str(results), "--format", "json"])
    assert done.exit_code == 0, done.stderr
    records = json.loads(done.stdout)  # only the summary on stdout: a program reads it whole
    assert len(records) == len(rows)
    first = records[0]
    assert first["estimator"] == rows[0]["estimator"]
    assert first["tv_mean"] == pytest.approx(rows[0]["tv"][0], rel=1e-12)
    assert first["tv_sd"] == pytest.approx(rows[0]["tv"][1], rel=1e-12)

    done = runner.invoke(app, ["show", str(results), "-f", "csv"])
    assert done.exit_code == 0, done.stderr
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    assert len(table) == len(rows) and float(table[0]["tv_mean"]) == pytest.approx(first["tv_mean"], rel=1e-12)

    done = runner.invoke(app, ["show", str(results), "--format", "markdown"])
    lines = done.stdout.splitlines()
    assert done.exit_code == 0 and len(lines) == len(rows) + 2
    assert lines[0].startswith("| ") and "tv_mean" in lines[0] and set(lines[1]) <= set("|:-")

    done = runner.invoke(app, ["show", str(results)])  # the rich table stays the default
    assert "scores: mean ± sd over 2 repetitions" in done.stdout and "created" in done.stdout


def test_run_prints_its_summary_in_the_chosen_format(tmp_path):
    out = tmp_path / "q.nc"
    args = ["run", str(QUICKSTART), "-o", str(out), "-e", "serial", "--set", "users=300", "--set", "repetitions=1"]
    done = runner.invoke(app, [*args, "--format", "csv"])
    assert done.exit_code == 0, done.stderr
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    assert table and table[0]["tv_sd"] == ""  # one repetition: no sd, an empty cell
    bad = runner.invoke(app, [*args, "--format", "xml"])
    assert bad.exit_code == 2


def test_unquoted_strings_in_a_list_are_named_with_the_quoted_fix():
    with pytest.raises(ScenarioError, match=r"strings in a list need quotes") as info:
        parse_override("estimators=[ibu,mle]")
    assert info.value.field == "--set estimators" and '["ibu", "mle"]' in str(info.value)
    done = runner.invoke(app, ["run", str(QUICKSTART), "--set", "estimators=[ibu,mle]"])
    assert done.exit_code == 2 and "non-empty table" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {QUICKSTART}: --set estimators: '[ibu,mle]' is not a TOML list or table: strings in a list need quotes;"
        """ write ["ibu", "mle"] (in single quotes for the shell: '["ibu", "mle"]')"""
    ]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("prior=0.1,0.2,0.7", [0.1, 0.2, 0.7]),
        ("w=1, 2,3", [1, 2, 3]),
        ("prior=[0.1, 0.9]", [0.1, 0.9]),
        ("values=a,b", "a,b"),  # only numbers make a list
        ("p=1/3", "1/3"),
    ],
)
def test_a_comma_list_of_numbers_is_a_vector_for_every_flag(text, value):
    assert parse_override(text)[1] == value


def test_check_mechanism_takes_a_prior_parameter_as_prior_takes_it():
    base = ["check", "mechanism", "lip", "-d", "integers:0..2", "-p", "eps=3", "--users", "0"]
    as_param = runner.invoke(app, [*base, "-p", "prior=0.1,0.2,0.7"])
    assert as_param.exit_code == 0, as_param.stderr
    as_list = runner.invoke(app, [*base, "-p", "prior=[0.1, 0.2, 0.7]", "--prior", "[0.1, 0.2, 0.7]"])
    as_commas = runner.invoke(app, [*base, "-p", "prior=0.1,0.2,0.7", "--prior", "0.1,0.2,0.7"])
    assert as_list.exit_code == 0 and as_list.stdout == as_commas.stdout


def test_scenarios_write_grids_as_rows_x_cols():
    """One convention, parse_domain's ``grid:ROWSxCOLS``: every 'A x B cells' a scenario mentions is rows x cols."""
    checked = 0
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        domain = tomllib.loads(path.read_text()).get("domain", {})
        if domain.get("kind") != "grid":
            continue
        for a, b in re.findall(r"(\d+) ?x ?(\d+)(?: \(rows x cols\))?(?: = \d+)? cells", path.read_text()):
            assert (int(a), int(b)) == (domain["rows"], domain["cols"]), path.name
            checked += 1
    assert checked >= 4


def test_check_results_reports_progress_to_the_end(results):
    from ldpsim.running.recheck import check_results

    calls = []
    rows = check_results(
        ldpsim.results.io.open_results(results), progress=lambda done, total: calls.append((done, total))
    )
    total = calls[-1][1]
    assert rows and calls == [(i, total) for i in range(1, total + 1)]


def test_progress_bar_waits_for_its_delay():
    from rich.console import Console

    from ldpsim.output import cli_console

    buffer = io.StringIO()
    saved = cli_console.err
    cli_console.err = Console(file=buffer, force_terminal=True, width=80)
    try:
        with cli_console.progress_bar("quick", quiet=False, delay=60) as update:
            update(1, 2)
            update(2, 2)
        assert buffer.getvalue() == ""  # done before the delay: nothing drawn
        with cli_console.progress_bar("slow", quiet=False) as update:
            update(1, 2)
        assert "slow" in buffer.getvalue()
    finally:
        cli_console.err = saved


def test_help_and_the_cli_module_load_no_plugin_registry_nor_numpy():
    code = (
        "import sys\nfrom ldpsim.output.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ldpsim.plugin', 'ldpsim.estimation', 'numpy'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_registry_reads_each_distributions_metadata_once(monkeypatch):
    """Parsing metadata per entry point was half of ``ldpsim list``: once per distribution is enough."""
    import importlib.metadata as im

    from ldpsim.plugin.registry import Registry

    reads = []
    original = im.Distribution.metadata

    def counted(self):
        reads.append(getattr(self, "_path", self))
        return original.fget(self)

    monkeypatch.setattr(im.Distribution, "metadata", property(counted))
    registry = Registry.from_entry_points()
    assert registry.entries("mechanism") and len(reads) == len(set(reads))
    entry = registry.entries("mechanism")[0]
    assert entry.distribution == "ldpsim" and entry.version == im.version("ldpsim")


def test_an_infinite_score_is_one_warning_line_naming_the_metric(results, tmp_path):
    ds = ldpsim.results.io.open_results(results).load()
    ds["tv"][{"rep": 0}] = np.inf
    path = ldpsim.results.io.save_results(ds, tmp_path / "inf.nc")
    done = runner.invoke(app, ["show", str(path), "--format", "json"])
    assert done.exit_code == 0, done.stderr
    assert all(r["tv_mean"] is None and r["tv_sd"] is None for r in json.loads(done.stdout))  # JSON has no inf
    n = ds["tv"].size
    assert done.stderr.strip().splitlines() == [
        f"warning: metric 'tv' is infinite in {n // 2} of {n} scores; their rows show inf (mean) and nan (sd)"
    ]


def test_avg_mse_takes_its_number_of_users_from_the_run():
    from ldpsim.running.scenario import load_scenario

    path = ROOT / "scenarios" / "002-fig7-histogram.toml"
    assert "avg-mse.users" not in path.read_text()  # written once: the run's users
    scenario = load_scenario(path, {"users": 300})
    setup = scenario.builder.setup(next(iter(scenario.points())), scenario.axes)
    assert setup.users == 300 and setup.metrics["avg-mse"].users == 300


def test_a_stale_avg_mse_users_is_refused_with_the_fix():
    from ldpsim.running.scenario import load_scenario

    path = ROOT / "scenarios" / "002-fig7-histogram.toml"
    with pytest.raises(
        ScenarioError, match=r"metrics\.avg-mse\.users: is 2000, the run's users is 300; leave users out"
    ):
        scenario = load_scenario(path, {"users": 300, "metrics.avg-mse.users": 2000})
        scenario.builder.setup(next(iter(scenario.points())), scenario.axes)


def test_avg_mse_called_directly_needs_users():
    from ldpsim import ParameterError, get_registry
    from ldpsim.model.domains import parse_domain

    metric = get_registry().create("metric", "avg-mse")
    with pytest.raises(ParameterError, match=r"users: is not set"):
        metric.check_domain(parse_domain("integers:0..1"))


def test_the_score_warning_is_public_so_analyses_can_filter_it(results):
    from ldpsim.results.summary import summarize

    assert "ScoreWarning" in ldpsim.__all__
    ds = ldpsim.results.io.open_results(results).load()
    ds["tv"][{"rep": 0}] = np.inf
    with pytest.warns(ldpsim.ScoreWarning, match="metric 'tv' is infinite"):
        summarize(ds)


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "krr", "-d", "integers:0..9", "-n", "nan"],
        ["plan", "oue", "--seed", "1.5"],
        ["run", "--bogus"],
        ["show"],
        ["bogus"],
    ],
)
def test_a_usage_error_is_one_line_naming_the_commands_help(args):
    """A value of the wrong type, an unknown option or command, a missing argument: one line, exit 2."""
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and "--help')" in lines[0]


def test_a_bare_group_still_prints_its_help():
    result = CliRunner().invoke(app, ["check"])
    assert result.exit_code == 2 and "Usage: ldpsim check" in result.output and "mechanism" in result.output


def test_control_characters_of_the_users_input_reach_the_terminal_escaped():
    result = CliRunner().invoke(app, ["plan", "oue", "-d", "integers:0..9", "--error", "\x1b[2Jboom\x07"])
    assert result.exit_code == 2
    assert "\x1b" not in result.output and "\x07" not in result.output and "\\x1b[2Jboom\\x07" in result.output


def test_a_piped_summary_keeps_its_own_width(tmp_path):
    """Not a terminal (a pipe, a log): the table is as wide as it needs, never squeezed to 80 columns."""
    doc = {
        "name": "wide",
        "seed": 1,
        "users": 300,
        "repetitions": 2,
        "domain": {"kind": "integers", "low": 0, "high": 4},
        "dataset": {"name": "uniform"},
        "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0}]}},
        "estimators": ["ibu", "inv-p"],
        "metrics": ["tv", "emd", "l1", "l2", "mean"],
    }
    path = tmp_path / "wide.nc"
    ldpsim.run_scenario(doc, executor="serial", output=path)
    done = CliRunner().invoke(app, ["show", str(path)])
    assert done.exit_code == 0, done.output
    table = done.stdout[done.stdout.index("scores:") :].splitlines()
    assert max(map(len, table)) > 80 and "…" not in done.stdout
    assert all(name in table[2] for name in ("tv", "emd", "l1", "l2", "mean", "iterations"))


def test_an_optional_parameter_reads_optional_not_none():
    class Plugin(ldpsim.Configurable):
        g = ldpsim.Param("int", None, ge=2, doc="hash buckets (default: derived)")
        h = ldpsim.Param("int", 3)

    assert Plugin.g.describe() == "g: int >= 2 (optional)"
    assert Plugin.h.describe() == "h: int = 3"


def test_dir_of_the_package_lists_its_public_names_only():
    assert set(dir(ldpsim)) <= {*ldpsim.__all__, "__version__"}
    assert {"Any", "TYPE_CHECKING", "annotations", "importlib"}.isdisjoint(dir(ldpsim))


def test_the_run_line_names_its_two_clocks_and_wall_seconds_is_the_tasks(tmp_path, monkeypatch):
    """`wall_seconds` (0.83) once read beside "10 runs in 5.9 s" with nothing saying what either measured. The
    file's is the time in the tasks; the line's is the whole command (loading, checks, assembly, the file)
    and names the file's too. Sleeps put known time in a task and outside every task: each clock must hold
    the first, only the line's the second."""
    import ldpsim.running.runner as runner_module

    real_row, real_assemble = runner_module.task_row, runner_module.assemble

    def slow_row(*args, **kwargs):
        time.sleep(0.1)
        return real_row(*args, **kwargs)

    def slow_assemble(*args, **kwargs):
        time.sleep(0.5)
        return real_assemble(*args, **kwargs)

    monkeypatch.setattr(runner_module, "task_row", slow_row)
    monkeypatch.setattr(runner_module, "assemble", slow_assemble)
    out = tmp_path / "q.nc"
    args = ["run", str(QUICKSTART), "-o", str(out), "-e", "serial", "-q", "--set", "users=300"]
    done = runner.invoke(app, [*args, "--set", "repetitions=2"])  # 2 sweep points x 2
    assert done.exit_code == 0, done.output
    line = re.search(r"\((\d+) runs in ([\d.]+) s, ([\d.e-]+) s of it running them = wall_seconds; seed", done.stderr)
    assert line, done.stderr
    runs, total, tasks = int(line[1]), float(line[2]), float(line[3])
    wall = float(ldpsim.results.io.open_results(out).attrs["wall_seconds"])
    assert tasks == float(f"{wall:.2g}" if wall < 1 else f"{wall:.1f}")  # the line quotes the file
    assert runs * 0.1 <= wall < total - 0.5  # the tasks' sleeps in both, the assembly's in the line's only


def test_the_folder_holding_a_clone_shadows_the_package_as_the_set_up_docs_say(tmp_path):
    """Python started beside a clone named ldpsim imports that folder as an empty namespace package: no code
    of ldpsim runs, so no guard can; docs/getting-started.md says so, and that the command is not affected."""
    (tmp_path / "ldpsim" / "ldpsim").mkdir(parents=True)  # a clone's root: no __init__.py of its own
    probe = "import ldpsim; print(ldpsim.__file__, hasattr(ldpsim, 'Estimator'))"
    shadowed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert shadowed.stdout.split() == ["None", "False"], shadowed.stderr
    command = subprocess.run(
        [str(Path(sys.executable).with_name("ldpsim")), "--version"], capture_output=True, text=True, cwd=tmp_path
    )
    assert command.returncode == 0 and command.stdout.startswith("ldpsim "), command.stderr
    docs = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    assert "as an empty namespace package" in docs and "The `ldpsim` command is not affected" in docs
