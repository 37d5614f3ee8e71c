"""The ``ldpsim`` command line: run, list, new, show, merge, plot, plan, audit, check.

Each group of commands lives in its own module (``cli_run``, ``cli_plugins``, ``cli_results``,
``cli_plan``, ``cli_check``; what they share in ``cli_console``); this module builds the typer
application from them, in the order ``ldpsim --help`` lists them. Problems the user can fix are
printed as one line, ``error: ...``, and exit with code 2; nothing is written in that case.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from ..base.untrusted import printable
from .cli_check import audit, check_estimate_cmd, check_mechanism_cmd
from .cli_console import USER_ERROR, err, print_version, show_warning
from .cli_plan import plan_cmd
from .cli_plugins import list_plugins, new
from .cli_results import merge, plot, show
from .cli_run import RunCommand, executor_help, run

__all__ = ["app", "check_app", "executor_help", "main"]


class OneLineErrors(TyperGroup):
    """The ``ldpsim`` group: a usage error (an unknown option, a value of the wrong type) is one line and exit 2,
    like ldpsim's own errors, instead of a usage block and a framed message."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; in standalone mode, report the parser's errors on one line and exit."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except TyperException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group (`ldpsim check`): its help is printed
                sys.exit(USER_ERROR)
            ctx = getattr(exc, "ctx", None)  # usage errors know the command they concern
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            err.print(printable(f"error: {exc.format_message()}{where}"), markup=False, soft_wrap=True)
            sys.exit(USER_ERROR)
        except typer.Abort:
            err.print("interrupted; nothing was written", markup=False)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
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
