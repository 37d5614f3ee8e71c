"""The command line's helpers for a newcomer: --version, one plugin's documentation, --dry-run, new."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from ldpsim.output.cli import app

runner = CliRunner()


def test_version_is_the_installed_distributions():
    done = runner.invoke(app, ["--version"])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"ldpsim {version('ldpsim')}"
