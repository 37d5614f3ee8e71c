"""Users' values drawn from open domains: a Zipf law over scattered 2^bits ids, and a CSV column of strings.

Neither is ever enumerated: a Zipf law is given by its ``support`` ranks (rank ``r`` has probability
``r^-exponent / H``), each rank's id scattered over the ``bits``-bit integers by a fixed keyed bijection
(so the frequent ids are not 0..k and share no prefix by construction); a CSV column's strings are hashed
with :meth:`ldpsim.OpenDomain.hash_strings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsim import OpenDataset, OpenDomain, OpenSample, Param, ParameterError, hookimpl

from .reading import Table, numbers

#: the fixed key that scatters Zipf ranks over the ids (part of the dataset's definition: never a seed)
SCATTER_KEY = 0x5EED_0F_21FF
#: odd multipliers of :func:`scatter` (odd: invertible modulo any power of two)
_ODD = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
#: the most ranks a Zipf law may have: its probabilities and ids are held as arrays
MAX_SUPPORT = 1 << 26


@dataclass
class OpenData:
    """Users' values over an open domain, with the truth a metric compares to.

    ``values`` are uint64 ids, one per user; ``items`` and ``frequency`` the distinct ids by decreasing true
    frequency (the law's probabilities for a Zipf law, the column's shares for a CSV file); ``names`` maps
    ids back to strings where they came from strings.
    """

    domain: OpenDomain
    values: np.ndarray
    items: np.ndarray
    frequency: np.ndarray
    names: dict[int, str] | None = None

    def top(self, k: int) -> np.ndarray:
        """The ``k`` most frequent ids (ties broken by the order of :attr:`items`)."""
        return self.items[:k]


def scatter(ranks: np.ndarray, bits: int) -> np.ndarray:
    """The ids of ranks: a fixed bijection of the ``bits``-bit integers (three rounds of adding a key,
    multiplying by an odd constant and xor-shifting, each invertible modulo ``2^bits``), so distinct ranks
    get distinct ids and the frequent ones are scattered over the whole domain."""
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(2**64 - 1)
    x = np.asarray(ranks, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        for key, odd in ((SCATTER_KEY, _ODD[0]), (SCATTER_KEY >> 7, _ODD[1]), (SCATTER_KEY >> 13, _ODD[2])):
            x = ((x + np.uint64(key)) * np.uint64(odd)) & mask
            x ^= x >> np.uint64(max(1, bits // 2))
    return x


def zipf(
    domain: OpenDomain, n: int, rng: np.random.Generator, *, exponent: float = 1.1, support: int = 1 << 20
) -> OpenData:
    """``n`` users drawn from a Zipf law over ``support`` ranks of an open domain.

    Parameters
    ----------
    domain : OpenDomain
        The domain (its ``bits`` set the ids' width).
    n : int
        Users.
    rng : numpy.random.Generator
        The randomness of the users' draws (the ids of the ranks are fixed).
    exponent : float
        The Zipf exponent ``s > 0``.
    support : int
        Ranks with positive probability, at most ``2^bits`` and :data:`MAX_SUPPORT`.

    Returns
    -------
    OpenData
        The users' ids and the law's items and probabilities.
    """
    if not exponent > 0:
        raise ParameterError(f"is {exponent}", field="exponent", hint="use a positive exponent")
    if not 1 <= support <= min(MAX_SUPPORT, 2**domain.bits):
        raise ParameterError(
            f"is {support}", field="support", hint=f"use 1..{min(MAX_SUPPORT, 2**domain.bits):,} ranks"
        )
    if n < 1:
        raise ParameterError(f"is {n}", field="users", hint="use at least one user")
    weights = np.arange(1, support + 1, dtype=float) ** -exponent
    prob = weights / weights.sum()
    ids = scatter(np.arange(support), domain.bits)
    ranks = np.searchsorted(np.cumsum(prob), rng.random(n) * (1 - 1e-15), side="right")
    return OpenData(domain, ids[np.minimum(ranks, support - 1)], ids, prob)


def csv_strings(domain: OpenDomain, path: str | Path, column: str, counts: str | None = None) -> OpenData:
    """Every row's string in ``column`` of a CSV file (with a header row), hashed to ids of ``domain``.

    Parameters
    ----------
    domain : OpenDomain
        The domain of the ids.
    path : str or Path
        The CSV file.
    column : str
        The column's header.
    counts : str or None
        A column of non-negative integer counts: each row stands for that many users (a file of
        aggregated values); None: each row is one user.

    Returns
    -------
    OpenData
        The users' ids; the distinct strings by decreasing share, and the id -> string dictionary.
    """
    table = Table(Path(path))
    names = [column] if counts is None else [column, counts]
    positions = table.positions(names, fields=["column", "counts"][: len(names)])
    texts, weights = [], []
    for start, parts in table.chunks(positions, text=True):
        texts.append(parts[0].astype(str))
        if counts is not None:
            got = numbers(parts[1], table, start, counts, integer=True)
            if got.size and int(got.min()) < 0:
                raise table.error(f"has a negative count in column '{counts}'", "counts are >= 0", field="counts")
            weights.append(got)
    if not texts or not sum(p.size for p in texts):
        raise table.error("has no data rows", "give a CSV file with data")
    strings = np.concatenate(texts)
    if counts is not None:
        repeat = np.concatenate(weights)
        if not repeat.sum():
            raise table.error(
                f"holds no users (every count in '{counts}' is 0)", "give positive counts", field="counts"
            )
        strings = np.repeat(strings, repeat)
    values, labels = domain.hash_strings(strings)
    items, users = np.unique(values, return_counts=True)
    order = np.argsort(-users, kind="stable")
    return OpenData(domain, values, items[order], users[order] / values.size, labels)


class OpenZipf(OpenDataset):
    """Users drawn from a Zipf law over support ranks whose ids are scattered over the domain"""

    name = "open-zipf"
    exponent = Param("float", 1.1, gt=0, doc="the Zipf exponent s: rank r has probability r^-s / H")
    support = Param("int", 1 << 20, ge=1, le=MAX_SUPPORT, doc="ranks with positive probability")

    def draw(self, domain: OpenDomain, users: int | None, rng: np.random.Generator) -> OpenSample:
        if users is None:
            raise ParameterError("is not given", field="users", hint="give users = N: a Zipf law has no own count")
        return OpenSample(zipf(domain, users, rng, exponent=self.exponent, support=self.support).values)


class OpenCSV(OpenDataset):
    """Every row's string in a column of a CSV file, hashed to the domain's ids (one user per row)"""

    name = "open-csv"
    path = Param("path", doc="CSV file with a header row; a relative path is relative to the scenario file")
    column = Param("str", doc="the column's header")
    counts = Param("str", None, doc="a column of counts: each row stands for that many users (default: one per row)")

    def draw(self, domain: OpenDomain, users: int | None, rng: np.random.Generator) -> OpenSample:
        data = csv_strings(domain, self.path, self.column, self.counts)
        if users is not None and users != data.values.size:
            raise ParameterError(
                f"is {users:,} but {self.path.name} has {data.values.size:,} rows",
                field="users",
                hint="leave users out: a CSV column's rows are its users",
            )
        return OpenSample(data.values, data.names)


@hookimpl
def register_open_datasets(register: Callable[[type], None]) -> None:
    register(OpenZipf)
    register(OpenCSV)
