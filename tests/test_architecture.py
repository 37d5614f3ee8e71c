"""The layering of ldpsim, read from the source: imports go down the layers, never round in a cycle;
the core never imports a plugin; plugins use only the public ``ldpsim`` package.

Every import statement of every module counts, wherever it sits: at the top, inside a function (a
deferred import is still a dependency, only a hidden one) or under ``if TYPE_CHECKING:`` (a type
annotation is a dependency too, and a cycle through one is still a cycle for a reader).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "ldpsim"
PLUGINS = ROOT / "plugins"

#: the layers of ldpsim, bottom to top: a module imports from its own layer or lower ones
LAYERS = ("base", "model", "estimation", "plugin", "theory", "results", "running", "output")
#: the public façade, above every layer
FACADE = ("ldpsim", "ldpsim.testing")

#: Edges that break the rules today and are being removed on other branches: (importer, imported).
#: An edge listed here is exempt from the checks below; a listed edge that no longer exists fails
#: :func:`test_known_violations_still_exist`, so the list only shrinks. Empty it once they are merged.
KNOWN_VIOLATIONS: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both dotted module names) at ``file:line``."""

    source: str
    target: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.file}:{self.line})"


def module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def modules(root: Path, package: str) -> dict[str, Path]:
    return {module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}


def imports(path: Path, name: str) -> Iterator[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) of every import in the file, at any depth."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module, [alias.name for alias in node.names], node.lineno


def edges(root: Path, package: str, known: dict[str, Path]) -> list[Edge]:
    """Import edges from the modules under ``root`` to the modules in ``known`` (or their packages)."""
    found = []
    for name, path in modules(root, package).items():
        where = str(path.relative_to(root.parent))
        for module, names, line in imports(path, name):
            targets = [f"{module}.{n}" if f"{module}.{n}" in known else module for n in names] or [module]
            for target in targets:
                while target and target not in known:  # `import a.b.func`-like: the module that holds it
                    target = target.rpartition(".")[0]
                if target:
                    found.append(Edge(name, target, where, line))
    return list(dict.fromkeys(found))  # `from .m import a, b`: one edge


CORE_MODULES = modules(CORE, "ldpsim")
CORE_EDGES = edges(CORE, "ldpsim", CORE_MODULES)


def rank(module: str) -> int:
    if module in FACADE:
        return len(LAYERS)
    layer = module.split(".")[1]
    assert layer in LAYERS, f"module {module} is in no layer; add its layer to LAYERS"
    return LAYERS.index(layer)


def checked(found: list[Edge]) -> list[Edge]:
    return [e for e in found if (e.source, e.target) not in KNOWN_VIOLATIONS]


def test_the_reader_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub import deep\n")
    (pkg / "top.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..top import X\n"
        "def f():\n    from .. import top\n    import pkg.sub\n"
    )
    found = {(e.source, e.target, e.line) for e in edges(pkg, "pkg", modules(pkg, "pkg"))}
    assert found == {
        ("pkg", "pkg.sub.deep", 1),
        ("pkg.sub.deep", "pkg.top", 3),
        ("pkg.sub.deep", "pkg.top", 5),
        ("pkg.sub.deep", "pkg.sub", 6),
    }
    assert len(CORE_MODULES) > 40 and len(CORE_EDGES) > 100  # the real tree was found and read


def test_every_import_goes_to_the_same_layer_or_a_lower_one():
    upward = [e for e in checked(CORE_EDGES) if rank(e.target) > rank(e.source)]
    assert not upward, "imports from a higher layer:\n" + "\n".join(map(str, upward))


def test_the_module_graph_has_no_cycle():
    graph: dict[str, list[Edge]] = {}
    for e in checked(CORE_EDGES):
        if e.source != e.target:
            graph.setdefault(e.source, []).append(e)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Edge] = []

    def visit(node: str) -> list[Edge] | None:
        state[node] = 1
        for e in graph.get(node, []):
            path.append(e)
            if state.get(e.target) == 1:
                start = next(i for i, p in enumerate(path) if p.source == e.target)
                return path[start:]
            if e.target not in state and (cycle := visit(e.target)):
                return cycle
            path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            pytest.fail("import cycle:\n" + "\n".join(map(str, cycle)))


def test_the_core_never_imports_a_plugin():
    bad = []
    for name, path in CORE_MODULES.items():
        for module, _, line in imports(path, name):
            if module.split(".")[0] == "ldpsim_plugins":
                bad.append(f"{name} -> {module} ({path.relative_to(ROOT)}:{line})")
    assert not bad, "the core imports a plugin:\n" + "\n".join(bad)


def test_plugins_use_only_the_public_package():
    bad = []
    for name, path in modules(PLUGINS, "ldpsim_plugins").items():
        for module, names, line in imports(path, name):
            if module.split(".")[0] != "ldpsim":
                continue
            inner = [n for n in names if f"ldpsim.{n}" in CORE_MODULES]  # `from ldpsim import running`
            if module != "ldpsim" or inner:
                bad.append(f"{name} -> {module}{'.' + inner[0] if inner else ''} ({path.relative_to(ROOT)}:{line})")
    assert not bad, "plugins may import only `ldpsim` itself:\n" + "\n".join(bad)


def test_known_violations_still_exist():
    present = {(e.source, e.target) for e in CORE_EDGES}
    gone = sorted(KNOWN_VIOLATIONS - present)
    assert not gone, f"fixed, remove from KNOWN_VIOLATIONS: {gone}"
