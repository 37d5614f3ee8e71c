"""One test id per contract check: the checks of any plugin as named, separately runnable steps.

``check_mechanism(m)`` stops at the first violation; a plugin author's suite learns more from one
failing test per broken rule, as scikit-learn's ``parametrize_with_checks`` gives for estimators::

    from ldpsim.testing import parametrize_with_checks

    @parametrize_with_checks([MyMechanism(Integers(low=0, high=9), eps=1.0)])
    def test_ldpsim_contract(plugin, check):
        check(plugin)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..estimation.estimator import Estimator
from ..model.dataset import Dataset
from ..model.mechanism import Mechanism
from ..model.metric import Metric
from ..model.tuples import TupleMechanism
from .checks import mechanism_checks
from .contracts import check_dataset, check_estimator, check_metric
from .tuple_checks import check_marginal_estimates

#: a named check of one plugin
Check = tuple[str, Callable[[Any], None]]


def plugin_checks(plugin: object, *, seed: int = 0, alpha: float = 1e-4) -> list[Check]:
    """The contract checks that apply to ``plugin``, in the order the one-line checks run them.

    Parameters
    ----------
    plugin
        A mechanism (a tuple protocol adds its marginal estimates' checks), an estimator, a dataset
        or a metric.
    seed
        Seed of every generator the checks use: the outcome is deterministic.
    alpha
        Chance that a correct plugin fails a given statistical check at a given seed.

    Returns
    -------
    list of (str, callable)
        The check's name and a function of the plugin that raises ``AssertionError`` on a violation.

    Raises
    ------
    TypeError
        If ``plugin`` is none of the kinds above.
    """
    if isinstance(plugin, Mechanism):
        found: list[Check] = list(mechanism_checks(seed=seed, alpha=alpha))
        if isinstance(plugin, TupleMechanism):
            found.append(("check_marginal_estimates", partial(check_marginal_estimates, seed=seed, alpha=alpha)))
        return found
    if isinstance(plugin, Estimator):
        return [("check_estimator", partial(check_estimator, seed=seed))]
    if isinstance(plugin, Dataset):
        return [("check_dataset", partial(check_dataset, seed=seed, alpha=alpha))]
    if isinstance(plugin, Metric):
        return [("check_metric", partial(check_metric, seed=seed))]
    raise TypeError(f"{plugin!r} is not a mechanism, estimator, dataset or metric")


def parametrize_with_checks(plugins: Sequence[object], *, seed: int = 0, alpha: float = 1e-4) -> Any:
    """A ``pytest.mark.parametrize`` over every (plugin, check) pair, one test id each.

    Parameters
    ----------
    plugins
        Instances to check (see :func:`plugin_checks` for the kinds).
    seed, alpha
        Passed to every check (see :func:`plugin_checks`).

    Returns
    -------
    pytest.MarkDecorator
        Parametrizes the test's ``plugin`` and ``check`` arguments; the test calls ``check(plugin)``.
        Ids read ``repr(plugin)-check_name``, e.g. ``krr(eps=1.0)-check_sampler``.
    """
    import pytest  # a test-time dependency only: importing ldpsim.testing must not need it

    cases, ids = [], []
    for plugin in plugins:
        for name, check in plugin_checks(plugin, seed=seed, alpha=alpha):
            cases.append((plugin, check))
            ids.append(f"{plugin!r}-{name}")
    return pytest.mark.parametrize(("plugin", "check"), cases, ids=ids)
