"""ldpsim.testing's contract checks for estimators, datasets and metrics: built-ins pass, broken plugins fail."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsim import Dataset, Estimator, Grid, Integers, Metric, get_registry
from ldpsim.testing import check_dataset, check_estimator, check_metric

DOMAIN = Integers(low=0, high=9)
REGISTRY = get_registry()

# Seeded statistical checks: each built-in passes at seed 0; a correct plugin fails a given seed
# with probability at most 1e-4 (the checks' alpha).


@pytest.mark.parametrize("name", ["ibu", "mle", "inv-n", "inv-p", "norm-sub", "krr-mle"])
def test_builtin_estimators_keep_the_contract(name):
    check_estimator(REGISTRY.create("estimator", name))


def test_the_posterior_mean_keeps_the_contract_but_is_not_consistent():
    mmse = REGISTRY.create("estimator", "mmse", prior=[0.1] * 10)
    check_estimator(mmse, tolerance=1.0)  # shrinks toward its prior: not within 0.05 of the truth
    with pytest.raises(AssertionError, match="in total variation from the users' distribution"):
        check_estimator(mmse)


@pytest.mark.parametrize(
    ("name", "domain", "params"),
    [
        ("binomial", DOMAIN, {"p": 0.3}),
        ("uniform", DOMAIN, {}),
        ("zipf", DOMAIN, {}),
        ("pmf", Integers(low=0, high=2), {"p": [0.2, 0.3, 0.5]}),
        ("adult-ages", Integers(low=17, high=90), {}),
        ("adult-ages", Integers(low=17, high=90), {"replace": True}),  # records drawn again: not all of them
        ("gowalla", Grid(rows=16, cols=24, cell=0.5), {}),
    ],
)
def test_builtin_datasets_keep_the_contract(name, domain, params):
    check_dataset(REGISTRY.create("dataset", name, domain, **params))


@pytest.mark.parametrize(
    ("name", "params"),
    [("tv", {}), ("l1", {}), ("l2", {}), ("emd", {}), ("mean", {}), ("linear", {"weights": [1.0] * 10})],
)
def test_builtin_metrics_keep_the_contract(name, params):
    check_metric(REGISTRY.create("metric", name, **params))


def test_a_metric_that_reads_intervals_is_checked_without_the_zero_at_truth_rule():
    check_metric(REGISTRY.create("metric", "coverage"))


# ------------------------------------------------------------------ broken plugins are caught
class Stuck(Estimator):
    """Always the uniform distribution."""

    name = "stuck"

    def _estimate(self, observations):
        return np.full(observations.domain.size, 1 / observations.domain.size)


class Overriding(Estimator):
    name = "overriding"

    def estimate(self, observations):
        return super().estimate(observations)


class Noisy(Estimator):
    """Draws from a generator of its own: two estimates differ."""

    name = "noisy"
    _rng = np.random.default_rng(0)

    def _estimate(self, observations):
        return self._rng.dirichlet(np.ones(observations.domain.size))


def test_an_inconsistent_estimator_fails():
    with pytest.raises(AssertionError, match="Stuck: the estimate from 100000 reports"):
        check_estimator(Stuck())


def test_an_estimator_overriding_estimate_fails():
    with pytest.raises(AssertionError, match="Overriding overrides estimate"):
        check_estimator(Overriding())


def test_an_estimator_with_its_own_randomness_fails():
    with pytest.raises(AssertionError, match="Noisy gave two estimates from the same observations"):
        check_estimator(Noisy())


class Skewed(Dataset):
    """Declares the uniform distribution but draws value 0 twice as often."""

    name = "skewed"

    def distribution(self):
        return np.full(self.domain.size, 1 / self.domain.size)

    def _sample(self, n, rng):
        p = np.r_[2.0, np.ones(self.domain.size - 1)]
        return rng.choice(self.domain.size, size=n, p=p / p.sum())


class Global(Dataset):
    """Draws from numpy's global generator instead of the one it is given."""

    name = "global"

    def _sample(self, n, rng):
        return np.random.randint(0, self.domain.size, size=n)


def test_a_dataset_that_does_not_follow_its_distribution_fails():
    with pytest.raises(AssertionError, match=r"Skewed.sample does not follow distribution\(\)"):
        check_dataset(Skewed(DOMAIN))


def test_a_dataset_that_ignores_its_generator_fails():
    with pytest.raises(AssertionError, match="Global: two generators with the same seed gave different values"):
        check_dataset(Global(DOMAIN))


class Offset(Metric):
    """The L1 distance plus 0.1: never zero."""

    name = "offset"

    def _compute(self, estimate, truth, domain):
        return float(np.abs(estimate - truth).sum()) + 0.1


class Calling(Metric):
    name = "calling"

    def __call__(self, estimate, truth, domain, outputs=None):
        return 0.0


def test_a_metric_that_is_not_zero_at_the_truth_fails():
    with pytest.raises(AssertionError, match="Offset scored the truth against itself 0.1, not 0"):
        check_metric(Offset())
    check_metric(Offset(), zero_at_truth=False)


def test_a_metric_overriding_call_fails():
    with pytest.raises(AssertionError, match="Calling overrides __call__"):
        check_metric(Calling())
