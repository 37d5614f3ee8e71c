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


def _mmse_error(matrix, prior):
    """E[Var(X | Y)] for X in {0, 1} with this prior reported through ``matrix``."""
    joint = np.asarray(prior)[:, None] * np.asarray(matrix)
    post = joint[1] / joint.sum(axis=0)
    return float(joint.sum(axis=0) @ (post * (1 - post)))


def test_cip_of_one_user_is_the_optimal_binary_lip():
    # N = 1: S = X_1 and Definition 4 is LIP (Definition 3). Posteriors must lie in [lo, hi] and average
    # to P1, so the best mechanism puts them at lo and hi: 002 Theorem 2's matrix, whose exact MMSE error
    # the LP must reach from above (its grid of posterior means converges to lo and hi)
    from helpers import make
    from ldpsim_plugins.metrics.average_mse import optimal_cip_mse

    p1, eps = 0.3, 1.0
    lip = make("mechanism", "lip-binary", Integers(low=0, high=1), eps=eps, prior=[1 - p1, p1])
    exact = _mmse_error(lip.matrix, [1 - p1, p1])
    assert exact <= optimal_cip_mse(eps, 1, (p1,), 2000) <= exact + 1e-3
    assert optimal_cip_mse(eps, 1, (p1,), 2000) <= optimal_cip_mse(eps, 1, (p1,), 20)


def test_cip_releases_the_sum_when_it_is_private_enough():
    # 200 users with prior 1/2 at eps = 1: P(X_i = 1 | S = s) = s / N stays within [e^-1 / 2, 1 - e^-1 / 2]
    # for every sum of probability above 1e-12, so releasing S is eps-CIP and the error is 0
    from ldpsim_plugins.metrics.average_mse import CentralizedIP

    metric = CentralizedIP(eps=1.0, users=200, priors=[0.5])
    assert metric([0.5, 0.5], [0.5, 0.5], Integers(low=0, high=1)) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ParameterError, match="domain"):
        metric.check_domain(Integers(low=0, high=2))
