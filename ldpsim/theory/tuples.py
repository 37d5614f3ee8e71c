"""Tuple protocols' diagnostics: the whole-tuple channel, what it identifies, and its exact privacy levels.

A tuple protocol (SPL, SMP, RS+FD, ...) is one channel from the tuples ``x = (x_1..x_d)`` to its reports.
Its papers reason attribute by attribute; this module looks at the channel itself, on domains small
enough to enumerate its outputs:

* :func:`joint_channel`: the dense ``(|X|, |Z|)`` matrix ``M[x, z] = P(z | x)``, from the mechanism's own
  likelihood on every report it can send (checked: each row sums to 1).
* :func:`identifiability`: the report distribution is ``M^T theta``, so theta is known up to
  ``null(M^T)``; a functional ``a^T theta`` is identifiable iff ``a`` lies in the column space of M.
  The joint is identifiable iff ``rank M = |X|``; SMP's and RS+FD's channels are sums of terms that
  each depend on one attribute, so they identify the 1-way marginals and nothing more.
* :func:`tuple_privacy`: the exact LDP level of the whole-tuple channel (any two tuples), beside the level
  between tuples that differ in one attribute (per attribute and over all), what the RS+FD papers' eps
  is about. docs/tuples-privacy.md derives the closed forms these numbers match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ..base.errors import ContractError, EstimationError, LdpsimError, ParameterError
from ..model.bitvectors import BitVectorMechanism
from ..model.mechanism import ROW_SUM_TOL, Mechanism
from ..model.privacy import Privacy, ldp_level
from ..model.tuples import TupleMechanism

#: the most entries (|X| x |Z|) of a joint channel that is enumerated: 128 MB of float64, and an SVD
#: of it takes seconds
MAX_JOINT_ENTRIES = 1 << 24
#: a unary (bit-vector) attribute has 2^k outputs: enumerated up to k bits
MAX_UNARY_BITS = 10
#: relative tolerance on singular values for the numerical rank (that of ``ldpsim.mechanism_report``)
RANK_TOL = 1e-10
#: singular values the Gram route of the rank settles: at least this share of the largest, or below RANK_TOL
GRAM_RESOLUTION = 1e-6
#: a marginal is identifiable when each of its indicator functionals lies in the column space of the
#: channel up to this relative residual (identifiable ones leave ~1e-8 of rounding, others O(1))
MARGINAL_TOL = 1e-6

_HINT = "the tuple diagnostics enumerate every report: use fewer attributes, or fewer values per attribute"


def _refuse(problem: str, hint: str = _HINT) -> ParameterError:
    return ParameterError(problem, field="domain", hint=hint)


def _require_tuple(mech: Mechanism) -> TupleMechanism:
    if not isinstance(mech, TupleMechanism):
        raise TypeError(f"the tuple diagnostics need a TupleMechanism, got {type(mech).__name__}")
    return mech


def _too_large(mech: TupleMechanism, outputs: int, least: bool = False) -> ParameterError:
    return _refuse(
        f"the joint channel of {mech.name} has {mech.domain.size:,} tuples x {'at least ' if least else ''}"
        f"{outputs:,} outputs, more than the {MAX_JOINT_ENTRIES:,} entries enumerated"
    )


def _part_outputs(mech: TupleMechanism, j: int) -> np.ndarray:
    """Every report attribute j's mechanism can send, in its encoding: ``(|Z_j|, report_width_j)``."""
    part, name = mech.parts[j], mech.domain.names[j]
    if isinstance(part, BitVectorMechanism):  # 2^k bit vectors, packed as the part packs them
        k = part.domain.size
        if k > MAX_UNARY_BITS:
            raise _refuse(
                f"attribute '{name}' is reported as {k}-bit vectors (2^{k} outputs), more than the"
                f" 2^{MAX_UNARY_BITS} enumerated",
                hint=f"give it at most {MAX_UNARY_BITS} values, or use a local randomizer with k outputs (grr)",
            )
        codes = np.arange(1 << k, dtype=np.int64)
        return part.pack_bits(((codes[:, None] >> np.arange(k)) & 1).astype(bool))
    count = part.output_count()
    if count is not None and count * mech.domain.size > MAX_JOINT_ENTRIES:  # every layout has as many reports
        raise _too_large(mech, count, least=True)
    if count is None and part.report_width == 1:
        m = part.matrix
        count = None if m is None else int(m.shape[1])
    if count is None or part.report_width != 1:
        raise _refuse(
            f"attribute '{name}': {part.name} has unbounded outputs (or reports of several columns)",
            hint="the tuple diagnostics need per-attribute mechanisms with a finite matrix (krr, oue, ...)",
        )
    return np.arange(count, dtype=np.int64)[:, None]


def _layouts(mech: TupleMechanism, outputs: Sequence[np.ndarray]) -> list[tuple[str, int]]:
    """The report layouts the mechanism's width allows, with their output counts.

    ``tuple``: one part report per attribute, side by side (SPL, RS+FD). ``indexed``: the attribute's index,
    then its part report, padded with zeros (SMP).
    """
    widths = [o.shape[1] for o in outputs]
    found = []
    if mech.report_width == sum(widths):
        found.append(("tuple", math.prod(o.shape[0] for o in outputs)))
    if mech.report_width == 1 + max(widths):
        found.append(("indexed", sum(o.shape[0] for o in outputs)))
    return found


def _build(layout: str, width: int, outputs: Sequence[np.ndarray]) -> np.ndarray:
    if layout == "tuple":
        cells = np.indices(tuple(o.shape[0] for o in outputs)).reshape(len(outputs), -1)
        return np.concatenate([o[c] for o, c in zip(outputs, cells)], axis=1)
    blocks = []
    for j, o in enumerate(outputs):
        block = np.zeros((o.shape[0], width), dtype=np.int64)
        block[:, 0] = j
        block[:, 1 : 1 + o.shape[1]] = o
        blocks.append(block)
    return np.concatenate(blocks, axis=0)


def _enumerate(mech: TupleMechanism) -> tuple[np.ndarray, np.ndarray]:
    """``(reports, log_channel)``: every report the mechanism can send and the ``(|X|, |Z|)`` log P(z | x).

    The layout is not declared by the protocol: each one its report width allows is tried (side by side first:
    SPL's and RS+FD's likelihoods index their parts' reports without checking them, while SMP's parts refuse a
    report that is not theirs), and the first whose enumerated reports carry all the probability of every tuple
    (rows sum to 1) is the channel, without the reports that no tuple sends.
    """
    outputs = [_part_outputs(mech, j) for j in range(mech.attribute_count)]
    layouts = _layouts(mech, outputs)
    if not layouts:
        raise _refuse(
            f"the reports of {mech.name} ({mech.report_width} columns) are neither its attributes' reports side by"
            " side nor an attribute index and its report",
            hint="the tuple diagnostics know the layouts of SPL, RS+FD (side by side) and SMP (indexed)",
        )
    size = mech.domain.size
    short, too_big, broken = 0.0, 0, None
    for layout, count in layouts:
        if count * size > MAX_JOINT_ENTRIES:
            too_big = min(too_big or count, count)
            continue
        reports = _build(layout, mech.report_width, outputs)
        try:
            log_l = mech.log_likelihood(reports).T
        except EstimationError:  # a part refused a report: not this layout
            continue
        except ContractError as exc:  # a likelihood that does not check its reports, fed another layout's
            broken = broken or exc
            continue
        total = np.exp(log_l).sum(axis=1)
        if np.any(total > 1 + ROW_SUM_TOL):
            raise ContractError(
                f"{mech!r}: distinct reports have probabilities adding up to {total.max():.12g} > 1 for a tuple"
            )
        if np.all(total >= 1 - ROW_SUM_TOL):
            possible = np.isfinite(log_l).any(axis=0)  # a wider layout may hold reports no tuple sends
            return reports[possible], log_l[:, possible]
        short = max(short, float(1 - total.min()))
    if too_big:
        raise _too_large(mech, too_big)
    if broken is not None:
        raise broken
    raise LdpsimError(
        f"the enumerated reports of {mech.name} miss probability {short:.3g} of some tuple: its reports are"
        " laid out otherwise",
        hint="the tuple diagnostics know the layouts of SPL, RS+FD (side by side) and SMP (indexed)",
    )


def joint_outputs(mech: TupleMechanism) -> np.ndarray:
    """Every report the tuple protocol can send, in its own encoding: the columns of :func:`joint_channel`.

    Parameters
    ----------
    mech
        A tuple protocol whose attributes' mechanisms have finitely many outputs.

    Returns
    -------
    numpy.ndarray
        ``(|Z|, report_width)`` int64 reports.
    """
    return _enumerate(_require_tuple(mech))[0]


def joint_log_channel(mech: TupleMechanism) -> np.ndarray:
    """``(|X|, |Z|)`` log P(z | x) of the whole-tuple channel (``-inf`` where impossible).

    The logarithms come from the mechanism's likelihood, so privacy levels read from them do not suffer
    from probabilities that underflow.
    """
    return _enumerate(_require_tuple(mech))[1]


def joint_channel(mech: TupleMechanism) -> np.ndarray:
    """The dense ``(|X|, |Z|)`` row-stochastic matrix of a tuple protocol, tuples in the domain's (row-major) order.

    The protocols never form it (their likelihood is a sum of Kronecker terms); it is what the diagnostics of
    identifiability and privacy are about, on domains small enough to enumerate every report.

    Parameters
    ----------
    mech
        A tuple protocol whose attributes' mechanisms have finite matrices (bit vectors of at most
        :data:`MAX_UNARY_BITS` bits).

    Returns
    -------
    numpy.ndarray
        ``M[x, z] = P(z | x)``, columns in the order of :func:`joint_outputs`.

    Raises
    ------
    ParameterError
        When the channel has more than :data:`MAX_JOINT_ENTRIES` entries, or a part's outputs are unbounded.
    ContractError
        When the mechanism's probabilities of distinct reports add up to more than 1.
    """
    return np.exp(joint_log_channel(mech))


# ------------------------------------------------------------------------------------- identifiability


def interaction_dimension(sizes: Sequence[int], order: int) -> int:
    """Dimension of the span of the marginals over ``order`` attributes: ``sum_{|T| <= order} prod_T (k_j - 1)``.

    The functions of x that are sums of terms over ``order`` attributes each (the ANOVA decomposition);
    ``order = 1`` gives ``1 + sum_j (k_j - 1)``, ``order = d`` gives ``|X|``.
    """
    return sum(
        math.prod(sizes[j] - 1 for j in subset)
        for k in range(order + 1)
        for subset in combinations(range(len(sizes)), k)
    )


@dataclass(frozen=True)
class Identifiability:
    """What the report distribution of a tuple protocol determines of the joint distribution theta.

    Linear identifiability, which holds at every distribution inside the simplex (zeros of theta may
    identify more at the boundary).

    Attributes
    ----------
    rank
        Numerical rank of the joint channel (singular values above ``tolerance`` times the largest).
    size
        |X|, the number of tuples.
    names, sizes
        The attributes and their numbers of values.
    marginals
        ``(attributes, identifiable)`` for every set of 1 to d - 1 attributes, by size then order.
    tolerance
        The relative tolerance of the rank.
    """

    rank: int
    size: int
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    marginals: tuple[tuple[tuple[int, ...], bool], ...]
    tolerance: float = RANK_TOL

    @property
    def identifiable(self) -> bool:
        """Whether the joint distribution is identifiable (full rank)."""
        return self.rank == self.size

    def marginal(self, attributes: Sequence[int]) -> bool:
        """Whether the marginal over these attributes (indices, any order) is identifiable."""
        key = tuple(sorted(attributes))
        if len(key) == len(self.sizes):
            return self.identifiable
        return dict(self.marginals)[key]

    @property
    def order(self) -> int:
        """The largest k such that every k-way marginal is identifiable (d for the joint, 0 for none)."""
        if self.identifiable:
            return len(self.sizes)
        order = 0
        for k in range(1, len(self.sizes)):
            if not all(ok for attrs, ok in self.marginals if len(attrs) == k):
                break
            order = k
        return order

    @property
    def exactly_marginals(self) -> bool:
        """Whether what is identifiable is exactly the span of the :attr:`order`-way marginals (rank = its dim)."""
        return self.rank == interaction_dimension(self.sizes, self.order)

    def _level(self, k: int) -> str:
        found = [(attrs, ok) for attrs, ok in self.marginals if len(attrs) == k]
        if all(ok for _, ok in found):
            return f"every {k}-way marginal is"
        if not any(ok for _, ok in found):
            return f"no {k}-way marginal is"
        listed = ", ".join(
            f"{'x'.join(self.names[j] for j in attrs)} {'is' if ok else 'is not'}" for attrs, ok in found
        )
        return f"{k}-way marginals: {listed}"

    def __str__(self) -> str:
        if self.identifiable:
            return f"the joint is identifiable (rank {self.rank} of {self.size}), and so is every marginal"
        levels = "; ".join(self._level(k) for k in range(1, len(self.sizes)))
        out = f"the joint is not identifiable (rank {self.rank} of {self.size}); {levels}"
        order = self.order
        if order == 0:
            return out
        if self.exactly_marginals:
            return (
                f"{out}. The reports identify exactly the {order}-way marginals (and their combinations): estimate"
                " those, not the joint (the protocol's marginal estimates, or the marginals of an MLE, which every"
                " MLE shares)"
            )
        return f"{out}. The reports identify more than the {order}-way marginals (rank {self.rank})"


def _column_space(m: np.ndarray) -> tuple[int, np.ndarray]:
    """Numerical rank of ``m`` and an orthonormal basis of its column space, as rows ``(rank, |X|)``.

    A wide channel (more outputs than tuples, as most tuple protocols') goes through the eigenvectors V
    of ``m m^T``: two matrix products, 10x faster than an SVD on a 243 x 32768 channel. The singular
    values are read as the norms of the rows of ``V^T m``, exact to ~1e-16 of the largest (the
    eigenvalues themselves only resolve ~1e-8 of it); when one falls between :data:`RANK_TOL` and
    :data:`GRAM_RESOLUTION` of the largest, where nearly-null eigenvectors of the Gram matrix mix, the
    SVD decides.
    """
    rows, cols = m.shape
    if rows < cols:
        _, v = np.linalg.eigh(m @ m.T)
        sigma = np.linalg.norm(v.T @ m, axis=1)
        top = float(sigma.max())
        if not np.any((sigma > RANK_TOL * top) & (sigma < GRAM_RESOLUTION * top)):
            keep = sigma >= GRAM_RESOLUTION * top
            return int(keep.sum()), v[:, keep].T
    u, singular, _ = np.linalg.svd(m, full_matrices=False)
    rank = int((singular > RANK_TOL * singular[0]).sum())
    return rank, u[:, :rank].T


def identifiability(mech: TupleMechanism, channel: np.ndarray | None = None) -> Identifiability:
    """Rank of the joint channel and which marginals of the joint distribution its reports identify.

    The reports' distribution is ``M^T theta``: theta is known up to ``null(M^T)``, and a functional
    ``a^T theta`` is identifiable iff ``a`` is orthogonal to ``null(M^T)``, i.e. lies in the column space
    of M. A marginal is identifiable iff each of its cells' indicators does; a set of attributes whose
    subset is not identifiable is not either (its marginal is a function of the larger one), which spares
    checking most sets.

    Parameters
    ----------
    mech
        A tuple protocol (see :func:`joint_channel`).
    channel
        Its joint channel, if already computed.

    Returns
    -------
    Identifiability
        Its ``str`` says in words what is and is not identifiable.
    """
    mech = _require_tuple(mech)
    m = joint_channel(mech) if channel is None else np.asarray(channel, dtype=float)
    domain = mech.domain
    rank, basis = _column_space(m)  # orthonormal rows spanning the column space of M: the identifiable functionals
    d = len(domain.sizes)
    status: dict[tuple[int, ...], bool] = {}
    for k in range(1, d):
        for attrs in combinations(range(d), k):
            if k > 1 and not all(status[sub] for sub in combinations(attrs, k - 1)):
                status[attrs] = False
                continue
            if rank == domain.size:
                status[attrs] = True
                continue
            # |U_r^T a|^2 for each cell's indicator a (|a|^2 = |X| / |X_S|): its share in the column space
            inside = (domain.marginal(basis, attrs) ** 2).sum(axis=0)
            norm2 = domain.size / math.prod(domain.sizes[j] for j in attrs)
            residual = math.sqrt(max(0.0, 1.0 - float(inside.min()) / norm2))
            status[attrs] = residual <= MARGINAL_TOL
    return Identifiability(
        rank=rank,
        size=domain.size,
        names=tuple(domain.names),
        sizes=tuple(domain.sizes),
        marginals=tuple(status.items()),
    )


# ---------------------------------------------------------------------------------------------- privacy


@dataclass(frozen=True)
class TuplePrivacy:
    """Exact LDP levels of a tuple protocol's whole-tuple channel, beside the declared one.

    Attributes
    ----------
    declared
        The guarantee the mechanism declares.
    eps_all
        The LDP level: the largest ``log P(z|x) / P(z|x')`` over reports and any two tuples.
    per_attribute
        Per attribute j, the largest over tuples that differ only in attribute j.
    names
        The attributes.
    parameter
        The mechanism's ``eps`` parameter when it differs from the declared level (RS+FD's: the paper's eps).
    """

    declared: Privacy
    eps_all: float
    per_attribute: tuple[float, ...]
    names: tuple[str, ...]
    parameter: float | None = None

    @property
    def eps_one(self) -> float:
        """The level between tuples that differ in one attribute (any one)."""
        return max(self.per_attribute)

    @property
    def declared_eps(self) -> float | None:
        """The declared eps when the claim is eps-LDP, else None."""
        return float(self.declared.eps) if self.declared.notion == "ldp" else None

    @property
    def holds(self) -> bool | None:
        """Whether the whole-tuple channel keeps the declared eps-LDP (None for another notion)."""
        eps = self.declared_eps
        return None if eps is None else self.eps_all <= eps + 1e-9 * max(1.0, eps)

    def __str__(self) -> str:
        claim = f"declared {self.declared}"
        if self.parameter is not None:
            claim += f" (parameter eps = {_num(self.parameter)})"
        verdict = {True: "holds", False: "VIOLATED", None: "not an LDP claim"}[self.holds]
        return (
            f"{claim}: {verdict}; exact eps = {_num(self.eps_all)} between any two tuples,"
            f" {_num(self.eps_one)} between tuples differing in one attribute"
        )

    def attribute_line(self) -> str:
        """The per-attribute levels, in words."""
        levels = ", ".join(f"{n} {_num(e)}" for n, e in zip(self.names, self.per_attribute))
        return f"eps between tuples differing only in that attribute: {levels}"


def tuple_privacy(mech: TupleMechanism, log_channel: np.ndarray | None = None) -> TuplePrivacy:
    """The exact privacy levels of the whole-tuple channel: any two tuples, and tuples differing in one attribute.

    eps-LDP quantifies over every pair of tuples; the RS+FD papers' eps holds between tuples that differ
    in one attribute. For attribute j the log-channel, shaped ``(k_1..k_d, |Z|)``, gives the level of the
    pairs differing only in j as the largest ``max - min`` along axis j.

    Parameters
    ----------
    mech
        A tuple protocol (see :func:`joint_channel`).
    log_channel
        Its ``(|X|, |Z|)`` log-channel, if already computed (:func:`joint_log_channel`).

    Returns
    -------
    TuplePrivacy
        The levels, the declared guarantee, and RS+FD's parameter eps when it differs from the declared.
    """
    mech = _require_tuple(mech)
    log_m = joint_log_channel(mech) if log_channel is None else np.asarray(log_channel, dtype=float)
    sizes = tuple(mech.domain.sizes)
    cube = log_m.reshape(sizes + (log_m.shape[1],))
    per = []
    for j in range(len(sizes)):
        with np.errstate(invalid="ignore"):  # -inf - -inf: impossible for both tuples, no constraint
            gaps = cube.max(axis=j) - cube.min(axis=j)
        per.append(float(np.max(np.where(np.isnan(gaps), 0.0, gaps))))
    declared = mech.privacy
    parameter = mech.get_params().get("eps")
    if not isinstance(parameter, int | float) or (declared.notion == "ldp" and math.isclose(parameter, declared.eps)):
        parameter = None
    return TuplePrivacy(
        declared=declared,
        eps_all=ldp_level(log_m.T),
        per_attribute=tuple(per),
        names=tuple(mech.domain.names),
        parameter=None if parameter is None else float(parameter),
    )


# ----------------------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class TupleReport:
    """The tuple section of ``ldpsim check mechanism``: identifiability and privacy levels, or why not computed."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    outputs: int | None
    identifiability: Identifiability | None
    privacy: TuplePrivacy | None
    skipped: str | None = None

    def lines(self) -> list[str]:
        """A readable account, one finding per line."""
        attrs = ", ".join(f"{n}: {k} values" for n, k in zip(self.names, self.sizes))
        head = f"tuples      {len(self.names)} attributes ({attrs}), {math.prod(self.sizes)} tuples"
        if self.skipped is not None or self.identifiability is None or self.privacy is None:
            return [f"{head}; joint channel not enumerated: {self.skipped}"]
        return [
            f"{head}, {self.outputs} outputs enumerated",
            f"joint       {self.identifiability}",
            f"tuple eps   {self.privacy}",
            f"per attr    {self.privacy.attribute_line()}",
        ]


def tuple_report(mech: TupleMechanism) -> TupleReport:
    """Identifiability and exact privacy levels of a tuple protocol, or a line saying why they are not computed.

    It never fails for a mechanism whose channel cannot be enumerated (too many outputs, unbounded parts):
    the report says so, as ``ldpsim.mechanism_report`` never fails.
    """
    mech = _require_tuple(mech)
    names, sizes = tuple(mech.domain.names), tuple(mech.domain.sizes)
    try:
        reports, log_m = _enumerate(mech)
    except LdpsimError as exc:
        reason = exc.problem + (f" ({exc.hint})" if exc.hint else "")
        return TupleReport(names, sizes, None, None, None, skipped=reason)
    return TupleReport(
        names,
        sizes,
        int(reports.shape[0]),
        identifiability(mech, np.exp(log_m)),
        tuple_privacy(mech, log_m),
    )


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"
