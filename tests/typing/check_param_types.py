"""Static checks of :class:`ldpsim.Param`'s types, run by mypy (the gates), not by pytest.

``assert_type`` is an error for mypy when the type differs, and the ``type: ignore``
below becomes one (warn_unused_ignores) if a wrong default is no longer refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, assert_type

import numpy as np

from ldpsim import Mechanism, Param


class Declared(Mechanism):
    eps = Param("float", gt=0)
    start = Param("float", None)
    users = Param("int", 10, ge=1)
    flag = Param("bool", True)
    rule = Param("str", "kkt", choices=("delta", "kkt"))
    box = Param("str", None)
    outputs = Param("strings", None)
    path = Param("path", None)
    weights = Param("vector")
    rows = Param("matrix")
    prior = Param("distribution", None)
    either = Param(("distribution", "str"), "dataset")

    def values(self) -> None:
        assert_type(self.eps, float)
        assert_type(self.start, float | None)
        assert_type(self.users, int)
        assert_type(self.flag, bool)
        assert_type(self.rule, str)
        assert_type(self.box, str | None)
        assert_type(self.outputs, tuple[str, ...] | None)
        assert_type(self.path, Path | None)
        assert_type(self.weights, np.ndarray)
        assert_type(self.rows, np.ndarray)
        assert_type(self.prior, np.ndarray | None)
        assert_type(self.either, Any)


assert_type(Declared.eps, Param[float])
assert_type(Declared.parameters()["eps"], Param[Any])

wrong_default = Param("float", "one")  # type: ignore[call-overload]
