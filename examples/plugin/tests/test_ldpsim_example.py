"""The example plugins keep ldpsim's contracts: one line per plugin with ldpsim.testing."""

from ldpsim_example import Floor, MaxError, Triangle, UniformNoise

from ldpsim import Integers
from ldpsim.testing import check_dataset, check_estimator, check_mechanism, check_metric

DOMAIN = Integers(low=0, high=9)


def test_uniform_noise():
    check_mechanism(UniformNoise(DOMAIN, q=0.4))


def test_floor():
    check_estimator(Floor(floor=0.01), UniformNoise(DOMAIN, q=0.4))


def test_triangle():
    check_dataset(Triangle(DOMAIN, mode=3))


def test_max_error():
    check_metric(MaxError(), DOMAIN)
