"""Domains: the alphabet X of the users' true values, with its geometry.

Internally a value is its index ``0..size-1`` in the domain's order; the
domain maps indices to labelled coordinates (for results) and supplies the
distances that metrics and metric-based mechanisms need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar, Self

import numpy as np

from ..base.errors import DataError, ParameterError, ScenarioError, a_or_an, did_you_mean
from .params import Configurable, Param

#: the most values a domain may have: every estimate holds one probability per value, and a likelihood
#: pass touches each several times, so beyond 10^8 values a run would not fit a workstation. Checked from
#: the parameters, before anything is allocated.
MAX_DOMAIN_SIZE = 10**8

#: integer values must fit numpy's int64
_INT64 = (-(2**63), 2**63 - 1)


def _require_size(size: int, field: str, hint: str) -> None:
    if size > MAX_DOMAIN_SIZE:
        raise ParameterError(
            f"the domain would have {size:,} values, more than the {MAX_DOMAIN_SIZE:,} ldpsim handles",
            field=field,
            hint=hint,
        )


class Domain(Configurable):
    """An ordered finite set of values with a distance."""

    kind: ClassVar[str] = "domain"
    #: names of the result dimensions that index this domain (a product domain sets its own, per instance)
    dims: tuple[str, ...] = ("value",)
    _DERIVED: ClassVar[tuple[str, ...]] = (*Configurable._DERIVED, "_size_cache")

    @classmethod
    def of(cls, domain: Domain) -> Self:
        """``domain`` typed as this kind of domain, for code that works on one kind only.

        A plugin's ``domain_kinds`` refuses other kinds when it is built, but its ``domain`` is still typed
        :class:`Domain`; ``Grid.of(self.domain).rows`` gives the type checker the grid. The domain itself is
        returned, unchanged.

        Parameters
        ----------
        domain : Domain
            The domain to narrow.

        Returns
        -------
        Self
            ``domain``, typed as ``cls``.

        Raises
        ------
        ParameterError
            If ``domain`` is another kind: on field ``domain``, as a plugin's ``domain_kinds`` refuses it.
        """
        if not isinstance(domain, cls):
            raise ParameterError(
                f"is {a_or_an(domain.name)} domain where {a_or_an(cls.name)} domain is needed",
                field="domain",
                hint=f"use a domain of kind {cls.name}",
            )
        return domain

    @property
    def size(self) -> int:
        """The number of values, kept once found: read twenty times per run of a sweep (estimators, metrics, the
        simulation), it was a tenth of a sub-millisecond run's bookkeeping through ``shape``. Setting any
        attribute forgets it (a derived cache, see ``Configurable._DERIVED``)."""
        size = self.__dict__.get("_size_cache")
        if size is None:
            # math.prod, not np.prod: numpy's reduction set-up dominated small sweeps
            size = self.__dict__["_size_cache"] = int(math.prod(self.shape))
        return size

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the result dimensions :attr:`dims`."""
        raise NotImplementedError

    def labels(self) -> list[str]:
        """A printable label per value, in index order."""
        raise NotImplementedError

    @cached_property
    def distances(self) -> np.ndarray:
        """The (size, size) matrix of distances between values."""
        raise NotImplementedError

    def index(self, raw: Sequence[Any] | np.ndarray, *, source: str = "data") -> np.ndarray:
        """Indices of raw values (as read from a file); DataError if one is not in the domain."""
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """A plain mapping that :func:`make_domain` turns back into this domain."""
        params = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.get_params().items()}
        if params.get("unit") == "":  # keep specs (and results files) of unit-less domains as they were
            del params["unit"]
        return {"kind": self.name, **params}

    def reshape(self, flat: np.ndarray) -> np.ndarray:
        """Reshape trailing axis ``size`` into the domain's :attr:`dims`."""
        return flat.reshape(flat.shape[:-1] + self.shape)

    def _key(self) -> tuple:
        return ("domain", *super()._key())


class Integers(Domain):
    """Integers low, low+step, ..., high; distance ``|x - y|``."""

    name = "integers"
    low = Param("int", doc="smallest value")
    high = Param("int", doc="largest value")
    step = Param("int", 1, gt=0, doc="spacing between consecutive values")
    unit = Param("str", "", doc='unit of the values and of distances between them, e.g. "years"; empty: unnamed')

    def _validate(self) -> None:
        if self.high <= self.low:
            raise ParameterError(
                f"high ({self.high}) must exceed low ({self.low})",
                field="high",
                hint="give a range of at least two values",
            )
        if (self.high - self.low) % self.step:
            raise ParameterError(
                f"high - low = {self.high - self.low} is not a multiple of step {self.step}",
                field="high",
                hint=f"use high = {self.low + (self.high - self.low) // self.step * self.step}",
            )
        for name in ("low", "high"):
            if not _INT64[0] <= getattr(self, name) <= _INT64[1]:
                raise ParameterError(
                    f"{getattr(self, name)} does not fit a 64-bit integer", field=name, hint="use a smaller value"
                )
        _require_size((self.high - self.low) // self.step + 1, "high", "use a coarser step or a narrower range")

    @cached_property
    def values(self) -> np.ndarray:
        return np.arange(self.low, self.high + 1, self.step, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.values),)

    def coords(self) -> dict[str, np.ndarray]:
        return {"value": self.values}

    def labels(self) -> list[str]:
        return [str(v) for v in self.values]

    @cached_property
    def distances(self) -> np.ndarray:
        v = self.values.astype(float)
        return np.abs(v[:, None] - v[None, :])

    def index(self, raw: Sequence[Any] | np.ndarray, *, source: str = "data") -> np.ndarray:
        arr = np.asarray(raw)
        if arr.dtype.kind not in "iu":
            raise DataError(f"{source} holds non-integer values", hint="an integers domain needs integer data")
        offset = arr.astype(np.int64) - self.low
        bad = (offset < 0) | (offset > self.high - self.low) | (offset % self.step != 0)
        if bad.any():
            first = arr[bad][0]
            raise DataError(
                f"{source} has {int(bad.sum())} value(s) outside the domain {self.low}..{self.high}"
                f" (step {self.step}), e.g. {first}",
                hint="widen the domain or filter the data",
            )
        return offset // self.step


class Grid(Domain):
    """A rows x cols grid of square cells of side ``cell``; Euclidean distance between centres."""

    name = "grid"
    dims = ("row", "col")
    rows = Param("int", gt=0, doc="number of rows")
    cols = Param("int", gt=0, doc="number of columns")
    cell = Param("float", 1.0, gt=0, doc="side length of a cell, in `unit`s")
    unit = Param("str", "", doc='unit of `cell` and of all distances, e.g. "km"; empty: unnamed')

    def _validate(self) -> None:
        if self.rows * self.cols < 2:
            raise ParameterError("a grid needs at least two cells", field="rows", hint="raise rows or cols")
        _require_size(self.rows * self.cols, "rows", "use larger cells (fewer rows and cols)")

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, self.cols)

    def coords(self) -> dict[str, np.ndarray]:
        return {"row": np.arange(self.rows), "col": np.arange(self.cols)}

    @cached_property
    def centers(self) -> np.ndarray:
        """(size, 2) cell centres as (y, x), row-major: index = row * cols + col."""
        r, c = np.divmod(np.arange(self.size), self.cols)
        return np.column_stack([(r + 0.5) * self.cell, (c + 0.5) * self.cell])

    def labels(self) -> list[str]:
        return [f"({r},{c})" for r in range(self.rows) for c in range(self.cols)]

    @cached_property
    def distances(self) -> np.ndarray:
        diff = self.centers[:, None, :] - self.centers[None, :, :]
        return np.sqrt((diff**2).sum(axis=-1))

    def index(self, raw: Sequence[Any] | np.ndarray, *, source: str = "data") -> np.ndarray:
        arr = np.asarray(raw)
        if arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iu":
            raise DataError(f"{source} must give integer (row, col) pairs", hint="read two integer columns")
        bad = (arr[:, 0] < 0) | (arr[:, 0] >= self.rows) | (arr[:, 1] < 0) | (arr[:, 1] >= self.cols)
        if bad.any():
            raise DataError(
                f"{source} has {int(bad.sum())} cell(s) outside the {self.rows}x{self.cols} grid",
                hint="enlarge the grid or filter the data",
            )
        return arr[:, 0].astype(np.int64) * self.cols + arr[:, 1]


class Categorical(Domain):
    """Unordered labels; distance 1 between different labels."""

    name = "categorical"
    values = Param("strings", doc="the labels, in order")

    def _validate(self) -> None:
        if len(self.values) < 2:
            raise ParameterError("a domain needs at least two labels", field="values", hint="add labels")
        seen: set[str] = set()
        for v in self.values:
            if v in seen:
                raise ParameterError(f"label '{v}' appears twice", field="values", hint="make labels unique")
            seen.add(v)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.values),)

    def coords(self) -> dict[str, np.ndarray]:
        return {"value": np.array(self.values, dtype=object)}

    def labels(self) -> list[str]:
        return list(self.values)

    @cached_property
    def distances(self) -> np.ndarray:
        return 1.0 - np.eye(self.size)

    def index(self, raw: Sequence[Any] | np.ndarray, *, source: str = "data") -> np.ndarray:
        lookup = {v: i for i, v in enumerate(self.values)}
        arr = np.asarray(raw, dtype=object).astype(str)
        uniq, inverse = np.unique(arr, return_inverse=True)
        missing = [u for u in uniq if u not in lookup]
        if missing:
            raise DataError(
                f"{source} has {len(missing)} label(s) not in the domain, e.g. '{missing[0]}'",
                hint="add them to domain.values or filter the data",
            )
        return np.array([lookup[u] for u in uniq], dtype=np.int64)[inverse]


#: result dimensions the results already use: an attribute may not be named after one
RESERVED_DIMS = frozenset({"value", "row", "col", "rep", "estimator", "metric", "round", "cohort", "attribute"})


class Product(Domain):
    """Tuples of d attributes, each a domain of its own (integers, categorical or grid); a value is one
    cell of the product, indexed row-major (the last attribute varies fastest).

    Results index it by one dimension per attribute (two for a grid attribute, ``NAME_row`` and
    ``NAME_col``), labelled with the attribute's values; the distance between tuples is the sum of
    the attributes' distances (L1 over attributes).
    """

    name = "product"
    attributes = Param(
        "tables",
        doc='the attributes, in order: tables with a name and a domain, e.g. { name = "sex", kind = "categorical", values = ["F", "M"] }',
    )

    def _validate(self) -> None:
        parts: list[Domain] = []
        names: list[str] = []
        for i, spec in enumerate(self.attributes):
            spec = dict(spec)
            label = spec.pop("name", None)
            field = f"attributes.{i}"
            if not isinstance(label, str) or not label.isidentifier():
                raise ParameterError(
                    f"attribute {i} has {'no name' if label is None else f'the name {label!r}'}",
                    field=f"{field}.name",
                    hint='give each attribute a name made of letters, digits and _, e.g. name = "age"',
                )
            if label in names:
                raise ParameterError(
                    f"attribute name '{label}' is used twice",
                    field=f"{field}.name",
                    hint="give every attribute its own name",
                )
            if label in RESERVED_DIMS:
                raise ParameterError(
                    f"attribute name '{label}' is a dimension the results already use",
                    field=f"{field}.name",
                    hint=f"rename it, e.g. '{label}_'",
                )
            if spec.get("kind") == "product":
                raise ParameterError(
                    "an attribute cannot itself be a product", field=f"{field}.kind", hint="list its attributes here"
                )
            try:
                parts.append(make_domain(spec))
            except ScenarioError as exc:
                where = exc.field.replace("domain", field, 1) if exc.field else field
                raise ParameterError(exc.problem, field=where, hint=exc.hint) from None
            names.append(label)
        if len(parts) < 2:
            raise ParameterError(
                f"a product domain needs at least two attributes, got {len(parts)}",
                field="attributes",
                hint="add attributes, or use the attribute's own domain",
            )
        size = math.prod(p.size for p in parts)
        _require_size(
            size,
            "attributes",
            f"the joint table of {' x '.join(str(p.size) for p in parts)} cells is too large: coarsen or drop "
            "attributes, or estimate marginals only (one scenario per attribute, on its own domain)",
        )
        self.__dict__["parts"] = tuple(parts)
        self.__dict__["names"] = tuple(names)
        self.__dict__["dims"] = tuple(d for n, p in zip(names, parts) for d in _attribute_dims(n, p))

    #: the attributes' domains and names, set by validation (derived from ``attributes``)
    parts: tuple[Domain, ...]
    names: tuple[str, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        """Values per attribute, in order."""
        return tuple(p.size for p in self.parts)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n for p in self.parts for n in p.shape)

    def coords(self) -> dict[str, np.ndarray]:
        """Each attribute's coordinates, under its dimension names (a grid attribute's two)."""
        out: dict[str, np.ndarray] = {}
        for name, part in zip(self.names, self.parts):
            for dim, values in zip(_attribute_dims(name, part), part.coords().values()):
                out[dim] = values
        return out

    def labels(self) -> list[str]:
        """``(a, b, ...)`` per cell, from the attributes' labels."""
        per = [p.labels() for p in self.parts]
        cells = np.unravel_index(np.arange(self.size), self.sizes)
        return ["(" + ", ".join(per[j][int(c[i])] for j, c in enumerate(cells)) + ")" for i in range(self.size)]

    @cached_property
    def distances(self) -> np.ndarray:
        """The sum of the attributes' distances (L1 over attributes), refused where it would not fit."""
        from ..base.memory import require_memory

        require_memory(
            16.0 * self.size**2,
            f"the {self.size} x {self.size} distances of a product domain",
            hint="use a metric without distances (tv, marginal-tv) on large product domains",
        )
        cells = np.unravel_index(np.arange(self.size), self.sizes)
        out = np.zeros((self.size, self.size))
        for part, c in zip(self.parts, cells):
            out += part.distances[np.ix_(c, c)]
        return out

    def index(self, raw: Sequence[Any] | np.ndarray, *, source: str = "data") -> np.ndarray:
        """Flat indices of tuples given as one column per attribute (each as its attribute's ``index`` reads it)."""
        columns = list(raw)
        if len(columns) != len(self.parts):
            raise DataError(
                f"{source} gives {len(columns)} columns for {len(self.parts)} attributes",
                hint=f"give one column per attribute: {', '.join(self.names)}",
            )
        parts = [
            p.index(col, source=f"{source} (attribute '{n}')") for n, p, col in zip(self.names, self.parts, columns)
        ]
        return self.join(parts)

    def require_attribute_kinds(self, kinds: tuple[str, ...], *, field: str, hint: str) -> None:
        """ParameterError naming the first attribute whose domain is not of one of ``kinds`` (a plugin that needs,
        say, numeric attributes checks them here)."""
        for name, part in zip(self.names, self.parts):
            if part.name not in kinds:
                raise ParameterError(
                    f"attribute '{name}' is {part.name}, not {' or '.join(kinds)}", field=field, hint=hint
                )

    def split(self, values: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each attribute's indices of flat values (one array per attribute)."""
        return tuple(np.unravel_index(np.asarray(values, dtype=np.int64), self.sizes))

    def join(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """Flat values from each attribute's indices."""
        return np.ravel_multi_index(tuple(np.asarray(p, dtype=np.int64) for p in parts), self.sizes).astype(np.int64)

    def marginal(self, theta: np.ndarray, attributes: int | Sequence[int]) -> np.ndarray:
        """The marginal of a joint vector over some attributes (in the order given), flattened.

        ``theta`` may carry leading axes (several estimates at once); the marginal is taken over the last.
        """
        keep = (attributes,) if isinstance(attributes, int) else tuple(attributes)
        if not keep or any(not 0 <= j < len(self.parts) for j in keep) or len(set(keep)) != len(keep):
            raise ValueError(f"attributes must be distinct indices in 0..{len(self.parts) - 1}, got {keep}")
        theta = np.asarray(theta, dtype=float)
        lead = theta.shape[:-1]
        cube = theta.reshape(lead + self.sizes)
        drop = tuple(len(lead) + j for j in range(len(self.parts)) if j not in keep)
        kept = np.sum(cube, axis=drop) if drop else cube
        order = sorted(keep)
        kept = np.moveaxis(kept, [len(lead) + order.index(j) for j in keep], range(len(lead), len(lead) + len(keep)))
        return kept.reshape(lead + (-1,))


def _attribute_dims(name: str, part: Domain) -> tuple[str, ...]:
    return (name,) if len(part.dims) == 1 else tuple(f"{name}_{d}" for d in part.dims)


class OnDomain(Configurable):
    """A plugin built for one domain: mechanisms and datasets."""

    #: domain kinds the plugin works on; None means any
    domain_kinds: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, domain: Domain, **params: Any):
        if not isinstance(domain, Domain):
            raise TypeError(f"{type(self).__name__} needs a Domain as first argument, got {type(domain).__name__}")
        self._require_domain_kind(domain, self.domain_kinds)
        self.domain = domain
        super().__init__(**params)

    def _key(self) -> tuple:
        return (*super()._key(), self.domain._key())


DOMAIN_KINDS: dict[str, type[Domain]] = {cls.name: cls for cls in (Integers, Grid, Categorical, Product)}


#: how parse_domain's specs are written, for help texts and error hints
DOMAIN_SYNTAX = (
    "integers:0..99[:step], grid:24x16[:cell], categorical:a,b,c or product:age=integers:0..4;sex=categorical:F,M"
)


def _domain_spec(text: str) -> dict[str, Any]:
    """The table of one non-product command-line spec (ValueError if it is not one)."""
    kind, _, rest = text.partition(":")
    parts = rest.split(":")
    if kind == "integers" and 1 <= len(parts) <= 2 and ".." in parts[0]:
        low, high = parts[0].split("..")
        spec: dict[str, Any] = {"kind": kind, "low": int(low), "high": int(high)}
        if len(parts) == 2:
            spec["step"] = int(parts[1])
    elif kind == "grid" and 1 <= len(parts) <= 2 and "x" in parts[0]:
        rows, cols = parts[0].split("x")
        spec = {"kind": kind, "rows": int(rows), "cols": int(cols)}
        if len(parts) == 2:
            spec["cell"] = float(parts[1])
    elif kind == "categorical" and rest:
        spec = {"kind": kind, "values": rest.split(",")}
    else:
        raise ValueError(text)
    return spec


def parse_domain(text: str) -> Domain:
    """A domain from a short command-line spec.

    ``integers:0..99`` (optionally ``:STEP``), ``grid:24x16`` (optionally ``:CELL``),
    ``categorical:a,b,c``, and ``product:NAME=SPEC;NAME=SPEC...`` for tuples of attributes, each
    one of the others, e.g. ``product:age=integers:0..4;sex=categorical:F,M``.
    """
    kind, _, rest = text.partition(":")
    try:
        if kind == "product":
            attributes = []
            for item in rest.split(";"):
                name, eq, part = item.partition("=")
                if not eq or not name.strip():
                    raise ValueError(item)
                attributes.append({"name": name.strip(), **_domain_spec(part.strip())})
            spec: dict[str, Any] = {"kind": kind, "attributes": attributes}
        else:
            spec = _domain_spec(text)
    except ValueError:
        raise ScenarioError(f"'{text}' is not a domain", field="--domain", hint=f"write {DOMAIN_SYNTAX}") from None
    try:
        return make_domain(spec)
    except ScenarioError as exc:
        raise ScenarioError(exc.problem, field="--domain", hint=exc.hint) from None


def make_domain(spec: Mapping[str, Any] | Domain) -> Domain:
    """Build a domain from ``{"kind": "integers", "low": 0, "high": 99}`` and the like."""
    if isinstance(spec, Domain):
        return spec
    if not isinstance(spec, Mapping):
        raise ScenarioError(
            "must be a table", field="domain", hint='write [domain] with kind = "integers", "grid" or "categorical"'
        )
    params = dict(spec)
    kind = params.pop("kind", None)
    if kind is None:
        raise ScenarioError("has no 'kind'", field="domain", hint='add kind = "integers", "grid" or "categorical"')
    if not isinstance(kind, str) or kind not in DOMAIN_KINDS:
        raise ScenarioError(f"unknown kind '{kind}'", field="domain.kind", hint=did_you_mean(str(kind), DOMAIN_KINDS))
    try:
        return DOMAIN_KINDS[kind](**params)
    except ParameterError as exc:
        raise exc.at("domain") from None
