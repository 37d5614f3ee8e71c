"""The command line's helpers for a newcomer: --version, one plugin's documentation, --dry-run, new."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from ldpsim import Capabilities, Integers, get_registry
from ldpsim.output.cli import app
from ldpsim.plugin.registry import KINDS

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
        ("coverage", "reads: lower, upper"),
        ("binomial", "domains: integers"),
        ("processes", "workers: int >= 1 = None"),
    ],
)
def test_list_documents_every_kind(name, expected):
    done = runner.invoke(app, ["list", name])
    assert done.exit_code == 0, done.output
    assert expected in done.output


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
