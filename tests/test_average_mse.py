"""avg-mse: 002's E/N from one run's histogram."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim_plugins.metrics.average_mse import AverageMSE

from ldpsim import Integers, ParameterError


def test_sum_is_squared_count_error_over_n():
    # 10 users, truth 3 ones, estimate says 5: (S - S_hat)^2 / N = 4 / 10
    domain = Integers(low=0, high=1)
    metric = AverageMSE(users=10)
    assert metric([0.5, 0.5], [0.7, 0.3], domain) == pytest.approx(0.4)


def test_histogram_sums_the_squared_count_errors():
    domain = Integers(low=0, high=2)
    metric = AverageMSE(users=4, aggregate="histogram")
    # counts (2, 1, 1) against (1, 1, 2): squared errors 1 + 0 + 1 over N = 4
    assert metric([0.25, 0.25, 0.5], [0.5, 0.25, 0.25], domain) == pytest.approx(0.5)


def test_weights_must_match_the_domain():
    with pytest.raises(ParameterError, match="weights"):
        AverageMSE(users=3, weights=[1.0, 2.0]).check_domain(Integers(low=0, high=2))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 10**6), st.lists(st.floats(0, 1), min_size=3, max_size=3))
def test_sum_equals_n_times_squared_mean_error(n, raw):
    # the square root of E/N is sqrt(N) times the error of the mean: the mean metric scaled
    domain = Integers(low=0, high=2)
    estimate = np.array(raw) + 1e-3
    estimate /= estimate.sum()
    truth = np.array([0.2, 0.5, 0.3])
    mean_error = float(np.arange(3) @ (estimate - truth))
    assert AverageMSE(users=n)(estimate, truth, domain) == pytest.approx(n * mean_error**2, rel=1e-9, abs=1e-12)
