"""How well a heavy-hitter estimator found the frequent items: precision, recall and F1 of its top-k against
the true top-k, and the frequency error of the items it found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TopKScore:
    """Precision, recall and F1 of found items against the true top-k, and the found items' frequency error."""

    precision: float
    recall: float
    f1: float
    frequency_error: float


def top_k_score(
    found: np.ndarray,
    found_frequency: np.ndarray,
    true_items: np.ndarray,
    true_frequency: np.ndarray,
    k: int,
) -> TopKScore:
    """Score the ``k`` most frequent found items against the ``k`` truly most frequent ones.

    Parameters
    ----------
    found, found_frequency : numpy.ndarray
        Found items (uint64) and their estimated frequencies; only the ``k`` largest estimates count.
    true_items, true_frequency : numpy.ndarray
        The truth: distinct items and their frequencies (any order).
    k : int
        The size of the top sets.

    Returns
    -------
    TopKScore
        ``precision = |F & T| / |F|`` (1 when nothing was found: no false alarm), ``recall = |F & T| / |T|``,
        ``f1`` their harmonic mean (0 when both are 0), and ``frequency_error`` the mean absolute difference
        between every scored found item's estimate and its true frequency (0 for an item not in the truth;
        NaN when nothing was found).
    """
    order = np.argsort(-np.asarray(found_frequency, dtype=float), kind="stable")[:k]
    f_items = np.asarray(found, dtype=np.uint64)[order]
    f_freq = np.asarray(found_frequency, dtype=float)[order]
    t_order = np.argsort(-np.asarray(true_frequency, dtype=float), kind="stable")[:k]
    t_items = np.asarray(true_items, dtype=np.uint64)[t_order]
    hits = np.isin(f_items, t_items).sum()
    precision = float(hits / f_items.size) if f_items.size else 1.0
    recall = float(hits / t_items.size) if t_items.size else 1.0
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    sorter = np.argsort(true_items)
    items_sorted = np.asarray(true_items, dtype=np.uint64)[sorter]
    pos = np.minimum(np.searchsorted(items_sorted, f_items), max(items_sorted.size - 1, 0))
    known = items_sorted[pos] == f_items if items_sorted.size else np.zeros(f_items.size, dtype=bool)
    truth = np.where(known, np.asarray(true_frequency, dtype=float)[sorter][pos], 0.0)
    error = float(np.mean(np.abs(f_freq - truth))) if f_items.size else float("nan")
    return TopKScore(precision, recall, f1, error)
