"""The layering of ldpsim, read from the source: imports go down the layers, never round in a cycle;
the core never imports a plugin; plugins use only the public ``ldpsim`` package. Beyond the import
graph: the core imports by name at run time only in the façade, plugins reach no layer through the
façade's attributes, no module uses another's private names, and no core module outgrows
:data:`MAX_MODULE_LINES`. Each rule is shown to fail on a planted violation.

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


# --- Rules the import graph cannot see -------------------------------------------------------------
#
# An import by name at run time (importlib.import_module, __import__) draws no edge above, so the core
# may load modules by name only in the façade, whose lazy attributes are its declared job. Plugins
# could reach a layer through the façade's attributes (``ldpsim.running.build.Builder``) without an
# import statement. And a module that reads another's private name (``other._x``, ``from m import _x``,
# ``getattr(obj, "_x")``) depends on what that module never promised; it needs a declared interface.

#: core modules that may import by name at run time
DYNAMIC_IMPORTERS = frozenset({"ldpsim"})
#: private names of other code that are part of a documented interface, or have none: (module, name, why)
ALLOWED_PRIVATE: frozenset[tuple[str, str]] = frozenset(
    {
        ("ldpsim_plugins.executors.processes", "_exit"),  # os._exit: documented, the only exit without cleanup
        # concurrent.futures has no public way to kill a pool's workers before Python 3.14 (kill_workers)
        ("ldpsim_plugins.executors.processes", "_processes"),
    }
)
#: private-looking names that are public API (namedtuple's, enum's)
PUBLIC_UNDERSCORED = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults", "_value_", "_name_"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def _own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: a class using its own (or its bases') protected members."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _defined(tree: ast.AST) -> set[str]:
    """Every name the module defines or assigns (functions, classes, variables, attributes, arguments)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _where(root: Path, path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"


def dynamic_imports(root: Path, package: str, allowed: frozenset[str] = DYNAMIC_IMPORTERS) -> list[str]:
    """Modules under ``root`` that import by name at run time (or name the functions that do)."""
    bad = []
    for name, path in modules(root, package).items():
        if name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if isinstance(node, ast.ImportFrom) and node.module == "importlib":
                named = next((a.name for a in node.names if a.name == "import_module"), None)
            if named in ("import_module", "__import__"):
                bad.append(f"{name}: {named} ({_where(root, path, node)})")
    return bad


def layer_chains(root: Path, package: str, core: str = "ldpsim", layers: frozenset[str] | None = None) -> list[str]:
    """Attribute chains from the façade into a layer (``ldpsim.running...``) in the modules under ``root``."""
    if layers is None:
        layers = frozenset(m.split(".")[1] for m in CORE_MODULES if m.count(".") >= 1)
    bad = []
    for name, path in modules(root, package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [a for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        aliases = {a.asname or a.name for a in imported if a.name == core}
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                target = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in aliases
                and isinstance(node.args[1], ast.Constant)
            ):
                target = str(node.args[1].value)
            if target in layers:
                bad.append(f"{name}: {core}.{target} ({_where(root, path, node)})")
    return bad


def private_reaches(root: Path, package: str, allowed: frozenset[tuple[str, str]] = ALLOWED_PRIVATE) -> list[str]:
    """Uses of another module's private names in the modules under ``root``."""
    bad = []
    for name, path in modules(root, package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _defined(tree)
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.ImportFrom):
                found = [a.name for a in node.names if _private(a.name)]
            elif isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value):
                found = [node.attr] if node.attr not in own else []
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) > 1
                and not _own(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
            ):
                found = [node.args[1].value]
            bad += [f"{name}: {n} ({_where(root, path, node)})" for n in found if (name, n) not in allowed]
    return bad


def test_the_core_imports_by_name_only_in_the_facade():
    bad = dynamic_imports(CORE, "ldpsim")
    assert not bad, "run-time imports by name outside the façade (import normally):\n" + "\n".join(bad)


def test_plugins_reach_no_layer_through_the_facade():
    bad = layer_chains(PLUGINS, "ldpsim_plugins")
    assert not bad, "plugins reach a layer through `ldpsim.<layer>` (use `from ldpsim import X`):\n" + "\n".join(bad)


@pytest.mark.parametrize(("root", "package"), [(CORE, "ldpsim"), (PLUGINS, "ldpsim_plugins")], ids=["core", "plugins"])
def test_no_module_uses_another_modules_private_names(root, package):
    bad = private_reaches(root, package)
    assert not bad, "private names used across modules (declare an interface):\n" + "\n".join(bad)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pkg"
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_each_rule_fails_on_a_planted_violation(tmp_path):
    """The rules above can fail: each finds what is planted, and passes the lawful look-alikes."""
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "import importlib\ndef __getattr__(n):\n    return importlib.import_module('.' + n, __name__)\n",
            "core.py": (
                "import importlib\nfrom importlib import import_module\n"
                "def f():\n    return importlib.import_module('pkg.x'), __import__('os')\n"
            ),
            "plug.py": (
                "import ldpsim\nimport ldpsim as L\n"
                "B = ldpsim.running.build.Builder\nC = getattr(L, 'model')\nD = ldpsim.Mechanism\n"
            ),
            "a.py": "class A:\n    def _m(self):\n        return 1\n    def m(self):\n        return self._m()\n",
            "b.py": (
                "from .a import A, _hidden\n"
                "class B(A):\n    def n(self):\n        return super()._m() + self._m()\n"
                "def g(a):\n    return a._m(), getattr(a, '_m'), a._replace(), getattr(a, 'public')\n"
            ),
        },
    )
    assert sorted(dynamic_imports(pkg, "pkg", allowed=frozenset({"pkg"}))) == [
        "pkg.core: __import__ (pkg/core.py:4)",
        "pkg.core: import_module (pkg/core.py:2)",
        "pkg.core: import_module (pkg/core.py:4)",
    ]
    assert any(b.startswith("pkg: ") for b in dynamic_imports(pkg, "pkg", allowed=frozenset()))  # the façade's own
    chains = layer_chains(pkg, "pkg", layers=frozenset({"running", "model"}))
    assert sorted(chains) == ["pkg.plug: ldpsim.model (pkg/plug.py:4)", "pkg.plug: ldpsim.running (pkg/plug.py:3)"]
    private = sorted(private_reaches(pkg, "pkg", allowed=frozenset()))
    assert private == ["pkg.b: _hidden (pkg/b.py:1)", "pkg.b: _m (pkg/b.py:6)", "pkg.b: _m (pkg/b.py:6)"]


#: a core module longer than this holds more than one job: split it along its seams
MAX_MODULE_LINES = 700


def test_no_core_module_is_longer_than_the_limit():
    long = {
        name: n
        for name, path in CORE_MODULES.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them along their seams): {long}"
