"""A cached catalogue of the installed plugins: what ``ldpsim list`` prints, without importing them.

Listing the plugins used to import every plugin module, and with them numpy and the estimation
layer: most of ``ldpsim list``'s time. The catalogue keeps the printed facts (name, summary,
origin, domains, parameter lines) of every registered class in a JSON file under the user's cache
folder, keyed by a fingerprint of everything the facts come from:

* the entry points of the ``ldpsim`` group (name, target, and a digest of the distribution's
  metadata file, which names and versions it: read, not parsed, as parsing was most of the time),
  so that installing, removing or upgrading a plugin package changes it;
* the size and modification time of every ``.py`` file of each entry point's top-level package
  and of ldpsim itself, so that editing an editable install (ours, or a plugin author's) changes
  it too;
* the Python version, the catalogue's format and ``$LDPSIM_DISABLE_PLUGINS``.

Computing the fingerprint reads metadata and stats a few hundred files (milliseconds); it
imports no plugin. The cache is a convenience, never a source of errors: a missing, unreadable,
corrupt or stale file is rebuilt from the registry, and a folder that cannot be written is
skipped. The file is untrusted input: anything but a regular file of at most ``MAX_BYTES`` (a FIFO,
a device, a huge sparse file) is not read, and a listing of another shape than the one
:func:`from_registry` builds, or with a control character in any of its text (a terminal escape
sequence would reach the screen), is rebuilt. A registry that skipped a broken plugin is never cached, so its warning is printed on
every run until the plugin is fixed. ``LDPSIM_CACHE_DIR`` moves the folder; ``LDPSIM_NO_CACHE=1``
turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from importlib.metadata import entry_points
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.untrusted import UNPRINTABLE, open_regular
from .hookspecs import ENTRY_POINT_GROUP, disabled_plugins

if TYPE_CHECKING:
    from .registry import Registry

#: bump when the stored layout changes: an older file then misses
FORMAT = 1
#: the cache file's name inside the cache folder
FILE_NAME = "plugin-catalogue.json"

#: the largest cache file read: the built-in plugins' catalogue is about 45 KB, so this leaves room for ninety
#: times as many plugins, while a huge file (a sparse 2 GB one) is never read, let alone parsed
MAX_BYTES = 4 << 20
#: what no cached plugin name may hold: the characters no text may (:data:`UNPRINTABLE`), and the brackets
#: of rich markup, inside which ``ldpsim list`` prints a name
UNPRINTABLE_NAME = re.compile(f"[\\[\\]]|{UNPRINTABLE.pattern}")
#: the fields of an entry of the listing, as :func:`from_registry` builds them
ENTRY_FIELDS = ("name", "summary", "origin", "domains", "parameters")

#: one plugin kind's listing: a list of entries, each a dict of printable facts
Listing = dict[str, list[dict[str, Any]]]


def cache_dir() -> Path | None:
    """The folder of the cache file, or None when ``LDPSIM_NO_CACHE`` is set."""
    if os.environ.get("LDPSIM_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = os.environ.get("LDPSIM_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ldpsim"


def _package_files(top: str) -> list[str]:
    """The ``.py`` files of a top-level package, found without importing it."""
    try:
        spec = find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    roots = list(spec.submodule_search_locations or [])
    if not roots:
        return [spec.origin] if spec.origin else []
    files: list[str] = []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
            files.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    return sorted(files)


def _distribution_key(dist: Any) -> str:
    """What identifies an installed distribution's version, without parsing its metadata.

    Parsing each distribution's METADATA (an e-mail message) took most of ``ldpsim list``'s time;
    a digest of the file's text (``Distribution.read_text``) changes with its name, version and
    anything a reinstall rewrites in it, at the cost of reading a small file.
    """
    if dist is None:
        return ""
    for name in ("METADATA", "PKG-INFO"):  # a wheel's metadata; an egg-info's (setuptools' develop)
        text = dist.read_text(name)
        if text is not None:
            return hashlib.sha256(text.encode()).hexdigest()
    return f"{dist.name}=={dist.version}"


def fingerprint(group: str) -> str:
    """A digest of what the catalogue of entry-point ``group`` depends on (see the module docstring)."""
    disabled = ",".join(sorted(disabled_plugins()))  # $LDPSIM_DISABLE_PLUGINS changes what is listed
    digest = hashlib.sha256(f"{FORMAT}|{sys.version}|{group}|{disabled}".encode())
    tops = {"ldpsim"}
    origins: dict[int, str] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
        dist = getattr(ep, "dist", None)
        if id(dist) not in origins:
            origins[id(dist)] = _distribution_key(dist)
        digest.update(f"|ep:{ep.name}={ep.value}@{origins[id(dist)]}".encode())
        tops.add(ep.value.split(":")[0].split(".")[0])
    for top in sorted(tops):
        for path in _package_files(top):
            try:
                st = os.stat(path)
            except OSError:
                continue
            digest.update(f"|{path}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def load(key: str) -> Listing | None:
    """The cached listing for fingerprint ``key``, or None (missing, unreadable, corrupt, suspect or stale)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        data = json.loads(_read_bounded(folder / FILE_NAME))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("fingerprint") != key:
        return None
    listing = data.get("kinds")
    return listing if _valid_listing(listing) else None


def _read_bounded(path: Path) -> str:
    """The text of ``path`` if it is a regular file (:func:`open_regular`) of at most ``MAX_BYTES``; OSError otherwise."""
    fh = open_regular(path)
    if fh is None:
        raise OSError(f"{path} is not a regular file")
    with fh:
        if os.fstat(fh.fileno()).st_size > MAX_BYTES:
            raise OSError(f"{path} is larger than {MAX_BYTES} bytes")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:  # grew since the check
        raise OSError(f"{path} is larger than {MAX_BYTES} bytes")
    return data.decode("utf-8")


def _valid_listing(listing: Any) -> bool:
    """Whether ``listing`` has the shape :func:`from_registry` builds, with printable text throughout."""
    if not isinstance(listing, dict):
        return False
    for kind, entries in listing.items():
        if not _text(kind, UNPRINTABLE_NAME) or not isinstance(entries, list):
            return False
        for entry in entries:
            if not isinstance(entry, dict) or tuple(entry) != ENTRY_FIELDS:
                return False
            if not _text(entry["name"], UNPRINTABLE_NAME) or not _text(entry["summary"]) or not _text(entry["origin"]):
                return False
            domains, parameters = entry["domains"], entry["parameters"]
            if not isinstance(domains, list) or not all(_text(d) for d in domains):
                return False
            if not isinstance(parameters, list) or not all(
                isinstance(p, list) and len(p) == 2 and _text(p[0]) and _text(p[1]) for p in parameters
            ):
                return False
    return True


def _text(value: Any, forbidden: re.Pattern[str] = UNPRINTABLE) -> bool:
    return isinstance(value, str) and forbidden.search(value) is None


def save(key: str, listing: Listing) -> None:
    """Store ``listing`` under fingerprint ``key``; a folder that cannot be written is skipped."""
    folder = cache_dir()
    if folder is None:
        return
    from ..base.atomic import atomic_path

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / FILE_NAME) as tmp:
            tmp.write_text(json.dumps({"fingerprint": key, "kinds": listing}), encoding="utf-8")
    except OSError:
        pass


def from_registry(registry: Registry) -> Listing:
    """The printable facts of every class of ``registry``, kind by kind."""
    from .registry import KINDS

    listing: Listing = {}
    for kind in KINDS:
        listing[kind] = [
            {
                "name": entry.name,
                "summary": entry.cls.summary(),
                "origin": entry.origin,
                "domains": list(getattr(entry.cls, "domain_kinds", None) or []),
                "parameters": [[p.describe(), p.doc or ""] for p in entry.cls.parameters().values()],
            }
            for entry in registry.entries(kind)
        ]
    return listing


def catalogue(group: str = ENTRY_POINT_GROUP) -> Listing:
    """The listing of the installed plugins: from the cache when it is current, else from the registry.

    A registry already loaded in this process (plugins registered in-process with
    :func:`ldpsim.register`) is listed as it is, neither read from nor written to the cache.

    Parameters
    ----------
    group
        The entry-point group the plugins are advertised under.

    Returns
    -------
    dict
        Plugin kind -> list of entries, each a dict with ``name``, ``summary``, ``origin``,
        ``domains`` and ``parameters`` (pairs of the parameter's description and its doc).
    """
    module = sys.modules.get(f"{__package__}.registry")  # imported already? then plugins are loaded or cheap
    loaded = module.loaded_registry() if module is not None else None
    if loaded is not None:
        return from_registry(loaded)
    key = fingerprint(group)
    cached = load(key)
    if cached is not None:
        return cached
    from .registry import Registry, get_registry

    registry = get_registry() if group == ENTRY_POINT_GROUP else Registry.from_entry_points(group)
    listing = from_registry(registry)
    if not registry.skipped:
        save(key, listing)
    return listing
