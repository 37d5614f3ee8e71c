"""Tuple mechanisms: users with several attributes, reported through per-attribute mechanisms.

A tuple protocol (SPL, SMP, RS+FD, a third party's) reports a user's tuple ``x = (x_1..x_d)``
through one mechanism per attribute (its *parts*), with sampling and fake data around them. Its
channel is always a mixture of Kronecker terms::

    P(z | x) = sum_t w_t(z) prod_{j in S_t} P_j(z[c_tj] | x_j)

where term t covers the reports where it applies, ``w_t(z)`` is what does not depend on x (the
sampling probability, the fake data's probability) and ``S_t`` the attributes whose true value the
report carries, read from report columns ``c_tj`` through part j. SPL is one term over every
attribute (the channel is ``P_1 (x) ... (x) P_d``); SMP has a term per attribute covering the reports
that name it (block diagonal); RS+FD has a term per sampled attribute, the others' fake data in
``w_t`` (``(1/d) sum_j P_j (x) U_{-j}``). A subclass declares its parts and its terms
(:meth:`TupleMechanism._terms`); the exact likelihood, dense and structured, follows here.

The structured likelihood (:class:`ProductChannel`) never forms the (reports x cells) matrix: each
term's product is applied through the attributes' marginals of theta, by mode products over the
distinct per-attribute reports when they are few (a term over one attribute costs O(|X| + D)), or
report by report in bounded blocks otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ..base.errors import ContractError, ParameterError
from ..base.hooks import overrides
from ..base.memory import require_memory
from .domains import Domain, Product
from .mechanism import Mechanism

#: the mode-product path holds a tensor of this many distinct per-attribute report combinations at most
#: (per term); beyond it, a term's products run report by report (exact, O(D |X_S|))
MODE_PRODUCT_MAX = 1 << 24
#: floats per temporary block of the report-by-report path (32 MB)
BLOCK_FLOATS = 1 << 22


@dataclass(frozen=True)
class Term:
    """One term of a tuple channel.

    Attributes
    ----------
    log_weight
        ``(R,)`` log of the factor that does not depend on x, one per report the term covers
        (``-inf``: the term cannot have produced that report).
    columns
        For each attribute the term's reports carry (its index in the domain), the report columns
        part j reads (a slice of the tuple report).
    rows
        The reports (distinct indices into the tuple reports) the term covers; None for all of them.
    """

    log_weight: np.ndarray
    columns: Mapping[int, slice]
    rows: np.ndarray | None = None


@dataclass
class _Factor:
    """One attribute of one term: distinct part reports' likelihoods and each report's code."""

    attribute: int
    table: np.ndarray  # (U, k_j) P_j(u | x_j) / its row maximum
    codes: np.ndarray  # (R,) index into table's rows


@dataclass
class _Block:
    rows: np.ndarray | None
    weight: np.ndarray  # (R,) in [0, 1]: exp(log weight + rows' maxima - shift)
    factors: list[_Factor] = field(default_factory=list)

    @property
    def attributes(self) -> tuple[int, ...]:
        return tuple(f.attribute for f in self.factors)


class ProductChannel:
    """The ``(D, |X|)`` likelihood of tuple reports as a sum of Kronecker terms, applied without forming it.

    ``H[d, x] = sum_t weight_t[d] prod_{f in t} table_f[codes_f[d], x_f]`` over the cells x of a
    product domain of attribute ``sizes``. ``matvec``/``rmatvec`` are what GIBU needs; ``rows`` gives
    exact dense rows (the Newton solver's sampled Hessian, the dense likelihood of small problems).
    """

    def __init__(self, sizes: Sequence[int], n_reports: int, blocks: Sequence[_Block]):
        self.sizes = tuple(int(k) for k in sizes)
        self.shape = (int(n_reports), int(math.prod(self.sizes)))
        self.blocks = list(blocks)
        for block in self.blocks:
            block.factors.sort(key=lambda f: f.attribute)

    # -------------------------------------------------------------- products
    def matvec(self, theta: np.ndarray) -> np.ndarray:
        cube = np.asarray(theta, dtype=float).reshape(self.sizes)
        out = np.zeros(self.shape[0])
        marginals: dict[tuple[int, ...], np.ndarray] = {}
        for block in self.blocks:
            attrs = block.attributes
            if attrs not in marginals:
                drop = tuple(j for j in range(len(self.sizes)) if j not in attrs)
                marginals[attrs] = cube.sum(axis=drop) if drop else cube
            vals = block.weight * self._term_values(block, marginals[attrs])
            if block.rows is None:
                out += vals
            else:  # a term's rows are distinct reports
                out[block.rows] += vals
        return out

    def rmatvec(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float).ravel()
        grad = np.zeros(self.sizes)
        for block in self.blocks:
            y = (w if block.rows is None else w[block.rows]) * block.weight
            part = self._term_adjoint(block, y)
            grad += part.reshape([k if j in block.attributes else 1 for j, k in enumerate(self.sizes)])
        return grad.ravel()

    def rows(self, index: np.ndarray) -> np.ndarray:
        """``H[index, :]`` as a dense array."""
        index = np.asarray(index, dtype=np.intp)
        out = np.zeros((index.size,) + self.sizes)
        where = np.full(self.shape[0], -1, dtype=np.intp)
        for block in self.blocks:
            if block.rows is None:
                sel, local = np.arange(index.size), index
            else:
                where[block.rows] = np.arange(block.rows.size)
                local = where[index]
                sel = np.flatnonzero(local >= 0)
                local = local[sel]
                where[block.rows] = -1
            if not sel.size:
                continue
            outer = block.weight[local][:, None]
            for f in block.factors:
                outer = (outer[:, :, None] * f.table[f.codes[local]][:, None, :]).reshape(sel.size, -1)
            shape = [sel.size] + [k if j in block.attributes else 1 for j, k in enumerate(self.sizes)]
            out[sel] += outer.reshape(shape)
        return out.reshape(index.size, -1)

    # ------------------------------------------------------------ internals
    def _term_values(self, block: _Block, marginal: np.ndarray) -> np.ndarray:
        factors = block.factors
        if len(factors) == 1:
            return (factors[0].table @ marginal)[factors[0].codes]
        distinct = math.prod(f.table.shape[0] for f in factors)
        if distinct <= MODE_PRODUCT_MAX:
            t = marginal
            for axis, f in enumerate(factors):  # mode product: axis k_j -> U_j
                t = np.moveaxis(np.tensordot(f.table, t, axes=([1], [axis])), 0, axis)
            return t[tuple(f.codes for f in factors)]
        out = np.empty(factors[0].codes.size)
        step = max(1, BLOCK_FLOATS // max(1, marginal.size // factors[-1].table.shape[1]))
        for lo in range(0, out.size, step):
            b = slice(lo, lo + step)
            x = np.tensordot(marginal, factors[-1].table[factors[-1].codes[b]], axes=([marginal.ndim - 1], [1]))
            for f in reversed(factors[:-1]):  # x: (k_1..k_i, B) -> (k_1..k_{i-1}, B)
                x = np.einsum("...kb,bk->...b", x, f.table[f.codes[b]])
            out[b] = x
        return out

    def _term_adjoint(self, block: _Block, y: np.ndarray) -> np.ndarray:
        factors = block.factors
        if len(factors) == 1:
            f = factors[0]
            return np.bincount(f.codes, weights=y, minlength=f.table.shape[0]) @ f.table
        counts = tuple(f.table.shape[0] for f in factors)
        if math.prod(counts) <= MODE_PRODUCT_MAX:
            flat = np.ravel_multi_index(tuple(f.codes for f in factors), counts)
            t = np.bincount(flat, weights=y, minlength=math.prod(counts)).reshape(counts)
            for axis, f in enumerate(factors):  # adjoint mode product: axis U_j -> k_j
                t = np.moveaxis(np.tensordot(f.table, t, axes=([0], [axis])), 0, axis)
            return t
        size = math.prod(f.table.shape[1] for f in factors)
        total = np.zeros(size)
        step = max(1, BLOCK_FLOATS // size)
        for lo in range(0, y.size, step):
            b = slice(lo, lo + step)
            outer = y[b][:, None]
            for f in factors:
                outer = (outer[:, :, None] * f.table[f.codes[b]][:, None, :]).reshape(outer.shape[0], -1)
            total += outer.sum(axis=0)
        return total.reshape(tuple(f.table.shape[1] for f in factors))


def _distinct(columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an integer array and each row's index among them."""
    if columns.shape[1] == 1:
        uniq, codes = np.unique(columns[:, 0], return_inverse=True)
        return uniq[:, None], codes.ravel()
    uniq, codes = np.unique(columns, axis=0, return_inverse=True)
    return uniq, codes.ravel()


class TupleMechanism(Mechanism):
    """Base class of tuple protocols: one report per user over a product domain, built on per-attribute
    mechanisms (its *parts*).

    A subclass implements :meth:`_parts` (part j on the domain's attribute j), :meth:`_terms` (its channel,
    see the module docstring), ``privacy`` and ``_sample``. The dense and structured likelihoods follow.
    Optional hooks: :meth:`_marginal_estimates` (the protocol's unbiased per-attribute frequency estimates,
    what the literature's aggregators compute) and :meth:`_marginal_variances` (their variances in closed
    form). ``ldpsim.testing.check_tuple_mechanism`` checks a subclass against the dense product of its
    parts.
    """

    domain_kinds: ClassVar[tuple[str, ...] | None] = ("product",)
    #: the structured likelihood is never slower than the dense one on a product domain
    structured_min_size = 0
    domain: Product

    # ------------------------------------------------------------------ hooks
    def _parts(self) -> Sequence[Mechanism]:
        """One mechanism per attribute, on that attribute's domain."""
        raise NotImplementedError(f"{type(self).__name__} must implement _parts")

    def _terms(self, reports: np.ndarray) -> Sequence[Term]:
        """The channel's terms for these (distinct) tuple reports."""
        raise NotImplementedError(f"{type(self).__name__} must implement _terms")

    def _marginal_estimates(self, reports: np.ndarray, counts: np.ndarray) -> Sequence[np.ndarray] | None:
        """Unbiased estimates of every attribute's distribution (may leave the simplex), or None."""
        return None

    def _marginal_variances(self, theta: np.ndarray) -> Sequence[np.ndarray] | None:
        """``n Var`` of each attribute's unbiased estimate for n users of empirical joint ``theta``, or None."""
        return None

    # --------------------------------------------------------------- the parts
    @cached_property
    def parts(self) -> tuple[Mechanism, ...]:
        """The per-attribute mechanisms, checked: one per attribute, each on its attribute's domain."""
        parts = tuple(self._parts())
        if len(parts) != len(self.domain.parts):
            raise ContractError(
                f"{self!r}._parts returned {len(parts)} mechanisms for {len(self.domain.parts)} attributes"
            )
        for j, (part, dom) in enumerate(zip(parts, self.domain.parts)):
            if not isinstance(part, Mechanism) or part.domain != dom:
                raise ContractError(
                    f"{self!r}._parts: part {j} is not a mechanism on attribute '{self.domain.names[j]}'"
                )
        return parts

    def side_by_side(self) -> list[slice]:
        """Each part's report columns when the parts' reports are laid side by side, in attribute order
        (SPL's and RS+FD's reports)."""
        ends = np.cumsum([p.report_width for p in self.parts])
        return [slice(int(end - p.report_width), int(end)) for p, end in zip(self.parts, ends)]

    @property
    def attribute_count(self) -> int:
        """d, the number of attributes."""
        return len(self.domain.parts)

    def build_part(self, j: int, spec: Mapping[str, Any], field: str, registry: Any) -> Mechanism:
        """Part j from ``{"mechanism": NAME, **params}`` through ``registry`` (``ldpsim.get_registry()``), with any
        error located at ``field`` and naming the attribute."""
        params = dict(spec)
        name = params.pop("mechanism", None)
        if not isinstance(name, str):
            raise ParameterError(
                "needs a mechanism name", field=field, hint='add mechanism = "krr" (or any finite one)'
            )
        attribute = self.domain.names[j]
        try:
            part = registry.create("mechanism", name, self.domain.parts[j], **params)
        except ParameterError as exc:
            raise ParameterError(
                f"attribute '{attribute}': {exc.problem}",
                field=f"{field}.{exc.field}" if exc.field else field,
                hint=exc.hint,
            ) from None
        if isinstance(part, TupleMechanism):
            raise ParameterError(
                f"attribute '{attribute}': '{name}' is itself a tuple protocol",
                field=field,
                hint="give a single-attribute mechanism (krr, oue, olh, ...)",
            )
        return part

    # ----------------------------------------------------------- likelihoods
    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        shift, channel = self._channel(reports)
        require_memory(
            16.0 * reports.shape[0] * self.domain.size,
            f"the dense {reports.shape[0]} x {self.domain.size} likelihood of {self.name}",
            hint="let estimation use the structured likelihood (it does by default)",
        )
        with np.errstate(divide="ignore"):
            return np.log(channel.rows(np.arange(reports.shape[0]))) + shift[:, None]

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any]:
        from scipy.sparse.linalg import LinearOperator

        shift, channel = self._channel(reports)
        operator = LinearOperator(channel.shape, matvec=channel.matvec, rmatvec=channel.rmatvec, dtype=float)
        operator.rows = channel.rows  # type: ignore[attr-defined]  # exact rows, as ldpsim.with_exact_rows attaches
        operator.channel = channel  # type: ignore[attr-defined]
        return shift, operator

    def channel(self, reports: np.ndarray) -> tuple[np.ndarray, ProductChannel]:
        """``(shift, channel)`` with ``P(report_d | x) = exp(shift_d) channel[d, x]`` (the structured likelihood)."""
        return self._channel(self._check_reports(reports))

    def _channel(self, reports: np.ndarray) -> tuple[np.ndarray, ProductChannel]:
        parts = self.parts
        n = reports.shape[0]
        terms = list(self._terms(reports))
        if not terms:
            raise ContractError(f"{self!r}._terms returned no term")
        cache: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        blocks: list[_Block] = []
        scales: list[np.ndarray] = []
        for term in terms:
            rows = None if term.rows is None else np.asarray(term.rows, dtype=np.intp)
            size = n if rows is None else rows.size
            log_w = np.asarray(term.log_weight, dtype=float)
            if log_w.shape != (size,):
                raise ContractError(f"{self!r}._terms: a term's log_weight has shape {log_w.shape}, expected ({size},)")
            factors = []
            scale = log_w.copy()
            for j, cols in sorted(term.columns.items()):
                if not 0 <= j < len(parts):
                    raise ContractError(f"{self!r}._terms: attribute {j} out of range")
                key = (j, cols.start or 0, cols.stop or 0)
                if rows is None and key in cache:
                    table, codes, top = cache[key]
                else:
                    sub = reports[:, cols] if rows is None else reports[rows, cols]
                    uniq, codes = _distinct(sub)
                    log_l = parts[j].log_likelihood(uniq)
                    top = log_l.max(axis=1)
                    with np.errstate(invalid="ignore"):
                        table = np.exp(log_l - np.where(np.isfinite(top), top, 0.0)[:, None])
                    if rows is None:
                        cache[key] = (table, codes, top)
                factors.append(_Factor(j, table, codes))
                scale = scale + top[codes]
            blocks.append(_Block(rows, scale, factors))
            scales.append(scale)
        shift = np.full(n, -np.inf)
        for block, scale in zip(blocks, scales):
            if block.rows is None:
                np.maximum(shift, scale, out=shift)
            else:
                np.maximum.at(shift, block.rows, scale)
        safe = np.where(np.isfinite(shift), shift, 0.0)
        for block in blocks:
            with np.errstate(invalid="ignore"):
                w = np.exp(block.weight - (safe if block.rows is None else safe[block.rows]))
            block.weight = np.nan_to_num(w, nan=0.0)
        return shift, ProductChannel(self.domain.sizes, n, blocks)

    # -------------------------------------------------------- marginal estimates
    def marginal_estimates(self, reports: np.ndarray, counts: np.ndarray) -> list[np.ndarray] | None:
        """The protocol's unbiased estimate of each attribute's distribution (the literature's aggregators).

        Parameters
        ----------
        reports
            (D, report_width) distinct tuple reports.
        counts
            (D,) how many users sent each.

        Returns
        -------
        list of numpy.ndarray or None
            One vector per attribute (its values, in order), with expectation the attribute's true
            distribution; None if the protocol has no such estimate.
        """
        reports = self._check_reports(reports)
        if not overrides(type(self), TupleMechanism, "_marginal_estimates"):
            return None
        out = self._call("_marginal_estimates", reports, np.asarray(counts))
        if out is None:
            return None
        vectors = [np.asarray(v, dtype=float) for v in out]
        if len(vectors) != self.attribute_count or any(
            v.shape != (k,) or not np.all(np.isfinite(v)) for v, k in zip(vectors, self.domain.sizes)
        ):
            raise ContractError(f"{self!r}._marginal_estimates must return one finite vector per attribute")
        return vectors

    def marginal_variances(self, theta: np.ndarray) -> list[np.ndarray] | None:
        """``n Var`` of :meth:`marginal_estimates` per attribute value, for n users whose joint empirical
        distribution is ``theta`` (only the mechanism's randomness counts); None without a closed form."""
        if not overrides(type(self), TupleMechanism, "_marginal_variances"):
            return None
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.domain.size,) or np.any(theta < 0) or not np.isclose(theta.sum(), 1.0):
            raise ValueError(f"theta must be a distribution over the {self.domain.size} cells")
        out = self._marginal_variances(theta)
        if out is None:
            return None
        return [np.maximum(np.asarray(v, dtype=float), 0.0) for v in out]


def part_domains(domain: Domain) -> tuple[Domain, ...]:
    """The attributes' domains of a product domain (a ParameterError naming the field otherwise)."""
    if not isinstance(domain, Product):
        raise ParameterError(
            "a tuple protocol needs a product domain", field="domain", hint='use [domain] kind = "product"'
        )
    return domain.parts
