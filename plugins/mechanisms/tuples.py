"""Tuple protocols: SPL, SMP, RS+FD and RS+RFD over a product domain.

* ``spl`` (splitting): every attribute reported through its own mechanism with eps/d (sequential
  composition: eps-LDP for the tuple). Channel ``P_1 (x) ... (x) P_d``.
* ``smp`` (sampling): one attribute drawn uniformly, reported with the whole eps, with its index.
  Channel block diagonal over the index; only the marginals are identifiable.
* ``rsfd`` (Arcolezi et al., CIKM 2021): one attribute drawn uniformly and reported through GRR or
  OUE with the amplified ``eps' = ln(d (e^eps - 1) + 1)``; every other attribute gets fake data
  (GRR: a uniform value, unperturbed; OUE-z: OUE of the all-zero vector; OUE-r: OUE of a uniform
  value). Channel ``(1/d) sum_j P_j (x) F_{-j}``.
* ``rsrfd`` (Arcolezi et al. 2022): RS+FD whose fake values follow a prior (realistic fake data)
  instead of the uniform law.

The per-attribute unbiased estimates are the papers' aggregators, written for any pure frequency
oracle: with u the part's own unbiased estimate over all n reports of attribute j, and s the
probability that fake data support a value, ``f_hat = d u + (d - 1) (q - s) / (p - q)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ldpsim import (
    WORD_BITS,
    Mechanism,
    Observations,
    Param,
    ParameterError,
    Privacy,
    Term,
    TupleMechanism,
    get_registry,
    hookimpl,
    set_bit_counts,
    unbiased_estimate,
)

LOCAL = ("grr", "oue-z", "oue-r")


def _ldp_eps(part: Mechanism, field: str) -> float:
    privacy = part.privacy
    if privacy.notion != "ldp":
        raise ParameterError(
            f"{part.name} claims {privacy}, not eps-LDP",
            field=field,
            hint="tuple protocols compose eps-LDP mechanisms (krr, oue, olh, ...)",
        )
    return float(privacy.eps)


def _part_estimate(part: Mechanism, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The part's unbiased estimate from its reports (its own, else its inverted matrix)."""
    return np.asarray(unbiased_estimate(Observations.from_counts(part.domain, part, reports, counts)))


class _Split(TupleMechanism):
    """Shared by SPL and SMP: a per-attribute mechanism built from ``mechanism`` or ``per_attribute``."""

    eps = Param("float", gt=0, doc="privacy level of the whole tuple (eps-LDP)")
    # not `mechanism`: a scenario's report table already uses that key for the plugin's name
    local = Param("str", "krr", doc="the per-attribute mechanism (any plugin with an eps), for every attribute")
    per_attribute = Param(
        "tables",
        (),
        doc='one table per attribute overriding `local` and its parameters, e.g. { mechanism = "oue" }',
    )

    #: the problem and the fix when the attributes' levels compose above the tuple's eps
    _over_budget: ClassVar[tuple[str, str]]

    def _part_eps(self) -> float:
        raise NotImplementedError

    def _tuple_level(self, levels: list[float]) -> float:
        """The tuple's LDP level from its attributes' (the same rule for the budget check and the claim)."""
        raise NotImplementedError

    def _validate(self) -> None:
        d = len(self.domain.parts)
        if self.per_attribute and len(self.per_attribute) != d:
            raise ParameterError(
                f"per_attribute has {len(self.per_attribute)} tables for {d} attributes",
                field="per_attribute",
                hint="give one table per attribute, in the domain's order",
            )
        registry = get_registry()
        built = []
        for j in range(d):
            spec: dict[str, Any] = {"mechanism": self.local, "eps": self._part_eps()}
            spec.update(self.per_attribute[j] if self.per_attribute else {})
            field = f"per_attribute.{j}" if self.per_attribute else "local"
            built.append(self.build_part(j, spec, field, registry))
        self._built = tuple(built)
        level = self._tuple_level([_ldp_eps(p, f"per_attribute.{j}") for j, p in enumerate(built)])
        if level > self.eps * (1 + 1e-9):
            problem, hint = self._over_budget
            raise ParameterError(problem.format(level=level, eps=self.eps), field="per_attribute", hint=hint)

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self._tuple_level([float(p.privacy.eps) for p in self._built]))

    def _parts(self) -> Sequence[Mechanism]:
        return self._built


class SPL(_Split):
    """SPL: every attribute reported through its own mechanism with eps/d (the budget split)"""

    name = "spl"

    _over_budget = (
        "the attributes' eps add up to {level:g}, more than the tuple's eps = {eps:g}",
        "lower the per-attribute eps so that they add up to eps at most",
    )

    def _part_eps(self) -> float:
        return self.eps / len(self.domain.parts)

    def _tuple_level(self, levels: list[float]) -> float:
        return sum(levels)  # sequential composition: every attribute is reported

    def _validate(self) -> None:
        super()._validate()
        self.report_width = sum(p.report_width for p in self._built)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        xs = self.domain.split(values)
        return np.concatenate([p.sample(x, rng) for p, x in zip(self._built, xs)], axis=1)

    def _terms(self, reports: np.ndarray) -> Sequence[Term]:
        return [Term(np.zeros(reports.shape[0]), dict(enumerate(self.side_by_side())))]

    def _marginal_estimates(self, reports: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
        return [_part_estimate(p, reports[:, cols], counts) for p, cols in zip(self._built, self.side_by_side())]

    def _marginal_variances(self, theta: np.ndarray) -> list[np.ndarray] | None:
        out = []
        for j, p in enumerate(self._built):
            v = p.estimate_variance(self.domain.marginal(theta, j))
            if v is None:
                return None
            out.append(v)
        return out


class SMP(_Split):
    """SMP: one attribute drawn uniformly, reported with the whole eps, with its index"""

    name = "smp"

    _over_budget = (
        "an attribute's eps ({level:g}) exceeds the tuple's eps = {eps:g}",
        "give each attribute eps at most the tuple's",
    )

    def _part_eps(self) -> float:
        return self.eps

    def _tuple_level(self, levels: list[float]) -> float:
        return max(levels)  # the index does not depend on x; one attribute's report is sent

    def _validate(self) -> None:
        super()._validate()
        self.report_width = 1 + max(p.report_width for p in self._built)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        xs = self.domain.split(values)
        chosen = rng.integers(len(self._built), size=values.shape[0])
        out = np.zeros((values.shape[0], self.report_width), dtype=np.int64)
        out[:, 0] = chosen
        for j, p in enumerate(self._built):
            rows = np.flatnonzero(chosen == j)
            if rows.size:
                out[rows, 1 : 1 + p.report_width] = p.sample(xs[j][rows], rng)
        return out

    def _rows(self, reports: np.ndarray, j: int) -> np.ndarray:
        """Reports that name attribute j, with their padding columns zero (others are impossible)."""
        ok = reports[:, 0] == j
        pad = 1 + self._built[j].report_width
        if pad < reports.shape[1]:
            ok &= ~np.any(reports[:, pad:], axis=1)
        return np.flatnonzero(ok)

    def _terms(self, reports: np.ndarray) -> Sequence[Term]:
        d = len(self._built)
        terms = []
        for j, p in enumerate(self._built):
            rows = self._rows(reports, j)
            if rows.size:
                terms.append(Term(np.full(rows.size, -math.log(d)), {j: slice(1, 1 + p.report_width)}, rows))
        if not terms:  # no report names an attribute: every one is impossible
            terms.append(Term(np.full(reports.shape[0], -np.inf), {}, None))
        return terms

    def _marginal_estimates(self, reports: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
        out = []
        for j, p in enumerate(self._built):
            rows = self._rows(reports, j)
            if not counts[rows].sum():  # nobody reported this attribute: nothing is known of it
                out.append(np.full(p.domain.size, 1.0 / p.domain.size))
                continue
            out.append(_part_estimate(p, reports[rows, 1 : 1 + p.report_width], counts[rows]))
        return out

    def _marginal_variances(self, theta: np.ndarray) -> list[np.ndarray] | None:
        # A user reports attribute j w.p. 1/d: about n/d of them do, and their empirical distribution
        # differs from the population's. To first order (delta method, Poisson sampling):
        # n Var = d V_j(theta_j) + (d - 1) theta_j (1 - theta_j), V_j the part's own n Var.
        d = len(self._built)
        out = []
        for j, p in enumerate(self._built):
            margin = self.domain.marginal(theta, j)
            v = p.estimate_variance(margin)
            if v is None:
                return None
            out.append(d * v + (d - 1) * margin * (1 - margin))
        return out


class RSFD(TupleMechanism):
    """RS+FD (Arcolezi et al. 2021): one sampled attribute through GRR or OUE with eps', fake data for the others

    ``eps`` is the paper's parameter. The whole tuple is eps'-LDP, eps' = ln(d (e^eps - 1) + 1): the paper's
    eps holds only between tuples that differ in one attribute, of attributes of equal sizes (see :attr:`privacy`).
    """

    name = "rsfd"
    eps = Param(
        "float",
        gt=0,
        le=700,
        doc="the paper's eps: exact for tuples that differ in one attribute; whole tuples are eps'-LDP",
    )
    local = Param("str", "grr", choices=LOCAL, doc="the local randomizer and its fake data: grr, oue-z or oue-r")

    def _validate(self) -> None:
        d = len(self.domain.parts)
        registry = get_registry()
        name = "krr" if self.local == "grr" else "oue"
        self._built = tuple(
            self.build_part(j, {"mechanism": name, "eps": self.amplified_eps}, "local", registry) for j in range(d)
        )
        self.report_width = sum(p.report_width for p in self._built)

    @property
    def amplified_eps(self) -> float:
        """eps' = ln(d (e^eps - 1) + 1): the level of the sampled attribute's report (amplification by sampling)."""
        d = len(self.domain.parts)
        # d (e^eps - 1) + 1 = e^eps (d - (d - 1) e^-eps), without overflow for large eps
        return float(self.eps + math.log(d - (d - 1) * math.exp(-self.eps)))

    @property
    def privacy(self) -> Privacy:
        # The paper claims eps-LDP by amplification by sampling. Derived from the channel (the ratio of
        # (1/d) sum_j r_j(z_j | x_j) between two tuples, r_j = P_j / fake law): tuples that differ in ONE
        # attribute are e^eps apart at most when the attributes have equal sizes (more otherwise: a small
        # attribute's r_i is small), but tuples that differ in every attribute
        # reach p/q = e^eps' (every r_j at its largest against its smallest). eps-LDP quantifies over all
        # pairs, so the tuple's level is eps'; `ldpsim check mechanism` prints both.
        return Privacy("ldp", self.amplified_eps)

    def _parts(self) -> Sequence[Mechanism]:
        return self._built

    def _support(self, j: int) -> tuple[float, float]:
        """(p, q): the probabilities that attribute j's report supports a value the user holds, and another."""
        k = self.domain.sizes[j]
        e = self.amplified_eps
        if self.local == "grr":
            return 1.0 / (1.0 + (k - 1) * math.exp(-e)), 1.0 / (math.exp(e) + k - 1)
        return 0.5, 1.0 / (math.exp(e) + 1.0)

    def _fake_prior(self, j: int) -> np.ndarray:
        """The law of the value fake data are drawn from (uniform here)."""
        k = self.domain.sizes[j]
        return np.full(k, 1.0 / k)

    def _fake_support(self, j: int) -> np.ndarray:
        """Per value, the probability that attribute j's fake data support it."""
        p, q = self._support(j)
        prior = self._fake_prior(j)
        if self.local == "grr":
            return prior
        if self.local == "oue-z":
            return np.full(prior.shape, q)
        return q + (p - q) * prior

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        xs = self.domain.split(values)
        n: int = values.shape[0]
        chosen = rng.integers(len(self._built), size=n)
        out = np.empty((n, self.report_width), dtype=np.int64)
        for j, (p, cols) in enumerate(zip(self._built, self.side_by_side())):
            real = chosen == j
            fake_values = rng.choice(p.domain.size, size=n, p=self._fake_prior(j))
            source = np.where(real, xs[j], fake_values)
            if self.local == "grr":  # fake values are sent as they are
                sent = np.where(real, p.sample(source, rng)[:, 0], source)
                out[:, cols] = sent[:, None]
            else:  # fake data perturbed like real data (oue-z: of the all-zero vector)
                words = p.sample(source, rng)
                if self.local == "oue-z":
                    words = self._zero_bit(p, words, fake_values, ~real, rng)
                out[:, cols] = words
        return out

    def _zero_bit(
        self, part: Any, words: np.ndarray, values: np.ndarray, fake: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """OUE of the all-zero vector: the fake users' encoded bit redrawn with the other bits' probability q."""
        q = self._support(0)[1]
        rows = np.flatnonzero(fake)
        v = values[rows]
        word, bit = np.divmod(v, WORD_BITS)
        one = rng.random(rows.size) < q
        mask = np.left_shift(np.int64(1), bit.astype(np.int64))
        current = words[rows, word]
        words[rows, word] = np.where(one, current | mask, current & ~mask)
        return words

    def _fake_log_likelihood(self, j: int, reports: np.ndarray) -> np.ndarray:
        """log P(attribute j's report | it is fake data), per report."""
        p_, q = self._support(j)
        part = self._built[j]
        if self.local == "grr":
            part.require_outputs(reports[:, 0], part.domain.size)
            with np.errstate(divide="ignore"):
                return np.log(self._fake_prior(j))[reports[:, 0]]
        if self.local == "oue-z":
            ones = set_bit_counts(reports)
            k = self.domain.sizes[j]
            return ones * math.log(q) + (k - ones) * math.log1p(-q)
        from scipy.special import logsumexp

        uniq, codes = np.unique(reports, axis=0, return_inverse=True)
        with np.errstate(divide="ignore"):
            return logsumexp(part.log_likelihood(uniq) + np.log(self._fake_prior(j))[None, :], axis=1)[codes.ravel()]

    def _terms(self, reports: np.ndarray) -> Sequence[Term]:
        d = len(self._built)
        columns = self.side_by_side()
        fake = [self._fake_log_likelihood(j, reports[:, columns[j]]) for j in range(d)]
        total = np.sum(fake, axis=0)
        terms = []
        for j in range(d):
            with np.errstate(invalid="ignore"):
                others = total - fake[j] if np.all(np.isfinite(fake[j])) else _sum_except(fake, j)
            terms.append(Term(others - math.log(d), {j: columns[j]}))
        return terms

    def _marginal_estimates(self, reports: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
        d = len(self._built)
        out = []
        for j, (part, cols) in enumerate(zip(self._built, self.side_by_side())):
            p, q = self._support(j)
            u = _part_estimate(part, reports[:, cols], counts)
            out.append(d * u + (d - 1) * (q - self._fake_support(j)) / (p - q))
        return out

    def _marginal_variances(self, theta: np.ndarray) -> list[np.ndarray]:
        # Each user's report supports value v of attribute j w.p. pi_1 = (p + (d-1) s_v) / d if they hold v,
        # pi_0 = (q + (d-1) s_v) / d otherwise, independently across users (a fixed population).
        d = len(self._built)
        out = []
        for j in range(d):
            p, q = self._support(j)
            s = self._fake_support(j)
            f = self.domain.marginal(theta, j)
            pi1, pi0 = (p + (d - 1) * s) / d, (q + (d - 1) * s) / d
            out.append(d**2 * (f * pi1 * (1 - pi1) + (1 - f) * pi0 * (1 - pi0)) / (p - q) ** 2)
        return out


def _sum_except(parts: list[np.ndarray], j: int) -> np.ndarray:
    total = np.zeros_like(parts[0])
    for i, part in enumerate(parts):
        if i != j:
            total = total + part
    return total


class RSRFD(RSFD):
    """RS+RFD (Arcolezi et al. 2022): RS+FD whose fake values follow a prior (realistic fake data)"""

    name = "rsrfd"
    local = Param("str", "grr", choices=("grr", "oue-r"), doc="the local randomizer: grr or oue-r")
    prior = Param("distribution", doc='the joint prior the fake values are drawn from (its marginals), or "dataset"')

    def _validate(self) -> None:
        if self.prior.shape != (self.domain.size,):
            raise ParameterError(
                f"has {self.prior.shape[0]} entries for the {self.domain.size} cells of the domain",
                field="prior",
                hint='give one probability per cell, or prior = "dataset"',
            )
        super()._validate()

    def _fake_prior(self, j: int) -> np.ndarray:
        return self.domain.marginal(self.prior, j)


@hookimpl
def register_mechanisms(register):
    for cls in (SPL, SMP, RSFD, RSRFD):
        register(cls)
