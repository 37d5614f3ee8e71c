"""Euclidean projection onto the probability simplex."""

from __future__ import annotations

import numpy as np


def project_simplex(v: np.ndarray) -> np.ndarray:
    """argmin_{p in simplex} ||p - v||_2 (Wang & Carreira-Perpinan, arXiv:1309.1541).

    Sort-based and exact: the result is max(v - tau, 0) for the unique
    threshold tau that makes it sum to one.
    """
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("project_simplex needs a non-empty finite vector")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    ranks = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - css / ranks > 0)[-1]
    tau = css[rho] / (rho + 1)
    return np.maximum(v - tau, 0.0)
