"""Planning a shuffled collection: the largest eps0 for a central eps at N users, and its error.

A shuffler turns N users' eps0-LDP reports into a central (eps, delta) guarantee
(:mod:`ldpsim.theory.shuffle`). A deployment that promises a central eps can so let each user
report at a larger eps0: the largest one the bound allows is found by bisection over eps0 (the
bounds grow with eps0), with the mechanism's own variation-ratio parameters at each eps0 where it
has a matrix; the error expected at that eps0 and N users is then the planner's
(:func:`ldpsim.plan`), so the estimate's accuracy at equal central privacy can be compared
across mechanisms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base.errors import ParameterError
from ..model.domains import Domain, parse_domain
from ..model.mechanism import Mechanism
from ..plugin.registry import get_registry
from ..theory.shuffle import BOUNDS, ShuffleGuarantee, check_shuffle, largest_eps0, shuffle_guarantee
from .plan import MAX_EPS, MIN_EPS, Plan, plan


@dataclass(frozen=True)
class ShufflePlan:
    """The largest local eps0 for a central target, the guarantee it gives, and the error there."""

    eps0: float
    central_eps: float
    guarantee: ShuffleGuarantee
    plan: Plan

    def line(self) -> str:
        """The eps0 found, what the bound certifies at it, and the planner's answer there."""
        g = self.guarantee
        return (
            f"largest eps0 = {self.eps0:.4g} keeps the shuffled reports of {g.n:,} users"
            f" ({g.eps:.4g}, {g.delta:.3g})-DP (target eps {self.central_eps:g}, {g.bound} bound); {self.plan.line()}"
        )


def plan_shuffled(
    mechanism: str,
    domain: str | Domain,
    *,
    central_eps: float,
    users: int,
    delta: float = 1e-6,
    bound: str = "variation-ratio",
    params: Mapping[str, Any] | None = None,
    **options: Any,
) -> ShufflePlan:
    """The largest eps0 whose N shuffled reports meet a central eps, and the error at that eps0.

    Parameters
    ----------
    mechanism, domain, params
        The mechanism (parameterised by ``eps``), its domain and its other parameters.
    central_eps, delta
        The central (eps, delta) target.
    users
        The users N, shuffled together (>= 2).
    bound
        ``variation-ratio`` (the mechanism's own parameters), ``clones`` or ``clones-closed``.
    **options
        The planner's other options (``error``, ``estimator``, ``dataset``, ``method``, ...).

    Returns
    -------
    ShufflePlan
        eps0, the guarantee the bound gives at it, and the planner's error there.

    Raises
    ------
    ParameterError
        On a bad input, or when even the smallest eps0 misses the target.
    """
    if isinstance(central_eps, bool) or not isinstance(central_eps, int | float) or not 0 < central_eps < math.inf:
        raise ParameterError(f"must be a number > 0, got {central_eps!r}", field="central_eps", hint="e.g. 1")
    target = float(central_eps)
    users, delta = check_shuffle(users, delta)
    if bound not in BOUNDS:
        raise ParameterError(f"unknown bound '{bound}'", field="bound", hint=f"choose one of {', '.join(BOUNDS)}")
    dom = parse_domain(domain) if isinstance(domain, str) else domain
    registry = get_registry()
    fixed = dict(params or {})

    def mechanism_at(eps0: float) -> Mechanism:
        made = registry.create("mechanism", mechanism, dom, **{**fixed, "eps": float(eps0)})
        assert isinstance(made, Mechanism)
        return made

    try:
        mechanism_at(1.0)
    except ParameterError as exc:
        raise exc.at("params") from None
    eps0 = largest_eps0(target, users, delta, bound, mechanism_at, low=MIN_EPS, high=MAX_EPS)
    guarantee = shuffle_guarantee(mechanism_at(eps0), users, delta, bound)
    answer = plan(mechanism, dom, eps=eps0, users=users, params=fixed, **options)
    return ShufflePlan(eps0, target, guarantee, answer)
