"""Plugins as cache keys: equality and hashing by their parameters, computed once per instance."""

from __future__ import annotations

import ldpsim


def test_a_plugin_changed_after_hashing_is_not_found_by_its_old_key():
    """Hash and key are computed once per instance; setting an attribute forgets them."""
    domain = ldpsim.Integers(low=0, high=9)
    a = ldpsim.get_registry().create("mechanism", "krr", domain, eps=1.0)
    b = ldpsim.get_registry().create("mechanism", "krr", domain, eps=1.0)
    cache = {a: "a"}
    assert cache[b] == "a" and hash(a) == hash(b)
    b.eps = 2.0  # not how plugins are used, but a stale key must never match
    assert b not in cache and a != b
    b.eps = 1.0
    assert cache[b] == "a"


def test_a_domain_changed_after_its_size_was_read_gives_its_new_size():
    """Domain.size is kept once found, as a derived attribute setting any attribute forgets."""
    domain = ldpsim.Grid(rows=4, cols=4)
    assert domain.size == 16
    domain.cols = 5  # a grid's shape is its parameters (Integers keeps its values once listed)
    assert domain.size == 20
    assert hash(domain) != hash(ldpsim.Grid(rows=4, cols=4))
