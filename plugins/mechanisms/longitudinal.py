"""Memoized longitudinal protocols: a permanent response drawn once, an instantaneous one every round.

One report is the user's whole sequence of ``rounds`` reports (see ``ldpsim.MemoizedMechanism``),
so GIBU (``ibu``/``mle``) estimates from the exact joint likelihood of the sequence.

* ``memoized``: any permanent mechanism with finitely many outputs, then any instantaneous
  mechanism(s) on its outputs, by name and eps (a cohort may switch mechanisms between rounds).
* ``l-grr``, ``l-sue`` (basic RAPPOR), ``l-oue``, ``l-osue``, ``l-soue``: Arcolezi, Couchot,
  Al Bouna & Xiao, "Improving the utility of locally differentially private protocols for
  longitudinal and multidimensional frequency estimates" (2022). The permanent stage is
  eps_inf-LDP; the instantaneous stage is chosen so that one report is eps_1-LDP, with
  ``eps_1 = log[P'(1 - Q') / (Q'(1 - P'))]`` for the composite bit probabilities
  ``P' = p1 p2 + (1 - p1) q2``, ``Q' = q1 p2 + (1 - q1) q2`` of the unary protocols (the paper's
  definition; ldpsim solves it numerically, and the tests check the solutions against the closed
  forms of multi-freq-ldpy).

L-GRR's eps_1: the composite one-report channel A1 A2 has ``P(y = x | x) = p1 p2 + (k-1) q1 q2`` and
``P(y | x) = q1 p2 + p1 q2 + (k-2) q1 q2`` for each y != x. By default ldpsim solves
``e^eps_1 = P(x | x) / P(y | x)`` exactly; ``published = true`` uses the paper's closed form for p2,
which solves ``e^eps_1 = (p1 p2 + q1 q2) / (p1 q2 + q1 p2)`` (no (k-1), (k-2) q1 q2 terms): its
report is then more private than eps_1 (e.g. 0.92 for eps_1 = 1, eps_inf = 4, k = 10), and
``ldpsim check mechanism`` prints the true level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from ldpsim import (
    MAX_ROUNDS,
    Domain,
    EstimationError,
    Integers,
    Mechanism,
    MemoizedMechanism,
    MemoizedUnary,
    Param,
    ParameterError,
    Privacy,
    count_estimate_variance,
    get_registry,
    hookimpl,
    output_domain,
    require_memory,
)


def _eps_pair_check(eps_inf: float, eps_1: float) -> None:
    if eps_1 >= eps_inf:
        raise ParameterError(
            f"eps_1 ({eps_1:g}) must be below eps_inf ({eps_inf:g})",
            field="eps_1",
            hint="choose eps_1 < eps_inf: one report must be more private than the permanent response",
        )


class Memoized(MemoizedMechanism):
    """A permanent mechanism reused by instantaneous mechanism(s) every round; a report is the whole sequence."""

    name = "memoized"
    permanent = Param("str", "krr", doc="the permanent stage: a mechanism with finitely many outputs")
    eps_permanent = Param("float", gt=0, doc="eps of the permanent stage (eps_inf for k-RR)")
    instantaneous = Param(
        ("str", "strings"), "krr", doc="the instantaneous mechanism, or one per round (on the permanent outputs)"
    )
    eps_instantaneous = Param(("float", "vector"), gt=0, doc="eps of the instantaneous stage, or one per round")
    # an int once built (_stages fills in the default): typed so, as MemoizedMechanism.rounds is
    rounds = cast(
        "Param[int]",
        Param(
            "int",
            None,
            ge=1,
            le=MAX_ROUNDS,
            doc=f"tau: reports per user, one per round (default: the stages given, or 1; at most {MAX_ROUNDS:,})",
        ),
    )

    def _stages(self) -> tuple[Mechanism, Sequence[Mechanism]]:
        registry = get_registry()
        names = (self.instantaneous,) if isinstance(self.instantaneous, str) else tuple(self.instantaneous)
        eps = np.atleast_1d(np.asarray(self.eps_instantaneous, dtype=float))
        if self.rounds is None:
            self.rounds = max(len(names), eps.size)
        for field, given in (("instantaneous", len(names)), ("eps_instantaneous", eps.size)):
            if given not in (1, self.rounds):
                raise ParameterError(
                    f"gives {given} stages for {self.rounds} rounds",
                    field=field,
                    hint="give one value for every round, or one per round",
                )
        permanent = registry.create("mechanism", self.permanent, self.domain, eps=self.eps_permanent)
        inputs = output_domain(permanent)
        built: dict[tuple[str, float], Mechanism] = {}
        stages = []
        for t in range(self.rounds):
            key = (names[t % len(names)], float(eps[t % eps.size]))
            if key not in built:
                built[key] = registry.create("mechanism", key[0], inputs, eps=key[1])
            stages.append(built[key])
        return permanent, stages

    def _prefix(self, t: int) -> Mechanism:
        params: dict[str, Any] = {**self.get_params(), "rounds": t}
        if not isinstance(self.instantaneous, str) and len(self.instantaneous) > 1:
            params["instantaneous"] = self.instantaneous[:t]
        if np.ndim(self.eps_instantaneous) and np.size(self.eps_instantaneous) > 1:
            params["eps_instantaneous"] = np.asarray(self.eps_instantaneous)[:t]
        return type(self)(self.domain, **params)


class LGRR(MemoizedMechanism):
    """L-GRR (Arcolezi et al. 2022): k-RR with eps_inf memoized, then k-RR every round, one report eps_1-LDP."""

    name = "l-grr"
    eps_inf = Param("float", gt=0, le=700, doc="eps of the permanent k-RR: the bound over infinitely many rounds")
    eps_1 = Param("float", gt=0, doc="eps of one report (< eps_inf)")
    rounds = Param("int", 1, ge=1, le=MAX_ROUNDS, doc=f"tau: reports per user, one per round (at most {MAX_ROUNDS:,})")
    published = Param("bool", False, doc="use the paper's closed form for p2 (one report is then below eps_1)")

    def instantaneous_p(self) -> float:
        """p2, the probability that a round reports the permanent value."""
        return lgrr_p2(self.domain.size, self.eps_inf, self.eps_1, self.published)

    def _stages(self) -> tuple[Mechanism, Sequence[Mechanism]]:
        _eps_pair_check(self.eps_inf, self.eps_1)
        k = self.domain.size
        if not 1.0 / (1.0 + (k - 1) * math.exp(-self.eps_inf)) > 1.0 / k:
            raise ParameterError(
                f"eps_inf = {self.eps_inf:g} is too small for doubles: the permanent k-RR's probabilities round to"
                " equal (a uniform report)",
                field="eps_inf",
                hint="choose eps_inf >= 1e-15",
            )
        p2 = self.instantaneous_p()
        q2 = (1.0 - p2) / (k - 1)
        if not q2 < p2 < 1:
            raise ParameterError(
                f"gives no valid instantaneous stage (p2 = {p2:.6g})", field="eps_1", hint="choose a smaller eps_1"
            )
        registry = get_registry()
        permanent = registry.create("mechanism", "krr", self.domain, eps=self.eps_inf)
        stage = registry.create("mechanism", "krr", self.domain, eps=math.log(p2 / q2))
        return permanent, [stage] * self.rounds


def _solve_round(eps_1: float, p1: float, q1: float, symmetric: bool, eps_inf: float) -> tuple[float, float]:
    """(p2, q2) of the instantaneous bit flip whose composite with (p1, q1) is eps_1-LDP.

    ``symmetric``: q2 = 1 - p2 with p2 in (1/2, 1) (SUE); else p2 = 1/2 and q2 in (0, 1/2) (OUE).
    The level grows from 0 (p2 = q2) to its largest value as the flip vanishes: one root.
    """
    from scipy.optimize import brentq

    def pair(s: float) -> tuple[float, float]:
        return (s, 1.0 - s) if symmetric else (0.5, s)

    def level(s: float) -> float:
        p2, q2 = pair(s)
        big, small = p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2
        return math.log(big / small) + math.log1p(-small) - math.log1p(-big) - eps_1

    near, far = (0.5, 1.0) if symmetric else (0.5, 0.0)
    tiny = 1e-12
    lo, hi = near + (tiny if symmetric else -tiny), far - (tiny if symmetric else -tiny)
    if level(hi) <= 0:
        raise ParameterError(
            f"eps_1 = {eps_1:g} is out of reach with eps_inf = {eps_inf:g}: one report is at most"
            f" {level(hi) + eps_1:.6g}-LDP",
            field="eps_1",
            hint="choose a smaller eps_1 or a larger eps_inf",
        )
    if level(lo) < 0:
        return pair(brentq(level, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps))
    return _solve_tiny_round(eps_1, p1, q1, symmetric, eps_inf)


#: the smallest eps_1 the L-UE protocols solve for when its root lies within 1e-12 of p2 = q2: there p2 and q2
#: differ by about eps_1 / 2, and doubles near 1/2 are 1.1e-16 apart, so the level of the rounded pair is within
#: ~4e-4 of eps_1 at 1e-12 and off by 10% at 1e-15 (a smaller eps_inf moves the root away and needs no bound)
MIN_EPS_1 = 1e-12


def _solve_tiny_round(eps_1: float, p1: float, q1: float, symmetric: bool, eps_inf: float) -> tuple[float, float]:
    """:func:`_solve_round` for an eps_1 so small that its root lies within 1e-12 of p2 = q2.

    Solved for the distance t from p2 = q2 (p2 - q2 = 2t for SUE, t for OUE), the level written
    ``log1p(delta / small) - log1p(-delta / (1 - small))`` with ``delta = (p1 - q1)(p2 - q2)``, both
    exact to rounding for a tiny t where the form in p2 cancels; p2 and q2 are rounded only once solved.
    """
    from scipy.optimize import brentq

    if eps_1 < MIN_EPS_1:
        raise ParameterError(
            f"eps_1 = {eps_1:g} is below the {MIN_EPS_1:g} the L-UE protocols resolve with eps_inf = {eps_inf:g}:"
            " its round's bit probabilities would differ by less than rounding moves them",
            field="eps_1",
            hint=f"choose eps_1 >= {MIN_EPS_1:g} (or a smaller eps_inf)",
        )

    def pair(t: float) -> tuple[float, float]:
        return (0.5 + t, 0.5 - t) if symmetric else (0.5, 0.5 - t)

    def level(t: float) -> float:  # smooth in t: p2 and q2 unrounded (rounding them makes steps of 1e-16)
        gap = 2 * t if symmetric else t
        small = 0.5 - (1 - 2 * q1) * t if symmetric else 0.5 - (1 - q1) * t  # q1 p2 + (1 - q1) q2
        delta = (p1 - q1) * gap
        return math.log1p(delta / small) - math.log1p(-delta / (1 - small)) - eps_1

    # the root is near 1e-12 (the form in p2 found no sign change beyond it): 1e-6 brackets it with room
    return pair(brentq(level, 0.0, 1e-6, xtol=1e-300, rtol=4 * np.finfo(float).eps))


class _LongitudinalUnary(MemoizedUnary):
    """L-UE family: a subclass sets ``permanent_kind`` and ``instantaneous_kind`` ("sue" or "oue")."""

    permanent_kind = "sue"
    instantaneous_kind = "sue"
    eps_inf = Param("float", gt=0, le=700, doc="eps of the permanent unary encoding (the memoization bound)")
    eps_1 = Param("float", gt=0, doc="eps of one report (< eps_inf)")
    rounds = Param("int", 1, ge=1, le=MAX_ROUNDS, doc=f"tau: reports per user, one per round (at most {MAX_ROUNDS:,})")

    def _bit_probabilities(self) -> tuple[tuple[float, float], Sequence[tuple[float, float]]]:
        _eps_pair_check(self.eps_inf, self.eps_1)
        if self.permanent_kind == "sue":
            p1 = 1.0 / (1.0 + math.exp(-self.eps_inf / 2))
            q1 = 1.0 - p1
        else:
            p1, q1 = 0.5, 1.0 / (1.0 + math.exp(self.eps_inf))
        flip = _solve_round(self.eps_1, p1, q1, self.instantaneous_kind == "sue", self.eps_inf)
        return (p1, q1), [flip] * self.rounds


class LSUE(_LongitudinalUnary):
    """L-SUE, basic RAPPOR (Erlingsson et al. 2014; Arcolezi et al. 2022): symmetric unary encoding in both stages."""

    name = "l-sue"


class LOUE(_LongitudinalUnary):
    """L-OUE (Arcolezi et al. 2022): optimized unary encoding in both stages."""

    name = "l-oue"
    permanent_kind = "oue"
    instantaneous_kind = "oue"


class LOSUE(_LongitudinalUnary):
    """L-OSUE (Arcolezi et al. 2022): OUE permanent stage, symmetric unary instantaneous stage."""

    name = "l-osue"
    permanent_kind = "oue"
    instantaneous_kind = "sue"


class LSOUE(_LongitudinalUnary):
    """L-SOUE (Arcolezi et al. 2022): symmetric unary permanent stage, OUE instantaneous stage."""

    name = "l-soue"
    permanent_kind = "sue"
    instantaneous_kind = "oue"


#: the universal hash family of LOLOHA's reports: h(x) = ((a x + b) mod PRIME) mod g, seed a * PRIME + b
PRIME = (1 << 31) - 1


def _big(n: int) -> str:
    """An integer for a message: in full up to 10^15, else its order of magnitude (it may have 300 digits)."""
    return f"{n:,}" if n < 10**15 else f"about 10^{len(str(n)) - 1}"


def _hash(seeds: np.ndarray, x: np.ndarray, g: int) -> np.ndarray:
    a, b = np.divmod(seeds, PRIME)
    return (a * x + b) % PRIME % g


def lgrr_p2(k: int, eps_inf: float, eps_1: float, published: bool) -> float:
    """p2 of L-GRR on k values (see the module docstring): exact one-report level eps_1, or the paper's form."""
    p1 = 1.0 / (1.0 + (k - 1) * math.exp(-eps_inf))
    q1 = (1.0 - p1) / (k - 1)
    e = math.exp(eps_1)
    if published:
        return (q1 - e * p1) / (-p1 * e + k * q1 * e - q1 * e - p1 * (k - 1) + q1)
    c = (1.0 - q1) / (k - 1)  # P(y | x) = q1 p2 + c (1 - p2) for y != x
    return (e * c - q1) / (p1 - q1 - e * q1 + e * c)


def loloha_g(eps_inf: float, eps_1: float) -> int:
    """LOLOHA's optimal number of hash values (Arcolezi et al., EDBT 2023, the closed form minimizing its
    approximate variance), at least 2.

    The paper's form ``(sqrt(a^4 - 14 a^2 - 12 a^2 b^2 + 12 a b + 12 a^3 b + 1) - a^2 + 6 a - 6 b + 1) / (6 (a - b))``
    (``a = e^eps_inf``, ``b = e^eps_1``) overflows from eps_inf ~ 178, cancels to noise from eps_inf ~ 40 and
    takes the root of a rounded negative near eps = 0. Divided through by a^2, with ``u = e^-eps_inf``,
    ``gamma = 1 - u^2``, ``w = 1 - b/a`` and ``d = b - u``, it is
    ``1 + 2 d (1 + u^2 / (r + gamma)) / (1 + r)``, ``r = sqrt(gamma^2 + 12 w u d)``: every term positive and
    finite for 0 < eps_1 < eps_inf <= 700 (it tends to e^eps_1 + 1 as eps_inf grows).
    """
    u = math.exp(-eps_inf)
    gamma = -math.expm1(-2 * eps_inf)
    w = -math.expm1(eps_1 - eps_inf)
    d = math.expm1(eps_1) - math.expm1(-eps_inf)
    r = math.sqrt(gamma * gamma + 12 * w * u * d)
    return max(2, round(1 + 2 * d * (1 + u * u / (r + gamma)) / (1 + r)))


class HashedChannel(Mechanism):
    """One round of LOLOHA: (seed, y), y k-RR-like on the g hash values with P(y = h(x)) = p."""

    name = "hashed-channel"

    def __init__(self, domain: Domain, g: int, p: float, label: str):
        self.g, self.p, self._label_text = g, p, label
        self.report_width = 2
        super().__init__(domain)

    def _key(self) -> tuple:
        return (*super()._key(), self.g, self.p)

    def __repr__(self) -> str:
        return self._label_text

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", math.log(self.p * (self.g - 1) / (1 - self.p)))

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n: int = values.shape[0]
        seeds = rng.integers(PRIME, PRIME * PRIME, size=n)  # a >= 1
        hv = _hash(seeds, values, self.g)
        keep = rng.random(n) < self.p
        other = (hv + 1 + rng.integers(0, self.g - 1, size=n)) % self.g
        return np.column_stack([seeds, np.where(keep, hv, other)])

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        _check_seeds(self, reports[:, 0])
        self.require_outputs(reports[:, 1], self.g)
        hit = _hash(reports[:, :1], np.arange(self.domain.size)[None, :], self.g) == reports[:, 1:]
        return np.where(hit, math.log(self.p), math.log((1 - self.p) / (self.g - 1))) + LOG_SEED_PROB

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        # LOLOHA's estimator (Arcolezi et al., EDBT 2023), as for local hashing: a report supports x (h(x) = y)
        # w.p. p = p1 p2 + (1 - p1) q2 if x is the user's value, else 1/g (universal hashing, up to O(1/P)), so
        # E[C_x / n] = 1/g + (p - 1/g) theta_x: the paper's (C_x - n q1' ) / (n (p1' - q1')) with q1' = 1/g.
        _check_seeds(self, reports[:, 0])
        self.require_outputs(reports[:, 1], self.g)
        counts = np.asarray(counts, dtype=float)
        k = self.domain.size
        supported = np.zeros(k)
        step = max(1, 2**22 // k)
        for start in range(0, reports.shape[0], step):
            rows = slice(start, start + step)
            hit = _hash(reports[rows, :1], np.arange(k)[None, :], self.g) == reports[rows, 1:]
            supported += np.einsum("d,dx->x", counts[rows], hit.astype(float))
        return (supported / counts.sum() - 1.0 / self.g) / (self.p - 1.0 / self.g)

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray:
        # a report supports x w.p. p for a user holding x and 1/g for the others (up to O(1/PRIME)),
        # independently across users: the pure oracles' n Var with q = 1/g, as for local hashing
        return count_estimate_variance(np.asarray(theta, dtype=float), self.p, 1.0 / self.g)


#: log P(seed): a uniform on 1..PRIME-1, b uniform on 0..PRIME-1
LOG_SEED_PROB = -math.log(PRIME - 1) - math.log(PRIME)


def _check_seeds(mech: Mechanism, seeds: np.ndarray) -> None:
    bad = (seeds < PRIME) | (seeds >= PRIME * PRIME)
    if bad.any():
        raise EstimationError(
            f"report seed {int(seeds[bad][0])} is not a hash seed of {mech!r}",
            hint="check that the reports were produced by this mechanism",
        )


class LOLOHA(MemoizedMechanism):
    """LOLOHA (Arcolezi, Pinzon, Palamidessi & Gambs, EDBT 2023): a memoized hash to g values, then L-GRR on them.

    Each user draws a hash function once (a seed of a universal family) and memoizes L-GRR on
    the g hash values: a report is (seed, y_t) per round, the seed repeated. The likelihood of a
    whole sequence is L-GRR's on g values at h(x), so eps_1, eps_tau and eps_inf are L-GRR's on g values.
    """

    name = "loloha"
    eps_inf = Param("float", gt=0, le=700, doc="eps of the permanent k-RR on the hash values (memoization bound)")
    eps_1 = Param("float", gt=0, doc="eps of one report (< eps_inf)")
    rounds = Param("int", 1, ge=1, le=MAX_ROUNDS, doc=f"tau: reports per user, one per round (at most {MAX_ROUNDS:,})")
    # an int once built (_validate fills in the default)
    g = cast(
        "Param[int]",
        Param("int", None, ge=2, doc="number of hash values (default: LOLOHA's optimal g for eps_inf, eps_1)"),
    )
    published = Param("bool", False, doc="p2 from the L-GRR paper's closed form (one report is then below eps_1)")

    def _validate(self) -> None:
        _eps_pair_check(self.eps_inf, self.eps_1)
        if self.g is None:
            self.g = loloha_g(self.eps_inf, self.eps_1)
        if self.g > PRIME:
            raise ParameterError(
                f"g = {_big(self.g)} hash values, more than the {PRIME:,} its hash family ((a x + b) mod {PRIME})"
                " mod g can give",
                field="g",
                hint="give a smaller g, or a smaller eps_1 (LOLOHA's default g grows as e^eps_1)",
            )
        require_memory(  # the inner L-GRR's k-RR channels on the g hash values are dense g x g matrices
            8.0 * self.g * self.g,
            f"the dense {self.g:,} x {self.g:,} channel of {self.name} on its hash values",
            hint="give a smaller g, or a smaller eps_1 (LOLOHA's default g grows as e^eps_1)",
        )
        inner_domain = Integers(low=0, high=self.g - 1)
        self.inner = LGRR(
            inner_domain, eps_inf=self.eps_inf, eps_1=self.eps_1, rounds=self.rounds, published=self.published
        )
        self.permanent_stage = self.inner.permanent_stage
        self.instantaneous_stages = self.inner.instantaneous_stages
        self.report_width = 2 * self.rounds

    @property
    def round_width(self) -> int:
        return 2

    def round_channel(self, t: int) -> Mechanism:
        self._check_round(t, 0, self.rounds - 1)
        m = self.inner.round_channel(t).matrix
        assert m is not None
        return HashedChannel(self.domain, self.g, float(m[0, 0]), f"{self.name} round {t + 1} channel")

    def permanent_level(self) -> float:
        return self.inner.permanent_level()

    def one_report_level(self) -> float:
        return self.inner.one_report_level()

    def round_outputs(self) -> list[int] | None:
        return None  # seeds: too many sequences to enumerate

    def eps_tau_closed(self) -> float | None:
        return self.inner.privacy_over_time.eps_tau

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n: int = values.shape[0]
        seeds = rng.integers(PRIME, PRIME * PRIME, size=n)
        y = self.inner.sample(_hash(seeds, values, self.g), rng)
        out = np.empty((n, self.rounds, 2), dtype=np.int64)
        out[:, :, 0] = seeds[:, None]
        out[:, :, 1] = y
        return out.reshape(n, self.report_width)

    def _split(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = reports.reshape(reports.shape[0], self.rounds, 2)
        seeds = pairs[:, 0, 0]
        _check_seeds(self, seeds)
        if np.any(pairs[:, :, 0] != seeds[:, None]):
            raise EstimationError(
                f"a report of {self!r} changes its hash seed between rounds (a seed is drawn once per user)",
                hint="check that the reports were produced by this mechanism",
            )
        return seeds, pairs[:, :, 1]

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        seeds, y = self._split(reports)
        inner = self.inner.log_likelihood(y)  # (D, g): the sequence's likelihood at each hash value
        hashed = _hash(seeds[:, None], np.arange(self.domain.size)[None, :], self.g)
        return np.take_along_axis(inner, hashed, axis=1) + LOG_SEED_PROB

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        # rescaled per report: (D, k) with the row maximum 1; the g-value likelihood is computed once per report
        log_p = self._log_likelihood(reports)
        shift = log_p.max(axis=1)
        return shift, np.exp(log_p - shift[:, None])


@hookimpl
def register_mechanisms(register):
    for cls in (Memoized, LGRR, LSUE, LOUE, LOSUE, LSOUE, LOLOHA):
        register(cls)
