"""Sphinx configuration of ldpsim's API reference (``sphinx-build -W -b html docs/api OUT``).

The reference is generated from the docstrings (numpydoc style) of the public API: ``ldpsim``
and ``ldpsim.testing``. Every name of ``ldpsim.__all__`` must appear in index.rst
(tests/test_docs.py checks it); the build runs with warnings as errors in .ci/run.
"""

from __future__ import annotations

import ldpsim

project = "ldpsim"
author = "the ldpsim authors"
copyright = "the ldpsim authors"  # noqa: A001 (Sphinx's name)
release = ldpsim.__version__
version = ".".join(release.split(".")[:2])

extensions = ["sphinx.ext.autodoc", "numpydoc", "sphinx.ext.intersphinx"]
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc sections give the types; signatures stay readable
numpydoc_show_class_members = False  # autodoc's :members: lists them once
numpydoc_class_members_toctree = False
numpydoc_validation_checks = {"GL08"}  # every documented public name has a docstring
numpydoc_validation_exclude = {
    r"\.(domain_kinds|unlimited_by|uncertainty|prior)$",  # class attributes documented by their #: comment
    r"^ldpsim\.(Integers|Grid|Categorical)\.(coords|distances|index|labels|spec)$",  # documented on Domain
}
nitpicky = False
exclude_patterns = ["_build"]
html_theme = "alabaster"
intersphinx_mapping: dict[str, tuple[str, None]] = {}
