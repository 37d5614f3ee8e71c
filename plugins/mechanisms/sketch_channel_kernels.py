"""Compiled loop of the sketch channels (numba): imported only where a large pass runs.

:meth:`~ldpsim_plugins.mechanisms.sketch_channels.CMSLevel.hit_scores` over a whole dictionary reads one
bucket per (used hash, value): 4.3 x 10^9 at Apple's CMS size (65,536 hashes) and 2^16 words. numpy forms
(hashes x values) temporaries for the hashes, the cells and the gathered weights; this loop computes each
bucket (the same multiply-shift as :class:`~ldpsim_plugins.mechanisms.sketch_channels.SketchHashes`) and
adds the weights in place. Deterministic: the same sums as the numpy path, in the same order per value.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def gather_scores(
    multipliers: np.ndarray, mixed: np.ndarray, buckets: int, per_bucket: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover (compiled)
    """``out[i, x] += per_bucket[i, u m + h_u(x)]`` for every used hash u (``multipliers[u]``) and value x."""
    used = multipliers.shape[0]
    m = np.uint64(buckets)
    shift = np.uint64(32)
    for u in range(used):
        a = multipliers[u]
        base = u * buckets
        for x in range(mixed.shape[0]):
            cell = base + np.int64((((a * mixed[x]) >> shift) * m) >> shift)
            for i in range(out.shape[0]):
                out[i, x] += per_bucket[i, cell]
