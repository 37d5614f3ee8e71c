"""``ldpsim check mechanism``, ``check estimate`` and ``audit``: mechanisms and estimates against the theory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..base.errors import LdpsimError
from .cli_console import err, out, progress_bar, user_errors
from .summary import format_label

if TYPE_CHECKING:
    from ..model.mechanism import Mechanism

# the mechanism, its domain and its parameters, as `check mechanism` and `audit` take them
MechanismName = Annotated[str, typer.Argument(help="mechanism name (see `ldpsim list mechanisms`)")]
DomainOption = Annotated[
    str,
    typer.Option(
        "--domain",
        "-d",
        help="integers:0..99[:step], grid:24x16[:cell], categorical:a,b,c, or a product of those for tuple"
        " protocols: product:age=integers:0..4;sex=categorical:F,M",
    ),
]
ParamOption = Annotated[
    list[str], typer.Option("--param", "-p", metavar="KEY=VALUE", help="a mechanism parameter, e.g. eps=1")
]


def check_mechanism_cmd(
    name: MechanismName,
    domain: DomainOption,
    param: ParamOption = [],  # noqa: B006
    prior: Annotated[
        str | None, typer.Option(help="prior for the LIP level: comma-separated probabilities, or 'uniform'")
    ] = None,
    users: Annotated[int, typer.Option(min=0, help="users for the simulated INV error (0: skip)")] = 10_000,
    shuffle: Annotated[
        int | None,
        typer.Option(help="also the central (eps, delta) of this many users' reports after a shuffler, by each bound"),
    ] = None,
    delta: Annotated[float, typer.Option(help="the central delta of --shuffle")] = 1e-6,
) -> None:
    """Privacy levels, identifiability and INV error bounds of a mechanism.

    For a tuple protocol (spl, smp, rsfd, rsrfd on a product domain) also what its whole-tuple channel
    identifies (the joint, which marginals) and its exact privacy levels: between any two tuples, and
    between tuples that differ in one attribute. With ``--shuffle N``, the central guarantee of N
    users' reports after a shuffler by each bound, with the local parameters each uses.
    """
    import numpy as np

    from ..base.errors import ParameterError
    from ..model.domains import parse_domain
    from ..plugin.registry import get_registry
    from ..running.paths import parse_override, parse_value
    from ..theory.diagnostics import mechanism_report

    with user_errors():
        dom = parse_domain(domain)
        params = dict(parse_override(p, "--param", "eps=1") for p in param)
        try:
            mech = get_registry().create("mechanism", name, dom, **params)
        except ParameterError as exc:
            field = "--domain" if exc.field == "domain" else f"--param {exc.field}"
            raise ParameterError(exc.problem, field=field, hint=exc.hint) from None
        vector = None
        if prior is not None:
            # the same value syntax as --param (a comma list or a TOML list), so --param prior=... reads alike
            value = parse_value(prior, "--prior")
            try:
                vector = (
                    np.full(dom.size, 1 / dom.size)
                    if value == "uniform"
                    else np.array(value if isinstance(value, list) else [value], dtype=float)
                )
            except (TypeError, ValueError):
                raise LdpsimError(
                    f"'{prior}' is not a list of numbers", field="--prior", hint="write e.g. 0.2,0.3,0.5"
                ) from None
            if vector.shape != (dom.size,) or np.any(vector < 0) or not np.isclose(vector.sum(), 1):
                raise LdpsimError(
                    f"needs {dom.size} non-negative numbers summing to 1", field="--prior", hint="or write uniform"
                )
        shuffled = _shuffled(mech, shuffle, delta) if shuffle is not None else []
        report = mechanism_report(mech, prior=vector, users=users or None)
    for line in report.lines() + shuffled:
        out.print(line, markup=False, soft_wrap=True)


def _shuffled(mech: Mechanism, n: int, delta: float) -> list[str]:
    """The lines of ``--shuffle``: each bound's central eps, its errors named by their flag."""
    from ..base.errors import ParameterError
    from ..theory.shuffle import as_printed_eps, check_shuffle, shuffle_guarantees, variation_ratio

    try:
        check_shuffle(n, delta)
        own = variation_ratio(mech)  # once: every bound and the paper's number read it
        found = shuffle_guarantees(own, n, delta)
    except ParameterError as exc:
        flag = {"n": "--shuffle", "delta": "--delta"}.get(exc.field or "", exc.field)
        raise ParameterError(exc.problem, field=flag, hint=exc.hint) from None
    lines = [f"shuffled among {n:,} users (central, neighbours differ in one user's value):"]
    lines += ["  " + g.line() for g in found]
    if own.source == "matrix" and 0 < own.beta < math.tanh(own.eps0 / 2) * (1 - 1e-12):
        lines.append(
            f"  (Wang et al.'s formula as printed, with this mechanism's own beta = {own.beta:.4g}, q = e^"
            f"{math.log(own.q):.4g}, gives eps = {as_printed_eps(own, n, delta):.4g}: not a guarantee, see"
            " docs/theory/shuffling.md)"
        )
    return lines


def check_estimate_cmd(
    results: Annotated[Path, typer.Argument(help="results file written by `ldpsim run`")],
    scenario_dir: Annotated[
        Path | None,
        typer.Option(
            help="folder where the stored scenario's relative data paths start (default: the results file's);"
            " they may not leave it"
        ),
    ] = None,
) -> None:
    """For each estimate: is it an MLE (KKT), is L strictly concave, is the MLE unique."""
    from ..results.io import open_results
    from ..results.scores import sweep_dims
    from ..running.recheck import check_results

    with user_errors(), progress_bar(results.stem, quiet=False, delay=1.0) as progress:
        ds = open_results(results)
        rows = check_results(ds, scenario_dir, progress=progress)
    sweeps = sweep_dims(ds)
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault(tuple(row[d] for d in sweeps) + (row["estimator"],), []).append(row["report"])
    table = Table(title="estimates against the MLE conditions (over repetitions)", title_justify="left")
    for col in [*sweeps, "estimator", "max KKT violation", "is an MLE", "L strictly concave", "unique MLE"]:
        table.add_column(col, justify="left" if col == "estimator" else "right")
    for key, reports in groups.items():
        n = len(reports)
        uniq = [r.unique_mle for r in reports if r.unique_mle is not None]
        table.add_row(
            *[format_label(v) for v in key[:-1]],
            key[-1],
            f"{max(r.kkt_violation for r in reports):.3g}",
            f"{sum(r.is_mle for r in reports)}/{n}",
            f"{sum(r.strictly_concave for r in reports)}/{n}",
            f"{sum(uniq)}/{len(uniq)}" if uniq else "-",
        )
    out.print(table)
    out.print(
        "KKT: theta is an MLE iff dL/dtheta_x <= n for all x, with equality where theta_x > 0; the violation is the "
        "largest deviation of dL/dtheta_x / n from those conditions (an MLE counts below 1e-3).",
        markup=False,
    )


def audit(
    name: MechanismName,
    domain: DomainOption,
    param: ParamOption = [],  # noqa: B006
    draws: Annotated[int, typer.Option("--draws", "-n", help="draws per value (N)")] = 10**6,
    seed: Annotated[int, typer.Option(help="seed of all draws")] = 0,
    confidence: Annotated[float, typer.Option(help="confidence of the lower bound, over both code paths")] = 0.95,
    prior: Annotated[
        str | None,
        typer.Option(
            help="prior for the Bayes vulnerability: comma-separated probabilities or 'uniform'"
            " (default: a LIP mechanism's own prior, else uniform)"
        ),
    ] = None,
) -> None:
    """Audit a mechanism's privacy claim from its draws; exit 1 if they show it less private than declared.

    For pairs of values, N draws each, an event chosen by the likelihood ratio and Clopper-Pearson
    bounds give a lower bound on the eps the sampler and the simulation's count path really give.
    """
    import numpy as np

    from ..base.errors import ParameterError
    from ..model.domains import parse_domain
    from ..plugin.registry import get_registry
    from ..running.paths import parse_override
    from ..theory.audit import audit_mechanism

    with user_errors():
        dom = parse_domain(domain)
        try:
            mech = get_registry().create(
                "mechanism", name, dom, **dict(parse_override(p, "--param", "eps=1") for p in param)
            )
        except ParameterError as exc:
            field = "--domain" if exc.field == "domain" else f"--param {exc.field}"
            raise ParameterError(exc.problem, field=field, hint=exc.hint) from None
        vector = None
        if prior is not None and prior != "uniform":
            try:
                vector = np.array([float(v) for v in prior.split(",")])
            except ValueError:
                raise LdpsimError(
                    f"'{prior}' is not a list of numbers", field="--prior", hint="write e.g. 0.2,0.3,0.5"
                ) from None
        elif prior == "uniform":
            vector = np.full(dom.size, 1 / dom.size)
        try:
            report = audit_mechanism(mech, draws=draws, seed=seed, confidence=confidence, prior=vector)
        except ParameterError as exc:
            raise ParameterError(exc.problem, field=f"--{exc.field}", hint=exc.hint) from None
    for line in report.lines():
        out.print(line, markup=False, soft_wrap=True)
    worst = report.worst()
    if report.exceeded and worst is not None:
        x, y = (report.labels[i] for i in worst.pair)
        err.print(
            f"audit failed: the {worst.path} draws show eps >= {worst.bound:.4g} (values {x}, {y}) at"
            f" {confidence:.0%} confidence, above the declared {report.privacy}",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
