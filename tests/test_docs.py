"""The documentation: the README as the front door, the site's sources (docs/, built by Sphinx in
.ci/run), the API reference's completeness, the generated catalogue's kinds, and the gallery."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import ldpsim

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
API = DOCS / "reference" / "api.rst"

#: a Markdown link or image outside code: [text](target) or ![alt](target)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def local_links(path: Path) -> list[str]:
    """The targets of ``path``'s links to files (not URLs, not anchors), outside code blocks and spans."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)  # fenced blocks
    text = re.sub(r"^(?: {4}|\t).*$", "", text, flags=re.M)  # indented code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans
    targets = [m.group(1).split("#")[0] for m in LINK.finditer(text)]
    return [t for t in targets if t and not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_every_public_name_is_in_the_api_reference():
    text = API.read_text()
    documented = set(re.findall(r"^\.\. auto(?:class|function|data):: (\w+)$", text, flags=re.M))
    public = set(ldpsim.__all__) - {"__version__"}
    assert public - documented == set(), "add them to docs/reference/api.rst"
    assert documented - public == set(), "docs/reference/api.rst documents names ldpsim does not export"
    assert ".. automodule:: ldpsim.testing" in text  # the contract checks, by their __all__


def test_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) < 250, "the README is the front door: move reference material to a docs/ page"
    # .ci/run runs the line two below the marker: "SETUP && pytest ..."
    command = lines[lines.index("<!-- test-command -->") + 2]
    assert command.startswith("    python3 -m venv .venv && ") and " && pytest" in command


def test_readme_links_resolve():
    links = local_links(README)
    assert any(link.startswith("docs/") for link in links), "the README links to the docs' pages"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_links_resolve(page: Path):
    """Sphinx checks links between pages; this also catches those to repository files, before a build."""
    missing = [link for link in local_links(page) if not (page.parent / link).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_catalogue_has_a_page_per_kind_ldpsim_lists():
    """docs/catalogue is generated from ``ldpsim list``; each kind it prints needs its page."""
    command = shutil.which("ldpsim", path=str(Path(sys.executable).parent)) or shutil.which("ldpsim")
    assert command is not None, "the ldpsim command is not installed"
    listing = subprocess.run([command, "list"], capture_output=True, text=True, check=True).stdout
    kinds = {line.strip() for line in listing.splitlines() if line.strip() and not line.startswith(" ")}
    pages = {
        m.group(1)
        for page in (DOCS / "catalogue").glob("*.md")
        for m in re.finditer(r"^```\{ldpsim-catalogue\} (\w+)$", page.read_text(), flags=re.M)
    }
    assert kinds == {
        "mechanisms",
        "estimators",
        "datasets",
        "metrics",
        "executors",
        "attacks",
        "protocols",
        "open_datasets",
    }
    assert pages == kinds


def gallery_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_gallery", ROOT / "scripts" / "make_gallery.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_gallery_figures_come_from_shipped_scenarios():
    gallery = gallery_script()
    for figure in gallery.FIGURES:
        assert figure.scenario.exists(), f"gallery figure {figure.name}: no scenario {figure.scenario}"
    names = {figure.name for figure in gallery.FIGURES}
    pngs = {png.stem: png for png in (DOCS / "gallery").glob("*.png")}
    assert set(pngs) == names, "run python scripts/make_gallery.py (and remove figures no longer listed)"
    for png in pngs.values():
        assert png.stat().st_size < gallery.MAX_BYTES, f"{png} is too large for the repository"
    assert (DOCS / "gallery" / "index.md").read_text() == gallery.page(), "run python scripts/make_gallery.py"


def test_gallery_script_regenerates_a_figure(tmp_path: Path):
    gallery = gallery_script()
    cheapest = gallery.FIGURES[0]
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_gallery.py"), "--only", cheapest.name, "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    made = tmp_path / f"{cheapest.name}.png"
    assert made.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert made.stat().st_size < gallery.MAX_BYTES
    assert not (tmp_path / "index.md").exists()  # one figure elsewhere leaves the page alone
