"""Any explicit row-stochastic matrix as a mechanism."""

from __future__ import annotations

import numpy as np

from ldpsim import ROW_SUM_TOL, Mechanism, Param, ParameterError, Privacy, hookimpl, ldp_level


class MatrixMechanism(Mechanism):
    """An explicit stochastic matrix: row x is the distribution of the report given value x."""

    name = "matrix"
    rows = Param("matrix", doc="one row per domain value; entries >= 0, each row summing to 1")
    outputs = Param("strings", None, doc="labels of the columns (default 0, 1, ...)")

    def _validate(self) -> None:
        m = self.rows
        if m.shape[0] != self.domain.size:
            raise ParameterError(
                f"has {m.shape[0]} rows but the domain has {self.domain.size} values",
                field="rows",
                hint="give one row per domain value",
            )
        if np.any(m < 0):
            r, c = np.argwhere(m < 0)[0]
            raise ParameterError(f"entry ({r}, {c}) is negative", field="rows", hint="probabilities are >= 0")
        sums = m.sum(axis=1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
        if bad.size:
            raise ParameterError(
                f"row {bad[0]} sums to {sums[bad[0]]:.12g}, not 1",
                field="rows",
                hint="make every row a probability distribution",
            )
        if self.outputs is not None and len(self.outputs) != m.shape[1]:
            raise ParameterError(
                f"has {len(self.outputs)} labels for {m.shape[1]} columns",
                field="outputs",
                hint="give one label per column",
            )

    @property
    def privacy(self) -> Privacy:
        # An explicit matrix claims exactly the LDP level it has (inf if a column mixes 0 and > 0).
        m = self.matrix
        assert m is not None  # finitely many outputs: never None
        with np.errstate(divide="ignore"):
            return Privacy("ldp", ldp_level(np.log(m).T))

    def _matrix(self) -> np.ndarray:
        return self.rows / self.rows.sum(axis=1, keepdims=True)

    def output_labels(self) -> list[str] | None:
        return list(self.outputs) if self.outputs is not None else super().output_labels()


@hookimpl
def register_mechanisms(register):
    register(MatrixMechanism)
