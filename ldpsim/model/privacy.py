"""Privacy guarantees: what a mechanism claims, and what its probabilities give.

The levels are computed from log-likelihood columns: ``log_p[z, x] = log P(z | x)``
for a set of outputs ``z`` (all of them for a finite mechanism: the transposed
log-matrix). Over all outputs they are the exact levels; over a subset, lower
bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Privacy:
    """A privacy guarantee claimed by a mechanism.

    ``notion`` is ``"ldp"`` (eps-local differential privacy), ``"geo"``
    (d-privacy / geo-indistinguishability: eps per unit of the domain's
    distance), ``"lip"`` (eps-localized information privacy under ``prior``,
    002 Definition 3) or ``"none"``.
    """

    notion: str
    eps: float
    prior: tuple[float, ...] | None = None

    def __str__(self) -> str:
        if self.notion == "none":
            return "no formal guarantee"
        eps = "inf" if math.isinf(self.eps) else f"{self.eps:g}"
        return {
            "ldp": f"{eps}-LDP",
            "geo": f"{eps}-geo-indistinguishability (eps per unit distance)",
            "lip": f"{eps}-LIP (under its prior)",
        }.get(self.notion, f"{self.notion} eps={eps}")


def ldp_level(log_p: np.ndarray) -> float:
    """Smallest eps with P(z|x) <= e^eps P(z|x') for all z, x, x' (inf if a column mixes 0 and > 0)."""
    log_p = np.asarray(log_p, dtype=float)
    possible = np.isfinite(log_p).any(axis=1)
    if not possible.any():
        return 0.0
    rows = log_p[possible]
    return float((rows.max(axis=1) - rows.min(axis=1)).max())


def geo_level(log_p: np.ndarray, distances: np.ndarray) -> float:
    """Smallest eps with P(z|x) <= e^(eps d(x,x')) P(z|x') for all z, x, x' (distances > 0 off the diagonal)."""
    log_p = np.asarray(log_p, dtype=float)
    rows = log_p[np.isfinite(log_p).any(axis=1)]
    off = ~np.eye(distances.shape[0], dtype=bool)
    scale = distances[off]
    step = max(1, 4_000_000 // distances.size)  # bound the (chunk, |X|, |X|) temporary
    level = 0.0
    for start in range(0, rows.shape[0], step):
        chunk = rows[start : start + step]
        with np.errstate(invalid="ignore"):
            gaps = np.abs(chunk[:, :, None] - chunk[:, None, :])[:, off]
        gaps[np.isnan(gaps)] = 0.0  # both impossible: no constraint
        if gaps.size:
            level = max(level, float((gaps / scale).max()))
    return level


def lip_level(matrix: np.ndarray, prior: np.ndarray) -> float:
    """Smallest eps with e^-eps <= P(y) / P(y|x) <= e^eps for x in the prior's support (002 eq. 5)."""
    matrix = np.asarray(matrix, dtype=float)
    prior = np.asarray(prior, dtype=float)
    marginal = prior @ matrix
    rows = matrix[prior > 0][:, marginal > 0]
    with np.errstate(divide="ignore"):
        gaps = np.abs(np.log(marginal[marginal > 0])[None, :] - np.log(rows))
    return float(gaps.max()) if gaps.size else 0.0
