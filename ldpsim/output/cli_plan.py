"""``ldpsim plan``: the users, the eps or the error of a deployment, before it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from ..base.errors import LdpsimError
from .cli_console import err, out, user_errors

#: the planner's errors by keyword, named on the command line by flag
PLAN_FLAGS = {
    "target": "--target",
    "users": "--users",
    "eps": "--eps",
    "error": "--error",
    "method": "--method",
    "repetitions": "--repetitions",
    "seed": "--seed",
    "confidence": "--level",
    "mechanism": "MECHANISM",
    "estimator": "--estimator",
    "dataset": "--dataset",
    "domain": "--domain",
    "central_eps": "--central-eps",
    "n": "--shuffle",
    "delta": "--delta",
    "bound": "--bound",
}


@contextmanager
def plan_flags() -> Iterator[None]:
    """The planner's errors named by their flag (``--param k``, ``--target``) rather than their keyword."""
    try:
        yield
    except LdpsimError as exc:
        field = exc.field or ""
        head, _, rest = field.partition(".")
        prefix = {"params": "--param", "dataset": "--dataset-param", "estimator": "--estimator-param"}
        if field in PLAN_FLAGS:
            field = PLAN_FLAGS[field]
        elif rest and head in prefix:
            field = f"{prefix[head]} {rest}"
        raise type(exc)(exc.problem, field=field or None, hint=exc.hint) from None


def plan_cmd(
    mechanism: Annotated[str, typer.Argument(help="mechanism name (see `ldpsim list mechanisms`)")],
    domain: Annotated[
        str, typer.Option("--domain", "-d", help="integers:0..99[:step], grid:24x16[:cell] or categorical:a,b,c")
    ],
    eps: Annotated[float | None, typer.Option(help="privacy level (give two of --eps, --users, --target)")] = None,
    users: Annotated[int | None, typer.Option("--users", "-n", help="number of users")] = None,
    target: Annotated[float | None, typer.Option(help="target error")] = None,
    error: Annotated[
        str, typer.Option(help="tv, l2 (root mean square), max (absolute frequency error) or halfwidth (of intervals)")
    ] = "tv",
    estimator: Annotated[str, typer.Option("--estimator", "-e", help="estimator name")] = "inv-p",
    param: Annotated[
        list[str], typer.Option("--param", "-p", metavar="KEY=VALUE", help="a mechanism parameter other than eps")
    ] = [],  # noqa: B006
    dataset: Annotated[str, typer.Option(help="the guessed distribution: a dataset plugin")] = "uniform",
    dataset_param: Annotated[
        list[str], typer.Option("--dataset-param", metavar="KEY=VALUE", help="a dataset parameter, e.g. p=0.3")
    ] = [],  # noqa: B006
    estimator_param: Annotated[
        list[str], typer.Option("--estimator-param", metavar="KEY=VALUE", help="an estimator parameter")
    ] = [],  # noqa: B006
    level: Annotated[float, typer.Option(help="confidence level of the intervals (with --error halfwidth)")] = 0.95,
    method: Annotated[str, typer.Option(help="auto, analytic or simulation")] = "auto",
    repetitions: Annotated[int, typer.Option("--repetitions", "-r", help="simulation runs per point")] = 20,
    seed: Annotated[int, typer.Option(help="root of the simulations' randomness")] = 0,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write the searched curve (netCDF4)")] = None,
    figure: Annotated[Path | None, typer.Option(help="draw the searched curve (png, pdf, svg)")] = None,
    central_eps: Annotated[
        float | None,
        typer.Option(help="with --shuffle: the central eps to meet; plans the largest eps0 and the error there"),
    ] = None,
    shuffle: Annotated[
        int | None, typer.Option(help="the users whose reports a shuffler mixes (with --central-eps)")
    ] = None,
    delta: Annotated[float, typer.Option(help="the central delta of --central-eps")] = 1e-6,
    bound: Annotated[str, typer.Option(help="variation-ratio, clones or clones-closed (with --central-eps)")] = (
        "variation-ratio"
    ),
) -> None:
    """The users needed for a target error, the eps needed, or the error expected, before a deployment.

    With ``--central-eps E --shuffle N``: the largest eps0 whose N shuffled reports are (E, delta)-DP
    by the bound, and the error expected at that eps0 and N users.
    """
    from ..results.io import check_output, save_results
    from ..running.paths import parse_override
    from ..running.plan import plan as make_plan
    from .plan_figure import plan_figure
    from .plotting import save_figure

    with user_errors(), plan_flags():
        common: dict[
            str, Any
        ] = {  # what the planner is asked beyond the mechanism, its domain and its eps/users/target
            "params": dict(parse_override(p, "--param", "truncate=false") for p in param),
            "error": error,
            "estimator": estimator,
            "dataset": dataset,
            "dataset_params": dict(parse_override(p, "--dataset-param", "p=0.3") for p in dataset_param),
            "estimator_params": dict(parse_override(p, "--estimator-param", "max_iter=500") for p in estimator_param),
            "level": level,
            "method": method,
            "repetitions": repetitions,
            "seed": seed,
        }
    if central_eps is not None or shuffle is not None:
        _plan_shuffled_cmd(mechanism, domain, central_eps, shuffle, delta, bound, eps, users, target, common)
        return
    with user_errors(), plan_flags():
        for path, flag in ((output, "--output"), (figure, "--figure")):
            if path is not None:
                try:
                    check_output(path)
                except LdpsimError as exc:
                    raise LdpsimError(exc.problem, field=flag, hint=exc.hint) from None
        answer = make_plan(mechanism, domain, eps=eps, users=users, target=target, **common)
        ds = answer.to_dataset()
        if output is not None:
            save_results(ds, output)
        if figure is not None:
            save_figure(plan_figure(ds), figure)
    out.print(answer.line(), markup=False, soft_wrap=True)
    for path in (output, figure):
        if path is not None:
            err.print(f"wrote {path}", markup=False)


def _plan_shuffled_cmd(
    mechanism: str,
    domain: str,
    central_eps: float | None,
    shuffle: int | None,
    delta: float,
    bound: str,
    eps: float | None,
    users: int | None,
    target: float | None,
    common: dict[str, Any],
) -> None:
    """``plan --central-eps E --shuffle N``: the largest eps0 for E at N shuffled users, and its error."""
    from ..running.plan_shuffle import plan_shuffled

    with user_errors(), plan_flags():
        if central_eps is None or shuffle is None:
            missing = "--central-eps" if central_eps is None else "--shuffle"
            raise LdpsimError(
                "give --central-eps and --shuffle together",
                field=missing,
                hint="e.g. --central-eps 1 --shuffle 1000000",
            )
        for value, flag in ((eps, "--eps"), (users, "--users"), (target, "--target")):
            if value is not None:
                raise LdpsimError("is planned from --central-eps and --shuffle", field=flag, hint=f"leave {flag} out")
        answer = plan_shuffled(
            mechanism,
            domain,
            central_eps=central_eps,
            users=shuffle,
            delta=delta,
            bound=bound,
            **common,
        )
    out.print(answer.line(), markup=False, soft_wrap=True)
