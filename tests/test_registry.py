"""The plugin registry: built-ins, a third-party package, broken and clashing plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from helpers import forget_modules_from

import ldpsim
from ldpsim import Integers, PluginError, PluginWarning, Registry
from ldpsim.plugin.hookspecs import DISABLE_VARIABLE, disabled_plugins
from ldpsim.plugin.registry import KINDS
from ldpsim.testing import check_mechanism

ROOT = Path(__file__).resolve().parents[1]
THIRDPARTY = Path(__file__).parent / "thirdparty"


def fake_distribution(site: Path, name: str, version: str, entry_points: dict[str, str], files: dict[str, str]) -> None:
    """Lay out an installed distribution on ``site``, as pip would (dist-info + modules).

    Its entry points load even where the venv holds a plugin of the same name, which conftest.py keeps out
    of the tests (the ``site`` fixture restores the variable afterwards)."""
    os.environ[DISABLE_VARIABLE] = ",".join(sorted(disabled_plugins() - set(entry_points)))
    for filename, text in files.items():
        (site / filename).write_text(text)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[ldpsim]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv(DISABLE_VARIABLE, os.environ.get(DISABLE_VARIABLE, ""))  # restored after the test
    monkeypatch.syspath_prepend(str(site))
    before = set(sys.modules)
    yield site
    forget_modules_from(site, before)


@pytest.fixture
def neighbour(site):
    """The package in tests/thirdparty, installed the way its pyproject.toml says."""
    meta = tomllib.loads((THIRDPARTY / "pyproject.toml").read_text())["project"]
    fake_distribution(
        site,
        meta["name"],
        meta["version"],
        meta["entry-points"]["ldpsim"],
        {"ldpsim_neighbour.py": (THIRDPARTY / "ldpsim_neighbour.py").read_text()},
    )
    return site


def test_builtins_are_registered_through_entry_points_like_any_plugin():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["ldpsim"]
    registry = Registry.from_entry_points()
    # ours exactly; a venv may hold third parties' plugins beside them (the example plugin, a user's)
    ours = {e.plugin for kind in KINDS for e in registry.entries(kind) if e.distribution == "ldpsim"}
    assert ours == set(declared)
    entry = registry.get("mechanism", "krr")
    assert (entry.distribution, entry.version) == ("ldpsim", ldpsim.__version__)
    assert {"krr", "geometric", "matrix"} <= set(registry.names("mechanism"))
    assert {"ibu", "inv-n", "inv-p"} <= set(registry.names("estimator"))
    assert {"binomial", "uniform", "zipf", "csv"} <= set(registry.names("dataset"))
    assert {"tv", "emd", "l1", "l2"} <= set(registry.names("metric"))
    assert {"dask", "processes", "serial"} <= set(registry.names("executor"))


def test_builtins_use_only_the_public_api():
    for path in (ROOT / "plugins").rglob("*.py"):
        for line in path.read_text().splitlines():
            if line.startswith(("from ldpsim", "import ldpsim")):
                assert line.startswith(("from ldpsim import", "import ldpsim\n")) or line == "import ldpsim", (
                    f"{path}: {line}"
                )


def test_a_third_party_mechanism_is_found_and_meets_the_contract(neighbour):
    registry = Registry.from_entry_points()
    entry = registry.get("mechanism", "neighbour")
    assert (entry.plugin, entry.distribution, entry.version) == ("neighbour", "ldpsim-neighbour", "1.2.3")
    check_mechanism(registry.create("mechanism", "neighbour", Integers(low=0, high=9), p=0.3))
    assert "krr" in registry.names("mechanism")


def test_a_third_party_mechanism_runs_in_a_scenario(neighbour, monkeypatch):
    monkeypatch.setattr(ldpsim.plugin.registry, "_default", Registry.from_entry_points())
    ds = ldpsim.run_scenario(
        {
            "seed": 3,
            "users": 4000,
            "domain": {"kind": "integers", "low": 0, "high": 9},
            "dataset": {"name": "binomial", "p": 0.4},
            "cohorts": {"all": {"reports": [{"mechanism": "neighbour", "p": 0.2}]}},
            "estimators": ["ibu"],
            "metrics": ["tv"],
        }
    )
    assert float(ldpsim.scores(ds).max()) < 0.05
    assert (
        '"mechanism:neighbour": {"distribution": "ldpsim-neighbour", "plugin": "neighbour", "version": "1.2.3"}'
        in ds.attrs["plugins"]
    )
    assert json.loads(ds.attrs["distributions"]) == {"ldpsim": ldpsim.__version__, "ldpsim-neighbour": "1.2.3"}


def test_a_plugin_that_fails_to_import_is_skipped_with_a_warning(site):
    fake_distribution(
        site, "broken-plugin", "0.1", {"broken": "ldpsim_broken"}, {"ldpsim_broken.py": "import not_a_module\n"}
    )
    with pytest.warns(PluginWarning, match="plugin 'broken' from broken-plugin failed to import .*not_a_module"):
        registry = Registry.from_entry_points()
    assert "krr" in registry.names("mechanism")
    assert registry.skipped and "broken" in registry.skipped[0]


def test_a_plugin_whose_hook_raises_is_skipped(site):
    code = "from ldpsim import hookimpl\n@hookimpl\ndef register_metrics(register):\n    raise RuntimeError('boom')\n"
    fake_distribution(site, "boom-plugin", "0.1", {"boom": "ldpsim_boom"}, {"ldpsim_boom.py": code})
    with pytest.warns(PluginWarning, match="plugin 'boom' failed to register .*boom"):
        registry = Registry.from_entry_points()
    assert "tv" in registry.names("metric")


def test_registering_something_that_is_not_a_plugin_class_is_reported(site):
    code = "from ldpsim import hookimpl\n@hookimpl\ndef register_mechanisms(register):\n    register(dict)\n"
    fake_distribution(site, "odd-plugin", "0.1", {"odd": "ldpsim_odd"}, {"ldpsim_odd.py": code})
    with pytest.warns(PluginWarning, match="not a subclass of ldpsim.Mechanism"):
        Registry.from_entry_points()


def test_a_hook_with_a_misspelled_name_is_rejected(site):
    code = "from ldpsim import hookimpl\n@hookimpl\ndef register_mechanismz(register):\n    pass\n"
    fake_distribution(site, "typo-plugin", "0.1", {"typo": "ldpsim_typo"}, {"ldpsim_typo.py": code})
    with pytest.warns(PluginWarning, match="plugin 'typo' is invalid .*register_mechanismz"):
        Registry.from_entry_points()


def test_two_plugins_claiming_one_name_is_an_error_naming_both(site):
    code = (
        "from ldpsim import hookimpl, get_registry\n"
        "KRR = get_registry().get('mechanism', 'krr').cls\n"
        "class Mine(KRR):\n    name = 'krr'\n"
        "@hookimpl\ndef register_mechanisms(register):\n    register(Mine)\n"
    )
    fake_distribution(site, "krr-again", "2.0", {"zkrr": "ldpsim_zkrr"}, {"ldpsim_zkrr.py": code})
    with pytest.raises(
        PluginError, match=r"mechanism 'krr' is registered by two plugins: krr \(ldpsim .*\) and zkrr \(krr-again 2.0\)"
    ):
        Registry.from_entry_points()


def test_unknown_names_get_a_suggestion(registry):
    with pytest.raises(PluginError, match="unknown mechanism 'kr'; did you mean 'krr'"):
        registry.get("mechanism", "kr")
    with pytest.raises(PluginError, match="unknown estimator 'zzz'; choose one of"):
        registry.get("estimator", "zzz")


def test_plugin_classes_validate_like_the_registry_says(registry):
    entry = registry.get("mechanism", "krr")
    assert entry.cls.summary().startswith("k-ary randomized response")
    assert [p.describe() for p in entry.cls.parameters().values()] == ["eps: float > 0 (required)"]
    mech = registry.create("mechanism", "krr", Integers(low=0, high=3), eps=1)
    assert mech.eps == 1.0 and isinstance(mech.eps, float)
    assert mech == registry.create("mechanism", "krr", Integers(low=0, high=3), eps=1.0)
    assert mech != registry.create("mechanism", "krr", Integers(low=0, high=4), eps=1.0)
    assert np.isclose(mech.matrix.sum(), 4)


def test_a_test_site_forgets_its_own_modules_only(tmp_path):
    """Forgetting every module a test imported also forgot numpy/scipy submodules it imported first, and
    the next test to import them failed with numpy's "cannot load module more than once per process"."""
    import importlib

    (tmp_path / "ldpsim_forget_me.py").write_text("import xml.dom.minidom\n")
    sys.modules.pop("xml.dom.minidom", None)  # a pure-Python module, safe to import again
    before = set(sys.modules)
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("ldpsim_forget_me")
    finally:
        sys.path.remove(str(tmp_path))
    forget_modules_from(tmp_path, before)
    assert "ldpsim_forget_me" not in sys.modules
    assert "xml.dom.minidom" in sys.modules  # imported by the test's module, but not from its folder


@pytest.mark.parametrize(
    ("kind", "written", "registered"),
    [
        ("mechanism", "square-wave", "square_wave"),
        ("mechanism", "subset-selection", "subset_selection"),
        ("estimator", "krr_mle", "krr-mle"),
        ("mechanism", "l_grr", "l-grr"),
    ],
)
def test_hyphens_and_underscores_are_one_spelling(kind, written, registered):
    registry = ldpsim.get_registry()
    assert written not in registry.names(kind) and registry.get(kind, written) is registry.get(kind, registered)


def test_an_unknown_name_is_still_refused_with_a_suggestion():
    with pytest.raises(PluginError, match="unknown mechanism 'square-waves'.*square_wave"):
        ldpsim.get_registry().get("mechanism", "square-waves")


EXTRA = """
import numpy as np
from ldpsim import Metric, hookimpl

class Largest(Metric):
    \"\"\"Largest absolute error of one value's frequency.\"\"\"

    name = "largest-error"

    def _compute(self, estimate, truth, domain):
        return float(np.abs(estimate - truth).max())

@hookimpl
def register_metrics(register):
    register(Largest)
"""


def test_the_suite_passes_in_a_venv_holding_an_extra_and_a_broken_plugin(tmp_path):
    """Installing a third party's plugin once failed one test ("Extra items: 'example'"), and a plugin that fails
    to import some 50 (its warning an error in every test loading the registry; a warning line in every CLI's
    output; no plugin cache). Here both are installed, on a folder of their own, for a user's command and for
    a pytest session of registry-dependent tests: the user is warned, the tests pass."""
    site = tmp_path / "site"
    site.mkdir()
    fake_distribution(site, "ldpsim-extra", "1.0", {"extra": "ldpsim_extra"}, {"ldpsim_extra.py": EXTRA})
    fake_distribution(site, "ldpsim-broken", "0.1", {"broken": "ldpsim_broken"}, {"ldpsim_broken.py": "import nope\n"})
    env = {k: v for k, v in os.environ.items() if k != DISABLE_VARIABLE}  # as a user's shell, or a fresh session
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["LDPSIM_CACHE_DIR"] = str(tmp_path / "cache")
    exe = Path(sys.executable).with_name("ldpsim")
    listed = subprocess.run([str(exe), "list", "metrics"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "largest-error" in listed.stdout  # the extra plugin works
    assert "warning: plugin 'broken' from ldpsim-broken failed to import (ModuleNotFoundError" in listed.stderr
    assert f"{DISABLE_VARIABLE}=broken" in listed.stderr  # and the warning says how to silence it
    quiet = env | {DISABLE_VARIABLE: "broken"}
    silenced = subprocess.run([str(exe), "list", "metrics"], capture_output=True, text=True, env=quiet)
    assert silenced.returncode == 0 and "'broken'" not in silenced.stderr and "largest-error" in silenced.stdout

    here = Path(__file__).parent
    checks = [
        "test_registry.py::test_builtins_are_registered_through_entry_points_like_any_plugin",
        "test_registry.py::test_unknown_names_get_a_suggestion",
        "test_cli.py::test_bad_input_is_one_line_exit_2_and_no_file[args3-did you mean 'geometric'?]",  # a CLI's stderr
        "test_catalogue.py::test_a_corrupt_or_stale_cache_is_rebuilt_silently[{not json]",  # a cached listing
    ]
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(here / check) for check in checks)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert session.returncode == 0, session.stdout[-3000:]
    assert "failed" not in session.stdout and " passed" in session.stdout
