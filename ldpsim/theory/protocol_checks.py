"""The contracts of heavy-hitter protocols and open datasets, as checks a plugin author runs in one line.

    from ldpsim.testing import check_open_dataset, check_protocol

    def test_my_protocol():
        check_protocol(MyProtocol(eps=4.0))
        check_open_dataset(MyOpenDataset())

Each check raises ``AssertionError`` naming the first violation. They run at fixed seeds, so their
outcome is deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base.errors import ParameterError
from ..model.heavy_hitters import FoundItems, HeavyHitterProtocol, OpenDataset, OpenSample
from ..model.open_domain import OpenDomain
from ..model.privacy import Privacy

#: the users of the planted problem: one id holds PLANTED_SHARE of them, the rest are spread thin
PLANTED_USERS = 20_000
PLANTED_SHARE = 0.6
#: the privacy level at which the planted id must be found first (the check's copy of the protocol)
PLANTED_EPS = 8.0
#: domain widths tried in this order; the first the protocol takes is used (small ones last: few ids)
WIDTHS = (*range(16, 65), *range(15, 0, -1))


def protocol_domain(protocol: HeavyHitterProtocol) -> OpenDomain:
    """The first of :data:`WIDTHS` whose open domain the protocol's parameters fit (``check_domain``)."""
    refusal = ""
    for bits in WIDTHS:
        domain = OpenDomain(bits=bits)
        try:
            protocol.check_domain(domain)
        except ParameterError as exc:
            refusal = refusal or f"{bits} bits: {exc}"
            continue
        return domain
    raise AssertionError(f"{type(protocol).__name__} refuses every domain of 1..64 bits (e.g. {refusal})")


def planted_values(domain: OpenDomain, seed: int = 0) -> tuple[np.ndarray, int]:
    """:data:`PLANTED_USERS` values: one id (returned) held by :data:`PLANTED_SHARE` of them, each other user an id
    drawn uniformly from the domain."""
    rng = np.random.default_rng(seed)
    planted = int(rng.integers(0, domain.max_value, dtype=np.uint64, endpoint=True))
    values = rng.integers(0, domain.max_value, size=PLANTED_USERS, dtype=np.uint64, endpoint=True)
    values[: int(PLANTED_SHARE * PLANTED_USERS)] = planted
    return values, planted


def check_found_items(found: Any, domain: OpenDomain, k: int, where: str = "find") -> None:
    """``found`` is a :class:`ldpsim.FoundItems` of at most ``k`` distinct uint64 items of ``domain``, with
    frequencies in [0, 1] from the most frequent down and upper bounds at least the frequencies (or NaN)."""
    assert isinstance(found, FoundItems), f"{where} returned {type(found).__name__}, not an ldpsim.FoundItems"
    items, freq, upper = (np.asarray(a) for a in (found.items, found.frequency, found.upper))
    assert items.ndim == 1 and items.dtype == np.uint64, f"{where}: items must be a 1-D uint64 array, got {items.dtype}"
    assert freq.shape == items.shape == upper.shape, f"{where}: items, frequency and upper differ in length"
    assert items.size <= k, f"{where} found {items.size} items, more than k = {k}"
    assert np.unique(items).size == items.size, f"{where} found an item twice"
    if items.size and domain.bits < 64:
        assert int(items.max()) <= domain.max_value, f"{where} found an id wider than the domain's {domain.bits} bits"
    assert np.all(np.isfinite(freq)) and np.all((freq >= -1e-12) & (freq <= 1 + 1e-12)), (
        f"{where}: frequencies must be shares in [0, 1]"
    )
    assert np.all(np.diff(freq) <= 1e-12), f"{where}: items must come from the most frequent down"
    bounded = ~np.isnan(upper)
    assert np.all(upper[bounded] >= freq[bounded] - 1e-12), f"{where}: an upper bound is below its frequency"


def check_protocol(protocol: HeavyHitterProtocol) -> None:
    """Check a heavy-hitter protocol's contract.

    On the first open domain it takes: ``privacy()`` is pure LDP at its ``eps``; ``collect`` then ``find``
    give a valid :class:`ldpsim.FoundItems` (:func:`check_found_items`), the same for the same seed; and a copy
    at eps = 8 finds, first, the id that 60% of 20,000 users hold (the others spread uniformly).

    Parameters
    ----------
    protocol : HeavyHitterProtocol
        The protocol to check.
    """
    name = type(protocol).__name__
    privacy = protocol.privacy()
    assert isinstance(privacy, Privacy) and privacy.notion == "ldp", f"{name}.privacy() must be pure LDP"
    assert privacy.eps == protocol.eps, (
        f"{name}.privacy() claims eps {privacy.eps}, the protocol's eps is {protocol.eps}"
    )
    domain = protocol_domain(protocol)
    values, planted = planted_values(domain)

    def search(p: HeavyHitterProtocol, seed: int) -> FoundItems:
        reports = p.collect(domain, values.copy(), np.random.default_rng(seed))
        found = p.find(domain, reports)
        check_found_items(found, domain, p.k, f"{type(p).__name__}.find")
        return found

    first, again = search(protocol, 1), search(protocol, 1)
    assert np.array_equal(first.items, again.items) and np.array_equal(first.frequency, again.frequency), (
        f"{name}: the same seed gave other items: collect must draw only from the generator it is given"
    )
    params = {key: getattr(protocol, key) for key in type(protocol).parameters()}
    easy = type(protocol)(**{**params, "eps": max(PLANTED_EPS, float(protocol.eps))})
    found = search(easy, 2)
    assert found.items.size and int(found.items[0]) == planted, (
        f"{name} at eps {easy.eps} did not find first the id {planted:#x} that {PLANTED_SHARE:.0%} of"
        f" {PLANTED_USERS:,} users hold (found {[hex(int(i)) for i in found.items[:3]]})"
    )
    share = float(found.frequency[0])
    assert abs(share - PLANTED_SHARE) < 0.1, f"{name} estimates the planted id's share {PLANTED_SHARE} as {share:.3f}"


def check_open_dataset(dataset: OpenDataset, users: int | None = 1000) -> None:
    """Check an open dataset's contract: ``draw`` gives an :class:`ldpsim.OpenSample` of uint64 values of the
    domain, ``users`` of them when given, the same for the same seed.

    Parameters
    ----------
    dataset : OpenDataset
        The dataset to check.
    users : int or None
        The users asked for (None for a dataset backed by a file).
    """
    name = type(dataset).__name__
    for bits in (16, 32, 64):
        domain = OpenDomain(bits=bits)
        sample = dataset.draw(domain, users, np.random.default_rng(3))
        assert isinstance(sample, OpenSample), f"{name}.draw returned {type(sample).__name__}, not an OpenSample"
        values = np.asarray(sample.values)
        assert values.ndim == 1 and values.dtype == np.uint64, f"{name}.draw: values must be a 1-D uint64 array"
        if users is not None:
            assert values.size == users, f"{name}.draw gave {values.size} values for {users} users"
        if bits < 64 and values.size:
            assert int(values.max()) <= domain.max_value, f"{name}.draw gave a value wider than {bits} bits"
        again = dataset.draw(domain, users, np.random.default_rng(3))
        assert np.array_equal(values, again.values), f"{name}.draw: the same seed gave other values"
