"""The contracts of estimators, datasets and metrics, as checks a plugin author runs in one line.

    from ldpsim.testing import check_dataset, check_estimator, check_metric

    def test_my_plugins():
        check_estimator(MyEstimator())
        check_dataset(MyDataset(Integers(low=0, high=9)))
        check_metric(MyMetric(), Integers(low=0, high=9))

Like :func:`ldpsim.testing.check_mechanism` (and scikit-learn's ``check_estimator``), each
check raises ``AssertionError`` naming the first violation. Statistical checks run at a
fixed seed, so their outcome is deterministic; for a correct plugin the chance that a
given seed fails one is at most ``alpha`` (default 1e-4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base.errors import ParameterError
from ..base.hooks import overrides
from ..estimation.estimator import Estimate, Estimator
from ..estimation.observations import Observations
from ..model.dataset import Dataset
from ..model.domains import Domain, Integers
from ..model.mechanism import Mechanism
from ..model.metric import Metric
from ..model.params import Configurable

__all__ = ["check_configurable", "check_dataset", "check_estimator", "check_metric"]


def check_configurable(cls: type[Configurable], valid: dict[str, Any], *args: Any) -> None:
    """Valid parameters construct; an unknown name, a wrong type or a value out of bounds raises a
    ParameterError naming the parameter.

    Parameters
    ----------
    cls
        The plugin class (any kind).
    valid
        Parameters that construct it.
    *args
        What the constructor takes before the parameters (a dataset's domain).
    """
    cls(*args, **valid)
    try:
        cls(*args, **valid, no_such_parameter=1)
    except ParameterError as exc:
        assert "no_such_parameter" in str(exc), f"{cls.__name__}: the error does not name the unknown parameter"
    else:
        raise AssertionError(f"{cls.__name__} accepted an unknown parameter")
    for name, param in cls.parameters().items():
        bad_values: list[Any] = [{"not": "a valid value"}]  # no parameter kind accepts a table
        if {"float", "int"} & set(param.kinds):
            bad_values.append("not a number")
            for bound, delta in ((param.gt, 0), (param.ge, -1), (param.lt, 0), (param.le, 1)):
                if bound is not None:
                    bad_values.append(bound + delta)
        for bad in bad_values:
            try:
                cls(*args, **{**valid, name: bad})
            except ParameterError as exc:
                assert name in str(exc), f"{cls.__name__}: the error for {name}={bad!r} does not name {name}: {exc}"
            else:
                raise AssertionError(f"{cls.__name__} accepted {name}={bad!r}")


def _chi_square_p(observed: np.ndarray, expected_p: np.ndarray) -> float:
    """p-value of counts ``observed`` under probabilities ``expected_p`` (cells of zero probability must be empty)."""
    from scipy.stats import chisquare

    observed = np.asarray(observed, dtype=float)
    keep = expected_p > 0
    assert observed[~keep].sum() == 0, "values of probability zero were drawn"
    if keep.sum() < 2:
        return 1.0
    return float(chisquare(observed[keep], observed.sum() * expected_p[keep] / expected_p[keep].sum()).pvalue)


def check_estimator(
    estimator: Estimator,
    mechanism: Mechanism | None = None,
    *,
    users: int = 100_000,
    tolerance: float = 0.05,
    seed: int = 0,
) -> None:
    """An estimator keeps the contract of :class:`ldpsim.Estimator`.

    Checks that it implements ``_estimate`` rather than overriding the checked ``estimate``; that it
    says what its estimate is (``gives``); that its parameters are validated; that it accepts the mechanism (``check_setup``); that it gives a
    distribution (with its declared outputs only) and the same one twice from the same observations;
    and that it is consistent: from ``users`` reports of a known distribution its estimate is within
    ``tolerance`` in total variation of the users' empirical distribution.

    Parameters
    ----------
    estimator
        The estimator to check.
    mechanism
        The mechanism the reports go through (default: k-RR with eps = 2 on 0..9).
    users
        Reports drawn for the consistency check.
    tolerance
        Largest total variation distance accepted there.
    seed
        Seed of the draws: the outcome is deterministic.

    Raises
    ------
    AssertionError
        Naming the first violation.
    """
    name = type(estimator).__name__
    assert not overrides(type(estimator), Estimator, "estimate"), (
        f"{name} overrides estimate(), which checks and times what _estimate returns: implement _estimate"
    )
    gives = type(estimator).gives
    assert isinstance(gives, str) and gives, f"{name}.gives must name what the estimate is, e.g. 'distribution'"
    check_configurable(type(estimator), estimator.get_params())
    if mechanism is None:
        from ..plugin.registry import get_registry

        mechanism = get_registry().create("mechanism", "krr", Integers(low=0, high=9), eps=2.0)
    domain = mechanism.domain
    estimator.check_setup(domain, [(mechanism,)])
    rng = np.random.default_rng([seed, 1])
    truth = rng.dirichlet(np.ones(domain.size))
    values = rng.choice(domain.size, size=users, p=truth)
    observations = Observations.from_reports(domain, [(mechanism, mechanism.sample(values, rng))])
    first, again = estimator.estimate(observations), estimator.estimate(observations)
    assert isinstance(first, Estimate), f"{name}.estimate returned {type(first).__name__}, not an Estimate"
    assert np.array_equal(first.distribution, again.distribution), (
        f"{name} gave two estimates from the same observations: its randomness must be derived from them"
    )
    empirical = np.bincount(values, minlength=domain.size) / users
    tv = 0.5 * float(np.abs(first.distribution - empirical).sum())
    assert tv <= tolerance, (
        f"{name}: the estimate from {users} reports through {mechanism!r} is {tv:.3g} in total variation from "
        f"the users' distribution (accepted: {tolerance})"
    )


def check_dataset(dataset: Dataset, *, users: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """A dataset keeps the contract of :class:`ldpsim.Dataset`.

    Checks that it implements hooks (``_sample``, ``_sample_counts``) rather than overriding the checked
    ``sample`` and ``sample_counts``; that its parameters are validated; that it draws only from its
    generator; and that values and counts follow one law: its ``distribution()`` if it declares one
    (chi-square tests), else each other's (a chi-square test of homogeneity). A dataset of fixed
    records (``size``) drawn without replacement (``max_users == size``) gives all of them when asked for
    ``size`` users.

    Parameters
    ----------
    dataset
        The dataset to check, on a small domain.
    users
        Users drawn by the statistical checks (at most ``size``).
    seed
        Seed of the draws: the outcome is deterministic.
    alpha
        Chance that a correct dataset fails a statistical check at this seed (each test runs at alpha / 2).

    Raises
    ------
    AssertionError
        Naming the first violation.
    """
    name = type(dataset).__name__
    replaced = [m for m in ("sample", "sample_counts") if overrides(type(dataset), Dataset, m)]
    assert not replaced, f"{name} overrides {', '.join(replaced)}: implement _sample and _sample_counts instead"
    check_configurable(type(dataset), dataset.get_params(), dataset.domain)
    k = dataset.domain.size
    n = min(users, dataset.size) if dataset.size is not None else users
    a = dataset.sample(n, np.random.default_rng([seed, 2]))
    assert np.array_equal(a, dataset.sample(n, np.random.default_rng([seed, 2]))), (
        f"{name}: two generators with the same seed gave different values"
    )
    from_values = np.bincount(a, minlength=k)
    counts = dataset.sample_counts(n, np.random.default_rng([seed, 3]))
    law = dataset.distribution()
    if law is not None:
        law = np.asarray(law, dtype=float)
        assert law.shape == (k,) and np.isclose(law.sum(), 1) and law.min() >= 0, (
            f"{name}.distribution() is not a distribution over {k} values"
        )
        for what, observed in (("sample", from_values), ("sample_counts", counts)):
            p = _chi_square_p(observed, law)
            assert p >= alpha / 2, f"{name}.{what} does not follow distribution() (chi-square p = {p:.3g})"
    elif dataset.size is None:
        from scipy.stats import chi2_contingency

        table = np.stack([from_values, counts])
        table = table[:, table.sum(axis=0) > 0]
        if table.shape[1] > 1:
            p = float(chi2_contingency(table).pvalue)
            assert p >= alpha / 2, f"{name}: sample and sample_counts follow different laws (chi-square p = {p:.3g})"
    if dataset.size is not None and dataset.max_users == dataset.size:  # drawn without replacement
        everyone = dataset.sample_counts(dataset.size, np.random.default_rng([seed, 4]))
        again = dataset.sample_counts(dataset.size, np.random.default_rng([seed, 5]))
        assert np.array_equal(everyone, again), f"{name}: all {dataset.size} records gave different counts twice"


def check_metric(metric: Metric, domain: Domain | None = None, *, seed: int = 0, zero_at_truth: bool = True) -> None:
    """A metric keeps the contract of :class:`ldpsim.Metric`.

    Checks that it implements ``_compute`` rather than overriding the checked ``__call__``; that its
    parameters are validated and it accepts ``domain``; that it scores random distributions with a
    finite number, the same one twice, and (with ``zero_at_truth``, for errors) 0 when the estimate is
    the truth and at least 0 otherwise; that it gives exactly its declared outputs; and that its
    ``units`` is a string ("distance" for the domain's unit of distance) and ``scores`` None or a tuple of
    what estimators give.

    Parameters
    ----------
    metric
        The metric to check.
    domain
        A domain it works on (default: the integers 0..9).
    seed
        Seed of the random distributions.
    zero_at_truth
        Whether the metric is an error that vanishes at the truth (a signed bias is not).

    Raises
    ------
    AssertionError
        Naming the first violation.
    """
    name = type(metric).__name__
    assert not overrides(type(metric), Metric, "__call__"), f"{name} overrides __call__: implement _compute instead"
    assert isinstance(type(metric).units, str), f"{name}.units must be a string"
    scores = type(metric).scores
    assert scores is None or (isinstance(scores, tuple) and scores and all(isinstance(s, str) and s for s in scores)), (
        f"{name}.scores must be None (any estimate) or a tuple of what estimators give, e.g. ('distribution',)"
    )
    check_configurable(type(metric), metric.get_params())
    domain = domain if domain is not None else Integers(low=0, high=9)
    metric.check_domain(domain)
    rng = np.random.default_rng([seed, 6])
    for _ in range(5):
        estimate, truth = rng.dirichlet(np.ones(domain.size), size=2)
        outputs = _fake_outputs(metric, estimate)
        score = metric(estimate, truth, domain, outputs)
        assert np.isfinite(score), f"{name} scored {score} on two distributions over {domain.size} values"
        assert score == metric(estimate, truth, domain, outputs), f"{name} scored the same pair differently twice"
        if zero_at_truth and not type(metric).reads:  # one that reads intervals scores them, not a distance
            assert score >= 0, f"{name} scored {score} < 0: an error is never negative (or pass zero_at_truth=False)"
            at_truth = metric(truth, truth, domain, _fake_outputs(metric, truth))
            assert abs(at_truth) <= 1e-12, f"{name} scored the truth against itself {at_truth}, not 0"
        if type(metric).outputs:
            metric.output_values(estimate, truth, domain)  # raises naming undeclared or missing outputs


def _fake_outputs(metric: Metric, estimate: np.ndarray) -> dict[str, np.ndarray]:
    """What a metric that reads an estimate's outputs needs: the estimate itself for every read output
    (a zero-width interval), so it can be scored."""
    return {name: estimate for name in type(metric).reads}
