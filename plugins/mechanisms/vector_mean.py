"""Mean estimation of a numeric vector: Duchi et al.'s multidimensional mechanism, PM- and HM-sampling.

A user holds a tuple of a product domain whose attributes are all ``integers``; attribute j's values
map linearly onto [-1, 1] as the one-dimensional numeric mechanisms map them (``low`` to -1, ``high`` to
1, :class:`ldpsim.NumericMechanism`), giving the vector t in [-1, 1]^d. Each mechanism here gives, per
report, an unbiased estimate of the user's whole vector (:meth:`attribute_estimates`, in the
attributes' own units), whose average over users is the ``vector-mean`` estimator's result.

``duchi-md`` (Duchi, Jordan & Wainwright, JASA 2018; Wang et al., ICDE 2019, Algorithm 3): round t to
v in {-1, 1}^d (``P(v_j = 1) = (1 + t_j) / 2``, independently), then report z = B s, s in {-1, 1}^d,
drawn uniformly from the half-space {s . v > 0} with probability ``pi = e^eps / (e^eps + 1)`` and from
the other side {s . v < 0} otherwise. For odd d there are no ties. For even d the ties s . v = 0 (a
fraction ``binom(d, d/2) / 2^d``) must be split: with ``ties = "split"`` (default) each tie goes to
either side with probability 1/2, so ``P(s | v)`` is ``pi / 2^(d-1)``, ``1 / 2^d`` or
``(1 - pi) / 2^(d-1)``: exactly eps-LDP, and ``B = (e^eps + 1) / (e^eps - 1) * 2^(d-1) / binom(d-1,
floor((d-1)/2))`` for every d. ``ties = "negative"`` is Algorithm 3 as printed (T- = {s . v <= 0}, ties
included): its two sides have unequal sizes for even d, so it is only ``eps + ln(|T-| / |T+|)``-LDP (the
declared level here) and its unbiasing constant differs from the odd-d formula. B is derived, not
copied: ``E[s_j | v] = c v_j`` with ``c = sum_a binom(d, a) P(s | a agreements) (2a - d) / d``, and
``B = 1 / c`` (:meth:`DuchiMD.bound`; the tests check ``E[z | t] = t`` by enumerating all 2^d outputs).

The channel is finite (2^d outputs, an output index whose bit ``d-1-j`` is 1 when attribute j's report
is +B): ``P(s | t) = sum_a P(A = a | t, s) g(a)`` with A the number of coordinates where v agrees
with s, a Poisson-binomial count, and g(a) the probability of s given a agreements. It is not a sum of
a few Kronecker terms of per-attribute mechanisms (g couples all attributes), so ``duchi-md`` is a
plain mechanism with a matrix over the product domain's cells, not a :class:`ldpsim.TupleMechanism`.

``pm-sampling`` / ``hm-sampling`` (Wang et al., ICDE 2019, Algorithm 4): k attributes drawn uniformly
without replacement (``k = max(1, min(d, floor(eps / 2.5)))`` unless given), each reported through the
one-dimensional ``piecewise`` / ``hybrid`` plugin at eps/k, the others not at all; the estimate of
attribute j is ``d/k`` times its report if sampled, 0 otherwise. The parts' reports are their output
cells (``ldpsim.model.numeric``): the cell's midpoint ``E[y | cell]`` replaces the continuous report
(the same expectation, a variance no larger). The channel is ``binom(d, k)^-1 prod_{j in S} P_j(z_j |
x_j)`` for the sampled set S the report names: one Kronecker term per set, so these are tuple
protocols with the exact likelihood (GIBU works on them). A report is ``2d`` integers: the d parts'
output cells (0 where not sampled), then the d sampled flags.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from typing import cast

import numpy as np

from ldpsim import (
    Domain,
    Integers,
    Mechanism,
    NumericMechanism,
    Param,
    ParameterError,
    Privacy,
    Product,
    Term,
    TupleMechanism,
    get_registry,
    hookimpl,
    require_memory,
)


# ------------------------------------------------------------------ shared geometry
def _integer_parts(domain: Domain) -> tuple[Integers, ...]:
    """The attributes of a product domain of integers (a ParameterError naming the field otherwise)."""
    if not isinstance(domain, Product):
        raise ParameterError(
            "needs a product domain of integer attributes", field="domain", hint='use [domain] kind = "product"'
        )
    domain.require_attribute_kinds(
        ("integers",), field="domain", hint="vector mean mechanisms need numeric (integers) attributes"
    )
    return tuple(Integers.of(part) for part in domain.parts)


def attribute_inputs(part: Integers) -> np.ndarray:
    """t_x in [-1, 1] for each value of an integers attribute: ``NumericMechanism.inputs``'s convention."""
    k = part.size
    t = -1.0 + 2.0 * np.arange(k) / (k - 1)
    t[-1] = 1.0
    return t


def attribute_scale(part: Integers) -> float:
    """Value units per unit of t: (high - low) / 2."""
    return float(part.high - part.low) / 2.0


class _VectorMean:
    """What the ``vector-mean`` estimator reads from a mechanism (mixed into the classes below)."""

    def _product(self) -> Product:
        raise NotImplementedError

    @cached_property
    def _geometry(self) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
        parts = _integer_parts(self._product())
        inputs = tuple(attribute_inputs(p) for p in parts)
        lows = np.array([float(p.low) for p in parts])
        scales = np.array([attribute_scale(p) for p in parts])
        return inputs, lows, scales

    def _to_values(self, t: np.ndarray) -> np.ndarray:
        """(n, d) estimates in units of t mapped onto the attributes' value scales."""
        _, lows, scales = self._geometry
        return lows + (t + 1.0) * scales

    def true_vector(self, theta: np.ndarray) -> np.ndarray:
        """The mean vector of a distribution over the cells, in the attributes' units."""
        return np.array(
            [
                self._product().marginal(theta, j) @ p.values.astype(float)
                for j, p in enumerate(_integer_parts(self._product()))
            ]
        )

    def _t_columns(self, theta: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per attribute: (marginal of theta, t of each value)."""
        inputs, _, _ = self._geometry
        dom = self._product()
        return [(dom.marginal(np.asarray(theta, dtype=float), j), t) for j, t in enumerate(inputs)]


# ------------------------------------------------------------------ Duchi et al., multidimensional
TIES = ("split", "negative")


def duchi_md_weights(d: int, eps: float, ties: str = "split") -> np.ndarray:
    """g(a) = P(s | v) for an output s that agrees with v in a of its d coordinates, a = 0..d.

    ``split``: pi / 2^(d-1) on the side s . v > 0, (1 - pi) / 2^(d-1) on s . v < 0, 2^-d on ties.
    ``negative`` (Algorithm 3 as printed): pi / |T+| on s . v > 0, (1 - pi) / |T-| on s . v <= 0.
    """
    a = np.arange(d + 1)
    pi = 1.0 / (1.0 + math.exp(-eps))
    size = np.array([math.comb(d, int(i)) for i in a], dtype=float)
    up, tie = 2 * a > d, 2 * a == d
    if ties == "split":
        g = np.where(up, pi, 1.0 - pi) / 2.0 ** (d - 1)
        return np.where(tie, 2.0**-d, g)
    plus = size[up].sum()
    minus = size[~up].sum()
    return np.where(up, pi / plus, (1.0 - pi) / minus)


def duchi_md_bound(d: int, eps: float, ties: str = "split") -> float:
    """B = 1 / c, ``c = sum_a binom(d, a) g(a) (2a - d) / d`` = E[s_j v_j] (derived from the sampling)."""
    a = np.arange(d + 1)
    size = np.array([math.comb(d, int(i)) for i in a], dtype=float)
    c = float(np.sum(size * duchi_md_weights(d, eps, ties) * (2 * a - d)) / d)
    return 1.0 / c


def duchi_md_closed_form(d: int, eps: float) -> float:
    """``(e^eps + 1) / (e^eps - 1) * 2^(d-1) / binom(d-1, floor((d-1)/2))``: B of ``ties = "split"`` (any d) and of
    Algorithm 3 for odd d."""
    return (math.exp(eps) + 1) / math.expm1(eps) * 2.0 ** (d - 1) / math.comb(d - 1, (d - 1) // 2)


class DuchiMD(_VectorMean, Mechanism):
    """Duchi et al.'s multidimensional mechanism (Wang et al. 2019, Alg. 3): a vector in {-B, B}^d, unbiased for t"""

    name = "duchi-md"
    domain_kinds = ("product",)
    eps = Param("float", gt=0, le=20, doc="privacy level of the whole tuple (eps-LDP with ties = split)")
    ties = Param(
        "str",
        "split",
        choices=TIES,
        doc="even d: split (each tie s.v = 0 on either side w.p. 1/2: eps-LDP) or negative (Algorithm 3 as printed:"
        " ties with the negative side; eps + ln(|T-|/|T+|)-LDP)",
    )

    def _validate(self) -> None:
        parts = _integer_parts(self.domain)
        d = len(parts)
        if d > 20:
            raise ParameterError(f"{d} attributes give 2^{d} outputs", field="domain", hint="use at most 20 attributes")

    def _product(self) -> Product:
        assert isinstance(self.domain, Product)
        return self.domain

    @property
    def attribute_count(self) -> int:
        return len(self._product().parts)

    @property
    def weights(self) -> np.ndarray:
        """g(a), a = 0..d (:func:`duchi_md_weights`)."""
        return duchi_md_weights(self.attribute_count, self.eps, self.ties)

    @property
    def bound(self) -> float:
        """B, the reports' magnitude, derived from the sampling (:func:`duchi_md_bound`)."""
        return duchi_md_bound(self.attribute_count, self.eps, self.ties)

    @property
    def privacy(self) -> Privacy:
        # at the corners (every t_j = +-1) v = t, so P(s | x) = g(agreements), and every count 0..d is reached
        # as x varies; interior values mix them. The level is exactly log(max g / min g).
        if self.ties == "split" or self.attribute_count % 2:
            return Privacy("ldp", self.eps)
        g = self.weights
        return Privacy("ldp", float(math.log(g.max() / g.min())))

    def _output_count(self) -> int:
        return 1 << self.attribute_count

    def output_labels(self) -> list[str]:
        d = self.attribute_count
        return [
            "(" + ", ".join("+B" if (z >> (d - 1 - j)) & 1 else "-B" for j in range(d)) + ")" for z in range(1 << d)
        ]

    def signs(self, reports: np.ndarray) -> np.ndarray:
        """(n, d) the signs s in {-1, 1} of output indices."""
        z = np.asarray(reports, dtype=np.int64).reshape(-1)
        self.require_outputs(z, 1 << self.attribute_count)
        d = self.attribute_count
        bits = (z[:, None] >> (d - 1 - np.arange(d))[None, :]) & 1
        return 2.0 * bits - 1.0

    def _matrix(self) -> np.ndarray:
        d = self.attribute_count
        cells, outputs = self.domain.size, 1 << d
        require_memory(
            8.0 * cells * outputs * (d + 2), f"the {cells} x {outputs} matrix of duchi-md", hint="use fewer values"
        )
        inputs, _, _ = self._geometry
        signs = self.signs(np.arange(outputs))  # (Z, d)
        cols = self._product().split(np.arange(cells))
        pmf = np.zeros((cells, outputs, d + 1))
        pmf[:, :, 0] = 1.0
        for j in range(d):  # Poisson-binomial count of agreements, one attribute at a time
            t = inputs[j][cols[j]][:, None]  # (X, 1)
            agree = (1.0 + signs[None, :, j] * t) / 2.0  # (X, Z): P(v_j = s_j)
            shifted = np.zeros_like(pmf)
            shifted[:, :, 1:] = pmf[:, :, :-1]
            pmf = pmf * (1.0 - agree)[:, :, None] + shifted * agree[:, :, None]
        return pmf @ self.weights

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        d, n = self.attribute_count, values.shape[0]
        inputs, _, _ = self._geometry
        cols = self._product().split(values)
        t = np.column_stack([inputs[j][cols[j]] for j in range(d)])
        v = np.where(rng.random((n, d)) < (1.0 + t) / 2.0, 1.0, -1.0)  # Algorithm 3, line 1
        # the side and the output within it: s agrees with v in A coordinates, P(A = a) = binom(d, a) g(a),
        # the agreeing coordinates a uniformly random set (uniform on each side, ties split or not)
        law = np.array([math.comb(d, a) for a in range(d + 1)], dtype=float) * self.weights
        agreements = np.asarray(rng.choice(d + 1, size=n, p=law / law.sum()))
        ranks = np.argsort(rng.random((n, d)), axis=1).argsort(axis=1)
        s = np.where(ranks < agreements[:, None], v, -v)
        bits = (s > 0).astype(np.int64)
        return (bits << (d - 1 - np.arange(d))[None, :]).sum(axis=1)[:, None]

    # ------------------------------------------------------------ the mean
    def attribute_estimates(self, reports: np.ndarray) -> np.ndarray:
        """(D, d) each report's unbiased estimate of its user's vector, in the attributes' units: B s mapped."""
        return self._to_values(self.bound * self.signs(reports))

    def mean_variances(self, theta: np.ndarray) -> np.ndarray:
        """n Var of each attribute's mean for n users of empirical distribution theta (a fixed population):
        ``Var[B s_j | t] = B^2 - t_j^2`` ((B s_j)^2 = B^2), in squared attribute units."""
        b2 = self.bound**2
        _, _, scales = self._geometry
        return np.array([(b2 - f @ t**2) for f, t in self._t_columns(theta)]) * scales**2


# ------------------------------------------------------------------ PM / HM with sampling
class _Sampling(_VectorMean, TupleMechanism):
    """Wang et al.'s Algorithm 4 around a one-dimensional numeric plugin (``part``)."""

    part: str = ""
    eps = Param("float", gt=0, doc="privacy level of the whole tuple (eps-LDP)")
    k = Param(
        "int",
        0,
        ge=0,
        doc="attributes sampled per user; 0: Wang et al.'s max(1, min(d, floor(eps / 2.5)))",
    )

    def _validate(self) -> None:
        parts = _integer_parts(self.domain)
        d = len(parts)
        if self.k > d:
            raise ParameterError(f"k = {self.k} exceeds the {d} attributes", field="k", hint=f"use k <= {d}")
        registry = get_registry()
        # `part` names a numeric mechanism (every subclass sets it): parts have midpoints and outputs
        self._built: tuple[NumericMechanism, ...] = tuple(
            cast(NumericMechanism, self.build_part(j, {"mechanism": self.part, "eps": self.part_eps}, "eps", registry))
            for j in range(d)
        )
        self.report_width = 2 * d

    @property
    def sampled(self) -> int:
        """k, the attributes each user reports."""
        d = len(self.domain.parts)
        return self.k or max(1, min(d, math.floor(self.eps / 2.5)))

    @property
    def part_eps(self) -> float:
        """eps / k, each sampled attribute's budget."""
        return self.eps / self.sampled

    @property
    def privacy(self) -> Privacy:
        # the sampled set does not depend on x; k reports at eps/k compose to eps
        return Privacy("ldp", self.eps)

    def _parts(self) -> Sequence[Mechanism]:
        return self._built

    def _product(self) -> Product:
        return self.domain

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        d, n, k = len(self._built), values.shape[0], self.sampled
        xs = self.domain.split(values)
        ranks = np.argsort(rng.random((n, d)), axis=1).argsort(axis=1)
        chosen = ranks < k  # a uniformly random k-subset per user
        out = np.zeros((n, 2 * d), dtype=np.int64)
        out[:, d:] = chosen
        for j, part in enumerate(self._built):
            rows = np.flatnonzero(chosen[:, j])
            if rows.size:
                out[rows, j] = part.sample(xs[j][rows], rng)[:, 0]
        return out

    def _patterns(self, reports: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(sampled attributes, rows) for each valid sampled set among the reports (k flags, zeros elsewhere)."""
        d, k = len(self._built), self.sampled
        flags = reports[:, d:]
        valid = np.all((flags == 0) | (flags == 1), axis=1) & (flags.sum(axis=1) == k)
        valid &= ~np.any((flags == 0) & (reports[:, :d] != 0), axis=1)
        rows = np.flatnonzero(valid)
        if not rows.size:
            return []
        uniq, inverse = np.unique(flags[rows], axis=0, return_inverse=True)
        inverse = inverse.ravel()
        return [(np.flatnonzero(pattern), rows[inverse == i]) for i, pattern in enumerate(uniq)]

    def _terms(self, reports: np.ndarray) -> Sequence[Term]:
        d, k = len(self._built), self.sampled
        log_w = -math.log(math.comb(d, k))
        terms = [
            Term(np.full(rows.size, log_w), {int(j): slice(int(j), int(j) + 1) for j in attrs}, rows)
            for attrs, rows in self._patterns(reports)
        ]
        if not terms:  # no report is a valid one: all are impossible
            terms.append(Term(np.full(reports.shape[0], -np.inf), {}, None))
        return terms

    # ------------------------------------------------------------ the mean
    def attribute_estimates(self, reports: np.ndarray) -> np.ndarray:
        """(D, d) each report's unbiased estimate of its user's vector: d/k times the sampled cells' midpoints
        (0 for the others, in units of t), mapped onto the attributes' units."""
        reports = np.asarray(reports, dtype=np.int64)
        d, k = len(self._built), self.sampled
        t = np.zeros((reports.shape[0], d))
        for j, part in enumerate(self._built):
            rows = np.flatnonzero(reports[:, d + j] == 1)
            cells = reports[rows, j]
            part.require_outputs(cells, part.midpoints.size)
            t[rows, j] = part.midpoints[cells] * d / k
        return self._to_values(t)

    def mean_variances(self, theta: np.ndarray, *, continuous: bool = False) -> np.ndarray:
        """n Var of each attribute's mean for n users of empirical distribution theta (a fixed population).

        A user's estimate of attribute j is ``r = (d/k) y I``, I ~ Bernoulli(k/d) (sampled), y the part's report
        with E[y | t] = t: ``Var[r | t] = (d/k) E[y^2 | t] - t^2 = (d/k) Var[y | t] + (d/k - 1) t^2`` (the form of
        Wang et al. 2019's analysis of sampling). ``E[y^2 | t]`` is exact from the part's matrix: over the cells'
        midpoints, or with ``continuous = True`` over the paper's continuous reports (adds width^2 / 12).
        """
        d, k = len(self._built), self.sampled
        _, _, scales = self._geometry
        out = []
        for part, (f, t) in zip(self._built, self._t_columns(theta)):
            left, right = part.outputs
            m = part.midpoints
            second = m**2 + ((right - left) ** 2 / 12 if continuous else 0.0)
            assert part.matrix is not None  # a numeric part has finitely many outputs
            ey2 = part.matrix @ second
            out.append(f @ (d / k * ey2 - t**2))
        return np.array(out) * scales**2


class PMSampling(_Sampling):
    """PM with sampling (Wang et al. 2019, Alg. 4): k attributes through the Piecewise Mechanism at eps/k, scaled d/k"""

    name = "pm-sampling"
    part = "piecewise"


class HMSampling(_Sampling):
    """HM with sampling (Wang et al. 2019, Alg. 4): k attributes through the Hybrid Mechanism at eps/k, scaled d/k"""

    name = "hm-sampling"
    part = "hybrid"


@hookimpl
def register_mechanisms(register):
    for cls in (DuchiMD, PMSampling, HMSampling):
        register(cls)
