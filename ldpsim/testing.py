"""Checks for plugin authors: does a mechanism keep the contract it declares?

::

    from ldpsim.testing import check_mechanism

    def test_my_mechanism():
        check_mechanism(MyMechanism(domain, eps=1.0))

Each check raises ``AssertionError`` naming what is wrong. ``check_mechanism``
runs them all, including a check of every optional capability the mechanism
declares (``check_capabilities``). ``check_estimator``, ``check_dataset`` and
``check_metric`` do the same for the other kinds of plugin; ``check_tuple_mechanism``
adds a tuple protocol's own checks (its per-attribute estimates' bias and variance);
``check_protocol`` and ``check_open_dataset`` check heavy-hitter protocols and open datasets.

``parametrize_with_checks`` gives a pytest suite one test id per check instead::

    @parametrize_with_checks([MyMechanism(domain, eps=1.0)])
    def test_ldpsim_contract(plugin, check):
        check(plugin)
"""

from .theory.checks import (
    check_capabilities,
    check_density_sampler,
    check_deterministic,
    check_diagonal_plus_constant,
    check_estimate_variance,
    check_hooks,
    check_likelihood,
    check_likely_subset,
    check_matrix,
    check_mechanism,
    check_named_value_likelihood,
    check_output_count,
    check_parameters,
    check_privacy_claim,
    check_rounds,
    check_sample_bit_counts,
    check_sample_counts,
    check_sampler,
    check_structured_likelihood,
    check_unbiased_estimate,
)
from .theory.contracts import check_configurable, check_dataset, check_estimator, check_metric
from .theory.protocol_checks import check_found_items, check_open_dataset, check_protocol
from .theory.suite import parametrize_with_checks, plugin_checks
from .theory.tuple_checks import check_marginal_estimates, check_tuple_mechanism

__all__ = [
    "check_configurable",
    "check_dataset",
    "check_estimator",
    "check_metric",
    "check_found_items",
    "check_open_dataset",
    "check_protocol",
    "check_capabilities",
    "check_density_sampler",
    "check_deterministic",
    "check_estimate_variance",
    "check_hooks",
    "check_likelihood",
    "check_likely_subset",
    "check_matrix",
    "check_mechanism",
    "check_named_value_likelihood",
    "check_output_count",
    "check_parameters",
    "check_privacy_claim",
    "check_rounds",
    "check_sample_counts",
    "check_diagonal_plus_constant",
    "check_sample_bit_counts",
    "check_sampler",
    "check_structured_likelihood",
    "check_unbiased_estimate",
    "check_tuple_mechanism",
    "check_marginal_estimates",
    "parametrize_with_checks",
    "plugin_checks",
]
