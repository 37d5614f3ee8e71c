from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import ldpsim
from ldpsim import Integers

settings.register_profile("default", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
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
