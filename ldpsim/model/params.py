"""Declared, validated plugin parameters.

A plugin class declares its parameters as class attributes::

    class KRR(Mechanism):
        name = "krr"
        eps = Param("float", gt=0, doc="privacy level (eps-LDP)")

Construction validates every value (type, range, choices) and rejects unknown
names with a suggestion, so a plugin instance is always valid, as in
scikit-learn. The same declarations feed ``ldpsim list``.
"""

from __future__ import annotations

import math
import numbers
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    SupportsInt,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
    overload,
)

import numpy as np

from ..base.errors import ParameterError, a_or_an, did_you_mean

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()

KINDS = ("float", "int", "bool", "str", "strings", "path", "vector", "matrix", "distribution", "tables")

T = TypeVar("T")


class _Options(TypedDict, total=False):
    """The keyword options of :class:`Param`, for its typed constructor overloads."""

    doc: str
    gt: float | None
    ge: float | None
    lt: float | None
    le: float | None
    choices: tuple[str, ...] | None


class Param(Generic[T]):
    """One parameter: its kind, default, allowed range and a one-line doc.

    ``kind`` is one of :data:`KINDS`, or a tuple of them tried in order
    (e.g. ``("distribution", "str")`` for "a vector or a keyword").

    For a type checker, ``eps = Param("float", gt=0)`` is a ``Param[float]``
    and ``self.eps`` a ``float`` (``float | None`` with a ``None`` default;
    ``Any`` for a tuple of kinds). At run time a Param is a plain class
    attribute: :class:`Configurable` stores each validated value on the
    instance, which shadows it.
    """

    # One overload per kind, and one per kind with a None default (the value may be unset).
    @overload
    def __init__(
        self: Param[float | None], kind: Literal["float"], default: None, **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(
        self: Param[float], kind: Literal["float"], default: float = ..., **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(self: Param[int | None], kind: Literal["int"], default: None, **options: Unpack[_Options]) -> None: ...
    @overload
    def __init__(self: Param[int], kind: Literal["int"], default: int = ..., **options: Unpack[_Options]) -> None: ...
    @overload
    def __init__(
        self: Param[bool | None], kind: Literal["bool"], default: None, **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(
        self: Param[bool], kind: Literal["bool"], default: bool = ..., **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(self: Param[str | None], kind: Literal["str"], default: None, **options: Unpack[_Options]) -> None: ...
    @overload
    def __init__(self: Param[str], kind: Literal["str"], default: str = ..., **options: Unpack[_Options]) -> None: ...
    @overload
    def __init__(
        self: Param[tuple[str, ...] | None], kind: Literal["strings"], default: None, **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(
        self: Param[tuple[str, ...]],
        kind: Literal["strings"],
        default: tuple[str, ...] = ...,
        **options: Unpack[_Options],
    ) -> None: ...
    @overload
    def __init__(
        self: Param[Path | None], kind: Literal["path"], default: None, **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(
        self: Param[Path], kind: Literal["path"], default: Path = ..., **options: Unpack[_Options]
    ) -> None: ...
    @overload
    def __init__(
        self: Param[np.ndarray | None],
        kind: Literal["vector", "matrix", "distribution"],
        default: None,
        **options: Unpack[_Options],
    ) -> None: ...
    @overload
    def __init__(
        self: Param[np.ndarray],
        kind: Literal["vector", "matrix", "distribution"],
        default: np.ndarray = ...,
        **options: Unpack[_Options],
    ) -> None: ...
    @overload
    def __init__(
        self: Param[tuple[dict[str, Any], ...]],
        kind: Literal["tables"],
        default: tuple[dict[str, Any], ...] = ...,
        **options: Unpack[_Options],
    ) -> None: ...
    @overload
    def __init__(self: Param[Any], kind: tuple[str, ...], default: Any = ..., **options: Unpack[_Options]) -> None: ...
    def __init__(
        self,
        kind: str | tuple[str, ...],
        default: Any = REQUIRED,
        *,
        doc: str = "",
        gt: float | None = None,
        ge: float | None = None,
        lt: float | None = None,
        le: float | None = None,
        choices: tuple[str, ...] | None = None,
    ):
        kinds = (kind,) if isinstance(kind, str) else tuple(kind)
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise TypeError(f"unknown parameter kind {unknown[0]!r}; use one of {KINDS}")
        self.kinds = kinds
        self.default = default
        self.doc = doc
        self.gt, self.ge, self.lt, self.le = gt, ge, lt, le
        self.choices = tuple(choices) if choices is not None else None
        self.name = "?"

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    if TYPE_CHECKING:
        # For type checkers only: on a class a Param is itself, on an instance its value. That is
        # already so at run time without a __get__, since Configurable sets each value on the
        # instance, which shadows the class attribute; so the run time keeps no descriptor.
        @overload
        def __get__(self, instance: None, owner: type | None = None) -> Param[T]: ...
        @overload
        def __get__(self, instance: object, owner: type | None = None) -> T: ...
        def __get__(self, instance: object, owner: type | None = None) -> Param[T] | T: ...

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> str:
        """A short human description, e.g. ``eps: float > 0 (required)``."""
        bounds = []
        for symbol, bound in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le)):
            if bound is not None:
                bounds.append(f"{symbol} {bound:g}")
        text = f"{self.name}: {'|'.join(self.kinds)}"
        if bounds:
            text += " " + ", ".join(bounds)
        if self.choices:
            text += " in {" + ", ".join(self.choices) + "}"
        if self.required:
            text += " (required)"
        elif self.default is None:  # filled in when the plugin is built: its doc says how ("default: ...")
            text += " (optional)"
        else:
            text += f" = {short_repr(self.default)}"
        return text

    def validate(self, value: Any) -> Any:
        """Coerce ``value`` to this parameter's kind, or raise ParameterError."""
        if value is None and self.default is None:
            return None  # explicitly "unset", as the default says
        errors = []
        for kind in self.kinds:
            try:
                return self._check_bounds(_COERCE[kind](self, value))
            except _KindMismatch as exc:
                errors.append(str(exc))
        raise ParameterError(
            f"expected {' or '.join(errors)}, got {short_repr(value)}",
            field=self.name,
            hint=f"give {self.name} as {_example(self.kinds[0])}",
        )

    def _check_bounds(self, value: Any) -> Any:
        if self.choices is not None and isinstance(value, str) and value not in self.choices:
            raise ParameterError(f"unknown value {value!r}", field=self.name, hint=did_you_mean(value, self.choices))
        if isinstance(value, (str, bool, Path, tuple)) or value is None:
            return value
        arr = np.asarray(value, dtype=float)
        for symbol, bound, ok in (
            (">", self.gt, lambda a, b: a > b),
            (">=", self.ge, lambda a, b: a >= b),
            ("<", self.lt, lambda a, b: a < b),
            ("<=", self.le, lambda a, b: a <= b),
        ):
            if bound is not None and not np.all(ok(arr, bound)):
                # A scalar shows as given (an integer parameter's 0, not 0.0).
                bad = value if arr.ndim == 0 else float(arr[~ok(arr, bound)].flat[0])
                raise ParameterError(
                    f"must be {symbol} {bound:g}, got {short_repr(bad)}",
                    field=self.name,
                    hint=f"choose {self.name} {symbol} {bound:g}",
                )
        return value


class _KindMismatch(Exception):
    pass


def _coerce_float(param: Param, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _KindMismatch("a number")
    value = float(value)
    if not math.isfinite(value):
        raise ParameterError(f"must be finite, got {value}", field=param.name, hint="give a finite number")
    return value


def _coerce_int(param: Param, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _KindMismatch("an integer")
    if isinstance(value, numbers.Integral):
        return int(value)
    if math.isfinite(value) and float(value).is_integer():
        return int(cast(SupportsInt, value))  # every concrete Real (float, np.float64, Fraction) has __int__
    raise _KindMismatch("an integer")


def _coerce_bool(param: Param, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise _KindMismatch("true or false")


def _coerce_str(param: Param, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _KindMismatch("a string")


def _coerce_strings(param: Param, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise _KindMismatch("a list of strings")
    items = list(value)
    if not all(isinstance(v, str) for v in items):
        raise _KindMismatch("a list of strings")
    return tuple(items)


def _coerce_path(param: Param, value: Any) -> Path:
    if isinstance(value, (str, Path)) and str(value):
        return Path(value)
    raise _KindMismatch("a file path")


def _coerce_vector(param: Param, value: Any) -> np.ndarray:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise _KindMismatch("a list of numbers")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise _KindMismatch("a list of numbers") from None
    if arr.ndim != 1 or arr.size == 0:
        raise _KindMismatch("a non-empty list of numbers")
    return _finite_frozen(param, arr)


def _coerce_matrix(param: Param, value: Any) -> np.ndarray:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise _KindMismatch("a list of rows")
    rows = list(value)
    if not rows or any(isinstance(r, (str, bytes)) or not hasattr(r, "__len__") for r in rows):
        raise _KindMismatch("a non-empty list of rows")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise ParameterError(
            f"rows have different lengths {sorted(widths)}",
            field=param.name,
            hint="give every row the same number of columns",
        )
    try:
        arr = np.asarray(rows, dtype=float)
    except (TypeError, ValueError):
        raise _KindMismatch("a list of rows of numbers") from None
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise _KindMismatch("a list of rows of numbers")
    return _finite_frozen(param, arr)


def _finite_frozen(param: Param, arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only (parameters are fixed at construction), if every entry is finite."""
    if not np.all(np.isfinite(arr)):
        raise ParameterError("has a non-finite entry", field=param.name, hint="give finite numbers")
    arr.setflags(write=False)
    return arr


def _coerce_distribution(param: Param, value: Any) -> np.ndarray:
    arr = _coerce_vector(param, value)
    if np.any(arr < 0):
        raise ParameterError(
            f"has a negative entry at position {int(np.argmax(arr < 0))}",
            field=param.name,
            hint="a distribution has non-negative entries summing to 1",
        )
    total = arr.sum()
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ParameterError(
            f"sums to {total:.12g}, not 1",
            field=param.name,
            hint="a distribution has non-negative entries summing to 1",
        )
    arr = arr / total
    arr.setflags(write=False)
    return arr


def _coerce_tables(param: Param, value: Any) -> tuple[dict[str, Any], ...]:
    """A list of tables (TOML's array of tables: a product domain's attributes, a tuple protocol's
    per-attribute mechanisms), each copied into a plain dict with string keys."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise _KindMismatch("a list of tables")
    items = list(value)
    if not all(isinstance(v, Mapping) and all(isinstance(k, str) for k in v) for v in items):
        raise _KindMismatch("a list of tables")
    return tuple(dict(v) for v in items)


_COERCE = {
    "float": _coerce_float,
    "int": _coerce_int,
    "bool": _coerce_bool,
    "str": _coerce_str,
    "strings": _coerce_strings,
    "path": _coerce_path,
    "vector": _coerce_vector,
    "matrix": _coerce_matrix,
    "distribution": _coerce_distribution,
    "tables": _coerce_tables,
}


def _example(kind: str) -> str:
    return {
        "float": "a number, e.g. 1.0",
        "int": "an integer, e.g. 10",
        "bool": "true or false",
        "str": 'a string, e.g. "name"',
        "strings": 'a list of strings, e.g. ["a", "b"]',
        "path": 'a file path, e.g. "data/values.csv"',
        "vector": "a list of numbers, e.g. [0.5, 0.5]",
        "matrix": "a list of rows, e.g. [[0.9, 0.1], [0.1, 0.9]]",
        "distribution": "a list of non-negative numbers summing to 1",
        "tables": 'a list of tables, e.g. [{ name = "age", kind = "integers", low = 17, high = 90 }]',
    }[kind]


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to 40 characters (arrays as lists), for parameter values in messages and reprs.

    Parameters
    ----------
    value
        Any value.

    Returns
    -------
    str
        The repr, ending in ``...`` where it was cut.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a parameter value."""
    if isinstance(value, np.ndarray):
        return (value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    return value


#: each Configurable class's declared parameters, found once (see Configurable.parameters)
_PARAMETERS: weakref.WeakKeyDictionary[type, dict[str, Param[Any]]] = weakref.WeakKeyDictionary()


class Configurable:
    """Base of every plugin class: declared parameters, validated at construction.

    Subclasses declare ``name`` (the registry name), a docstring whose first
    line is the one-line description, and :class:`Param` attributes. They may
    override :meth:`_validate` for checks that involve several parameters.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "plugin"
    #: attributes computed from the others and kept in ``__dict__``: setting any attribute forgets them (a
    #: subclass that keeps one more adds its name)
    _DERIVED: ClassVar[tuple[str, ...]] = ("_identity_cache",)

    def __init__(self, **params: Any):
        declared = self.parameters()
        for key in params:
            if key not in declared:
                raise ParameterError(
                    f"{self._label()} has no parameter '{key}'",
                    field=key,
                    hint=did_you_mean(key, declared) if declared else f"{self._label()} takes no parameters",
                )
        for key, param in declared.items():
            if key in params:
                value = param.validate(params[key])
            elif param.required:
                raise ParameterError(
                    f"{self._label()} needs parameter '{key}'",
                    field=key,
                    hint=f"add {param.describe()}",
                )
            else:
                value = param.default
            setattr(self, key, value)
        self._validate()

    @classmethod
    def parameters(cls) -> dict[str, Param[Any]]:
        """The declared parameters, in declaration order (base classes first)."""
        # Read on every hash, comparison and repr of a plugin: walking the class hierarchy each time was a
        # sixth of a sweep of millisecond runs. Cached per class (parameters are declared with the class).
        found = _PARAMETERS.get(cls)
        if found is None:
            found = {}
            for klass in reversed(cls.__mro__):
                for key, value in vars(klass).items():
                    if isinstance(value, Param):
                        found[key] = value
            _PARAMETERS[cls] = found
        return dict(found)

    @classmethod
    def summary(cls) -> str:
        """The first line of the class docstring."""
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    def get_params(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.parameters()}

    def _validate(self) -> None:
        """Cross-parameter checks; raise ParameterError naming the parameter."""

    def _require_domain_kind(self, domain: Any, kinds: tuple[str, ...] | None) -> None:
        """ParameterError on ``domain`` unless its kind is one of ``kinds`` (None: any)."""
        if kinds is not None and domain.name not in kinds:
            raise ParameterError(
                f"{self._label()} does not work on {a_or_an(domain.name)} domain",
                field="domain",
                hint=f"use a domain of kind {' or '.join(kinds)}, or another {self.kind}",
            )

    def _label(self) -> str:
        return f"{self.kind} '{self.name}'" if self.name else type(self).__name__

    def _key(self) -> tuple:
        return (type(self), tuple((k, _freeze(v)) for k, v in self.get_params().items()))

    def identity(self) -> tuple[tuple, int]:
        """This instance's key (its class and frozen parameters) and the key's hash, computed once.

        Plugins are hashed as cache keys thousands of times per sweep (freezing their arrays each time was
        a tenth of a sweep of millisecond runs). Setting any attribute forgets it, so a changed instance is
        never found by its old key, and a caller that keeps the returned tuple knows, by comparing it with
        ``is``, whether the instance is unchanged since.

        Returns
        -------
        tuple
            ``(key, hash(key))``, equal for equal instances.
        """
        cached = self.__dict__.get("_identity_cache")
        if cached is None:
            key = self._key()
            cached = (key, hash(key))
            self.__dict__["_identity_cache"] = cached
        return cached

    def __setattr__(self, name: str, value: Any) -> None:
        for derived in self._DERIVED:
            self.__dict__.pop(derived, None)
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        assert isinstance(other, Configurable)
        mine, theirs = self.identity(), other.identity()
        return mine[1] == theirs[1] and mine[0] == theirs[0]

    def __hash__(self) -> int:
        return self.identity()[1]

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={short_repr(v)}" for k, v in self.get_params().items())
        return f"{self.name or type(self).__name__}({args})"
