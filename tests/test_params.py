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
