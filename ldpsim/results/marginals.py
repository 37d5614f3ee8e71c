"""Marginals of a results dataset on a product domain: sums of the joint over the other attributes.

The joint estimate and the truth carry one dimension per attribute (two for a grid attribute),
so a marginal is a sum, exact and cheap: it is computed when asked rather than stored beside
the joint (where it would be redundant, and would multiply a file's variables by the
attributes).
"""

from __future__ import annotations

import json

import xarray as xr

from ..base.errors import LdpsimError
from ..model.domains import Product, make_domain


def product_of(ds: xr.Dataset) -> Product:
    """The product domain recorded in a results dataset's provenance."""
    try:
        domain = make_domain(json.loads(ds.attrs["domain"]))
    except (KeyError, TypeError, ValueError):
        raise LdpsimError("the results record no domain", hint="open a results file written by ldpsim run") from None
    if not isinstance(domain, Product):
        raise LdpsimError(
            f"the results are on {domain.name!r} domain, not a product of attributes",
            hint='marginals are for scenarios with [domain] kind = "product"',
        )
    return domain


def marginals(ds: xr.Dataset, *attributes: str, variable: str = "estimate") -> xr.DataArray:
    """The marginal of a joint variable over some attributes (every other attribute summed out).

    Parameters
    ----------
    ds
        Results of a scenario on a product domain.
    *attributes
        Attribute names, as in the scenario's ``[domain] attributes`` (one: a 1-way marginal;
        several: a k-way marginal, its dimensions in the attributes' domain order).
    variable
        The joint variable: ``"estimate"`` (default), ``"truth"``, or any variable over the domain.

    Returns
    -------
    xarray.DataArray
        ``variable`` summed over the other attributes' dimensions, named ``marginal``.

    Raises
    ------
    LdpsimError
        If the results are not on a product domain or an attribute name is unknown.
    """
    domain = product_of(ds)
    if not attributes:
        raise LdpsimError("name at least one attribute", hint=f"the attributes are {', '.join(domain.names)}")
    unknown = [a for a in attributes if a not in domain.names]
    if unknown:
        raise LdpsimError(f"no attribute '{unknown[0]}'", hint=f"the attributes are {', '.join(domain.names)}")
    if variable not in ds:
        raise LdpsimError(f"the results have no variable '{variable}'", hint="use estimate or truth")
    drop = [
        dim
        for name, part in zip(domain.names, domain.parts)
        if name not in attributes
        for dim in ([name] if len(part.dims) == 1 else [f"{name}_{d}" for d in part.dims])
    ]
    out = ds[variable].sum(drop)
    out.name = "marginal"
    out.attrs = {"long_name": f"marginal of {variable} over {', '.join(attributes)}"}
    return out
