"""The core's result variables, each declared once (see :class:`ldpsim.Variable`).

Runs, checkpoints, assembly, ``show`` and the summary iterate over :func:`declared`:
the core's variables below, then the extra outputs declared by the scenario's
estimators and metrics. Adding a variable is one entry here (or one entry in a
plugin's ``outputs``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..base.errors import PluginError
from ..model.variables import DOMAIN, POINT, ROUND, TASK, Variable
from .noisy import NOISY_DESCRIPTION

PER_ESTIMATE = ("estimator", TASK, ROUND)

#: the levels of ``privacy_over_time``, in order
PRIVACY_LEVELS = ("eps_1", "eps_tau", "eps_inf")

CORE: tuple[Variable, ...] = (
    Variable(  # stored as one variable per metric, named by its label (ldpsim.results.scores)
        "scores",
        ("metric", "estimator", TASK, ROUND),
        "each metric's score of the estimate against the truth",
        source="metric",
    ),
    Variable("estimate", (*PER_ESTIMATE, DOMAIN), "estimated distribution", attr="distribution"),
    Variable(
        "truth",
        (TASK, DOMAIN),
        "empirical distribution of the true values",
        source="task",
    ),
    Variable(
        "iterations",
        PER_ESTIMATE,
        "estimator iterations (0 if not iterative)",
        dtype="int64",
        fill=0,
        summary=True,
    ),
    Variable(
        "loglik",
        PER_ESTIMATE,
        "log-likelihood L(estimate) of the observations",
        units="nat",
        description="NaN for an estimator that neither maximizes the likelihood nor gives L itself (inversion, "
        "MMSE) unless its certify is always",
    ),
    Variable("seconds", PER_ESTIMATE, "estimation time", units="s", summary=True),
    Variable(
        "converged",
        PER_ESTIMATE,
        "stopping criterion met before the iteration cap",
        dtype="bool",
        fill=False,
    ),
    Variable(
        "gap",
        PER_ESTIMATE,
        "bound on L(MLE) - L(estimate) from the KKT conditions",
        units="nat",
        description="n log(1 + kkt); NaN for an estimate without a certificate (see loglik)",
    ),
    Variable(
        "kkt",
        PER_ESTIMATE,
        "relative KKT violation of the estimate (0 at an MLE)",
        description="max over values of the gradient of L above its weighted mean, relative to n "
        "(Likelihood.certificate); the gap is derived from it; NaN for an estimate without a certificate (see loglik)",
    ),
    Variable(
        "distinct_reports",
        (TASK,),
        "distinct (plan, report tuple) pairs",
        dtype="int64",
        fill=0,
        source="task",
    ),
    Variable("users", (POINT,), "number of users", dtype="int64", fill=0, source="task"),
    Variable(
        "simulation_seconds",
        (TASK,),
        "simulation time",
        units="s",
        source="task",
        description="drawing the users' values and reports of the run; with the estimators' `seconds`, "
        "the work a run's wall time is compared against (benchmarks/bench_sweep.py)",
    ),
    Variable(
        "noisy",
        (TASK, DOMAIN),
        "noisy distribution",
        source="task",
        optional=True,
        description=NOISY_DESCRIPTION,
    ),
    Variable(
        "privacy_over_time",
        (POINT, "cohort", "privacy_level"),
        "LDP levels of each cohort's memoized mechanism: one report, all its rounds, the memoization bound",
        source="task",
        optional=True,
        description="NaN for a cohort whose plan is not one memoized (longitudinal) mechanism; eps_tau is the"
        " level of all the mechanism's rounds of one value, eps_inf its permanent stage's",
    ),
    Variable(
        "central_eps",
        (POINT, "cohort"),
        "central eps of each shuffled cohort's reports (variation-ratio bound, at central_delta)",
        source="task",
        optional=True,
        description="the shuffled reports of the cohort's users are (central_eps, central_delta)-DP"
        " (ldpsim.shuffle_guarantee); NaN for a cohort that is not shuffled",
    ),
    Variable(
        "central_delta",
        (POINT, "cohort"),
        "central delta of each shuffled cohort (its table's delta)",
        source="task",
        optional=True,
        description="NaN for a cohort that is not shuffled",
    ),
)


def declared(plugins: Iterable[object] = ()) -> tuple[Variable, ...]:
    """The core's variables, then the ``outputs`` declared by ``plugins`` (estimators, metrics), once each.

    Two plugins may declare the same output (two interval estimators both give ``lower``) only
    with the same declaration; a plugin output may not reuse a core variable's name.
    """
    found: dict[str, Variable] = {v.name: v for v in CORE}
    for plugin in plugins:
        for var in getattr(type(plugin), "outputs", ()):
            if not isinstance(var, Variable):
                raise PluginError(
                    f"{type(plugin).__name__}.outputs holds {var!r}, not an ldpsim.Variable",
                    hint="declare each output as ldpsim.Variable(name, dims, long_name, ...)",
                )
            other = found.get(var.name)
            if other is not None and other != var:
                where = "a core variable" if any(v.name == var.name for v in CORE) else "another plugin's output"
                raise PluginError(
                    f"{type(plugin).__name__} declares output '{var.name}', which is {where} declared differently",
                    hint="rename the output or declare it identically",
                )
            found[var.name] = var
    return tuple(found.values())
