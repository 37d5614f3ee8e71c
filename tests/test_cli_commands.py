"""The command line's helpers for a newcomer: --version, one plugin's documentation, --dry-run, new."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ldpsim
from ldpsim import Capabilities, Integers, get_registry, mechanism_report
from ldpsim.base import memory
from ldpsim.output.cli import app
from ldpsim.plugin.registry import KINDS
from ldpsim.running.scenario import load_scenario

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"

runner = CliRunner()


def test_version_is_the_installed_distributions():
    done = runner.invoke(app, ["--version"])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"ldpsim {version('ldpsim')}"


@pytest.mark.parametrize("args", [["krr"], ["mechanism", "krr"], ["mechanisms", "krr"]])
def test_list_one_plugin_shows_its_full_documentation(args):
    done = runner.invoke(app, ["list", *args])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0] == "mechanism krr"
    assert f"origin: plugin krr, distribution ldpsim {version('ldpsim')}" in done.output
    assert "k-ary randomized response" in done.output
    assert "    eps: float > 0 (required)" in lines and "privacy level: the mechanism is eps-LDP" in done.output
    assert "privacy claimed: 1-LDP, e.g. on integers 0..2 with eps=1" in done.output
    capabilities = next(line for line in lines if line.startswith("  capabilities: "))
    assert set(capabilities.split(": ")[1].split(", ")) == Capabilities.of(type(_krr())).declared
    assert "geometric" not in done.output  # one plugin, not the listing


def _krr():
    return get_registry().create("mechanism", "krr", Integers(low=0, high=2), eps=1.0)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lip-binary", "privacy claimed: 1-LIP (under its prior), e.g. on integers 0..1 with eps=1, prior=uniform"),
        ("planar-laplace", "privacy claimed: 1-geo-indistinguishability (eps per unit distance), e.g. on a 3x3 grid"),
        ("matrix", "privacy claimed: 0.693147-LDP"),  # rows keeping the value w.p. 1/2 on 3 values: log 2
        ("laplace", "its probabilities may be more private than declared"),
        ("ibu", "confidence: float > 0, < 1 = 0.95"),
        ("krr-mle", "maximizes the likelihood (its estimates are certified: loglik, kkt, gap)"),
        ("coverage", "reads: lower, upper"),
        ("binomial", "domains: integers"),
        ("processes", "workers: int >= 1 (optional)"),
    ],
)
def test_list_documents_every_kind(name, expected):
    done = runner.invoke(app, ["list", name])
    assert done.exit_code == 0, done.output
    assert expected in done.output


def test_only_estimators_that_maximize_the_likelihood_say_so():
    assert "maximizes the likelihood (its estimates" not in runner.invoke(app, ["list", "inv-p"]).output


def test_every_plugin_is_documented():
    registry = get_registry()
    for kind in KINDS:
        for name in registry.names(kind):
            done = runner.invoke(app, ["list", kind, name])
            assert done.exit_code == 0 and done.output.startswith(f"{kind} {name}\n"), done.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["krx"], "error: unknown plugin or kind 'krx'; did you mean 'krr'?"),
        (["mechanism", "krx"], "error: unknown mechanism 'krx'; did you mean 'krr'?"),
        (["mechanismz", "krr"], "error: unknown kind 'mechanismz'; did you mean 'mechanisms'?"),
    ],
)
def test_list_unknown_name_is_one_line_with_a_suggestion(args, message):
    done = runner.invoke(app, ["list", *args])
    assert done.exit_code == 2
    assert done.output.strip() == message


def test_dry_run_prints_the_scenario_runs_memory_and_time_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["run", str(QUICKSTART), "--dry-run", "--set", "users=2000", "-e", "serial"])
    assert done.exit_code == 0, done.output
    assert list(tmp_path.iterdir()) == []  # no results, no checkpoint
    resolved = json.loads(done.stdout[done.stdout.index("{") : done.stdout.rindex("}") + 1])
    assert resolved["users"] == 2000 and resolved["seed"] == 20200907
    assert "runs: 10 = 2 sweep points (data: 2) x 5 repetitions" in done.stdout
    # inv-n and inv-p invert the 100 x 100 geometric matrix: three copies of 8-byte floats, as the preflight counts
    assert "the memory checks count 240.0 KB per run at most" in done.stdout
    # truth and 3 estimates of 100 values for each of the 10 runs
    assert "32.0 KB of results" in done.stdout
    assert "with the serial executor, 1 worker (" in done.stdout and "groups of points of like cost" in done.stdout


def test_dry_run_refuses_what_the_run_would_refuse(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(memory, "available_memory", lambda: 100_000)  # 80 KB allowed: the inversion needs 240 KB
    done = runner.invoke(app, ["run", str(QUICKSTART), "--dry-run"])
    assert done.exit_code == 2
    assert "matrix inversion on the 100 x 100 matrix of [geometric] would need 240.0 KB" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_dry_run_bad_option_is_named_by_its_flag():
    done = runner.invoke(app, ["run", str(QUICKSTART), "--dry-run", "--workers", "0"])
    assert done.exit_code == 2 and "--workers: must be >= 1" in done.stderr


@pytest.mark.parametrize("template", ["basic", "quickstart"])
def test_new_writes_a_commented_scenario_that_loads(tmp_path, monkeypatch, template):
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["new", "trial", "--from", template])
    assert done.exit_code == 0, done.output
    assert "wrote trial.toml" in done.stderr
    text = (tmp_path / "trial.toml").read_text()
    assert text.startswith("# ") and "ldpsim run trial.toml --dry-run" in text and "__" not in text
    scenario = load_scenario(tmp_path / "trial.toml")
    assert scenario.name == "trial" and scenario.repetitions == 5


def test_new_from_quickstart_is_the_quickstart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["new", "sub/q.toml", "--from", "quickstart"]).exit_code == 2  # no folder: refused
    assert runner.invoke(app, ["new", "q.toml", "--from", "quickstart"]).exit_code == 0
    written = load_scenario(tmp_path / "q.toml").document
    shipped = load_scenario(QUICKSTART).document
    assert written.pop("name") == "q" and shipped.pop("name") == "quickstart"
    assert written == shipped


def test_new_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text("# my work\n")
    done = runner.invoke(app, ["new", "mine"])
    assert done.exit_code == 2
    assert done.stderr.strip() == "error: mine.toml already exists; choose another name, or move the file away first"
    assert (tmp_path / "mine.toml").read_text() == "# my work\n"


def test_new_unknown_template(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["new", "x", "--from", "quickstrt"])
    assert done.exit_code == 2
    assert done.stderr.strip() == "error: --from: unknown template 'quickstrt'; did you mean 'quickstart'?"
    assert list(tmp_path.iterdir()) == []


def test_list_and_help_import_no_heavy_module():
    """`ldpsim --help` and `ldpsim list` start in well under a second: the heavy modules load where they are used."""
    heavy = [
        "scipy.stats",
        "scipy.signal",
        "scipy.fft",
        "scipy.special",
        "scipy.sparse",
        "xarray",
        "matplotlib",
        "pandas",
    ]
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from ldpsim.output.cli import app\n"
        "for args in (['--help'], ['list'], ['list', 'krr']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_mechanism_report_says_violated_when_the_claim_is_not_met():
    from plugins_under_test import OverclaimingKRR  # claims 0.5-LDP, gives 1-LDP

    report = mechanism_report(OverclaimingKRR(Integers(low=0, high=9), eps=1.0), users=None)
    assert report.privacy_holds is False
    assert report.lines()[1] == "declares    0.5-LDP: VIOLATED (its probabilities give eps = 1)"
    honest = mechanism_report(_krr(), users=None)
    assert (
        honest.privacy_holds is True
        and honest.lines()[1] == "declares    1-LDP: holds (its probabilities give eps = 1)"
    )


def test_lip_claims_are_checked_under_their_own_prior():
    mech = get_registry().create("mechanism", "lip", Integers(low=0, high=2), eps=1.0, prior=[0.4, 0.3, 0.3])
    report = mechanism_report(mech, users=None)
    assert report.privacy_holds is True and report.lines()[1].startswith("declares    1-LIP (under its prior): holds")


def test_check_mechanism_report_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match="use ldpsim.mechanism_report"):
        report = ldpsim.check_mechanism(_krr(), users=None)
    assert report == mechanism_report(_krr(), users=None)


def test_one_run_is_not_plural(tmp_path):
    out = tmp_path / "one.nc"
    args = ["run", str(QUICKSTART), "-o", str(out), "-q", "-e", "serial"]
    done = runner.invoke(app, [*args, "--set", "users=500", "--set", "repetitions=1", "--set", "sweep={}"])
    assert done.exit_code == 0, done.output
    assert f"wrote {out} (1 run in " in done.stderr
