"""``import ldpsim`` is light: each public name is imported on first use, and typed for mypy."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ldpsim

INIT = Path(ldpsim.__file__)


def test_import_ldpsim_loads_no_layer_and_not_numpy():
    code = "import sys, ldpsim; print(sorted(m for m in sys.modules if m.startswith(('ldpsim.', 'numpy'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_numba_is_imported_only_where_a_compiled_pass_runs():
    # the packed-bit likelihood of a small run (an OUE likelihood of 200 reports) stays in numpy; a pass
    # large enough for the compiled loops (ldpsim.model.bitvectors.KERNEL_MIN_HALFWORDS) imports numba
    code = (
        "import sys, numpy as np, ldpsim, ldpsim.estimation.operators\n"
        "words = np.arange(200 * 17, dtype=np.int64).reshape(200, 17) % 1000\n"
        "H = ldpsim.constant_plus_bits(words, 1024, 0.5)\n"
        "H @ np.ones(1024), H.T @ np.ones(200)\n"
        "print('numba' in sys.modules)\n"
        "from ldpsim.model.bitvectors import packed_kernels\n"
        "print(packed_kernels(1 << 30) is not None and 'numba' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_every_public_name_resolves_to_its_definition():
    for name in ldpsim.__all__:
        assert getattr(ldpsim, name) is not None, name
    assert ldpsim.Mechanism.__module__ == "ldpsim.model.mechanism"
    assert ldpsim.plugin.registry.get_registry is ldpsim.get_registry  # layers stay reachable as attributes


def test_the_type_checking_imports_and_the_lazy_table_name_the_same_objects():
    tree = ast.parse(INIT.read_text())
    typed = {
        alias.asname or alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == ldpsim._LAZY
    assert set(typed) == set(ldpsim.__all__) - {"__version__"}
