"""Compiled loops of the packed-bit likelihood (numba): imported only where a kernel runs.

The halfword layout of :func:`~ldpsim.model.bitvectors.halfword_rows` (``(P, D)`` uint16, byte ``2 p``
low and ``2 p + 1`` high) read in one sweep: ``B @ theta`` as two table lookups per halfword, ``B^T w``
as two 256-bin weighted histograms per halfword position, folded to the bits. numpy's versions
(the reference, and the path below :data:`~ldpsim.model.bitvectors.KERNEL_MIN_HALFWORDS`) gather and
count one position at a time over temporaries; these loops read each halfword once and keep their
sums in registers and cache. Single-threaded and in a fixed order: the same bits on every run.
``cache=True``: compiled once per machine (the first call's seconds, see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import numba
import numpy as np

#: reports per block of the lookups: the block's sums (16 KB) stay in L1 across the positions
_BLOCK = 2048


@numba.njit(cache=True, nogil=True)
def halfword_lookups(halves: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover (compiled)
    """``out[d] += table[2 p, low byte] + table[2 p + 1, high byte]`` of ``halves[p, d]``, p in order.

    The additions of numpy's reference (one position's low bytes, then its high bytes, from 0), in
    the same order: the same sums, bit for bit. Four positions per sweep over a block of reports.
    """
    positions, rows = halves.shape
    quads = positions - positions % 4
    for lo in range(0, rows, _BLOCK):
        hi = min(rows, lo + _BLOCK)
        for j in range(0, quads, 4):
            t0, t1, t2, t3 = table[2 * j], table[2 * j + 1], table[2 * j + 2], table[2 * j + 3]
            t4, t5, t6, t7 = table[2 * j + 4], table[2 * j + 5], table[2 * j + 6], table[2 * j + 7]
            r0, r1, r2, r3 = halves[j], halves[j + 1], halves[j + 2], halves[j + 3]
            for d in range(lo, hi):
                a, b, c, e = np.intp(r0[d]), np.intp(r1[d]), np.intp(r2[d]), np.intp(r3[d])
                s = (out[d] + t0[a & 0xFF]) + t1[a >> 8]
                s = (s + t2[b & 0xFF]) + t3[b >> 8]
                s = (s + t4[c & 0xFF]) + t5[c >> 8]
                out[d] = (s + t6[e & 0xFF]) + t7[e >> 8]
        for j in range(quads, positions):
            low, high, row = table[2 * j], table[2 * j + 1], halves[j]
            for d in range(lo, hi):
                h = np.intp(row[d])
                out[d] = (out[d] + low[h & 0xFF]) + high[h >> 8]


@numba.njit(cache=True, nogil=True)
def byte_histograms(halves: np.ndarray, w: np.ndarray, hist: np.ndarray) -> None:  # pragma: no cover (compiled)
    """``hist[2 p, v] += w[d]`` where the low byte of ``halves[p, d]`` is v, ``hist[2 p + 1, v]`` for the high.

    Reports in order within each bin: whole-number weights sum exactly, others in a fixed order.
    """
    positions, rows = halves.shape
    pairs = positions - positions % 2
    for j in range(0, pairs, 2):
        h0, h1, h2, h3 = hist[2 * j], hist[2 * j + 1], hist[2 * j + 2], hist[2 * j + 3]
        r0, r1 = halves[j], halves[j + 1]
        for d in range(rows):
            a, b, x = np.intp(r0[d]), np.intp(r1[d]), w[d]
            h0[a & 0xFF] += x
            h1[a >> 8] += x
            h2[b & 0xFF] += x
            h3[b >> 8] += x
    for j in range(pairs, positions):
        low, high, row = hist[2 * j], hist[2 * j + 1], halves[j]
        for d in range(rows):
            h = np.intp(row[d])
            low[h & 0xFF] += w[d]
            high[h >> 8] += w[d]


@numba.njit(cache=True, nogil=True)
def fold_bits(hist: np.ndarray) -> np.ndarray:  # pragma: no cover (compiled)
    """``(bytes, 8)``: for each bit t of each byte position, the sum of ``hist[b, v]`` over the byte values v
    that set it, in increasing v."""
    nbytes = hist.shape[0]
    out = np.zeros((nbytes, 8))
    for b in range(nbytes):
        for v in range(256):
            x = hist[b, v]
            for t in range(8):
                if (v >> t) & 1:
                    out[b, t] += x
    return out
