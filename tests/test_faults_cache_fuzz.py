"""Fuzzing the plugin catalogue's cache: whatever a cache file holds, `ldpsim list` reads it or rebuilds it.

The cache is a convenience, never a source of errors (ldpsim/plugin/catalogue.py): any JSON value where
the listing should be, any text in its strings, is either a well-formed listing or ignored, and nothing
read from it reaches the terminal as a control character.
"""

from __future__ import annotations

import json
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldpsim.plugin import catalogue as cat
from ldpsim.plugin.registry import KINDS

#: JSON values of any shape, with texts drawn from every Unicode category (controls included)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
ENTRY = st.fixed_dictionaries(
    {
        "name": st.text(max_size=12),
        "summary": st.text(max_size=30),
        "origin": st.text(max_size=12),
        "domains": st.lists(st.text(max_size=8), max_size=2),
        "parameters": st.lists(st.lists(st.text(max_size=8), min_size=2, max_size=2), max_size=2),
    }
)
LISTING = st.fixed_dictionaries({kind: st.lists(ENTRY, max_size=2) for kind in KINDS}) | st.dictionaries(
    st.sampled_from(sorted(KINDS)), JSON, max_size=len(KINDS)
)


def _shown_safely(text: str) -> bool:
    return not any(unicodedata.category(c) == "Cc" or 0x202A <= ord(c) <= 0x202E for c in text)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kinds=LISTING | JSON)
def test_any_cache_content_is_read_valid_or_ignored(tmp_path, monkeypatch, kinds):
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    key = "k"
    (tmp_path / cat.FILE_NAME).write_text(json.dumps({"fingerprint": key, "kinds": kinds}), encoding="utf-8")
    loaded = cat.load(key)  # never raises
    if loaded is None:
        return
    assert loaded == kinds and isinstance(loaded, dict)
    for entries in loaded.values():
        for entry in entries:
            texts = [entry["name"], entry["summary"], entry["origin"], *entry["domains"]]
            texts += [t for pair in entry["parameters"] for t in pair]
            assert all(isinstance(t, str) and _shown_safely(t) for t in texts)
