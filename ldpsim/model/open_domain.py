"""Open domains: integers of up to 64 bits, or strings hashed to them, never enumerated.

An :class:`~ldpsim.model.domains.Domain` is a finite, listed alphabet: every estimate holds one probability
per value, which stops at :data:`~ldpsim.model.domains.MAX_DOMAIN_SIZE`. The frequent words typed on
keyboards, URLs or app names do not fit: nobody can list them. An :class:`OpenDomain` is the set of
``bits``-bit unsigned integers; a value is a ``uint64`` and a string is mapped to one by a stable hash
(BLAKE2b with an 8-byte digest: the same string gives the same id on every machine and in every run,
whatever the seeds). Heavy-hitter protocols only ever look at *prefixes* of these ids (their top bits),
and their estimators at a few candidate prefixes at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from ..base.errors import ParameterError
from .params import Configurable, Param

#: the widest open domain: values and prefixes are uint64
MAX_OPEN_BITS = 64


def hash_string(text: str) -> int:
    """The 64-bit id of a string: BLAKE2b with an 8-byte digest of its UTF-8 bytes, read big-endian.

    Parameters
    ----------
    text : str
        The string.

    Returns
    -------
    int
        Its id in ``0 .. 2^64 - 1``, the same on every machine (no seed, unlike Python's ``hash``).
    """
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


class OpenDomain(Configurable):
    """The ``bits``-bit unsigned integers (or strings hashed to them), never enumerated."""

    kind: ClassVar[str] = "open_domain"
    name = "open"
    bits = Param("int", default=32, doc="the width of a value in bits, 1..64")

    def _validate(self) -> None:
        if not 1 <= self.bits <= MAX_OPEN_BITS:
            raise ParameterError(f"is {self.bits}", field="bits", hint=f"use 1..{MAX_OPEN_BITS} bits")

    @property
    def max_value(self) -> int:
        """The largest value, ``2^bits - 1``."""
        return (1 << self.bits) - 1

    def check(self, values: np.ndarray, *, source: str = "values") -> np.ndarray:
        """``values`` as a uint64 array, refusing any wider than the domain.

        Parameters
        ----------
        values : numpy.ndarray
            Non-negative integers.
        source : str
            The field named when a value is out of range.

        Returns
        -------
        numpy.ndarray
            The values as ``uint64``.

        Raises
        ------
        ParameterError
            If a value does not fit in ``bits`` bits.
        """
        arr = np.asarray(values)
        if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
            raise ParameterError("holds negative values", field=source, hint="values are unsigned integers")
        out = arr.astype(np.uint64, copy=False)
        if self.bits < 64 and out.size and int(out.max()) > self.max_value:
            raise ParameterError(
                f"holds {int(out.max())}, above 2^{self.bits} - 1", field=source, hint="use a wider domain (bits)"
            )
        return out

    def prefixes(self, values: np.ndarray, length: int) -> np.ndarray:
        """The top ``length`` bits of each value (``0 <= length <= bits``), as uint64.

        Parameters
        ----------
        values : numpy.ndarray
            uint64 values of this domain.
        length : int
            Prefix length in bits.

        Returns
        -------
        numpy.ndarray
            ``values >> (bits - length)``; all zeros for ``length == 0``.
        """
        if not 0 <= length <= self.bits:
            raise ParameterError(f"is {length}", field="length", hint=f"a prefix has 0..{self.bits} bits")
        if length == 0:
            return np.zeros(np.shape(values), dtype=np.uint64)
        return np.asarray(values, dtype=np.uint64) >> np.uint64(self.bits - length)

    def hash_strings(self, texts: Iterable[str]) -> tuple[np.ndarray, dict[int, str]]:
        """Ids of strings, and a dictionary back from each distinct id to its string, for display.

        Each distinct string is hashed once (:func:`hash_string`, its top ``bits`` bits kept).

        Parameters
        ----------
        texts : iterable of str
            The users' strings, one per user.

        Returns
        -------
        tuple
            ``(ids, names)``: a uint64 array with one id per string, and ``{id: string}``.
        """
        arr = np.asarray(list(texts), dtype=object).astype(str)
        uniq, inverse = np.unique(arr, return_inverse=True)
        shift = 64 - self.bits
        ids = np.array([hash_string(t) >> shift for t in uniq], dtype=np.uint64)
        return ids[inverse], {int(i): str(t) for i, t in zip(ids, uniq)}

    def label(self, value: int, names: dict[int, str] | None = None) -> str:
        """A printable label: the string behind an id where ``names`` knows it, else the id in hex."""
        if names is not None and int(value) in names:
            return names[int(value)]
        return f"0x{int(value):0{(self.bits + 3) // 4}x}"

    def spec(self) -> dict[str, Any]:
        """A plain mapping describing the domain (its kind and width)."""
        return {"kind": self.name, "bits": self.bits}
