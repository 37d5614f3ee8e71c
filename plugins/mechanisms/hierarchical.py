"""Range-query protocols with level sampling: the hierarchical histogram (HH / HIO) and the Haar wavelet.

Both work on an ordered domain of ``b^h`` values (the leaves; the domain must have exactly that many
values, no padding: pad the data's range to a power of ``b`` yourself) and send one report per user
about one level of a tree over the leaves, drawn uniformly among the ``h`` levels below the root (the
root says nothing: every user is in it). A report is the row ``(level, *y)``.

* ``hh`` (Cormode, Kulkarni & Srivastava, VLDB 2019; 1-D HIO of Wang et al., SIGMOD 2019): the b-ary
  tree. A user at level l (``1 <= l <= h``) reports the node holding its value, ``x // b^(h - l)``, one
  of ``b^l``, through a frequency oracle built on those nodes (``krr``, ``oue``, ``olh``: any
  registered eps-LDP mechanism) with the whole eps. Channel
  ``P((l, y) | x) = (1 / h) P_l(y | x // b^(h - l))``.
* ``haar-hrr`` (Cormode et al. 2019, HaarHRR): b = 2. Level l (``1 <= l <= h``) of the Haar
  decomposition has ``m = 2^(l - 1)`` coefficients; a value x lies under coefficient
  ``c = x >> (h - l + 1)`` with sign ``s = +1`` in its left half, ``-1`` in its right half (bit
  ``h - l`` of x). The user draws a Hadamard row j uniformly in ``0..m-1`` and sends
  ``t = s (-1)^popcount(j & c)`` by binary randomized response, kept w.p. ``p = e^eps / (e^eps + 1)``:
  the report is ``(l, j, y)`` with ``y = 1`` for +1. Channel
  ``P((l, j, y) | x) = (1 / h) (1 / m) (p if 2 y - 1 = t else 1 - p)``.

Likelihood operators (what GIBU and the exact MLE run on): ``H theta`` aggregates theta to the level's
nodes (a reshape and a sum) and applies the level's channel; ``H^T w`` spreads back (``np.repeat``).
For Haar the level's channel is ``r sum(theta) + (1 - r) (sum(theta) + sigma_y u_j) / 2`` with
``r = e^-eps``, ``sigma_y = 2 y - 1``, ``u = W v`` the Walsh-Hadamard transform of the level's signed
node masses ``v_c = sum_{x under c} s(x) theta_x``: O(|X| + m log m) per level. Distinct reports are
counted (the engine groups them): Haar and HH over k-RR have at most ``2 |X|`` and ``sum_l b^l``
distinct reports whatever the number of users; OLH's and OUE's reports are per user (their cost is
the level oracle's, times the level's users).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ldpsim import (
    EstimationError,
    Mechanism,
    Param,
    ParameterError,
    Privacy,
    get_registry,
    hookimpl,
    make_domain,
    with_exact_rows,
    with_min_entry,
)

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator

#: up to this branching factor a level's node masses are summed from strided slices, beyond by a reduction
SLICED_BRANCHING = 64
#: frequency oracles a level of ``hh`` may use (the papers' OUE and OLH; k-RR)
ORACLES = ("krr", "oue", "olh")


def tree_depth(size: int, branching: int, field: str = "domain") -> int:
    """h with ``branching^h == size``; a ParameterError naming ``field`` when size is not such a power.

    Parameters
    ----------
    size
        Number of leaves (the domain's values).
    branching
        The tree's branching factor b >= 2.
    field
        The field named in the error.

    Returns
    -------
    int
        The depth h >= 1 (levels 1..h below the root).
    """
    h = 0
    m = 1
    while m < size:
        m *= branching
        h += 1
    if m != size or h < 1:
        below = branching ** max(h - 1, 1)
        raise ParameterError(
            f"has {size} values, not a power of the branching factor {branching}",
            field=field,
            hint=f"use {branching}^h values (e.g. {below} or {m}): pad the ordered domain to a power of {branching}",
        )
    return h


def level_nodes(values: np.ndarray, branching: int, depth: int, level: int) -> np.ndarray:
    """The node at ``level`` (1..depth) holding each leaf index: ``x // b^(depth - level)``."""
    return np.asarray(values, dtype=np.int64) // branching ** (depth - level)


def walsh_hadamard(a: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """The unnormalized Walsh-Hadamard transform along axis 0 (length a power of two):
    ``out[j] = sum_c (-1)^popcount(j & c) a[c]``, in ``m log m`` additions.

    The constant-geometry form: ``log2 m`` times ``y = [x_even + x_odd, x_even - x_odd]`` (Sylvester's
    matrix is that sparse factor to the power log2 m), on two buffers, every step over long strided runs
    (2.7x faster than butterflies over short blocks at m = 2^19). ``overwrite``: ``a`` (a float64 array
    of the caller's own, such as a temporary) is one of the buffers, its contents lost: no copy.
    """
    own = overwrite and isinstance(a, np.ndarray) and a.dtype == np.float64 and a.flags.c_contiguous
    src = a if own else np.array(a, dtype=float, copy=True)
    m = src.shape[0]
    dst = np.empty_like(src)
    half = m // 2
    for _ in range(m.bit_length() - 1):
        np.add(src[0::2], src[1::2], out=dst[:half])
        np.subtract(src[0::2], src[1::2], out=dst[half:])
        src, dst = dst, src
    return src


def hadamard_sign(j: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``(-1)^popcount(j & c)`` as int64, broadcast."""
    return 1 - 2 * (np.bitwise_count(np.bitwise_and(j, c)).astype(np.int64) & 1)


def real_operator(
    shape: tuple[int, int],
    matvec: Callable[[np.ndarray], np.ndarray],
    rmatvec: Callable[[np.ndarray], np.ndarray],
    matmat: Callable[[np.ndarray], np.ndarray],
) -> LinearOperator:
    """A real LinearOperator whose transpose calls ``rmatvec`` directly.

    scipy's transpose of an operator (``H.T``, what every EM pass multiplies by) conjugates its input
    and its output, two copies of a vector of reports and one of leaves per product for nothing on a
    real matrix: on hh over k-RR at 2^20 leaves, a tenth of a pass with its levels' operators.
    """
    from scipy.sparse.linalg import LinearOperator

    operator: Any = LinearOperator(shape, matvec=matvec, rmatvec=rmatvec, matmat=matmat, dtype=float)
    flipped = LinearOperator((shape[1], shape[0]), matvec=rmatvec, rmatvec=matvec, dtype=float)
    # what LinearOperator.T and .H call: the flipped operator, shadowing the methods on this instance
    operator._transpose = operator._adjoint = lambda: flipped
    return cast(LinearOperator, operator)


def transpose_times(op: Any, w: np.ndarray) -> np.ndarray:
    """``op.T @ w`` of a level's operator (a dense array or a LinearOperator) without scipy's conjugating
    transpose wrapper."""
    if isinstance(op, np.ndarray):
        return np.asarray(op.T @ w, dtype=float).ravel()
    return np.asarray(op.rmatvec(w), dtype=float).ravel()


def contiguous(rows: np.ndarray) -> np.ndarray | slice:
    """``rows`` (sorted indices) as a slice when they are a run (distinct reports come sorted, levels first:
    each level's reports are one run, read without a gather), else as they are."""
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


class LevelSampled(Mechanism):
    """Base of the level-sampling protocols: the domain is ``b^depth`` leaves; reports are ``(level, ...)``."""

    structured_min_size = 0  # the dense likelihood is never the cheaper one here
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP (each level's oracle has it all)")
    #: b and h, set by _validate
    b: int = 2
    depth: int = 1

    @property
    def privacy(self) -> Privacy:
        # the level is drawn independently of x; the level's oracle is eps-LDP
        return Privacy("ldp", self.eps)

    def _levels(self, reports: np.ndarray) -> np.ndarray:
        level = reports[:, 0]
        bad = (level < 1) | (level > self.depth)
        if bad.any():
            raise EstimationError(
                f"report {tuple(int(v) for v in reports[np.argmax(bad)])} names level {int(level[bad][0])},"
                f" not one of 1..{self.depth} of {self!r}",
                hint="check that the reports were produced by this mechanism",
            )
        return level

    def aggregate(self, theta: np.ndarray, level: int) -> np.ndarray:
        """The masses of the level's nodes from leaf masses (axis 0; more axes are carried along)."""
        theta = np.asarray(theta, dtype=float)
        nodes = self.b**level
        return theta.reshape(nodes, -1, *theta.shape[1:]).sum(axis=1)

    def spread(self, u: np.ndarray, level: int) -> np.ndarray:
        """The transpose of :meth:`aggregate`: each node's value repeated over its leaves (axis 0)."""
        return np.repeat(u, self.b ** (self.depth - level), axis=0)

    def tree(self, theta: np.ndarray) -> list[np.ndarray]:
        """The node masses of levels 0..depth (``[l]`` has ``b^l`` rows; the leaves last), bottom-up in
        O(|X|) in all: each level the sum of the children below it."""
        theta = np.asarray(theta, dtype=float)
        out = [theta]
        b = self.b
        for _ in range(self.depth):
            below = out[-1]
            if b > SLICED_BRANCHING:
                out.append(below.reshape(-1, b, *below.shape[1:]).sum(axis=1))
                continue
            node = below[0::b] + below[1::b]  # strided slices: 4x faster than a reduction over a short axis
            for i in range(2, b):
                node += below[i::b]
            out.append(node)
        return out[::-1]

    def untree(self, parts: Sequence[np.ndarray | None]) -> np.ndarray:
        """``sum_l spread(parts[l], l)`` over levels 0..depth (None: nothing at that level), top-down in O(|X|)."""
        acc = np.zeros(1)
        b = self.b
        for lv, part in enumerate(parts):
            if lv:  # each node's value copied to its b children by strided slices (3x faster than np.repeat)
                wider = np.empty(acc.size * b)
                for i in range(b):
                    wider[i::b] = acc
                acc = wider
            if part is not None:
                acc += part
        return acc


class HierarchicalHistogram(LevelSampled):
    """HH/HIO: a uniformly drawn tree level, the node of x there reported through a frequency oracle with eps"""

    name = "hh"
    branching = Param("int", 4, ge=2, doc="b, the tree's branching factor (the domain must have b^h values)")
    oracle = Param("str", "krr", choices=ORACLES, doc="the frequency oracle of every level (on its b^l nodes)")

    def _validate(self) -> None:
        self.b = int(self.branching)
        self.depth = tree_depth(self.domain.size, self.b)
        registry = get_registry()
        self._oracles = tuple(
            registry.create(
                "mechanism",
                self.oracle,
                make_domain({"kind": "integers", "low": 0, "high": self.b**lv - 1}),
                eps=self.eps,
            )
            for lv in range(1, self.depth + 1)
        )
        self.report_width = 1 + max(m.report_width for m in self._oracles)

    def level_oracle(self, level: int) -> Mechanism:
        """The frequency oracle of ``level`` (1..depth), on its ``b^level`` nodes."""
        return self._oracles[level - 1]

    def level_rows(self, reports: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``(level, rows, oracle reports)`` for each level with reports among these (checked)."""
        level = self._levels(reports)
        out = []
        for lv in range(1, self.depth + 1):
            rows = np.flatnonzero(level == lv)
            if rows.size:
                width = self.level_oracle(lv).report_width
                out.append((lv, rows, np.ascontiguousarray(reports[rows, 1 : 1 + width])))
        return out

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = values.shape[0]
        level = rng.integers(1, self.depth + 1, size=n)
        out = np.zeros((n, self.report_width), dtype=np.int64)
        out[:, 0] = level
        for lv in range(1, self.depth + 1):
            rows = np.flatnonzero(level == lv)
            if rows.size:
                oracle = self.level_oracle(lv)
                nodes = level_nodes(values[rows], self.b, self.depth, lv)
                out[rows, 1 : 1 + oracle.report_width] = oracle.sample(nodes, rng)
        return out

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        out = np.empty((reports.shape[0], self.domain.size))
        leaves = np.arange(self.domain.size)
        for lv, rows, sub in self.level_rows(reports):
            ll = self.level_oracle(lv).log_likelihood(sub)
            out[rows] = ll[:, level_nodes(leaves, self.b, self.depth, lv)] - math.log(self.depth)
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        shift = np.empty(reports.shape[0])
        blocks: list[tuple[int, np.ndarray, Any, Callable[[np.ndarray], np.ndarray] | None]] = []
        for lv, rows, sub in self.level_rows(reports):
            oracle = self.level_oracle(lv)
            parts = oracle.structured_likelihood(sub)
            if parts is None:  # a dense oracle likelihood, rescaled by its largest entry per report
                ll = oracle.log_likelihood(sub)
                top = ll.max(axis=1)
                parts = (top, np.exp(ll - top[:, None]))
            s, op = parts
            s = np.asarray(s, dtype=float)
            shift[rows] = s - math.log(self.depth)
            blocks.append((lv, rows, op, _row_reader(op, oracle, sub, s)))
        return shift, self._operator(reports.shape[0], blocks)

    def _operator(
        self, count: int, blocks: Sequence[tuple[int, np.ndarray, Any, Callable[[np.ndarray], np.ndarray] | None]]
    ) -> LinearOperator:
        size = self.domain.size

        def matvec(theta: np.ndarray) -> np.ndarray:
            masses = self.tree(np.ravel(theta))
            out = np.empty(count)
            for lv, rows, op, _ in blocks:
                out[rows] = op @ masses[lv]
            return out

        def matmat(m: np.ndarray) -> np.ndarray:
            masses = self.tree(m)
            out = np.empty((count, m.shape[1]))
            for lv, rows, op, _ in blocks:
                out[rows] = op @ masses[lv]
            return out

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.ravel(w)
            parts: list[np.ndarray | None] = [None] * (self.depth + 1)
            for lv, rows, op, _ in blocks:
                parts[lv] = transpose_times(op, w[rows])
            return self.untree(parts)

        operator: Any = real_operator((count, size), matvec, rmatvec, matmat)
        readers = [reader for _, _, _, reader in blocks]
        if all(r is not None for r in readers):
            where = np.empty(count, dtype=np.int64)  # block of each report, and its row in the block
            position = np.empty(count, dtype=np.int64)
            for i, (_, rows, _, _) in enumerate(blocks):
                where[rows] = i
                position[rows] = np.arange(rows.size)

            def rows_of(index: np.ndarray) -> np.ndarray:
                index = np.asarray(index, dtype=np.int64)
                out = np.empty((index.size, size))
                for i, (lv, _, _, _) in enumerate(blocks):
                    mine = np.flatnonzero(where[index] == i)
                    if mine.size:
                        reader = readers[i]
                        assert reader is not None
                        got = reader(position[index[mine]])
                        out[mine] = np.repeat(got, self.b ** (self.depth - lv), axis=1)
                return out

            operator = with_exact_rows(operator, rows_of)
        floors = [getattr(op, "min_entry", None) for _, _, op, _ in blocks]
        if floors and all(f is not None for f in floors):
            operator = with_min_entry(operator, float(min(f for f in floors if f is not None)))
        return operator


def _row_reader(
    op: Any, oracle: Mechanism, reports: np.ndarray, shift: np.ndarray
) -> Callable[[np.ndarray], np.ndarray] | None:
    """Exact rows of a level's operator over its nodes: a dense array's, its declared ``rows``, or for an
    oracle whose report names a node (k-RR) ``exp(log P(z | node) - shift)`` from its two log-probabilities."""
    if isinstance(op, np.ndarray):
        return lambda index: op[index]
    rows = getattr(op, "rows", None)
    if callable(rows):
        return rows
    named = oracle.named_value_likelihood()
    if named is None:
        return None
    hit, miss = named
    nodes = np.arange(oracle.domain.size)

    def read(index: np.ndarray) -> np.ndarray:
        z = reports[index, 0]
        return np.exp(np.where(nodes[None, :] == z[:, None], hit, miss) - shift[index, None])

    return read


class HaarHRR(LevelSampled):
    """HaarHRR: a uniformly drawn Haar level, the sign of x's coefficient there by Hadamard randomized response"""

    name = "haar-hrr"
    report_width = 3
    #: the Walsh-Hadamard transform of the level operators (what the ``haar`` estimator inverts with)
    walsh = staticmethod(walsh_hadamard)

    def _validate(self) -> None:
        self.depth = tree_depth(self.domain.size, 2)

    @property
    def keep(self) -> float:
        """p = e^eps / (e^eps + 1), the probability that the sent sign is the true one."""
        return 1.0 / (1.0 + math.exp(-self.eps))

    def coefficient(self, values: np.ndarray, level: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(c, s)``: the coefficient at ``level`` over each value and the value's sign in it (+1 left half)."""
        values = np.asarray(values, dtype=np.int64)
        shift = self.depth - np.asarray(level, dtype=np.int64)
        return values >> (shift + 1), 1 - 2 * ((values >> shift) & 1)

    def _checked(self, reports: np.ndarray) -> np.ndarray:
        level = self._levels(reports)
        j, y = reports[:, 1], reports[:, 2]
        bad = (j < 0) | (j >= np.left_shift(1, level - 1)) | (y < 0) | (y > 1)
        if bad.any():
            raise EstimationError(
                f"report {tuple(int(v) for v in reports[np.argmax(bad)])} is not an output of {self!r}"
                " (j in 0..2^(level-1) - 1, y in 0..1)",
                hint="check that the reports were produced by this mechanism",
            )
        return level

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = values.shape[0]
        level = np.asarray(rng.integers(1, self.depth + 1, size=n), dtype=np.int64)
        j = np.asarray(rng.integers(0, np.left_shift(1, level - 1)), dtype=np.int64)
        c, s = self.coefficient(values, level)
        t = s * hadamard_sign(j, c)
        sent = np.where(rng.random(n) < self.keep, t, -t)
        return np.column_stack([level, j, (sent + 1) // 2]).astype(np.int64)

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        level = self._checked(reports)
        x = np.arange(self.domain.size)
        c, s = self.coefficient(x[None, :], np.asarray(level)[:, None])
        t = s * hadamard_sign(np.asarray(reports[:, 1:2]), c)
        match = t == 2 * reports[:, 2:3] - 1
        base = -math.log(self.depth) - (level - 1) * math.log(2.0)
        log_p = -math.log1p(math.exp(-self.eps))
        return base[:, None] + np.where(match, log_p, log_p - self.eps)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        level = self._checked(reports)
        count, size = reports.shape[0], self.domain.size
        r = math.exp(-self.eps)
        half = (1.0 - r) / 2.0
        shift = -math.log(self.depth) - (level - 1) * math.log(2.0) - math.log1p(r)
        sigma = 2.0 * reports[:, 2] - 1.0
        blocks = [(lv, contiguous(np.flatnonzero(level == lv))) for lv in range(1, self.depth + 1)]
        # per level: its reports' rows, Hadamard rows j and signs sigma_y (read by every product)
        levels = [(lv, rows, reports[rows, 1], sigma[rows]) for lv, rows in blocks]
        levels = [part for part in levels if part[2].size]

        def matmat(m: np.ndarray) -> np.ndarray:
            masses = self.tree(m)
            total = masses[0][0]
            out = np.empty((count, *m.shape[1:]))
            for lv, rows, j, sign in levels:  # v_c = left child's mass - right child's, u = W v
                u = walsh_hadamard(masses[lv][0::2] - masses[lv][1::2], overwrite=True)[j]
                u *= half * (sign if m.ndim == 1 else sign[:, None])
                u += (r + half) * total
                out[rows] = u
            return out

        def matvec(theta: np.ndarray) -> np.ndarray:
            return matmat(np.ravel(theta))

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.ravel(w)
            parts: list[np.ndarray | None] = [None] * (self.depth + 1)
            parts[0] = np.array([(r + half) * w.sum()])
            for lv, rows, j, sign in levels:
                big_w = np.bincount(j, weights=sign * w[rows], minlength=1 << (lv - 1))
                v = walsh_hadamard(big_w, overwrite=True)
                v *= half
                signed = np.empty(2 * v.size)  # +V on the left child, -V on the right
                signed[0::2] = v
                np.negative(v, out=signed[1::2])
                parts[lv] = signed
            return self.untree(parts)

        def rows_of(index: np.ndarray) -> np.ndarray:
            index = np.asarray(index, dtype=np.int64)
            return np.exp(self._log_likelihood(reports[index]) - shift[index, None])

        operator = real_operator((count, size), matvec, rmatvec, matmat)
        return shift, with_exact_rows(with_min_entry(operator, r), rows_of)


@hookimpl
def register_mechanisms(register: Callable[[type], None]) -> None:
    register(HierarchicalHistogram)
    register(HaarHRR)
