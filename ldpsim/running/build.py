"""Plugin instances for a grid point: its domain, datasets, cohorts' report plans, estimators and metrics.

Building is also the deep check of a scenario: a plugin's parameters are
validated when it is created, so :func:`check_setups` builds every point once
before the first user is simulated. Identical plugin specifications share one
instance, so a data file is read once per run, whatever the number of points.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..base.errors import ContractError, LdpsimError, ScenarioError
from ..estimation.backend import resolve_backend
from ..estimation.estimator import Estimator
from ..estimation.observations import round_channels
from ..model.attack import Attack
from ..model.dataset import Dataset
from ..model.domains import Domain, make_domain
from ..model.mechanism import Mechanism
from ..model.metric import Metric
from ..plugin.registry import Registry, get_registry
from .expected import OBSERVE_MODES, expected_refusal
from .paths import related
from .schema import require_known
from .shuffled import shuffle_delta
from .sweep import Axis, Point

#: the most reports one user's plan may hold: a plan is a tuple of mechanisms built before anything runs,
#: and each report of a plan is one more column of every user's report tuple
MAX_REPORTS_PER_USER = 10_000

COHORT_KEYS = ("share", "reports", "dataset", "observe", "attack", "against", "shuffled", "delta")
#: the share of a cohort that takes what the others leave
REST = "rest"
#: how far from 1 the cohorts' shares may sum (float shares like 0.1 + 0.2 + 0.7)
SHARE_TOL = 1e-9
#: the most users a point may have: their counts are 64-bit integers
MAX_USERS = 2**63 - 1
#: the most shards a run is split into (each shard is a task: a million would be all dispatch)
MAX_SHARDS = 65_536
#: where a sharded run's estimators read its reports (``passes``): merged here, or held in the shards
PASSES = ("merged", "shards")


@dataclass
class Cohort:
    """Users who apply one report plan: how many, the plan, and their own dataset if they have one."""

    name: str
    users: int
    plan: tuple[Mechanism, ...]
    dataset: Dataset | None = None  # None: the scenario's dataset
    #: "sampled": reports drawn; "expected": their exact expected counts (the infinite-data limit)
    observe: str = "sampled"
    #: fake users: their reports follow this attack on ``plan`` (the attacked cohort's); they hold no value, and
    #: their ``dataset`` is the attacked cohort's (whose known prior their reports' group carries), never drawn
    attack: Attack | None = None
    #: the central delta of a cohort whose reports are shuffled (:mod:`.shuffled`), else None
    shuffled: float | None = None


@dataclass
class Setup:
    """The concrete objects of one grid point."""

    domain: Domain
    dataset: Dataset
    users: int
    cohorts: list[Cohort]
    estimators: dict[str, Estimator]
    metrics: dict[str, Metric]
    #: where the estimators' passes run, and their precision (``ldpsim.resolve_backend``): names, so a setup
    #: travels to worker processes; each resolves them once
    backend: str = "numpy"
    precision: str = "float64"
    #: how many shards each run's users are simulated in (:mod:`.shards`): an integer, ``"auto"``, or None
    #: (unsharded, as before)
    shards: int | str | None = None
    #: where a sharded run's estimators read its reports (:data:`PASSES`): ``"merged"`` in the dispatching
    #: process, ``"shards"`` where each shard was drawn, each pass a map-reduce over them
    passes: str = "merged"
    #: what the tasks of this point derive from it once and share (:mod:`.tasks`: the result variables,
    #: the cohorts' privacy levels); a sweep runs hundreds of tasks on each point's one setup
    derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


def check_setups(
    points: Iterable[Point], axes: Sequence[Axis], base_dir: Path, registry: Registry, *, confine: bool = False
) -> Builder:
    """Build every grid point once, so a bad value fails before the run starts.

    Returns
    -------
    Builder
        The builder, holding the instances it made: the run reuses them.

    Raises
    ------
    LdpsimError
        The first problem found, naming the sweep point at fault if a swept field is.
    """
    builder = Builder(base_dir, registry, confine=confine)
    for point in points:
        builder.setup(point, axes)
    return builder


class Builder:
    """Turns resolved documents into plugin instances, reusing identical ones.

    Parameters
    ----------
    base_dir
        The folder relative data paths are resolved against.
    registry
        Where plugins are looked up (default: the installed plugins).
    """

    def __init__(self, base_dir: Path, registry: Registry | None = None, *, confine: bool = False):
        self.base_dir = base_dir
        #: data paths must stay inside base_dir (a scenario read from a results file: data, not a program)
        self.confine = confine
        self.registry = registry or get_registry()
        self._cache: dict[str, Any] = {}
        self._checked: set[tuple[Any, ...]] = set()
        self._setups: dict[str, Setup] = {}  # by the point's document
        #: by the document object itself (kept, so its id is not reused): a point's repetitions share it,
        #: and serializing the document for every run was a tenth of a sweep of small runs
        self._by_document: dict[int, tuple[dict, Setup]] = {}
        #: the data files the scenario names (a run must not write over them)
        self.inputs: set[Path] = set()

    def setup(self, point: Point, axes: Sequence[Axis] = ()) -> Setup:
        """The plugin instances of ``point``.

        Raises
        ------
        LdpsimError
            On a bad value; when it lies in a field one of ``axes`` sets, the
            message ends with the sweep point (``(at sweep point eps=-1)``).
        """
        same = self._by_document.get(id(point.document))
        if same is not None and same[0] is point.document:
            return same[1]
        key = json.dumps(point.document, sort_keys=True, default=str)
        known = self._setups.get(key)
        if known is not None:  # every repetition of a point: built and checked once
            self._by_document[id(point.document)] = (point.document, known)
            return known
        try:
            setup = self._setup(point.document)
        except LdpsimError as exc:
            swept = [a for a in axes if exc.field and any(related(exc.field, p) for p in a.paths)]
            if swept:  # say which sweep value is at fault
                where = ", ".join(f"{a.name}={point.coords[a.name]}" for a in swept)
                raise type(exc)(f"{exc.problem} (at sweep point {where})", field=exc.field, hint=exc.hint) from None
            raise
        try:
            self._check_estimators(setup)
        except LdpsimError as exc:
            if axes:  # the combination is at fault: say at which point
                where = ", ".join(f"{a.name}={point.coords[a.name]}" for a in axes)
                raise type(exc)(f"{exc.problem} (at sweep point {where})", field=exc.field, hint=exc.hint) from None
            raise
        self._setups[key] = setup
        self._by_document[id(point.document)] = (point.document, setup)
        return setup

    def _check_estimators(self, setup: Setup) -> None:
        """Each estimator's :meth:`~ldpsim.Estimator.check_setup` on the point's domain and plans (once per combination)."""
        plans = tuple(dict.fromkeys(cohort.plan for cohort in setup.cohorts if cohort.users > 0))
        for label, estimator in setup.estimators.items():
            seen = plans
            if estimator.rounds == "each":  # it estimates from one round at a time, through the round's channel
                seen = tuple(dict.fromkeys((channel,) for plan in plans for channel in round_channels(plan)))
            key = (id(estimator), json.dumps(setup.domain.spec(), sort_keys=True, default=str), seen)
            if key in self._checked:
                continue
            try:
                estimator.check_setup(setup.domain, seen)
            except LdpsimError as exc:
                report = _report_at_fault(setup, exc)
                if report is not None:  # a mechanism's own defect, met as this estimator formed its matrix
                    spot, mech = report
                    problem = exc.problem.removeprefix(f"{mech!r}: ")
                    raise type(exc)(
                        f"mechanism '{mech.name}', checked for estimator {label}: {problem}", field=spot, hint=exc.hint
                    ) from None
                raise exc.at(f"estimators.{label}") from None
            self._checked.add(key)

    def _setup(self, doc: dict) -> Setup:
        domain = make_domain(doc["domain"])
        dataset = self._plugin("dataset", doc["dataset"], "dataset", domain)
        users = doc.get("users", dataset.size)
        if users is None:
            raise ScenarioError(
                "missing field 'users'", hint=f"add users = <count>: dataset '{dataset.name}' has no fixed size"
            )
        if isinstance(users, float) and users.is_integer():
            users = int(users)
        if isinstance(users, bool) or not isinstance(users, int) or users < 1:
            raise ScenarioError(
                f"must be a positive integer, got {users!r}", field="users", hint="e.g. users = 100_000"
            )
        if users > MAX_USERS:  # counts are 64-bit integers
            raise ScenarioError(
                f"must be at most {MAX_USERS}, got {users}", field="users", hint="count users in 64-bit integers"
            )
        limit = dataset.max_users
        if limit is not None and users > limit:
            lift = dataset.unlimited_by
            raise ScenarioError(
                f"asks for {users} users but the dataset has {limit} records",
                field="users",
                hint=f"use at most {limit} users" + (f" or set dataset.{lift} = true" if lift else ""),
            )
        cohorts = self._cohorts(doc["cohorts"], domain, users, dataset, _observe(doc, "observe", "sampled"))
        attacks = [c.attack for c in cohorts if c.attack is not None]
        targets = sorted({int(t) for a in attacks for t in a.target_items}) if attacks else None
        estimators = {
            label: self._plugin("estimator", spec, f"estimators.{label}", default_name=label, dataset=dataset)
            for label, spec in doc["estimators"].items()
        }
        metrics = {
            label: self._plugin(
                "metric", spec, f"metrics.{label}", default_name=label, run={"users": users, "targets": targets}
            )
            for label, spec in doc["metrics"].items()
        }
        for label, metric in metrics.items():
            try:
                metric.check_domain(domain)
            except LdpsimError as exc:
                raise exc.at(f"metrics.{label}") from None
        _check_scores(estimators, metrics, self.registry)
        backend, precision = str(doc.get("backend", "numpy")), str(doc.get("precision", "float64"))
        resolve_backend(backend, precision)  # a GPU asked for where none is usable fails here, before the run
        setup = Setup(domain, dataset, users, cohorts, estimators, metrics, backend, precision)
        setup.shards = _shards(doc.get("shards"))
        setup.passes = _passes(doc, estimators)
        return setup

    def _cohorts(self, spec: Any, domain: Domain, users: int, dataset: Dataset, observe: str) -> list[Cohort]:
        rest: str | None = None  # the cohort whose share is what the others leave
        shares: list[Fraction] = []
        plans: list[tuple[Mechanism, ...]] = []
        datasets: list[Dataset | None] = []
        modes = []
        for name, cohort in spec.items():
            where = f"cohorts.{name}"
            if not isinstance(cohort, dict):
                raise ScenarioError("must be a table", field=where, hint="give share and reports")
            require_known(cohort, COHORT_KEYS, where)
            share = cohort.get("share", 1 if len(spec) == 1 else None)
            if share == REST:  # what the other cohorts leave (an attacked cohort as the attackers' share is swept)
                if rest is not None:
                    raise ScenarioError(
                        f"cohort '{rest}' takes the rest already", field=f"{where}.share", hint="give this one a number"
                    )
                rest = name
            shares.append(Fraction(0) if share == REST else _share(share, f"{where}.share"))
            if "attack" in cohort or "against" in cohort:  # fake users: their plan is the attacked cohort's
                plans.append(())
                datasets.append(None)
                modes.append(self._attackers(cohort, where, domain))
                continue
            own = None
            if "dataset" in cohort:
                own = self._plugin("dataset", cohort["dataset"], f"{where}.dataset", domain)
            datasets.append(own)
            plans.append(self._plan(cohort.get("reports"), f"{where}.reports", domain, own or dataset))
            mode = _observe(cohort, f"{where}.observe", observe)
            if mode == "expected":
                why = expected_refusal(plans[-1])
                if why is not None:
                    raise ScenarioError(
                        f'observe = "expected" needs exact expected report counts: {why}',
                        field=f"{where}.observe" if "observe" in cohort else "observe",
                        hint='use observe = "sampled" for this cohort, or mechanisms with finitely many outputs',
                    )
            modes.append(mode)
        if rest is not None:
            left = Fraction(1) - sum(shares, Fraction(0))
            if left < 0:
                raise ScenarioError(
                    f"the other cohorts' shares sum to {float(1 - left):g}, more than 1",
                    field=f"cohorts.{rest}.share",
                    hint="lower the other shares",
                )
            shares[list(spec).index(rest)] = left
        total = sum(shares)
        if abs(float(total) - 1.0) > SHARE_TOL:
            raise ScenarioError(
                f"shares sum to {float(total):.12g}, not 1",
                field="cohorts",
                hint='adjust the shares (exact fractions like share = "1/3" help)',
            )
        counts = _apportion(users, shares)
        cohorts = [
            Cohort(name, c, plan, own, mode) for name, c, plan, own, mode in zip(spec, counts, plans, datasets, modes)
        ]
        for cohort in cohorts:
            cohort.shuffled = shuffle_delta(spec[cohort.name], f"cohorts.{cohort.name}", cohort.plan)
        if any(plan == () for plan in plans):
            _attack_cohorts(cohorts, spec, shares, [self._attack_of(spec[c.name], c.name, domain) for c in cohorts])
        return cohorts

    def _attackers(self, cohort: dict, where: str, domain: Domain) -> str:
        """Check an attacker cohort's table (its attack is built by :meth:`_attack_of`); its observation mode."""
        for key in ("reports", "dataset"):
            if key in cohort:
                raise ScenarioError(
                    "an attacker cohort has no reports or dataset of its own",
                    field=f"{where}.{key}",
                    hint="its fake users send the attack's reports to the mechanism of the cohort it is against",
                )
        if "attack" not in cohort:
            raise ScenarioError(
                "names a cohort to attack but no attack", field=where, hint='add attack = { name = "mga", r = 10 }'
            )
        if cohort.get("observe", "sampled") != "sampled":
            raise ScenarioError(
                "an attacker cohort's reports are drawn",
                field=f"{where}.observe",
                hint='leave observe out, or "sampled"',
            )
        self._attack_of(cohort, where.split(".", 1)[1], domain)
        return "sampled"

    def _attack_of(self, cohort: dict, name: str, domain: Domain) -> Attack | None:
        """The attack of cohort ``name`` (None for an honest cohort)."""
        if "attack" not in cohort:
            return None
        attack: Attack = self._plugin("attack", cohort["attack"], f"cohorts.{name}.attack", domain)
        return attack

    def _plan(self, reports: Any, where: str, domain: Domain, dataset: Dataset) -> tuple[Mechanism, ...]:
        if not isinstance(reports, list) or not reports:
            raise ScenarioError(
                "needs a non-empty list of reports", field=where, hint='e.g. reports = [{ mechanism = "krr", eps = 1 }]'
            )
        plan: list[Mechanism] = []
        for i, report in enumerate(reports):
            spot = f"{where}[{i}]"
            if not isinstance(report, dict) or "mechanism" not in report:
                raise ScenarioError(
                    "must be a table with a mechanism", field=spot, hint='e.g. { mechanism = "krr", eps = 1 }'
                )
            params = dict(report)
            repeat = params.pop("repeat", 1)
            if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
                raise ScenarioError(
                    f"must be a positive integer, got {repeat!r}",
                    field=f"{spot}.repeat",
                    hint="how many times users report",
                )
            if len(plan) + repeat > MAX_REPORTS_PER_USER:
                raise ScenarioError(
                    f"{len(plan) + repeat:,} reports per user, more than the {MAX_REPORTS_PER_USER:,} a plan may hold",
                    field=f"{spot}.repeat",
                    hint="give each user fewer reports",
                )
            name = params.pop("mechanism")
            mech = self._plugin(
                "mechanism", {"name": name, **params}, spot, domain, name_key="mechanism", dataset=dataset
            )
            plan.extend([mech] * repeat)
        return tuple(plan)

    def _require_inside(self, value: str, field: str) -> None:
        """Refuse a path that leaves base_dir: an absolute one, or one through '..' or a link."""
        target = Path(value)
        inside = not target.is_absolute() and ".." not in target.parts
        if inside:
            inside = (self.base_dir / target).resolve().is_relative_to(self.base_dir.resolve())
        if not inside:
            raise ScenarioError(
                "names a file outside the results file's folder; a results file may only name data beside it",
                field=field,
                hint="copy the data next to the results file, or pass --scenario-dir with the folder that holds it",
            )

    def _plugin(
        self,
        kind: str,
        spec: Any,
        where: str,
        domain: Domain | None = None,
        *,
        default_name: str | None = None,
        name_key: str = "name",
        dataset: Dataset | None = None,
        run: dict[str, Any] | None = None,
    ) -> Any:
        if not isinstance(spec, dict):
            raise ScenarioError("must be a table", field=where, hint=f"give {name_key} = ... and parameters")
        params = dict(spec)
        name = params.pop("name", default_name)
        if name is None:
            raise ScenarioError(
                f"has no {name_key}", field=where, hint=f'add {name_key} = "..." (see `ldpsim list {kind}s`)'
            )
        try:
            entry = self.registry.get(kind, name)
        except LdpsimError as exc:
            raise exc.at(f"{where}.{name_key}") from None
        for key in getattr(entry.cls, "from_run", ()):
            if run is None:
                break
            if key not in params:
                params[key] = run[key]
            elif params[key] != run[key]:  # the number written twice, once stale (as after --set users=N)
                raise ScenarioError(
                    f"is {params[key]!r}, the run's {key} is {run[key]!r}",
                    field=f"{where}.{key}",
                    hint=f"leave {key} out: {kind} '{name}' takes it from the run",
                )
        for key, param in entry.cls.parameters().items():
            value = params.get(key)
            if "path" in param.kinds and isinstance(value, str):
                if self.confine:
                    self._require_inside(value, f"{where}.{key}")
                params[key] = str(self.base_dir / value)
                self.inputs.add(self.base_dir / value)
            if "distribution" in param.kinds and value == "dataset":
                known = dataset.distribution() if dataset is not None else None
                if known is None:
                    raise ScenarioError(
                        'is "dataset" but the dataset\'s distribution is unknown',
                        field=f"{where}.{key}",
                        hint="give the distribution as a list of numbers",
                    )
                params[key] = known.tolist()
        cache_key = json.dumps([kind, name, params, domain.spec() if domain else None], sort_keys=True, default=str)
        if cache_key not in self._cache:
            args = (domain,) if domain is not None else ()
            try:
                self._cache[cache_key] = entry.cls(*args, **params)
            except LdpsimError as exc:
                raise exc.at(where) from None
        return self._cache[cache_key]


#: at most this many plugins are named in the hint of a refused (metric, estimator) pair
SUGGESTED = 4


def _check_scores(estimators: dict[str, Estimator], metrics: dict[str, Metric], registry: Registry) -> None:
    """Refuse a metric that cannot score an estimator's estimates (:attr:`Metric.scores`, :attr:`Estimator.gives`).

    Every metric of a scenario scores every estimator, and a number computed from numeric-mean's
    two-point stand-in by TV would read as an error of the estimate while saying nothing about it.
    """
    for m_label, metric in metrics.items():
        for e_label, estimator in estimators.items():
            gives = type(estimator).gives
            if metric.can_score(gives):
                continue
            scores = type(metric).scores or ()
            metric_alt = [e.name for e in registry.entries("metric") if gives in (getattr(e.cls, "scores", ()) or ())]
            estimator_alt = [e.name for e in registry.entries("estimator") if getattr(e.cls, "gives", None) in scores]
            raise ScenarioError(
                f"{metric.name} cannot score estimator '{e_label}': {estimator.name} estimates a {gives}, "
                f"{metric.name} scores only {' or '.join(scores)} estimates",
                field=f"metrics.{m_label}",
                hint=f"a scenario's metrics score all its estimators: score {estimator.name} with "
                f"{_some(metric_alt, 'a metric for it')} and use {metric.name} with "
                f"{_some(estimator_alt, 'an estimator it scores')}, in scenarios of their own",
            )


def _some(names: Sequence[str], otherwise: str) -> str:
    """'a or b', at most :data:`SUGGESTED` names ('e.g. a, b, c or d'), or ``otherwise`` if there are none."""
    if not names:
        return otherwise
    shown = list(names[:SUGGESTED])
    text = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f"e.g. {text}" if len(names) > SUGGESTED else text


def _report_at_fault(setup: Setup, exc: LdpsimError) -> tuple[str, Mechanism] | None:
    """The report (``cohorts.NAME.reports[I]``, the first that uses it) and mechanism a ``ContractError`` of
    a mechanism's hook names (its message starts with the mechanism's repr); None for any other error."""
    if not isinstance(exc, ContractError) or exc.field is not None:
        return None
    for cohort in setup.cohorts:
        index, previous = -1, None
        for mech in cohort.plan:  # a report's `repeat` copies of one mechanism are one report
            if mech is not previous:
                index, previous = index + 1, mech
            if exc.problem.startswith(f"{mech!r}: "):
                return f"cohorts.{cohort.name}.reports[{index}]", mech
    return None


def _shards(value: Any) -> int | str | None:
    """The scenario's ``shards``: None (unsharded), an integer >= 1, or ``"auto"``."""
    if value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SHARDS:
        raise ScenarioError(
            f'must be an integer from 1 to {MAX_SHARDS} or "auto", got {value!r}',
            field="shards",
            hint='e.g. shards = 8, or shards = "auto" (from the per-user memory)',
        )
    return value


def _passes(doc: dict, estimators: dict[str, Estimator]) -> str:
    """The scenario's ``passes``: ``"merged"`` (the default), or ``"shards"`` where that can be done."""
    value = doc.get("passes", "merged")
    if value not in PASSES:
        raise ScenarioError(
            f"must be one of {', '.join(map(repr, PASSES))}, got {value!r}",
            field="passes",
            hint='passes = "shards" keeps each shard\'s reports where it was drawn',
        )
    if value == "merged":
        return value
    if doc.get("shards") is None:
        raise ScenarioError(
            'passes = "shards" needs a sharded run',
            field="passes",
            hint='add shards = N (or "auto"), or leave out passes',
        )
    if str(doc.get("backend", "numpy")) != "numpy" or doc.get("rounds", "last") != "last":
        which = "backend" if str(doc.get("backend", "numpy")) != "numpy" else "rounds"
        raise ScenarioError(
            f'passes = "shards" runs on numpy, after the last round: not with {which} = {doc.get(which)!r}',
            field="passes",
            hint=f'leave out {which}, or passes = "merged"',
        )
    for label, estimator in estimators.items():
        if not estimator.reads_passes():
            raise ScenarioError(
                f"{estimator.name} reads more of the reports than its likelihood's passes (as configured here): it"
                " cannot estimate from reports held in shards",
                field=f"estimators.{label}",
                hint='use ibu or mle (without intervals, per_plan or rounds = "each"), or passes = "merged"',
            )
    return value


def _observe(table: dict, where: str, default: str) -> str:
    """The observation mode a scenario (``where = "observe"``) or cohort table sets, else ``default``."""
    key = where.rsplit(".", 1)[-1]
    value = table.get(key, default)
    if value not in OBSERVE_MODES:
        raise ScenarioError(
            f"must be one of {', '.join(map(repr, OBSERVE_MODES))}, got {value!r}",
            field=where,
            hint='"sampled" draws the reports; "expected" uses their exact expected counts (no sampling noise)',
        )
    return str(value)


def _share(value: Any, where: str) -> Fraction:
    """A cohort's share as an exact fraction: ``"1/3"`` exactly, a float to within 1e-12."""
    if value is None:
        raise ScenarioError("is missing", field=where, hint='give each cohort a share, e.g. share = 0.5 or "1/3"')
    try:
        share = Fraction(value) if isinstance(value, str) else Fraction(value).limit_denominator(10**12)
    except (ValueError, ZeroDivisionError, TypeError, OverflowError):  # OverflowError: inf
        raise ScenarioError(
            f"'{value}' is not a number or fraction", field=where, hint='write e.g. 0.25 or "1/4"'
        ) from None
    if isinstance(value, bool) or not 0 <= share <= 1:
        raise ScenarioError(f"must be in [0, 1], got {value!r}", field=where, hint="shares are fractions of the users")
    return share


def _attack_cohorts(
    cohorts: list[Cohort], spec: dict, shares: Sequence[Fraction], attacks: Sequence[Attack | None]
) -> None:
    """Give each attacker cohort its attack and the plan of the cohort it is against; refuse what cannot be.

    The attackers' share is the paper's beta, the fraction of fake users among all: in [0, 1).
    """
    honest = [c.name for c, a in zip(cohorts, attacks) if a is None]
    beta = sum(s for s, a in zip(shares, attacks) if a is not None)
    if not honest or beta >= 1:
        raise ScenarioError(
            f"attacker cohorts hold a share {float(beta):g} of the users; the fake users' share must be in [0, 1)",
            field="cohorts",
            hint="give the honest cohorts a positive share",
        )
    if not sum(c.users for c, a in zip(cohorts, attacks) if a is None):
        raise ScenarioError(
            "no honest user is left once the attackers' share is rounded to whole users",
            field="cohorts",
            hint="give the honest cohorts a larger share, or add users",
        )
    by_name = {c.name: c for c in cohorts}
    for cohort, attack in zip(cohorts, attacks):
        if attack is None:
            continue
        where = f"cohorts.{cohort.name}"
        against = spec[cohort.name].get("against", honest[0] if len(honest) == 1 else None)
        if against not in honest:
            raise ScenarioError(
                f"must name an honest cohort, got {against!r}",
                field=f"{where}.against",
                hint=f"attack one of {', '.join(map(repr, honest))}: against = {honest[0]!r}",
            )
        target = by_name[against]
        if len(target.plan) != 1:
            raise ScenarioError(
                f"cohort '{against}' sends {len(target.plan)} reports per user; attacks target one report",
                field=f"{where}.against",
                hint="attack a cohort whose users send one report",
            )
        why = attack.applies_to(target.plan[0])
        if why is not None:
            raise ScenarioError(
                f"attack '{attack.name}' does not apply to {target.plan[0].name}: {why}",
                field=f"{where}.attack",
                hint="choose another attack (see `ldpsim list attacks`), or attack a cohort of another mechanism",
            )
        cohort.plan, cohort.dataset, cohort.attack = target.plan, target.dataset, attack


def _apportion(users: int, shares: Sequence[Fraction]) -> list[int]:
    """Users per cohort: exact shares rounded by largest remainder, summing to ``users``."""
    total = sum(shares)
    exact = [users * s / total for s in shares]
    counts = [math.floor(e) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: users - sum(counts)]:
        counts[i] += 1
    return counts
