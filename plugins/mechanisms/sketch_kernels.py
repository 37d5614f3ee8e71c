"""Compiled loops of the count-mean sketches (numba): imported only where a kernel runs.

Deterministic bookkeeping only: every random number is drawn with numpy's Generators by the caller
(``CountMeanSketch.sample_bit_counts`` in ``count_mean_sketch``) and these loops add it up. All sums are of whole numbers (int64, or float64 below 2^53): exact, so
the same whatever the order, and equal to numpy's reference paths in ``count_mean_sketch`` bit for
bit. ``cache=True``: compiled once per machine.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def collision_pairs(table: np.ndarray, head: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover (compiled)
    """``out[x, y] += 1`` for every hash ``j`` (a row of ``table``) and every pair y < x with h_j(x) = h_j(y).

    One pass per hash: the values are chained by bucket (``head`` holds -1 for every bucket on entry and
    on exit), and each value walks the chain of the smaller values sharing its bucket: O(k + pairs) per
    hash, against sorting each hash's values.
    """
    hashes, k = table.shape
    chain = np.empty(k, dtype=np.int64)
    for j in range(hashes):
        row = table[j]
        for x in range(k):
            b = row[x]
            chain[x] = head[b]
            head[b] = x
        for x in range(k):
            y = chain[x]
            while y >= 0:
                out[x, y] += 1.0
                y = chain[y]
        for x in range(k):
            head[row[x]] = -1


@numba.njit(cache=True, nogil=True)
def add_users(
    drawn: np.ndarray,
    values: np.ndarray,
    users: np.ndarray,
    table: np.ndarray,
    buckets: int,
    held: np.ndarray,
    split: np.ndarray,
) -> None:  # pragma: no cover (compiled)
    """``held[j m + h_j(x)] += 1`` for each user: ``drawn`` the users' hashes, ``users[i]`` of value ``values[i]`` in turn.

    A value with many users is first counted per hash in ``split`` (zeros on entry and on exit), then
    spread once over the hashes; one with few is spread user by user. The same whole numbers either way.
    """
    hashes = table.shape[0]
    start = 0
    for i in range(values.size):
        x, n = values[i], users[i]
        if 4 * n < hashes:
            for u in range(start, start + n):
                h = np.int64(drawn[u])
                held[h * buckets + table[h, x]] += 1
        else:
            for u in range(start, start + n):
                split[np.int64(drawn[u])] += 1
            for j in range(hashes):
                c = split[j]
                if c != 0:
                    held[j * buckets + table[j, x]] += c
                    split[j] = 0
        start += n


@numba.njit(cache=True, nogil=True)
def add_splits(
    split: np.ndarray, values: np.ndarray, table: np.ndarray, buckets: int, held: np.ndarray
) -> None:  # pragma: no cover (compiled)
    """``held[j m + h_j(x)] += split[i, j]`` for ``x = values[i]``: the users of each value per hash, spread."""
    hashes = table.shape[0]
    for i in range(values.size):
        x = values[i]
        for j in range(hashes):
            c = split[i, j]
            if c != 0:
                held[j * buckets + table[j, x]] += c
