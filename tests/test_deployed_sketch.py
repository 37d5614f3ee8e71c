"""Apple's CMS at deployed sizes (issue 31): the per-bucket counts drawn two exact ways follow the per-user
law, the compiled bookkeeping gives numpy's whole numbers from the same draws, and the hash table and the
estimate are the formulas they replace."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st
from ldpsim_plugins.mechanisms import count_mean_sketch
from scipy.stats import chi2

from ldpsim import Integers

PRIME = (1 << 31) - 1


def _cms(k: int, **params):
    return make("mechanism", "cms", Integers(low=0, high=k - 1), **{"eps": 3.0, **params})


def test_each_users_hash_is_uniform_over_a_family_of_any_size():
    """The users' hashes drawn one by one (the low bits of uniform words when the family is a power of 2,
    numpy's bounded integers otherwise) land in each hash equally often: every user of one value, its
    bucket counts per hash against the uniform expectation (chi-square, 7 hashes and 8: false alarm 1e-3 each)."""
    for hashes in (7, 8):
        mech = _cms(3, hashes=hashes, buckets=2)
        n = 70_000
        tally = mech.sample_bit_counts(np.array([n, 0, 0]), np.random.default_rng(hashes))
        per_hash = tally[-hashes:]
        assert per_hash.sum() == n
        stat = float(((per_hash - n / hashes) ** 2 / (n / hashes)).sum())
        assert chi2.sf(stat, hashes - 1) > 1e-3, per_hash


def _both_paths(k, hashes, buckets, counts, seed):
    """((tally, estimate) by numpy's loops, the same by the compiled ones) from one seed, fresh mechanisms."""
    out = []
    for cut in (1 << 62, 0):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(count_mean_sketch, "KERNEL_MIN_ENTRIES", cut)
            mech = _cms(k, hashes=hashes, buckets=buckets, family_seed=seed)
            tally = mech.sample_bit_counts(counts, np.random.default_rng(seed))
            out.append((tally, mech.bit_count_estimate(tally, int(counts.sum()))))
    return out


@settings(max_examples=25)
@given(
    k=st.integers(2, 40),
    hashes=st.integers(1, 70),
    buckets=st.integers(2, 70),
    scale=st.sampled_from([1, 30, 3000]),
    seed=st.integers(0, 2**16),
)
def test_compiled_bookkeeping_gives_numpys_counts(k, hashes, buckets, scale, seed):
    """The same draws added up by numba's loops and numpy's: the same tally and the same estimate, bit for bit
    (the collision matrix chained by bucket against sorted, users spread one by one and by hash, multinomial
    splits)."""
    counts = np.random.default_rng(seed).integers(0, 3, size=k) * np.random.default_rng(seed + 1).integers(
        0, scale + 1, size=k
    )
    counts[0] += 1  # at least one user: n = 0 has no estimate
    (tally, est), (fast_tally, fast_est) = _both_paths(k, hashes, buckets, counts, seed)
    np.testing.assert_array_equal(fast_tally, tally)
    assert tally[-hashes:].sum() == counts.sum()
    if est is None:
        assert fast_est is None
    else:
        np.testing.assert_array_equal(fast_est, est)


def test_the_hash_table_is_the_carter_wegman_formula():
    """By blocks of hashes and of values (up to 2^17 of them here), both kinds of width (a power of 2: a mask;
    else a remainder): ``(a x + b) mod P mod m`` in one pass."""
    rng = np.random.default_rng(np.random.SeedSequence(5))
    a = rng.integers(1, PRIME, size=3, dtype=np.int64)
    b = rng.integers(0, PRIME, size=3, dtype=np.int64)
    x = np.arange(1 << 17, dtype=np.int64)
    for buckets in (1024, 1000, 2):
        mech = _cms(1 << 17, hashes=3, buckets=buckets, family_seed=5)
        np.testing.assert_array_equal(mech.table, (a[:, None] * x + b[:, None]) % PRIME % buckets)


def test_the_estimate_is_the_sketchs_solved_to_1e_12():
    """``C^-1 s / n`` with s summed as whole numbers equals the sketch's rows gathered in floats (the formula it
    replaced) to 1e-12 of the largest estimate."""
    k, hashes, buckets, n = 50, 400, 16, 10**7
    mech = _cms(k, hashes=hashes, buckets=buckets, eps=8.0)
    counts = np.random.default_rng(0).multinomial(n, np.random.default_rng(1).dirichlet(np.ones(k)))
    tally = mech.sample_bit_counts(counts, np.random.default_rng(2))
    ones, per_hash = tally[: hashes * buckets].reshape(hashes, buckets), tally[hashes * buckets :]
    sketch = mech.c_eps * (ones - per_hash[:, None] / 2) + per_hash[:, None] / 2
    support = sketch[np.arange(hashes)[:, None], mech.table].sum(axis=0) / n
    table = mech.table
    collisions = (table[:, :, None] == table[:, None, :]).mean(axis=0)
    expected = np.linalg.solve(collisions, support)
    estimate = mech.bit_count_estimate(tally, n)
    assert np.abs(estimate - expected).max() < 1e-12 * np.abs(expected).max()
