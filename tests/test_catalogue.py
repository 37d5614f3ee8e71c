"""The cached plugin catalogue behind `ldpsim list`: current, invalidated by what it depends on, never an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

import ldpsim
from ldpsim.plugin import catalogue as cat
from ldpsim.plugin.registry import KINDS, Registry


def _ldpsim_list(cache: object, *args: str, no_cache: bool = False) -> subprocess.CompletedProcess[str]:
    """`ldpsim list ARGS` in a fresh interpreter, printing which heavy modules it imported."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from ldpsim.output.cli import app\n"
        f"r = CliRunner().invoke(app, ['list', *{list(args)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(r.output)\n"
        "heavy = ('numpy', 'ldpsim.estimation', 'ldpsim.plugin.registry')\n"
        "loaded = [m for m in sys.modules if m.startswith(heavy) or m.startswith(('plugins.', 'ldpsim_plugins'))]\n"
        "print('IMPORTED', sorted({m.split('.')[0] for m in loaded}))\n"
    )
    env = dict(os.environ, LDPSIM_CACHE_DIR=str(cache))
    if no_cache:
        env["LDPSIM_NO_CACHE"] = "1"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done


def test_a_current_cache_lists_without_importing_plugins_or_numpy(tmp_path):
    fresh = _ldpsim_list(tmp_path, no_cache=True)
    assert not (tmp_path / cat.FILE_NAME).exists()  # LDPSIM_NO_CACHE writes nothing
    first = _ldpsim_list(tmp_path)  # builds the cache from the registry
    assert (tmp_path / cat.FILE_NAME).exists()
    second = _ldpsim_list(tmp_path)  # reads it
    listing = second.stdout.split("IMPORTED")[0]
    assert listing == fresh.stdout.split("IMPORTED")[0] == first.stdout.split("IMPORTED")[0]
    assert "krr" in listing and "mechanisms" in listing
    assert "IMPORTED []" in second.stdout
    assert "IMPORTED []" not in first.stdout  # the first run had to load the plugins
    one_kind = _ldpsim_list(tmp_path, "metrics")
    assert "IMPORTED []" in one_kind.stdout
    assert "metrics" in one_kind.stdout and "mechanisms" not in one_kind.stdout


@pytest.mark.parametrize(
    "content", ["", "{not json", "[1, 2]", '{"fingerprint": 3}', '{"fingerprint": "x", "kinds": 5}']
)
def test_a_corrupt_or_stale_cache_is_rebuilt_silently(tmp_path, monkeypatch, content):
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    names = ldpsim.get_registry().names("estimator")
    monkeypatch.setattr("ldpsim.plugin.registry._default", None)  # as in a fresh `ldpsim list`
    (tmp_path / cat.FILE_NAME).write_text(content)
    key = cat.fingerprint(cat.ENTRY_POINT_GROUP)
    assert cat.load(key) is None
    listing = cat.catalogue()
    assert [e["name"] for e in listing["estimator"]] == names
    stored = json.loads((tmp_path / cat.FILE_NAME).read_text())
    assert stored["fingerprint"] == key and stored["kinds"] == listing


def test_a_current_cache_is_what_is_listed(tmp_path, monkeypatch):
    """The cache is really read: a file with the current fingerprint decides what `list` prints."""
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("ldpsim.plugin.registry._default", None)
    key = cat.fingerprint(cat.ENTRY_POINT_GROUP)
    fake = {k: [] for k in KINDS}
    fake["metric"] = [{"name": "planted", "summary": "s", "origin": "o", "domains": [], "parameters": []}]
    cat.save(key, fake)
    assert cat.catalogue() == fake


class _EntryPoint(SimpleNamespace):
    pass


def test_the_fingerprint_follows_entry_points_versions_and_source_files(tmp_path, monkeypatch):
    package = tmp_path / "acme_ldp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mech.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    dist = SimpleNamespace(name="acme-ldp", version="1.0", read_text=lambda name: None)  # no metadata file
    eps = [_EntryPoint(name="acme", value="acme_ldp.mech", dist=dist)]
    monkeypatch.setattr(cat, "entry_points", lambda group: list(eps))
    before = cat.fingerprint("g")
    assert cat.fingerprint("g") == before  # deterministic
    (package / "mech.py").write_text("X = 22\n")  # an edit of an editable install (size changes)
    edited = cat.fingerprint("g")
    assert edited != before
    dist.version = "1.1"  # an upgrade
    upgraded = cat.fingerprint("g")
    assert upgraded != edited
    eps.append(_EntryPoint(name="acme2", value="acme_ldp.other:plugin", dist=dist))  # a new plugin
    assert cat.fingerprint("g") != upgraded


def test_a_registry_that_skipped_a_broken_plugin_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    broken = Registry()
    broken.skipped.append("plugin 'x' failed to import")
    monkeypatch.setattr("ldpsim.plugin.registry._default", None)
    monkeypatch.setattr("ldpsim.plugin.registry.get_registry", lambda: broken)
    assert cat.catalogue() == {k: [] for k in KINDS}
    assert not (tmp_path / cat.FILE_NAME).exists()


def test_an_unwritable_cache_folder_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(blocker / "sub"))  # cannot be created: a file is in the way
    monkeypatch.setattr("ldpsim.plugin.registry._default", None)
    assert "krr" in [e["name"] for e in cat.catalogue()["mechanism"]]


def test_classes_registered_in_process_are_listed_and_not_cached(tmp_path, monkeypatch):
    from plugins_under_test import BiasedKRR

    monkeypatch.setenv("LDPSIM_CACHE_DIR", str(tmp_path))
    ldpsim.get_registry()
    with ldpsim.registered(BiasedKRR):
        names = [e["name"] for e in cat.catalogue()["mechanism"]]
    assert BiasedKRR.name in names
    assert not (tmp_path / cat.FILE_NAME).exists()


def test_the_fingerprint_reads_no_distribution_metadata_yet_follows_installs(tmp_path, monkeypatch):
    """Parsing every distribution's METADATA was most of `ldpsim list`: the metadata folder and file stand in."""
    import importlib.metadata as im

    def parsed(self):
        raise AssertionError("metadata parsed")

    monkeypatch.setattr(im.Distribution, "metadata", property(parsed))
    info = tmp_path / "acme_ldp-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-ldp\nVersion: 1.0\n")
    dist = im.PathDistribution(info)
    monkeypatch.setattr(cat, "entry_points", lambda group: [_EntryPoint(name="acme", value="acme_ldp", dist=dist)])
    before = cat.fingerprint("g")
    assert cat.fingerprint("g") == before
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-ldp\nVersion: 1.0\nSummary: again\n")
    reinstalled = cat.fingerprint("g")  # the same version installed again
    assert reinstalled != before
    upgraded = tmp_path / "acme_ldp-1.1.dist-info"
    info.rename(upgraded)
    (upgraded / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-ldp\nVersion: 1.1\n")
    dist = im.PathDistribution(upgraded)
    assert cat.fingerprint("g") != reinstalled
