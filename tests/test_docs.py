"""The API reference (docs/api, built by Sphinx in .ci/run) documents every public name."""

from __future__ import annotations

import re
from pathlib import Path

import ldpsim

INDEX = Path(__file__).resolve().parents[1] / "docs" / "api" / "index.rst"


def test_every_public_name_is_in_the_api_reference():
    text = INDEX.read_text()
    documented = set(re.findall(r"^\.\. auto(?:class|function|data):: (\w+)$", text, flags=re.M))
    public = set(ldpsim.__all__) - {"__version__"}
    assert public - documented == set(), "add them to docs/api/index.rst"
    assert documented - public == set(), "docs/api/index.rst documents names ldpsim does not export"
    assert ".. automodule:: ldpsim.testing" in text  # the contract checks, by their __all__
