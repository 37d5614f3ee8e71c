"""Checks of the arguments every sampler takes: a caller's mistake is a TypeError or ValueError, not a plugin's."""

from __future__ import annotations

import numpy as np


def require_generator(rng: object) -> np.random.Generator:
    """``rng`` itself if it is a :class:`numpy.random.Generator` (the only randomness ldpsim draws from)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator, e.g. numpy.random.default_rng(seed)")
    return rng


def value_counts(counts: object, size: int) -> np.ndarray:
    """``counts`` as ``(size,)`` int64: how many users hold each of a domain's ``size`` values."""
    out = np.asarray(counts)
    if out.shape != (size,) or (out.size and (out.dtype.kind not in "iu" or out.min() < 0)):
        raise ValueError(f"counts must be {size} non-negative integers, one per value")
    return out.astype(np.int64, copy=False)
