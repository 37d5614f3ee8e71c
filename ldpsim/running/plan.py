"""Planning a collection: the users, the eps or the error, before a deployment.

Three questions about one mechanism and one estimator on a guessed distribution of the values:
the number of users needed for a target error at a given eps, the eps needed for a target error
at a given number of users, and the error expected at a given (users, eps). The errors:

* ``tv``: the expected total variation distance to the users' true distribution;
* ``l2``: the root-mean-square L2 distance, ``sqrt(E ||estimate - truth||^2)``;
* ``max``: the expected largest absolute error of a value's frequency;
* ``halfwidth``: the expected half-width of the widest confidence interval, ``z se`` (where an
  interval is one-sided, ``[0, u]`` on the simplex's boundary, half its width). Simulated, it is
  the widest of the intervals the estimator states, which plug in the estimate: a little above the
  analytic value at the guessed distribution (0.7 % for k-RR, k = 5, eps = 2, n = 20 000).

**Analytic** where a formula exists: the unbiased estimate ``v = q A^+`` of matrix inversion has
the exact per-user covariance ``A^+T (diag(lambda) - lambda lambda^T) A^+`` (``lambda = theta A``),
the one its intervals state, so the half-width is ``z sqrt(max_x Sigma_xx / n)`` and the users for
a target half-width are closed form. Its error against the users' own values (what the metrics
score) has covariance ``A^+T (diag(lambda) - A^T diag(theta) A) A^+`` per user (the sampling of the
values removed), and a bias ``theta (A A^+ - I)`` when A has no left inverse: the RMS L2 error is
``sqrt(|b|^2 + tr(Sigma) / n)`` exactly, the TV error a normal approximation (folded normal per
value). A mechanism's own unbiased estimate (OUE, RAPPOR, hashing, ...) has its declared
``estimate_variance(theta)`` against the users' values, plus ``theta (1 - theta)`` in total, no bias.
These are the *unbiased* estimate's errors: INV-N and INV-P post-process it (INV-P's L2
error is at most this), so by default only the half-width is analytic for them.

**Simulation** otherwise: count-level simulations (one multinomial per value, whatever the number
of users) with ``repetitions`` runs per point, common random numbers across points (run r uses
``SeedSequence(seed, spawn_key=(r, stream))`` at every point), a search that grows the bracket by
a factor 10 then bisects in log scale, monotone (isotonic) smoothing of the searched curve, and
the answer where the smoothed curve crosses the target, interpolated in log-log. Its Monte-Carlo
standard error is the error's at the crossing divided by the curve's log-log slope there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression
from scipy.stats import norm

from ..base.errors import LdpsimError, ParameterError
from ..base.threads import one_blas_thread
from ..estimation.estimator import Estimator, InversionEstimator
from ..estimation.observations import Observations
from ..estimation.unbiased import plan_moments
from ..estimation.uncertainty import check_level
from ..model.dataset import Dataset
from ..model.domains import Domain, parse_domain
from ..model.mechanism import Mechanism
from ..plugin.registry import Registry, get_registry
from ..theory.sampling import cohort_group
from .schema import MAX_SEED
from .simulation import stream

ERRORS = ("tv", "l2", "max", "halfwidth")
METHODS = ("auto", "analytic", "simulation")
#: the users and eps the searches stay within
MIN_USERS, MAX_USERS = 1, 10**9
MIN_EPS, MAX_EPS = 1e-3, 30.0
#: the search stops when the bracket's ends are within this ratio (simulation) ...
SIM_RATIO = 1.05
#: ... or after this many bisection steps
MAX_STEPS = 14
#: analytic searches stop at this ratio
ANALYTIC_RATIO = 1 + 1e-6
#: the most simulation runs per point: at 10,000 the Monte-Carlo standard error is 1 % of one run's spread,
#: finer than the 5 % bracket (SIM_RATIO) the search stops at; each point costs that many estimates, and a
#: search evaluates some twenty points, so more runs would only make the plan look hung
MAX_REPETITIONS = 10_000

_DESCRIPTIONS = {
    "tv": "TV",
    "l2": "RMS L2 error",
    "max": "max absolute frequency error",
    "halfwidth": "half-width of the widest {level:g} % interval",
}


@dataclass(frozen=True)
class Curve:
    """The points a plan evaluated, sorted along its axis (``users`` or ``eps``).

    ``error`` is the analytic value or the mean over the runs, ``se`` its Monte-Carlo standard
    error (0 for analytic points), ``smoothed`` the monotone (non-increasing) fit the answer reads.
    """

    axis: str
    points: np.ndarray
    error: np.ndarray
    se: np.ndarray
    smoothed: np.ndarray


@dataclass(frozen=True)
class Plan:
    """A planner's answer.

    Attributes
    ----------
    question
        ``users`` (users needed), ``eps`` (eps needed) or ``error`` (error expected).
    error
        The error measured: ``tv``, ``l2``, ``max`` or ``halfwidth``.
    answer
        The users (an integer), the eps, or the error.
    se
        The answer's Monte-Carlo standard error (0 for an analytic answer; inf when the searched
        curve is flat at the answer).
    method
        ``analytic`` or ``simulation``.
    users, eps, target
        The question's givens (the answer's own field is None).
    note
        How the answer was found, in a sentence.
    curve
        The points searched.
    """

    question: str
    error: str
    answer: float
    se: float
    method: str
    users: int | None
    eps: float | None
    target: float | None
    level: float
    repetitions: int
    note: str
    curve: Curve
    settings: dict[str, Any] = field(default_factory=dict)

    def describe_error(self) -> str:
        return _DESCRIPTIONS[self.error].format(level=100 * self.level)

    def line(self) -> str:
        """The answer in one line, with its method and uncertainty."""
        what = self.describe_error()
        if self.question == "users":
            value = f"{int(self.answer):,} user{'s' * (int(self.answer) != 1)}"
            given = f"for {what} {self.target:g} at eps = {self.eps:g}"
        elif self.question == "eps":
            value = f"eps = {self.answer:.4g}"
            given = f"for {what} {self.target:g} with {self.users:,} users"
        else:
            value = f"{what} {self.answer:.4g}"
            given = f"with {self.users:,} users at eps = {self.eps:g}"
        if self.method == "analytic":
            spread = ""
        elif math.isfinite(self.se):
            se = f"{float(f'{self.se:.2g}'):,.0f}" if self.question == "users" and self.se >= 10 else f"{self.se:.2g}"
            spread = f", ± {se} Monte-Carlo standard error, {self.repetitions} runs per point"
        else:
            spread = ", Monte-Carlo error unknown: the curve is flat there"
        return f"{value} {given} ({self.method}{spread}): {self.note}"

    def to_dataset(self) -> Any:
        """The searched curve as an xarray Dataset, the answer and the question in its attributes."""
        import xarray as xr

        c = self.curve
        units = "users" if c.axis == "users" else "nats"
        what = self.describe_error()
        ds = xr.Dataset(
            {
                "error": (c.axis, c.error, {"long_name": what, "units": "1"}),
                "error_se": (c.axis, c.se, {"long_name": f"Monte-Carlo standard error of the {what}", "units": "1"}),
                "smoothed": (c.axis, c.smoothed, {"long_name": f"{what}, monotone fit", "units": "1"}),
            },
            coords={c.axis: (c.axis, c.points, {"long_name": c.axis, "units": units})},
        )
        attrs: dict[str, Any] = {
            "title": f"ldpsim plan: {self.question} needed" if self.question != "error" else "ldpsim plan",
            "question": self.question,
            "error_kind": self.error,
            "answer": float(self.answer),
            "answer_se": float(self.se),
            "method": self.method,
            "note": self.note,
            "level": self.level,
            "repetitions": self.repetitions,
            "summary": self.line(),
        }
        for key, value in (("users", self.users), ("eps", self.eps), ("target", self.target)):
            if value is not None:
                attrs[key] = value
        attrs.update({f"setting_{k}": str(v) for k, v in self.settings.items()})
        ds.attrs.update(attrs)
        return ds


class _Unreachable(Exception):
    def __init__(self, limit: float, se: float, at: float):
        self.limit, self.se, self.at = limit, se, at


def plan(
    mechanism: str,
    domain: str | Domain,
    *,
    eps: float | None = None,
    users: int | None = None,
    target: float | None = None,
    error: str = "tv",
    estimator: str = "inv-p",
    params: Mapping[str, Any] | None = None,
    dataset: str = "uniform",
    dataset_params: Mapping[str, Any] | None = None,
    estimator_params: Mapping[str, Any] | None = None,
    level: float = 0.95,
    method: str = "auto",
    repetitions: int = 20,
    seed: int = 0,
    registry: Registry | None = None,
) -> Plan:
    """Answer one planning question; which one is told by which two of eps, users and target are given.

    Parameters
    ----------
    mechanism, params
        The mechanism's name and its parameters other than ``eps``.
    domain
        A Domain, or a spec like ``integers:0..99`` (see :func:`ldpsim.parse_domain`).
    eps, users, target
        Exactly two of them: eps and target ask for the users, users and target for the eps,
        users and eps for the error.
    error
        ``tv``, ``l2`` (root mean square), ``max`` or ``halfwidth`` (of the widest interval at
        ``level``).
    estimator, estimator_params
        The estimator and its parameters.
    dataset, dataset_params
        The guessed distribution of the values: a dataset plugin on the domain.
    method
        ``auto`` (analytic where the formula is the estimator's own, else simulation),
        ``analytic`` or ``simulation``.
    repetitions, seed
        Simulation runs per point (2 to ``MAX_REPETITIONS``), and the root of their randomness (>= 0).

    Returns
    -------
    Plan
        The answer, its method and Monte-Carlo uncertainty, and the curve searched.

    Raises
    ------
    LdpsimError
        One line on a bad input, and on a target no users (or eps) can reach, naming the
        limiting error.
    """
    registry = registry or get_registry()
    if error not in ERRORS:
        raise ParameterError(f"unknown error '{error}'", field="error", hint=f"choose one of {', '.join(ERRORS)}")
    if method not in METHODS:
        raise ParameterError(f"unknown method '{method}'", field="method", hint=f"choose one of {', '.join(METHODS)}")
    level = check_level(level)
    given = [name for name, v in (("eps", eps), ("users", users), ("target", target)) if v is not None]
    if len(given) != 2:
        raise ParameterError(
            f"needs exactly two of eps, users and target, got {', '.join(given) or 'none'}",
            field="target",
            hint="eps and target: the users needed; users and target: the eps needed; users and eps: the error",
        )
    if target is not None and not (isinstance(target, (int, float)) and math.isfinite(target) and target > 0):
        raise ParameterError(f"must be a number > 0, got {target!r}", field="target", hint="e.g. 0.01")
    if users is not None and (isinstance(users, bool) or not isinstance(users, int) or not 1 <= users <= MAX_USERS):
        raise ParameterError(f"must be an integer in 1..{MAX_USERS}, got {users!r}", field="users", hint="e.g. 100000")
    if eps is not None and not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ParameterError(f"must be a number > 0, got {eps!r}", field="eps", hint="e.g. 1")
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or not 2 <= repetitions <= MAX_REPETITIONS:
        raise ParameterError(
            f"must be an integer in 2..{MAX_REPETITIONS:,}, got {repetitions!r}", field="repetitions", hint="e.g. 20"
        )
    # as a scenario's seed: SeedSequence entropy is >= 0, and results store it as an int64
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed <= MAX_SEED:
        raise ParameterError(f"must be an integer in 0..{MAX_SEED}, got {seed!r}", field="seed", hint="e.g. 0")
    model = _Model(
        registry,
        parse_domain(domain) if isinstance(domain, str) else domain,
        mechanism,
        dict(params or {}),
        estimator,
        dict(estimator_params or {}),
        dataset,
        dict(dataset_params or {}),
        error,
        level,
        repetitions,
        seed,
    )
    first = model.mechanism(eps if eps is not None else 1.0)  # a bad parameter fails before anything runs
    try:  # ... and an estimator that cannot take the mechanism (marginals needs a tuple protocol)
        model.estimator.check_setup(model.domain, [(first,)])
    except LdpsimError as exc:
        raise exc.at("estimator") from None
    analytic = model.analytic_reason(method, eps if eps is not None else 1.0)
    settings = {
        "mechanism": mechanism,
        "params": dict(params or {}),
        "domain": str(model.domain.spec()),
        "estimator": estimator,
        "dataset": dataset,
        "dataset_params": dict(dataset_params or {}),
        "seed": seed,
    }
    common: dict[str, Any] = dict(error=error, level=level, repetitions=repetitions, settings=settings)
    if target is None:
        assert users is not None and eps is not None
        if analytic is not None:
            value = model.analytic_error(users, eps)
            return Plan("error", answer=value, se=0.0, method="analytic", users=users, eps=eps, target=None,
                        note=analytic, curve=_curve("users", [users], [value], [0.0]), **common)  # fmt: skip
        mean, se = model.simulated_error(users, eps)
        return Plan("error", answer=mean, se=se, method="simulation", users=users, eps=eps, target=None,
                    note=f"mean of {repetitions} count-level simulations",
                    curve=_curve("users", [users], [mean], [se]), **common)  # fmt: skip
    if users is None:
        assert eps is not None
        return _plan_users(model, eps, target, analytic, common)
    return _plan_eps(model, users, target, analytic, common)


def _plan_users(model: _Model, eps: float, target: float, analytic: str | None, common: dict) -> Plan:
    what = _DESCRIPTIONS[model.error].format(level=100 * model.level)
    if analytic is not None and model.error in ("halfwidth", "l2"):
        per_user, floor = model.closed_form(eps)
        if target <= floor:
            raise _unreachable(what, target, floor, 0.0, "no number of users", "the estimate's bias")
        n = max(MIN_USERS, math.ceil(per_user / (target * target - floor * floor) - 1e-9))
        if n > MAX_USERS:
            raise _too_many(what, target, n)
        grid = np.unique(np.round(np.geomspace(max(1, n / 10), n * 10, 41)).astype(np.int64))
        values = [model.analytic_error(int(x), eps) for x in grid]
        formula = "(z / target)^2 max_x Sigma_xx" if model.error == "halfwidth" else "tr(Sigma) / (target^2 - |b|^2)"
        note = f"exact closed form n = {formula}; {analytic}"
        return Plan("users", answer=n, se=0.0, method="analytic", users=None, eps=eps, target=target, note=note,
                    curve=_curve("users", grid, values, np.zeros(grid.size)), **common)  # fmt: skip
    if analytic is not None:
        evaluate = lambda n: (model.analytic_error(int(n), eps), 0.0)  # noqa: E731
        ratio, method = ANALYTIC_RATIO, "analytic"
    else:
        evaluate = lambda n: model.simulated_error(int(n), eps)  # noqa: E731
        ratio, method = SIM_RATIO, "simulation"
    start = 10 ** max(2, round(math.log10(max(model.domain.size, 1))) + 1)
    try:
        answer, se, curve = _search(evaluate, float(start), MIN_USERS, MAX_USERS, target, ratio, integer=True)
    except _Unreachable as exc:
        raise _unreachable(what, target, exc.limit, exc.se, f"no number of users up to {MAX_USERS:.0e}",
                           f"at {int(exc.at):,} users") from None  # fmt: skip
    note = analytic if analytic is not None else _sim_note(model, curve)
    if answer <= MIN_USERS:
        note = f"met already by {MIN_USERS} user; {note}"
    return Plan("users", answer=float(math.ceil(answer)), se=se, method=method, users=None, eps=eps, target=target,
                note=note, curve=_as_curve("users", curve), **common)  # fmt: skip


def _plan_eps(model: _Model, users: int, target: float, analytic: str | None, common: dict) -> Plan:
    what = _DESCRIPTIONS[model.error].format(level=100 * model.level)
    if analytic is not None:
        evaluate = lambda e: (model.analytic_error(users, e), 0.0)  # noqa: E731
        ratio, method = ANALYTIC_RATIO, "analytic"
    else:
        evaluate = lambda e: model.simulated_error(users, e)  # noqa: E731
        ratio, method = SIM_RATIO, "simulation"
    try:
        answer, se, curve = _search(evaluate, 1.0, MIN_EPS, MAX_EPS, target, ratio, integer=False, factor=2.0)
    except _Unreachable as exc:
        raise _unreachable(what, target, exc.limit, exc.se, f"no eps up to {MAX_EPS:g} with {users:,} users",
                           f"at eps = {exc.at:g}", more="more users") from None  # fmt: skip
    note = analytic if analytic is not None else _sim_note(model, curve)
    if answer <= MIN_EPS:
        note = f"met already at eps = {MIN_EPS:g}, the smallest searched; {note}"
    return Plan("eps", answer=answer, se=se, method=method, users=users, eps=None, target=target, note=note,
                curve=_as_curve("eps", curve), **common)  # fmt: skip


def _sim_note(model: _Model, curve: tuple) -> str:
    return (
        f"count-level simulations at {len(curve[0])} points, bisection in log scale, monotone fit, "
        f"{model.estimator_name} estimates"
    )


def _unreachable(
    what: str, target: float, limit: float, se: float, nothing: str, where: str, more: str = "a larger eps"
) -> LdpsimError:
    spread = f" ± {se:.2g}" if se > 0 else ""
    return LdpsimError(
        f"{nothing} reaches {what} {target:g}: the error is still {limit:.4g}{spread} {where}",
        field="target",
        hint=f"aim above {limit:.3g}, or choose {more} or another estimator",
    )


def _too_many(what: str, target: float, n: int) -> LdpsimError:
    return LdpsimError(
        f"{what} {target:g} needs {n:.3g} users, more than the {MAX_USERS:.0e} the planner considers",
        field="target",
        hint="aim for a larger error or choose a larger eps",
    )


def _curve(axis: str, points: Any, error: Any, se: Any) -> Curve:
    e = np.asarray(error, dtype=float)
    return Curve(axis, np.asarray(points), e, np.asarray(se, dtype=float), e.copy())


def _as_curve(axis: str, curve: tuple) -> Curve:
    xs, means, ses, smoothed = curve
    return Curve(axis, np.asarray(xs, dtype=np.int64) if axis == "users" else np.asarray(xs), means, ses, smoothed)


def _search(
    evaluate: Callable[[float], tuple[float, float]],
    start: float,
    low: float,
    high: float,
    target: float,
    ratio: float,
    *,
    integer: bool,
    factor: float = 10.0,
) -> tuple[float, float, tuple]:
    """Where a decreasing error crosses ``target``: bracket by ``factor``, bisect in log scale, read the monotone fit.

    Returns the crossing, its Monte-Carlo standard error and the curve (points, means, ses, smoothed).
    Raises _Unreachable when the error at ``high`` is above the target.
    """
    seen: dict[float, tuple[float, float]] = {}

    def ev(x: float) -> float:
        if x not in seen:
            seen[x] = evaluate(x)
        return seen[x][0]

    x = start
    if ev(x) > target:
        while ev(x) > target:
            if x >= high:
                raise _Unreachable(*seen[x], x)
            x = min(x * factor, high)
        lo, hi = max(k for k in seen if k < x), x
    else:
        while ev(x) <= target and x > low:
            x = max(x / factor, low)
        if ev(x) <= target:  # reached already at the smallest point searched
            return x, 0.0, _fit(seen, target)[2]
        lo, hi = x, min(k for k in seen if k > x)
    for _ in range(MAX_STEPS):
        if hi / lo <= ratio:
            break
        mid = math.sqrt(lo * hi)
        if integer:
            mid = float(round(mid))
            if mid in (lo, hi):
                break
        if ev(mid) > target:
            lo = mid
        else:
            hi = mid
    answer, se, curve = _fit(seen, target)
    return answer, se, curve


def _fit(seen: dict[float, tuple[float, float]], target: float) -> tuple[float, float, tuple]:
    xs = np.array(sorted(seen))
    means = np.array([seen[x][0] for x in xs])
    ses = np.array([seen[x][1] for x in xs])
    if np.all(ses == 0):
        smoothed = np.minimum.accumulate(means)
    else:
        floor = max(float(ses[ses > 0].min()), 1e-300)
        smoothed = isotonic_regression(means, weights=1 / np.maximum(ses, floor) ** 2, increasing=False).x
    curve = (xs, means, ses, smoothed)
    below = np.flatnonzero(smoothed <= target)
    if below.size == 0:
        return float(xs[-1]), math.inf, curve
    j = int(below[0])
    if j == 0:
        return float(xs[0]), 0.0, curve
    lx, ls = np.log(xs[j - 1 : j + 1]), np.log(np.maximum(smoothed[j - 1 : j + 1], 1e-300))
    slope = (ls[1] - ls[0]) / (lx[1] - lx[0])
    if slope >= 0:
        return float(xs[j]), math.inf, curve
    answer = float(np.exp(lx[0] + (math.log(target) - ls[0]) / slope))
    weight = (math.log(answer) - lx[0]) / (lx[1] - lx[0])
    se_error = (1 - weight) * ses[j - 1] + weight * ses[j]
    # the fit is a staircase where the points are within noise of each other: a step between two close
    # points would make the answer look sure, so the slope is also read over a factor 2 either side
    a = int(np.searchsorted(xs, answer / 2, side="right")) - 1
    b = int(np.searchsorted(xs, answer * 2, side="left"))
    a, b = max(a, 0), min(b, xs.size - 1)
    if b > a and smoothed[a] > 0 and smoothed[b] > 0:
        wide = (math.log(smoothed[b]) - math.log(smoothed[a])) / (math.log(xs[b]) - math.log(xs[a]))
        slope = max(slope, wide)  # the flatter of the two (slopes are negative)
    if slope >= 0:
        return answer, math.inf, curve
    return answer, float(answer * se_error / target / abs(slope)), curve


class _Model:
    """The mechanism, estimator and guessed distribution of a plan; the error at (users, eps)."""

    def __init__(
        self,
        registry: Registry,
        domain: Domain,
        mechanism: str,
        params: dict[str, Any],
        estimator: str,
        estimator_params: dict[str, Any],
        dataset: str,
        dataset_params: dict[str, Any],
        error: str,
        level: float,
        repetitions: int,
        seed: int,
    ):
        self.registry, self.domain, self.error, self.level = registry, domain, error, level
        self.repetitions, self.seed = repetitions, seed
        self.mechanism_name, self.params = mechanism, params
        if "eps" in params:
            raise ParameterError("is given as eps, not as a parameter", field="params.eps", hint="give eps alone")
        cls = _entry(registry, "mechanism", mechanism).cls
        if "eps" not in cls.parameters():
            raise ParameterError(
                f"mechanism '{mechanism}' has no eps parameter", field="mechanism", hint="choose one with eps"
            )
        self.dataset: Dataset = _create(registry, "dataset", dataset, dataset_params, "dataset", domain)
        est_cls = _entry(registry, "estimator", estimator).cls
        if error == "halfwidth":
            if "intervals" not in est_cls.parameters():
                raise ParameterError(
                    f"estimator '{estimator}' states no intervals", field="estimator", hint="choose ibu, inv-n or inv-p"
                )
            estimator_params = {**estimator_params, "intervals": True, "confidence": level}
        self.estimator: Estimator = _create(registry, "estimator", estimator, estimator_params, "estimator")
        self.estimator_name = estimator
        self._mechanisms: dict[float, Mechanism] = {}

    def mechanism(self, eps: float) -> Mechanism:
        if eps not in self._mechanisms:
            if len(self._mechanisms) > 256:
                self._mechanisms.clear()
            params = {**self.params, "eps": float(eps)}
            self._mechanisms[eps] = _create(
                self.registry, "mechanism", self.mechanism_name, params, "params", self.domain
            )
        return self._mechanisms[eps]

    def analytic_reason(self, method: str, eps: float) -> str | None:
        """How the analytic answer is found, or None to simulate; refuses ``analytic`` where there is no formula.

        ``auto`` is analytic only for the half-width, whose formula is the one the estimator states;
        the TV and L2 formulas are the unbiased estimate's, before the estimator's post-processing.
        """
        if self.error == "halfwidth" and isinstance(self.estimator, InversionEstimator) and self._undeclared(eps):
            if getattr(self.estimator, "interval_method", "analytic") == "analytic":  # else: bootstrap intervals
                raise ParameterError(  # every interval [0, 1]: a simulated search would run to MAX_USERS
                    f"'{self.estimator_name}' states no interval on '{self.mechanism_name}': its own unbiased"
                    " estimate declares no variance, so every interval is [0, 1]",
                    field="estimator",
                    hint="use estimator ibu (Fisher-information intervals), or another error",
                )
        if method == "simulation":
            return None
        why = self._no_formula(eps)
        if why is not None:
            if method == "analytic":
                raise ParameterError(f"has no formula here: {why}", field="method", hint="use method simulation")
            return None
        if self.error == "halfwidth":
            if self.mechanism(eps).capabilities.unbiased_estimate:
                return "the closed-form variance of the mechanism's own unbiased estimate at the guessed distribution"
            return "the inversion's exact covariance at the guessed distribution"
        if method == "auto":
            return None
        if self.error == "l2":
            return "the unbiased estimate's exact covariance and bias, before post-processing (INV-P's is at most this)"
        return "normal approximation of the unbiased estimate's error value by value, before post-processing"

    def _undeclared(self, eps: float) -> bool:
        """Whether the mechanism has its own unbiased estimate and declares no variance for it (at theta, or uniform)."""
        mech, theta = self.mechanism(eps), self.dataset.distribution()
        theta = np.full(self.domain.size, 1.0 / self.domain.size) if theta is None else np.asarray(theta, dtype=float)
        return mech.capabilities.unbiased_estimate and mech.estimate_variance(theta) is None

    def _no_formula(self, eps: float) -> str | None:
        if self.error == "max":
            return "the max absolute error has no closed form"
        if not isinstance(self.estimator, InversionEstimator):
            return f"'{self.estimator_name}' is not a matrix inversion"
        mech = self.mechanism(eps)
        if mech.capabilities.unbiased_estimate:  # its estimate's variance is the one it declares, if it does
            if self._undeclared(eps):
                return f"'{self.mechanism_name}' has its own unbiased estimate, whose variance it does not declare"
            return None if self.dataset.distribution() is not None else "the dataset's distribution is unknown"
        if mech.report_width != 1 or mech.domain.size > 4096:
            return "the mechanism's matrix is too large"
        if mech.matrix is None:
            return f"'{self.mechanism_name}' has no matrix"
        if self.dataset.distribution() is None:
            return "the dataset's distribution is unknown"
        return None

    def _moments(self, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(total per-user variances, the same against the users' values, bias): see ``plan_moments``.

        OUE's total, for one: ``q (1-q) / (p-q)^2 + theta_x (1-p-q) / (p-q) + theta_x (1-theta_x)``, p = 1/2,
        q = 1 / (e^eps + 1), its declared estimate_variance plus the users' sampling.
        """
        moments = plan_moments((self.mechanism(eps),), np.asarray(self.dataset.distribution(), dtype=float))
        assert moments is not None and moments.given is not None, "_no_formula lets only plans with moments through"
        return moments.variance, moments.given, moments.bias

    def closed_form(self, eps: float) -> tuple[float, float]:
        """(per-user variance term, limiting error): the error is sqrt(floor^2 + per_user / n).

        The half-width's is ``z^2 max_x n Var[v_x]``: a half-width h needs ``z^2 max_x n Var[v_x] / h^2`` users.
        """
        total, given, bias = self._moments(eps)
        if self.error == "halfwidth":
            z = float(norm.ppf(0.5 + self.level / 2))
            return z * z * float(np.max(total)), 0.0
        return float(np.sum(given)), float(np.sqrt(bias @ bias))

    def analytic_error(self, users: int, eps: float) -> float:
        if self.error in ("halfwidth", "l2"):
            per_user, floor = self.closed_form(eps)
            return math.sqrt(floor * floor + per_user / users)
        _, given, bias = self._moments(eps)
        s = np.sqrt(np.clip(given, 0.0, None) / users)
        with np.errstate(divide="ignore", invalid="ignore"):
            folded = np.where(
                s > 0,
                s * math.sqrt(2 / math.pi) * np.exp(-0.5 * (bias / s) ** 2) + bias * (1 - 2 * norm.cdf(-bias / s)),
                np.abs(bias),
            )
        return float(0.5 * folded.sum())

    def simulated_error(self, users: int, eps: float) -> tuple[float, float]:
        """(mean, Monte-Carlo standard error) of the error over the runs; l2 as a root mean square."""
        mech = self.mechanism(eps)
        values = np.empty(self.repetitions)
        z = float(norm.ppf(0.5 + self.level / 2))
        with one_blas_thread():  # as a run's tasks: scipy's BLAS too (see ldpsim.base.threads)
            for r in range(self.repetitions):
                counts = self.dataset.sample_counts(users, stream(self.seed, r, 0))
                group = cohort_group((mech,), counts, [stream(self.seed, r, 1)])
                observations = Observations(self.domain, [group] if group is not None else [])
                estimate = self.estimator.estimate(observations)
                diff = estimate.distribution - counts / users
                if self.error == "tv":
                    values[r] = 0.5 * np.abs(diff).sum()
                elif self.error == "l2":
                    values[r] = diff @ diff
                elif self.error == "max":
                    values[r] = np.abs(diff).max()
                else:
                    u = estimate.uncertainty
                    assert u is not None
                    lower, upper = u.interval(self.level)
                    free = ~u.boundary & np.isfinite(u.se)
                    half = np.where(free, z * np.where(free, u.se, 0.0), (upper - lower) / 2)
                    values[r] = half.max()
        mean = float(values.mean())
        se = float(values.std(ddof=1) / math.sqrt(self.repetitions))
        if self.error == "l2":
            rms = math.sqrt(mean)
            return rms, se / (2 * rms) if rms > 0 else 0.0
        return mean, se


def _entry(registry: Registry, kind: str, name: str) -> Any:
    try:
        return registry.get(kind, name)
    except LdpsimError as exc:
        raise exc.at(kind) from None


def _create(registry: Registry, kind: str, name: str, params: dict[str, Any], where: str, *args: Any) -> Any:
    try:
        return registry.create(kind, name, *args, **params)
    except LdpsimError as exc:
        raise exc.at(where) from None


__all__ = ["ERRORS", "Curve", "Plan", "plan"]
