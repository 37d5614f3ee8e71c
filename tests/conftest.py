from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import ldpsim
from ldpsim import Integers

# The plugin catalogue cache (`ldpsim list`) of the tests, and of the CLIs they start, is their own.
_CACHE = tempfile.mkdtemp(prefix="ldpsim-test-cache-")
os.environ["LDPSIM_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

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
