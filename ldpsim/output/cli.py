"""The ``ldpsim`` command line: run, list, new, show, merge, plot, plan, audit, check.

Each group of commands lives in its own module (``cli_run``, ``cli_plugins``, ``cli_results``,
``cli_plan``, ``cli_check``; what they share in ``cli_console``); this module builds the typer
application from them, in the order ``ldpsim --help`` lists them. Problems the user can fix are
printed as one line, ``error: ...``, and exit with code 2; nothing is written in that case.
"""

from __future__ import annotations

import warnings
from typing import Annotated

import typer

from .cli_check import audit, check_estimate_cmd, check_mechanism_cmd
from .cli_console import print_version, show_warning
from .cli_plan import plan_cmd
from .cli_plugins import list_plugins, new
from .cli_results import merge, plot, show
from .cli_run import RunCommand, executor_help, run

__all__ = ["app", "check_app", "executor_help", "main"]

app = typer.Typer(
    name="ldpsim",
    help="Simulate local privacy mechanisms and estimators. Start with: ldpsim run scenarios/quickstart.toml",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _setup(
    version: Annotated[
        bool, typer.Option("--version", callback=print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    warnings.showwarning = show_warning


# registered in the order --help lists them (typer lists the commands first, then the check group)
app.command(cls=RunCommand)(run)
app.command("list")(list_plugins)
app.command()(new)
app.command()(show)
app.command()(merge)
app.command()(plot)

check_app = typer.Typer(help="Check a mechanism or estimates against the theory of the papers.", no_args_is_help=True)
app.add_typer(check_app, name="check")
check_app.command("mechanism")(check_mechanism_cmd)
check_app.command("estimate")(check_estimate_cmd)

app.command("plan")(plan_cmd)
app.command()(audit)


def main() -> None:
    """Entry point of the ``ldpsim`` script."""
    app(prog_name="ldpsim")


if __name__ == "__main__":  # pragma: no cover
    main()
