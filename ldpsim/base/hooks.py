"""Which optional hooks a plugin class implements.

Contract base classes (mechanisms, datasets) give optional hooks a default
that means "not offered". Whether a subclass offers one is decided here, in
one way, rather than by comparing functions wherever a caller needs to know.
"""

from __future__ import annotations

from inspect import getattr_static


def overrides(cls: type, base: type, name: str) -> bool:
    """Whether ``cls`` replaces the attribute ``name`` that ``base`` defines.

    Parameters
    ----------
    cls
        A subclass of ``base`` (or ``base`` itself, which overrides nothing).
    base
        The class that defines the default.
    name
        The hook's attribute name, e.g. ``"_unbiased_estimate"``.

    Returns
    -------
    bool
        True if the attribute found on ``cls`` is not ``base``'s own. Looked up
        statically, so properties, class methods and plain functions compare alike.
    """
    return getattr_static(cls, name) is not getattr_static(base, name)
