"""Checks for plugin authors: does a mechanism keep the contract it declares?

::

    from ldpsim.testing import check_mechanism

    def test_my_mechanism():
        check_mechanism(MyMechanism(domain, eps=1.0))

Each check raises ``AssertionError`` naming what is wrong.
"""

from .theory.checks import (
    check_deterministic,
    check_likelihood,
    check_matrix,
    check_mechanism,
    check_parameters,
    check_privacy_claim,
    check_sampler,
)

__all__ = [
    "check_deterministic",
    "check_likelihood",
    "check_matrix",
    "check_mechanism",
    "check_parameters",
    "check_privacy_claim",
    "check_sampler",
]
