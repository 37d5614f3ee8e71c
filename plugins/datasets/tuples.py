"""Datasets of tuples on a product domain: columns of a CSV file, a Gaussian copula, UCI Adult's persons.

A user's value is one cell of the product (one value per attribute). The real-data datasets are
finite populations counted once per cell when read (:class:`Counted`), so a draw costs the number
of occupied cells, not the number of users; the copula is a known joint law, computed exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property, reduce
from importlib.resources import as_file, files
from pathlib import Path
from typing import ClassVar

import numpy as np

from ldpsim import Categorical, DataError, Domain, Integers, Param, ParameterError, Product, hookimpl, require_memory

from .counted import Counted
from .reading import Table, numbers
from .synthetic import FromPmf

#: the largest temporary (bytes) the copula's quadrature may build: it is chunked over nodes to stay below
COPULA_TEMP_BYTES = 32 * 2**20
SHIPPED = "adult_tuples_counts.csv"
#: the columns of :data:`SHIPPED`
ADULT_COLUMNS = ("age", "sex", "race", "education", "workclass", "marital_status")


def _require_parts(domain: Product, label: str) -> None:
    """ParameterError unless every attribute of ``domain`` is integers or categorical (one column each)."""
    for name, part in zip(domain.names, domain.parts):
        if not isinstance(part, (Integers, Categorical)):
            raise ParameterError(
                f"{label} reads one column per attribute; attribute '{name}' is a {part.name}",
                field="domain",
                hint=f"make '{name}' an integers or categorical attribute",
            )


def _listed(values: Sequence[object], most: int = 30) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (f", ... ({len(values)} in all)" if len(values) > most else "")


class _CountedTuples(Counted):
    """A finite population of tuples, counted per cell of the product domain."""

    domain_kinds = ("product",)

    @property
    def _product(self) -> Product:
        """The domain, typed as the product ``domain_kinds`` makes it."""
        return Product.of(self.domain)

    @cached_property
    def _cells(self) -> np.ndarray:
        """The occupied cells: a product's cells are mostly empty."""
        return np.flatnonzero(self.counts)

    def _sample_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # Counted's law, drawn over the occupied cells only: 50x faster than over all of a 745,920-cell domain.
        if not self.replace and n > self.size:
            return super()._sample_counts(n, rng)  # its error
        cells = self._cells
        out = np.zeros(self.domain.size, dtype=np.int64)
        if self.replace:
            out[cells] = rng.multinomial(n, self.counts[cells] / self.size)
        else:
            out[cells] = rng.multivariate_hypergeometric(self.counts[cells], n)
        return out


@dataclass(frozen=True)
class _Read:
    counts: np.ndarray  # rows per cell
    dropped: int  # rows left out for a skip label


class CsvTuples(_CountedTuples):
    """Columns of a CSV file (with a header row) as users' tuples on a product domain, one user per row.

    Column j holds attribute j's values: numbers for an integers attribute, labels (stripped of
    surrounding whitespace) for a categorical one. A row holding one of the ``skip`` labels in any
    used column (a missing value, such as UCI's "?") is dropped, and counted in the description:
    dropping changes the population, so the results must say so.
    """

    name = "csv-tuples"
    path = Param("path", doc="CSV file; a relative path is relative to the scenario file")
    columns = Param("strings", None, doc="header of each attribute's column, in order; default: the attribute names")
    skip = Param(
        "strings", (), doc='labels of a missing value, e.g. ["?"]: rows holding one in a used column are dropped'
    )

    def _validate(self) -> None:
        _require_parts(self._product, "csv-tuples")
        if len(self._columns) != len(self._product.names):
            raise ParameterError(
                f"names {len(self._columns)} columns for {len(self._product.names)} attributes",
                field="columns",
                hint=f"give one column per attribute, in order: {', '.join(self._product.names)}",
            )
        _ = self.counts  # read and check the file now, not in the middle of a run

    @property
    def _columns(self) -> tuple[str, ...]:
        return tuple(self.columns) if self.columns is not None else tuple(self._product.names)

    @property
    def description(self) -> str:
        text = f"{self.size:,} tuples ({', '.join(self._columns)}) of '{self.path}'"
        if self.skip:
            labels = ", ".join(f"'{s}'" for s in self.skip)
            text += f"; {self._read.dropped:,} row(s) holding {labels} dropped"
        return text

    def _count(self) -> np.ndarray:
        return self._read.counts

    @cached_property
    def _read(self) -> _Read:
        table = Table(self.path)
        header = table.header_names()
        for column, attribute in zip(self._columns, self._product.names):
            if column not in header:
                raise table.error(
                    f"has no column '{column}' for attribute '{attribute}' (columns: {', '.join(header)})",
                    "set columns to the file's column of each attribute, in the attributes' order",
                    field="columns",
                )
        positions = [header.index(c) for c in self._columns]
        counts = np.zeros(self.domain.size, dtype=np.int64)
        skip = np.array(self.skip, dtype=str)
        rows = dropped = 0
        for start, texts in table.chunks(positions, text=True):
            keep = np.ones(texts[0].shape, dtype=bool)
            if skip.size:
                for text in texts:
                    keep &= ~np.isin(text, skip)
            parts = [self._attribute(j, text, keep, table, start) for j, text in enumerate(texts)]
            counts += np.bincount(self._product.join(parts), minlength=self.domain.size)
            rows += keep.size
            dropped += int(keep.size - keep.sum())
        if rows == 0:
            raise table.error("has no data rows", "give a CSV file with one user per row")
        if rows == dropped:
            raise table.error(
                f"has no rows left: all {rows:,} hold one of the skip labels ({', '.join(self.skip)})",
                "check skip, or give a file with complete rows",
                field="skip",
            )
        return _Read(counts, dropped)

    def _attribute(self, j: int, text: np.ndarray, keep: np.ndarray, table: Table, start: int) -> np.ndarray:
        """Attribute ``j``'s indices of the kept rows of one chunk; DataError naming line, value and fix."""
        part, name, column = self._product.parts[j], self._product.names[j], self._columns[j]
        where = f"column '{column}' (attribute '{name}')"
        if isinstance(part, Integers):
            # skipped rows read as the first value, so that positions (and the lines in errors) stay the file's
            filled = text if keep.all() else np.where(keep, text, str(part.low))
            values = numbers(filled, table, start, column, integer=True)
            offset = values - part.low
            bad = keep & ((offset < 0) | (offset > part.high - part.low) | (offset % part.step != 0))
            if bad.any():
                i = int(np.argmax(bad))
                raise table.error(
                    f"line {table.line_of(start + i)}: {values[i]} in {where} is not in the attribute's"
                    f" values {part.low}..{part.high} (step {part.step})",
                    f"widen attribute '{name}' (low, high), or list '{text[i]}' in skip to drop its rows",
                    field="domain",
                )
            return (offset // part.step)[keep]
        assert isinstance(part, Categorical)
        kept = text[keep]
        empty = kept == ""
        if empty.any():
            i = int(np.flatnonzero(keep)[np.argmax(empty)])
            raise table.error(f"line {table.line_of(start + i)} has no value in {where}", "fill or remove that row")
        labels, inverse = np.unique(kept, return_inverse=True)
        lookup = {v: i for i, v in enumerate(part.values)}
        missing = [str(v) for v in labels if v not in lookup]
        if missing:
            i = int(np.flatnonzero(keep & (text == missing[0]))[0])
            raise table.error(
                f"line {table.line_of(start + i)}: '{missing[0]}' in {where} is not one of the attribute's values"
                f" ({len(missing)} such label(s): {_listed(missing, 10)})",
                f"add them to the values of attribute '{name}', or list them in skip to drop their rows",
                field="domain",
            )
        return np.array([lookup[v] for v in labels], dtype=np.int64)[inverse]


class Copula(FromPmf):
    """Tuples with controllable dependence: a Gaussian copula over each attribute's ordered values.

    A user draws a latent Gaussian vector Z (standard margins, correlation ``rho`` between every
    pair of attributes) and takes, in attribute j, the value whose band of Z_j the marginal law puts
    it in: value i when c_{i-1} < Phi(Z_j) <= c_i, with c the marginal's cumulative probabilities
    over the values in their order (row-major cells for a grid attribute). So every attribute keeps
    exactly its marginal law, and ``rho`` alone sets the dependence: 0 gives independent attributes
    (the product of the marginals), rho > 0 makes high values go together (rank correlation grows
    with rho, towards a comonotone tuple as rho -> 1), rho < 0 (two attributes only) opposes them.

    The joint law is exact, not sampled: each cell is the probability of its box of Z, computed by
    conditioning on a common factor W, ``Z_j = sqrt(|rho|) W + sqrt(1 - |rho|) E_j`` (the second
    loading negated when rho < 0), which makes the attributes independent given W, and integrating
    over W with the trapezoid rule on a grid fine enough for the sharpest conditional band (spectrally
    accurate for this smooth, Gaussian-decaying integrand: errors near 1e-13 up to rho = 0.999, where
    200 Gauss-Hermite nodes are off by 1e-2). Equicorrelation needs rho >= -1/(d-1); a negative rho
    has no common factor beyond d = 2, so it is refused there.
    """

    name = "copula"
    domain_kinds = ("product",)
    _DERIVED: ClassVar[tuple[str, ...]] = (*FromPmf._DERIVED, "_joint")
    rho = Param("float", gt=-1, lt=1, doc="correlation of the latent Gaussian between every pair of attributes")
    marginals = Param(
        "str", "uniform", choices=("uniform", "zipf", "binomial"), doc="each attribute's law on its values, in order"
    )
    s = Param("float", None, ge=0, doc="exponent of the zipf marginals (value i has weight i^-s); default 1")
    p = Param(
        "float", None, ge=0, le=1, doc="success probability of the binomial marginals, Binomial(k-1, p); default 0.5"
    )

    def _validate(self) -> None:
        for key, law in (("s", "zipf"), ("p", "binomial")):
            if getattr(self, key) is not None and self.marginals != law:
                raise ParameterError(
                    f"only applies to {law} marginals, not {self.marginals}",
                    field=key,
                    hint=f'remove it, or set marginals = "{law}"',
                )
        d = len(Product.of(self.domain).parts)
        if self.rho < 0 and d > 2:
            raise ParameterError(
                f"a negative rho ({self.rho:g}) is supported for two attributes only; the domain has {d}",
                field="rho",
                hint=f"use rho >= 0 (equicorrelation of {d} attributes needs rho >= {-1 / (d - 1):.3g}, and"
                " its exact computation here a common factor, rho >= 0)",
            )
        require_memory(
            8.0 * self.domain.size * 3 + COPULA_TEMP_BYTES,
            f"the copula's joint law over {self.domain.size:,} cells",
            hint="use fewer or coarser attributes",
        )

    def marginal_law(self, k: int) -> np.ndarray:
        """The law of an attribute with ``k`` values, in their order."""
        i = np.arange(k, dtype=float)
        if self.marginals == "zipf":
            w = (i + 1) ** -(1.0 if self.s is None else self.s)
        elif self.marginals == "binomial":
            from scipy.stats import binom  # imported where used: `ldpsim list` stays fast

            w = binom.pmf(i, k - 1, 0.5 if self.p is None else self.p)
        else:
            w = np.ones(k)
        return w / w.sum()

    def pmf(self) -> np.ndarray:
        """The exact joint law over the product's cells (row-major)."""
        return self._joint.copy()

    @cached_property
    def _joint(self) -> np.ndarray:
        laws = [self.marginal_law(k) for k in Product.of(self.domain).sizes]
        if self.rho == 0:
            joint = reduce(np.multiply.outer, laws).ravel()  # independent: exactly the product (each sums to 1)
        else:
            joint = np.clip(_copula(laws, self.rho), 0.0, None)  # quadrature leaves ~1e-17 negatives
            joint /= joint.sum()
        joint.setflags(write=False)
        return joint


def _copula(laws: Sequence[np.ndarray], rho: float) -> np.ndarray:
    """The Gaussian copula's probability of every cell (row-major), by the common factor (see :class:`Copula`)."""
    from scipy.special import ndtr, ndtri  # imported where used: `ldpsim list` stays fast

    r = abs(rho)
    nodes, weights = _factor_nodes(r, len(laws))
    loadings = [math.sqrt(r)] * len(laws)
    if rho < 0:  # two attributes: opposite loadings give the correlation -r
        loadings[1] = -loadings[1]
    bands = []
    for law, loading in zip(laws, loadings):
        cumulative = np.clip(np.concatenate([[0.0], np.cumsum(law)]), 0.0, 1.0)
        cumulative[-1] = 1.0
        thresholds = ndtri(cumulative)  # -inf, ..., +inf
        given = ndtr((thresholds[None, :] - loading * nodes[:, None]) / math.sqrt(1 - r))
        bands.append(np.diff(given, axis=1))  # P(Z_j in band i | W = node): (nodes, k_j)
    return _sum_of_outer_products(weights, bands)


def _factor_nodes(r: float, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights (summing to 1) of the trapezoid rule for E[f(W)], W ~ N(0, 1), on [-9, 9].

    The integrand's narrowest feature scales as ``1 / sqrt(C)``, ``C = 1 + d r / (1 - r)`` (its
    growth off the real axis); a spacing of ``0.9 / sqrt(C)`` keeps the trapezoid rule's error,
    ``exp(-2 pi^2 / (h^2 C))``, near 1e-13. Beyond 9 the Gaussian weighs under 1e-18.
    """
    h = min(0.5, 0.9 / math.sqrt(1 + d * r / (1 - r)))
    half = math.ceil(9.0 / h)
    nodes = h * np.arange(-half, half + 1, dtype=float)
    weights = np.exp(-0.5 * nodes**2)
    return nodes, weights / weights.sum()


def _sum_of_outer_products(weights: np.ndarray, factors: Sequence[np.ndarray]) -> np.ndarray:
    """``sum_k weights[k] * factors[0][k] (x) ... (x) factors[-1][k]``, flattened row-major.

    The attributes are split in two groups of balanced sizes H and T; each group's outer products
    are built per node, ``(nodes, H)`` and ``(nodes, T)``, and one matrix product sums them over the
    nodes into the ``H x T`` result. Nodes go in chunks so that neither holds more than
    :data:`COPULA_TEMP_BYTES`: temporaries follow sqrt(cells), not cells x nodes (10^7 cells: 0.2 s
    where contracting one attribute at a time took 9 s).
    """
    sizes = [f.shape[1] for f in factors]
    split = min(range(1, len(sizes)), key=lambda m: max(math.prod(sizes[:m]), math.prod(sizes[m:])))
    head, tail = math.prod(sizes[:split]), math.prod(sizes[split:])
    chunk = max(1, COPULA_TEMP_BYTES // (8 * (head + tail)))
    out = np.zeros((head, tail))
    for start in range(0, weights.size, chunk):
        rows = slice(start, start + chunk)
        left = _row_outer(weights[rows, None], [f[rows] for f in factors[:split]])
        right = _row_outer(np.ones((left.shape[0], 1)), [f[rows] for f in factors[split:]])
        out += left.T @ right
    return out.ravel()


def _row_outer(first: np.ndarray, factors: Sequence[np.ndarray]) -> np.ndarray:
    """Row by row, the flattened outer product of ``first`` and the ``factors`` (a Khatri-Rao product)."""
    t = first
    for f in factors:
        t = (t[:, :, None] * f[:, None, :]).reshape(t.shape[0], -1)
    return t


class AdultTuples(_CountedTuples):
    """Persons of UCI Adult as tuples (Becker & Kohavi 1996, CC BY 4.0), from counts shipped with ldpsim.

    The shipped file (``adult_tuples_counts.csv``, made by ``scripts/make_adult_tuples.py`` from the
    shared ``adult.csv``) counts the 48,842 persons of adult.data + adult.test per combination of age,
    sex, race, education, workclass and marital_status (14,229 combinations). UCI's "?" (a missing
    workclass, 2,799 persons) is kept as a label, so the population stays the whole file: give it
    among a categorical attribute's values. ``columns`` chooses which of these the attributes are;
    the counts are summed over the others. An integers attribute reads ages; a categorical one reads
    labels (ages too, as text).
    """

    name = "adult-tuples"
    columns = Param(
        "strings",
        None,
        doc=f"the shipped column of each attribute, in order (of {', '.join(ADULT_COLUMNS)}); default: the attribute names",
    )

    def _validate(self) -> None:
        _require_parts(self._product, "adult-tuples")
        columns = self._columns
        if len(columns) != len(self._product.names):
            raise ParameterError(
                f"names {len(columns)} columns for {len(self._product.names)} attributes",
                field="columns",
                hint=f"give one column per attribute, in order: {', '.join(self._product.names)}",
            )
        for column, attribute in zip(columns, self._product.names):
            if column not in ADULT_COLUMNS:
                raise ParameterError(
                    f"'{column}' (attribute '{attribute}') is not a column of the shipped Adult counts",
                    field="columns",
                    hint=f"use {', '.join(ADULT_COLUMNS)}; or set columns to map each attribute to one",
                )
        _ = self.counts  # map the data onto the domain now, not in the middle of a run

    @property
    def _columns(self) -> tuple[str, ...]:
        return tuple(self.columns) if self.columns is not None else tuple(self._product.names)

    @property
    def description(self) -> str:
        return (
            f"{', '.join(self._columns)} of {self.size:,} persons of UCI Adult (shipped counts of adult.data +"
            " adult.test; Becker & Kohavi 1996, CC BY 4.0)"
        )

    def _count(self) -> np.ndarray:
        data = _adult_counts()
        product = self._product
        parts = [
            _adult_indices(part, name, column, data[column])
            for part, name, column in zip(product.parts, product.names, self._columns)
        ]
        return np.bincount(product.join(parts), weights=data["count"], minlength=self.domain.size).astype(np.int64)


def _adult_indices(part: Domain, name: str, column: str, labels: np.ndarray) -> np.ndarray:
    """Attribute indices of the shipped rows' labels; DataError listing the data's values if one is missing."""
    values, inverse = np.unique(labels, return_inverse=True)
    if isinstance(part, Integers):
        if column != "age":
            raise DataError(
                f"attribute '{name}' is integers but column '{column}' holds labels",
                field="domain",
                hint=f"make '{name}' categorical, with values {_listed(list(values))}",
            )
        ages = values.astype(np.int64)
        offset = ages - part.low
        inside = (offset >= 0) & (offset <= part.high - part.low) & (offset % part.step == 0)
        if not inside.all():
            raise DataError(
                f"attribute '{name}' ({part.low}..{part.high}, step {part.step}) lacks {int((~inside).sum())} of the"
                f" ages in the data, e.g. {ages[~inside][0]}",
                field="domain",
                hint=f"the data has the ages {ages.min()}..{ages.max()}: use low = {ages.min()}, high = {ages.max()}",
            )
        return (offset // part.step)[inverse]
    assert isinstance(part, Categorical)
    lookup = {v: i for i, v in enumerate(part.values)}
    missing = [str(v) for v in values if v not in lookup]
    if missing:
        ordered = sorted(values.tolist(), key=int) if column == "age" else values.tolist()
        raise DataError(
            f"attribute '{name}' lacks {len(missing)} of the values of column '{column}' in the data,"
            f" e.g. '{missing[0]}'",
            field="domain",
            hint=f"give '{name}' the values the data has: {_listed(ordered, 80)}",
        )
    return np.array([lookup[v] for v in values], dtype=np.int64)[inverse]


@cache
def _adult_counts() -> dict[str, np.ndarray]:
    """The shipped rows, once per process: labels per column (ages as text) and ``count``."""
    with as_file(files(__package__) / "data" / SHIPPED) as path:
        table = Table(Path(path), comment="#")
        names = [*ADULT_COLUMNS, "count"]
        positions = table.positions(names, fields=["path"] * len(names))
        parts: list[list[np.ndarray]] = [[] for _ in names]
        for start, texts in table.chunks(positions, text=True):
            for part, text in zip(parts, texts[:-1]):
                part.append(text)
            parts[-1].append(numbers(texts[-1], table, start, "count", integer=True))
    data = {name: np.concatenate(p) for name, p in zip(names, parts)}
    for array in data.values():
        array.setflags(write=False)
    return data


@hookimpl
def register_datasets(register):
    register(CsvTuples)
    register(Copula)
    register(AdultTuples)
