"""The plugin registry.

Plugins are modules named by entry points of the group ``ldpsim``; ldpsim's
own built-ins are found exactly the same way. Each plugin implements hooks
from :mod:`ldpsim.hookspecs` and registers classes by name. A plugin that fails
to import or to register is reported as a :class:`PluginWarning` and skipped;
two plugins claiming one name is a :class:`~ldpsim.errors.PluginError` naming
both. The plugins named in ``$LDPSIM_DISABLE_PLUGINS`` (comma-separated entry-point
names, as ``ldpsim list`` shows them) are not loaded at all: a broken one is silenced that
way until it is fixed, and the tests keep a venv's third-party plugins out of their runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pluggy

from ..base.errors import PluginError, did_you_mean
from ..estimation.estimator import Estimator
from ..model.attack import Attack
from ..model.dataset import Dataset
from ..model.heavy_hitters import HeavyHitterProtocol, OpenDataset
from ..model.mechanism import Mechanism
from ..model.metric import Metric
from ..model.params import Configurable
from . import hookspecs
from .executor import Executor
from .hookspecs import DISABLE_VARIABLE, ENTRY_POINT_GROUP, disabled_plugins

#: the plugin name of classes registered in-process (:func:`register`)
IN_PROCESS = "in-process"

#: plugin kind -> (base class, hook name)
KINDS: dict[str, tuple[type[Configurable], str]] = {
    "mechanism": (Mechanism, "register_mechanisms"),
    "estimator": (Estimator, "register_estimators"),
    "dataset": (Dataset, "register_datasets"),
    "metric": (Metric, "register_metrics"),
    "executor": (Executor, "register_executors"),
    "attack": (Attack, "register_attacks"),
    "protocol": (HeavyHitterProtocol, "register_protocols"),
    "open_dataset": (OpenDataset, "register_open_datasets"),
}


class PluginWarning(UserWarning):
    """A plugin could not be loaded and was skipped."""


@dataclass(frozen=True)
class Entry:
    """A registered class and where it came from."""

    kind: str
    name: str
    cls: type[Configurable]
    plugin: str
    distribution: str | None
    version: str | None

    @property
    def origin(self) -> str:
        if self.distribution is None:
            return self.plugin
        return f"{self.plugin} ({self.distribution} {self.version})"


class Registry:
    """Named mechanisms, estimators, datasets, metrics, executors, attacks, protocols and open datasets from plugins."""

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
        self.skipped: list[str] = []

    @classmethod
    def from_entry_points(cls, group: str = ENTRY_POINT_GROUP) -> Registry:
        """Load every plugin advertised under the entry-point ``group``."""
        registry = cls()
        # a distribution's metadata is parsed once, not twice per entry point: it was half of `ldpsim list`.
        # importlib.metadata gives every entry point of a distribution the same Distribution object.
        origins: dict[int, tuple[str | None, str | None]] = {}
        disabled = disabled_plugins()
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            if ep.name in disabled:
                continue
            dist = getattr(ep, "dist", None)
            key = id(dist)
            if key not in origins:
                meta = dist.metadata if dist is not None else None
                origins[key] = (meta["Name"], meta["Version"]) if meta is not None else (None, None)
            distribution, version = origins[key]
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must not take the others down
                source = distribution or ep.value
                registry._skip(
                    f"plugin '{ep.name}' from {source} failed to import ({type(exc).__name__}: {exc});"
                    f" {DISABLE_VARIABLE}={ep.name} stops loading it"
                )
                continue
            registry.add(module, name=ep.name, distribution=distribution, version=version)
        return registry

    def add(
        self, plugin: ModuleType | object, *, name: str, distribution: str | None = None, version: str | None = None
    ) -> None:
        """Register one plugin object (a module with hook implementations)."""
        try:
            self._pm.register(plugin, name=name)
            self._pm.check_pending()  # a hook implementation that matches no specification
        except Exception as exc:
            if self._pm.has_plugin(name):
                self._pm.unregister(name=name)
            self._skip(f"plugin '{name}' is invalid ({exc})")
            return
        staged: list[Entry] = []
        try:
            for kind, (_, hook) in KINDS.items():
                for impl in getattr(self._pm.hook, hook).get_hookimpls():
                    if impl.plugin_name == name:

                        def register(cls: type, kind: str = kind) -> None:
                            staged.append(self._entry(kind, cls, name, distribution, version))

                        impl.function(**({"register": register} if "register" in impl.argnames else {}))
        except Exception as exc:
            self._pm.unregister(name=name)
            self._skip(f"plugin '{name}' failed to register ({type(exc).__name__}: {exc})")
            return
        for entry in staged:
            table = self._entries[entry.kind]
            if entry.name in table:
                other = table[entry.name]
                raise PluginError(
                    f"{entry.kind} '{entry.name}' is registered by two plugins: {other.origin} and {entry.origin}",
                    hint="uninstall one of them or rename its class's `name`",
                )
            table[entry.name] = entry

    def register(self, cls: type, *, plugin: str = IN_PROCESS) -> Entry:
        """Register one plugin class directly, without an entry point (a notebook's, a test's).

        Its kind follows from its base class (:class:`ldpsim.Mechanism`, ...); a name another
        plugin registered already is refused, naming both.

        Raises
        ------
        PluginError
            If ``cls`` is not a plugin class, has no ``name``, or its name is taken.
        """
        kinds = [kind for kind, (base, _) in KINDS.items() if isinstance(cls, type) and issubclass(cls, base)]
        if not kinds:
            raise PluginError(
                f"{cls!r} is not a plugin class",
                hint="register a subclass of ldpsim.Mechanism, Estimator, Dataset, Metric, Executor or Attack",
            )
        try:
            entry = self._entry(kinds[0], cls, plugin, None, None)
        except TypeError as exc:
            raise PluginError(str(exc), hint="give the class a `name`, the one scenarios use") from None
        other = self._entries[entry.kind].get(entry.name)
        if other is not None:
            raise PluginError(
                f"{entry.kind} '{entry.name}' is registered by two plugins: {other.origin} and {entry.origin}",
                hint="give the class another `name`",
            )
        self._entries[entry.kind][entry.name] = entry
        return entry

    def unregister(self, kind: str, name: str, cls: type | None = None) -> None:
        """Forget the plugin class registered as ``name`` (only if it is ``cls``, when given; nothing if none)."""
        table = self._table(kind)
        if name in table and (cls is None or table[name].cls is cls):
            del table[name]

    def _entry(self, kind: str, cls: type, plugin: str, distribution: str | None, version: str | None) -> Entry:
        base = KINDS[kind][0]
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"{cls!r} registered as a {kind} is not a subclass of ldpsim.{base.__name__}")
        if not getattr(cls, "name", ""):
            raise TypeError(f"{cls.__name__} has no `name`")
        return Entry(kind, cls.name, cls, plugin, distribution, version)

    def _skip(self, message: str) -> None:
        self.skipped.append(message)
        warnings.warn(f"{message}; the other plugins still load", PluginWarning, stacklevel=3)

    # ---------------------------------------------------------------- lookup
    def names(self, kind: str) -> list[str]:
        return sorted(self._table(kind))

    def entries(self, kind: str) -> list[Entry]:
        table = self._table(kind)
        return [table[n] for n in sorted(table)]

    def get(self, kind: str, name: str) -> Entry:
        """The entry registered as ``name``: hyphens and underscores are one spelling (``square-wave`` finds
        ``square_wave``, ``krr_mle`` finds ``krr-mle``), as the built-in names mix them."""
        table = self._table(kind)
        if isinstance(name, str) and name not in table:
            for other in (name.replace("_", "-"), name.replace("-", "_")):
                if other in table:
                    return table[other]
        if not isinstance(name, str) or name not in table:
            hint = did_you_mean(str(name), table) if table else f"no {kind} plugins are installed"
            raise PluginError(f"unknown {kind} '{name}'", hint=hint)
        return table[name]

    def create(self, kind: str, name: str, *args: Any, **params: Any) -> Any:
        """Instantiate the class registered as ``name`` with validated ``params``."""
        return self.get(kind, name).cls(*args, **params)

    def _table(self, kind: str) -> dict[str, Entry]:
        if kind not in self._entries:
            raise PluginError(f"unknown plugin kind '{kind}'", hint=did_you_mean(kind, self._entries))
        return self._entries[kind]


_default: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, loaded from entry points on first use."""
    global _default
    if _default is None:
        _default = Registry.from_entry_points()
    return _default


def loaded_registry() -> Registry | None:
    """The process-wide registry if :func:`get_registry` has loaded it, else None (loads nothing)."""
    return _default


def register(*classes: type) -> None:
    """Register plugin classes in this process's registry, as if a package's entry point named them.

    For notebooks and tests: scenarios then use the classes by their ``name``, with the ``serial``
    executor and with ``processes`` where workers fork from this process (Linux); a Dask cluster's
    workers load plugins from entry points only. :func:`registered` undoes it on exit.

    Parameters
    ----------
    *classes
        Subclasses of :class:`ldpsim.Mechanism`, ``Estimator``, ``Dataset``, ``Metric``, ``Executor`` or ``Attack``.

    Raises
    ------
    PluginError
        If a class is not a plugin class or its name is taken (nothing is registered then).
    """
    registry = get_registry()
    done: list[Entry] = []
    try:
        for cls in classes:
            done.append(registry.register(cls))
    except PluginError:
        for entry in done:
            registry.unregister(entry.kind, entry.name)
        raise


@contextmanager
def registered(*classes: type) -> Iterator[Registry]:
    """:func:`register` the classes for the ``with`` block only; yields the registry.

    Examples
    --------
    >>> with ldpsim.registered(Neighbour):  # doctest: +SKIP
    ...     ds = ldpsim.run_scenario(scenario)
    """
    register(*classes)
    registry = get_registry()
    try:
        yield registry
    finally:
        for cls in classes:
            for kind, (base, _) in KINDS.items():
                if issubclass(cls, base):
                    registry.unregister(kind, cls.name, cls)


def reset_registry() -> None:
    """Forget the loaded registry (the next :func:`get_registry` reloads plugins)."""
    global _default
    _default = None
