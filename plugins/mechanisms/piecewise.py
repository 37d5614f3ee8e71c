"""The Piecewise Mechanism (Wang, Xiao, Yang, Zhao, Hui, Shin, Shin & Yu, ICDE 2019, Algorithm 2).

A value t in [-1, 1] is reported as y in [-C, C], ``C = (e^(eps/2) + 1) / (e^(eps/2) - 1)``, with
density ``p = (e^eps - e^(eps/2)) / (2 e^(eps/2) + 2)`` on t's band
``[l(t), r(t)] = [(C + 1)/2 t - (C - 1)/2, l(t) + C - 1]`` and ``p / e^eps`` elsewhere;
``E[y | t] = t`` and ``Var[y | t] = t^2 / (e^(eps/2) - 1) + (e^(eps/2) + 3) / (3 (e^(eps/2) - 1)^2)``
(their Lemma 2). The bands of t = -1 and t = 1 are disjoint, so the density ratio e^eps is
reached: eps-LDP, tight.

On the domain's k values the bands' 2k ends cut [-C, C] into at most 2k + 1 cells on each of
which every value's density is constant: the cell is a sufficient statistic, its probability
``width * density`` the exact likelihood (``ldpsim.model.numeric``). Band ends increase with
t, so the values whose band holds a cell are a contiguous run: GIBU's structured likelihood is
a constant plus a step on that run (``constant_plus_intervals``), O(k) per product.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import (
    BandMechanism,
    Param,
    ParameterError,
    Privacy,
    band_cells,
    constant_plus_intervals,
    hookimpl,
    piecewise_bands,
)

if TYPE_CHECKING:  # scipy is imported where an operator is built: `ldpsim list` stays fast
    from scipy.sparse.linalg import LinearOperator


#: the smallest eps Piecewise takes: its reports lie in [-C, C] with C ~ 4 / eps, which overflows doubles (and
#: e^(eps/2) - 1 underflows to 0) for a subnormal eps
MIN_EPS = 1e-300


class Piecewise(BandMechanism):
    """Piecewise Mechanism (Wang et al., ICDE 2019): density e^eps times higher on a band around the value in [-1, 1]."""

    name = "piecewise"
    eps = Param("float", gt=0, le=20, doc="privacy level: the mechanism is eps-LDP")

    def _validate(self) -> None:
        super()._validate()
        if self.eps < MIN_EPS:
            raise ParameterError(
                f"eps = {self.eps:g} is below the {MIN_EPS:g} Piecewise takes: its report range ~4/eps overflows",
                field="eps",
                hint=f"give eps >= {MIN_EPS:g}",
            )

    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @cached_property
    def _parts(self) -> tuple[float, np.ndarray, np.ndarray, float, float]:
        return piecewise_bands(self.eps, self.inputs)

    @property
    def bound(self) -> float:
        """C = (e^(eps/2) + 1) / (e^(eps/2) - 1): reports lie in [-C, C]."""
        return self._parts[0]

    @property
    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        """(l(t_x), r(t_x)) for every value."""
        return self._parts[1], self._parts[2]

    @property
    def p(self) -> float:
        """Density on the value's band, (e^eps - e^(eps/2)) / (2 e^(eps/2) + 2)."""
        return self._parts[3]

    @property
    def q(self) -> float:
        """Density elsewhere, p / e^eps."""
        return self._parts[4]

    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        return band_cells(-self.bound, self.bound, *self.bands)

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        shift, runs = self.band_runs(reports)
        return shift, constant_plus_intervals(runs, self.domain.size, math.exp(-self.eps))

    def density(self, y: np.ndarray) -> np.ndarray:
        """The paper's density of y for each value: p on [l(t), r(t)], p / e^eps elsewhere in [-C, C]."""
        y = np.asarray(y, dtype=float)[:, None]
        e2 = math.exp(self.eps / 2)
        c = (e2 + 1) / (e2 - 1)
        low = (c + 1) / 2 * self.inputs[None, :] - (c - 1) / 2
        high = low + c - 1
        p = (math.exp(self.eps) - e2) / (2 * e2 + 2)
        inside = (low <= y) & (y <= high)
        return np.where(np.abs(y) <= c, np.where(inside, p, p / math.exp(self.eps)), 0.0)

    def report_variance(self) -> np.ndarray:
        """Var[y | t] = t^2 / (e^(eps/2) - 1) + (e^(eps/2) + 3) / (3 (e^(eps/2) - 1)^2) (Wang et al. 2019, Lemma 2)."""
        e2 = math.exp(self.eps / 2)
        return self.inputs**2 / (e2 - 1) + (e2 + 3) / (3 * (e2 - 1) ** 2)


@hookimpl
def register_mechanisms(register):
    register(Piecewise)
