"""Static checks of :meth:`ldpsim.Domain.of`, run by mypy (the gates), not by pytest: the narrowed type is
the class it is called on, so a plugin reads a grid's rows or a product's parts without an ignore."""

from __future__ import annotations

from typing import assert_type

from ldpsim import Domain, Grid, Integers, Product


def narrowed(domain: Domain) -> None:
    assert_type(Grid.of(domain), Grid)
    assert_type(Grid.of(domain).rows, int)
    assert_type(Integers.of(domain).step, int)
    assert_type(Product.of(domain), Product)
    assert_type(Product.of(domain).names, tuple[str, ...])
