from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from importlib.metadata import entry_points

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import ldpsim
from ldpsim import Integers
from ldpsim.plugin.hookspecs import DISABLE_VARIABLE, ENTRY_POINT_GROUP, disabled_plugins

# The plugin catalogue cache (`ldpsim list`) of the tests, and of the CLIs they start, is their own.
_CACHE = tempfile.mkdtemp(prefix="ldpsim-test-cache-")
os.environ["LDPSIM_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

# The suite tests ldpsim, not the venv: the third-party plugins installed beside ldpsim (the example plugin, a
# user's, a broken one) are not loaded, in this process nor in the CLIs the tests start, so that an extra name
# or a plugin that fails to import changes no listing, output or warning. Tests that install a plugin do so on
# a folder of their own (tests/test_registry.py's `site`); ldpsim's own plugins always load, and one that fails
# is an error (pyproject.toml's filterwarnings).
_OURS = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP) if getattr(ep.dist, "name", None) == "ldpsim"}
THIRD_PARTY_PLUGINS = sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)} - _OURS)
os.environ[DISABLE_VARIABLE] = ",".join(sorted(disabled_plugins() | set(THIRD_PARTY_PLUGINS)))

# The property tests draw the same examples on every run (derandomize: seeded from each test), so a red run,
# in CI or here, is the same red run again; new examples are drawn with HYPOTHESIS_PROFILE=explore (as many,
# random) or thorough (1000, random). A random default once let a rare counterexample fail one CI run in many.
_SLOW_OK = [HealthCheck.too_slow]
settings.register_profile("default", deadline=None, max_examples=60, derandomize=True, suppress_health_check=_SLOW_OK)
settings.register_profile("explore", deadline=None, max_examples=60, suppress_health_check=_SLOW_OK)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def registry():
    return ldpsim.get_registry()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def line():
    """0..9: a small integers domain."""
    return Integers(low=0, high=9)
