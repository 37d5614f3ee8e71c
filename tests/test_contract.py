"""Every built-in mechanism passes the contract kit third parties use (and a new one cannot be added without)."""

from __future__ import annotations

import pytest
from helpers import make

import ldpsim
from ldpsim import Categorical, Grid, Integers
from ldpsim.testing import check_mechanism

LINE = Integers(low=0, high=7)
GRID = Grid(rows=3, cols=4, cell=0.5)
EXAMPLES = {
    "krr": (Categorical(values=list("abcde")), {"eps": 1.0}),
    "geometric": (LINE, {"eps": 0.4}),
    "laplace": (Integers(low=0, high=14, step=2), {"eps": 0.3}),
    "exponential": (GRID, {"eps": 1.5}),
    "planar-geometric": (GRID, {"eps": 1.0, "window": [0, 1, 2, 3]}),
    "planar-laplace": (GRID, {"eps": 2.0}),
    "rappor": (Integers(low=0, high=5), {"eps": 1.0}),
    "oue": (Integers(low=0, high=5), {"eps": 2.0}),
    "olh": (LINE, {"eps": 1.5}),
    "lip": (Integers(low=0, high=2), {"eps": 2.0, "prior": [0.2, 0.3, 0.5]}),
    "lip-binary": (Integers(low=0, high=1), {"eps": 1.0, "prior": [0.4, 0.6]}),
    "matrix": (Categorical(values=["x", "y"]), {"rows": [[0.8, 0.2], [0.3, 0.7]]}),
}


def test_every_built_in_mechanism_has_an_example():
    built_in = {e.name for e in ldpsim.get_registry().entries("mechanism") if e.distribution == "ldpsim"}
    assert built_in == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_built_in_mechanism_meets_the_contract(name):
    domain, params = EXAMPLES[name]
    check_mechanism(make("mechanism", name, domain, **params))
