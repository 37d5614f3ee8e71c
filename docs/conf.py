"""Sphinx configuration of ldpsim's documentation site.

One site, one build, nitpicky and with warnings as errors (as .ci/run builds it)::

    pip install -e '.[docs]'
    sphinx-build -W --keep-going -n -b html docs build/docs

Pages are Markdown (myst-parser) except the API reference (``reference/api.rst``), which autodoc
generates from the numpydoc docstrings of ``ldpsim`` and ``ldpsim.testing``; tests/test_docs.py
checks that it names every public name. The plugin catalogue is generated at build time by the
``ldpsim-catalogue`` directive (``_ext/ldpsim_catalogue.py``) from what ``ldpsim list`` prints, so
it cannot drift from the plugins. Nothing is fetched from the network (no intersphinx).
"""

from __future__ import annotations

import sys
from pathlib import Path

import ldpsim

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "ldpsim"
author = "the ldpsim authors"
copyright = "the ldpsim authors"  # Sphinx's name
release = ldpsim.__version__
version = ".".join(release.split(".")[:2])

extensions = ["sphinx.ext.autodoc", "numpydoc", "myst_parser", "ldpsim_catalogue"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/.ipynb_checkpoints"]

# Markdown: "#anchor" links to headings (down to ###), $...$ math as in docs/tuples-privacy.md is
# left alone (no dollarmath), and links to repository files outside docs/ (scenarios, examples,
# benchmarks) are written as paths relative to the page, as on GitHub; myst leaves them as links.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc sections give the types; signatures stay readable
numpydoc_show_class_members = False  # autodoc's :members: lists them once
numpydoc_class_members_toctree = False
numpydoc_validation_checks = {"GL08"}  # every documented public name has a docstring
numpydoc_validation_exclude = {
    r"\.(domain_kinds|unlimited_by|uncertainty|prior)$",  # class attributes documented by their #: comment
    r"^ldpsim\.(Integers|Grid|Categorical)\.(coords|distances|index|labels|spec)$",  # documented on Domain
}

# Nitpicky: every cross-reference must resolve, except those that cannot, each kind by a narrow
# pattern. A docstring that names a documented public name resolves; one naming an internal name
# (a hook, an internal module, a policy constant) keeps its text and is listed here.
nitpicky = True
nitpick_ignore_regex = [
    # other libraries' names: no intersphinx, so no network at build time
    (r"py:.*", r"(numpy|np|scipy|xarray|xr|pandas|pd|pluggy|typer|rich|collections|typing|pathlib|os)\..*"),
    (r"py:(class|meth)", r"PluginManager(\.\w+)?"),  # pluggy's, in the docstring ldpsim.hookimpl inherits
    # hooks: the protected methods a plugin implements, documented by their base class's docstring
    (r"py:(meth|func)", r"(\w+\.)*_[a-z]\w*"),
    # the layers' modules: internal (the reference documents ``ldpsim`` and ``ldpsim.testing`` only)
    (r"py:.*", r"ldpsim\.(base|model|estimation|plugin|theory|results|running|output)(\.\w+)*"),
    # internal policy constants (thresholds, budgets) that docstrings name; the public ones resolve
    (r"py:data", r"[A-Z][A-Z0-9_]+"),
]
nitpick_ignore = [
    # internal names some docstrings name without a path to a documented name
    ("py:attr", "dims"),  # Domain's, from Integers.coords and Categorical.coords
    ("py:attr", "fft_shape"),  # ConvolutionOperator.spectrum
    ("py:attr", "Mechanism.report_density"),  # ldpsim.testing.check_sampler
    ("py:meth", "sample"),  # NumericMechanism.continuous_reports: Mechanism.sample, inherited
    ("py:func", "execute"),  # run_scenario: the runner's internal function
    ("py:func", "sampled_rows"),  # with_exact_rows, newton_mle: the Newton solver's internal sampler
]

html_theme = "alabaster"
html_title = f"ldpsim {release}"
html_theme_options = {"description": "local privacy mechanisms and estimators, simulated at scale"}
