"""One plugin's full documentation, as ``ldpsim list NAME`` prints it.

Everything shown is read from the plugin's own declarations (its docstring, its
:class:`~ldpsim.Param` attributes, its class attributes), so the text cannot
drift from the code. A mechanism's privacy is a property of an instance; it is
shown for an example built on a small domain, since its notion (LDP,
geo-indistinguishability, LIP) is what a reader needs to compare mechanisms.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from ..base.errors import LdpsimError, did_you_mean
from ..model.capabilities import Capabilities
from ..model.domains import Categorical, Domain, Grid, Integers
from ..model.mechanism import Mechanism
from ..model.params import Param
from ..plugin.registry import KINDS, Entry, Registry

#: the small domains of each kind on which an example mechanism is built, tried in order
EXAMPLE_DOMAINS: dict[str, tuple[Domain, ...]] = {
    "integers": (Integers(low=0, high=2), Integers(low=0, high=1)),
    "grid": (Grid(rows=3, cols=3),),
    "categorical": (Categorical(values=("a", "b", "c")),),
}


def find_entries(registry: Registry, first: str, second: str | None) -> tuple[str | None, list[Entry]]:
    """What ``ldpsim list FIRST [SECOND]`` names: a kind to list (entries empty), or plugins to document.

    ``FIRST`` is a kind (``mechanisms`` or ``mechanism``) or a plugin name of any kind; with
    ``SECOND``, ``FIRST`` is the kind and ``SECOND`` the name. Raises a one-line
    :class:`~ldpsim.LdpsimError` with a suggestion for an unknown kind or name.
    """
    kind = _kind(first)
    if second is not None:
        if kind is None:
            raise LdpsimError(f"unknown kind '{first}'", hint=did_you_mean(first, [k + "s" for k in KINDS]))
        return kind, [registry.get(kind, second)]
    if kind is not None:
        return kind, []
    found = [registry.get(k, first) for k in KINDS if first in registry.names(k)]
    if not found:
        names = {name for k in KINDS for name in registry.names(k)} | {k + "s" for k in KINDS}
        raise LdpsimError(f"unknown plugin or kind '{first}'", hint=did_you_mean(first, names))
    return None, found


def _kind(word: str) -> str | None:
    singular = word[:-1] if word.endswith("s") else word
    return singular if singular in KINDS else None


def describe(entry: Entry) -> Iterator[str]:
    """The lines documenting one registered plugin class."""
    cls = entry.cls
    yield f"{entry.kind} {entry.name}"
    yield f"  origin: plugin {entry.plugin}, distribution {entry.distribution or '-'} {entry.version or ''}".rstrip()
    yield f"  class: {cls.__module__}.{cls.__qualname__}"
    yield ""
    for line in (inspect.getdoc(cls) or "(no description)").splitlines():
        yield f"  {line}".rstrip()
    yield ""
    params = cls.parameters()
    yield "  parameters:" if params else "  parameters: none"
    for param in params.values():
        yield from _param_lines(param)
    domains = getattr(cls, "domain_kinds", None)
    if entry.kind in ("mechanism", "dataset", "metric"):
        yield f"  domains: {', '.join(domains) if domains else 'any'}"
    for attr in ("outputs", "reads") if entry.kind in ("estimator", "metric") else ():
        declared = getattr(cls, attr, ())
        if isinstance(declared, tuple) and declared:  # result variables it adds, or estimate outputs it reads
            yield f"  {attr}: " + ", ".join(getattr(v, "name", str(v)) for v in declared)
    if getattr(cls, "maximizes_likelihood", False):
        yield "  maximizes the likelihood (its estimates are certified: loglik, kkt, gap)"
    if getattr(cls, "inverts_matrices", False):
        yield "  inverts the mechanisms' matrices (refused when they would not fit in memory)"
    if entry.kind == "mechanism":
        assert issubclass(cls, Mechanism)
        yield from _mechanism_lines(cls)


def _param_lines(param: Param[Any]) -> Iterator[str]:
    yield f"    {param.describe()}"
    if param.doc:
        yield f"        {param.doc}"


def _mechanism_lines(cls: type[Mechanism]) -> Iterator[str]:
    example = example_mechanism(cls)
    if example is None:
        yield "  privacy: declared by each instance (build one to see it: `ldpsim check mechanism`)"
    else:
        mech, how = example
        yield f"  privacy claimed: {mech.privacy}, e.g. {how}"
    yield (
        "  privacy bound: exactly the level of its probabilities"
        if cls.tight_privacy
        else "  privacy bound: an upper bound; its probabilities may be more private than declared"
    )
    declared = Capabilities.of(cls).declared
    names = [f.name for f in fields(Capabilities)]
    yield "  capabilities: " + (", ".join(n for n in names if n in declared) or "none")


def example_mechanism(cls: type[Mechanism]) -> tuple[Mechanism, str] | None:
    """An instance of ``cls`` on a small domain with example values for its required parameters, or None."""
    domains = [d for kind in cls.domain_kinds or ("integers",) for d in EXAMPLE_DOMAINS.get(kind, ())]
    for domain in domains:
        params = {}
        for key, param in cls.parameters().items():
            if param.required:
                value = _example_value(param, domain)
                if value is None:
                    return None
                params[key] = value
        try:
            mech = cls(domain, **params)
            mech.privacy  # noqa: B018  (the claim may be computed, and fail, here)
        except Exception:  # an example this domain does not suit (a binary mechanism): try the next
            continue
        shown = ", ".join(f"{k}={_short(v)}" for k, v in params.items())
        return mech, f"on {_domain_text(domain)}" + (f" with {shown}" if shown else "")
    return None


def _example_value(param: Param[Any], domain: Domain) -> Any:
    """A valid-looking value of a required parameter: 1 for a level, the uniform distribution, ..."""
    kind = param.kinds[0]
    if kind in ("float", "int"):
        value = 1.0 if kind == "float" else 1
        if param.le is not None and value > param.le:
            value = type(value)(param.le)
        if param.ge is not None and value < param.ge:
            value = type(value)(param.ge)
        return value
    if kind == "distribution":
        return [1 / domain.size] * domain.size
    if kind == "matrix":  # randomized response keeping the value w.p. 1/2
        k = domain.size
        return [[0.5 if i == j else 0.5 / (k - 1) for j in range(k)] for i in range(k)]
    return None


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "[...]" if value and isinstance(value[0], list) else "uniform"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _domain_text(domain: Domain) -> str:
    spec = domain.spec()
    if spec["kind"] == "integers":
        return f"integers {spec['low']}..{spec['high']}"
    if spec["kind"] == "grid":
        return f"a {spec['rows']}x{spec['cols']} grid"
    return "categorical {" + ", ".join(spec["values"]) + "}"
