"""Hook specifications: how a plugin adds mechanisms, estimators, datasets, metrics, executors, attacks,
heavy-hitter protocols and open-domain datasets.

A plugin is a module listed under the ``ldpsim`` entry-point group. It
implements any of these hooks; each receives a ``register`` callback to call
once per class it provides::

    from ldpsim import hookimpl

    @hookimpl
    def register_mechanisms(register):
        register(MyMechanism)

The class's ``name`` attribute is the name scenarios use.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pluggy

PROJECT = "ldpsim"
#: the entry-point group that advertises plugins (ldpsim's own built-ins included)
ENTRY_POINT_GROUP = "ldpsim"
#: the environment variable naming, comma-separated, the entry points (plugins) not to load
DISABLE_VARIABLE = "LDPSIM_DISABLE_PLUGINS"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[[type], None]


def disabled_plugins() -> frozenset[str]:
    """The entry-point names ``$LDPSIM_DISABLE_PLUGINS`` lists (comma-separated, blanks ignored): not loaded."""
    return frozenset(name.strip() for name in os.environ.get(DISABLE_VARIABLE, "").split(",") if name.strip())


@hookspec
def register_mechanisms(register: Register) -> None:
    """Register :class:`ldpsim.Mechanism` subclasses."""


@hookspec
def register_estimators(register: Register) -> None:
    """Register :class:`ldpsim.Estimator` subclasses."""


@hookspec
def register_datasets(register: Register) -> None:
    """Register :class:`ldpsim.Dataset` subclasses."""


@hookspec
def register_metrics(register: Register) -> None:
    """Register :class:`ldpsim.Metric` subclasses."""


@hookspec
def register_executors(register: Register) -> None:
    """Register :class:`ldpsim.Executor` subclasses (where a run's tasks execute)."""


@hookspec
def register_attacks(register: Register) -> None:
    """Register :class:`ldpsim.Attack` subclasses (what an attacker cohort's fake users send)."""


@hookspec
def register_protocols(register: Register) -> None:
    """Register :class:`ldpsim.HeavyHitterProtocol` subclasses (reports about an open domain and their search)."""


@hookspec
def register_open_datasets(register: Register) -> None:
    """Register :class:`ldpsim.OpenDataset` subclasses (users' values over an open domain)."""
