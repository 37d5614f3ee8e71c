"""Domain.of: a domain typed as its kind, the same object; a ParameterError for another kind."""

import pytest

from ldpsim import Categorical, Domain, Grid, Integers, ParameterError, Product, make_domain


def test_of_returns_the_domain_itself():
    grid = Grid(rows=3, cols=4)
    assert Grid.of(grid) is grid
    assert Domain.of(grid) is grid  # any domain is a Domain
    product = make_domain(
        {
            "kind": "product",
            "attributes": [
                {"name": "a", "kind": "integers", "low": 0, "high": 2},
                {"name": "b", "kind": "categorical", "values": ["x", "y"]},
            ],
        }
    )
    assert Product.of(product) is product


@pytest.mark.parametrize(
    ("kind", "domain"),
    [(Grid, Integers(low=0, high=3)), (Integers, Categorical(values=["a", "b"])), (Product, Grid(rows=2, cols=2))],
)
def test_of_refuses_another_kind(kind, domain):
    with pytest.raises(ParameterError) as err:
        kind.of(domain)
    assert err.value.field == "domain"
    assert f"{kind.name} domain is needed" in err.value.problem
    assert f"kind {kind.name}" in (err.value.hint or "")
