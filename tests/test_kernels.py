"""The compiled (numba) loops of the packed-bit likelihood equal numpy's reference loops.

``B @ theta`` is the same additions in the same order (bit for bit); ``B^T w`` sums in another order
(exact for whole-number weights, within a few ulps otherwise); the exact MLE is the same either way.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldpsim
from ldpsim import Integers, Observations, constant_plus_bits, constant_plus_halfwords
from ldpsim.model import bitvectors
from ldpsim.model.bitvectors import WORD_BITS, bit_sums, halfword_rows, packed_kernels

kernels = pytest.importorskip("ldpsim.model.kernels")


def _words(rng: np.random.Generator, rows: int, size: int, density: float) -> np.ndarray:
    """Random packed reports of ``size`` bits (bits set w.p. ``density``), in BitVectorMechanism's layout."""
    bits = rng.random((rows, size)) < density
    width = -(-size // WORD_BITS)
    padded = np.zeros((rows, width, 64), dtype=bool)
    padded.reshape(rows, -1)[:, : width * 64].reshape(rows, width, 64)[:, :, :WORD_BITS] = np.pad(
        bits, ((0, 0), (0, width * WORD_BITS - size))
    ).reshape(rows, width, WORD_BITS)
    return np.packbits(padded, axis=-1, bitorder="little").view("<i8").reshape(rows, width)


def _bits(words: np.ndarray, size: int) -> np.ndarray:
    """(rows, size) 0/1 float: the reports unpacked, the brute-force reference."""
    raw = np.unpackbits(words.view(np.uint8).reshape(words.shape[0], -1, 8), axis=-1, bitorder="little")
    return raw[:, :, :WORD_BITS].reshape(words.shape[0], -1)[:, :size].astype(float)


@settings(max_examples=40, deadline=None)
@given(
    positions=st.integers(1, 9),
    rows=st.integers(0, 5000),
    seed=st.integers(0, 2**32 - 1),
)
def test_lookups_are_numpys_additions_bit_for_bit(positions, rows, seed):
    rng = np.random.default_rng(seed)
    halves = rng.integers(0, 1 << 16, size=(positions, rows), dtype=np.uint16)
    table = rng.standard_normal((2 * positions, 256)) * 10.0 ** rng.integers(-5, 5, size=(2 * positions, 1))
    expected = np.zeros(rows)  # numpy's reference order: position by position, low byte then high byte
    for j in range(positions):
        expected += table[2 * j][halves[j] & 0xFF]
        expected += table[2 * j + 1][halves[j] >> 8]
    got = np.zeros(rows)
    kernels.halfword_lookups(halves, table, got)
    assert np.array_equal(got, expected)


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 300),
    rows=st.integers(1, 400),
    density=st.floats(0.0, 1.0),
    whole=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_bit_sums_equal_numpys_and_brute_force(size, rows, density, whole, seed):
    rng = np.random.default_rng(seed)
    words = _words(rng, rows, size, density)
    w = rng.integers(0, 1000, rows).astype(float) if whole else rng.exponential(size=rows)
    halves, column = halfword_rows(words, size)
    reference = bit_sums(halves, column, size, w)  # below the threshold: numpy's loops
    assert packed_kernels(halves.size) is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bitvectors, "KERNEL_MIN_HALFWORDS", 0)
        assert packed_kernels(halves.size) is kernels
        compiled = bit_sums(halves, column, size, w)
    brute = w @ _bits(words, size)
    if whole:  # whole numbers sum exactly in any order
        assert np.array_equal(compiled, reference) and np.array_equal(compiled, brute)
    else:
        np.testing.assert_allclose(compiled, reference, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(compiled, brute, rtol=1e-12, atol=1e-300)


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 200),
    rows=st.integers(1, 300),
    density=st.floats(0.0, 1.0),
    r=st.floats(1e-6, 0.999),
    seed=st.integers(0, 2**32 - 1),
)
def test_packed_operators_give_the_same_products_compiled(size, rows, density, r, seed):
    rng = np.random.default_rng(seed)
    words = _words(rng, rows, size, density)
    theta, w = rng.dirichlet(np.ones(size)), rng.exponential(size=rows)
    halves = rng.integers(0, 1 << 16, size=(-(-size // 16), rows), dtype=np.uint16)  # local hashing's layout
    value_major = np.unpackbits(np.ascontiguousarray(halves.T).view(np.uint8), axis=1, bitorder="little")
    cases = (
        (lambda: constant_plus_bits(words, size, r), _bits(words, size)),
        (lambda: constant_plus_halfwords(halves, size, r), value_major[:, :size].astype(float)),
    )
    for build, bits in cases:
        numpy_op = build()  # below the threshold: numpy's loops
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bitvectors, "KERNEL_MIN_HALFWORDS", 0)
            compiled_op = build()
        assert np.array_equal(compiled_op @ theta, numpy_op @ theta)
        np.testing.assert_allclose(compiled_op.T @ w, numpy_op.T @ w, rtol=1e-12)
        dense = r + (1 - r) * bits
        np.testing.assert_allclose(compiled_op @ theta, dense @ theta, rtol=1e-12)
        np.testing.assert_allclose(compiled_op.T @ w, dense.T @ w, rtol=1e-12)


def test_the_exact_mle_is_the_same_compiled(monkeypatch):
    k, n = 200, 20_000  # D |X|^2 beyond the dense Hessian's limit: passes over the packed operator
    rng = np.random.default_rng(7)
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", "oue", domain, eps=1.0)
    p = 1 / np.arange(1, k + 1) ** 1.1
    values = rng.choice(k, n, p=p / p.sum())
    observations = Observations.from_reports(domain, [(mech, mech.sample(values, rng))])
    estimator = ldpsim.get_registry().create("estimator", "mle", tol=1e-9)
    monkeypatch.setattr(bitvectors, "KERNEL_MIN_HALFWORDS", 1 << 62)
    reference = estimator.estimate(Observations(domain, observations.groups))
    monkeypatch.setattr(bitvectors, "KERNEL_MIN_HALFWORDS", 0)
    calls = []
    lookups = kernels.halfword_lookups
    monkeypatch.setattr(kernels, "halfword_lookups", lambda *args: calls.append(1) or lookups(*args))
    compiled = estimator.estimate(Observations(domain, observations.groups))
    assert len(calls) > 5  # the passes ran compiled
    # B^T w sums in another order, so the iterates part in the last digits; both are certified within
    # their gaps of the maximum, so their log-likelihoods agree within the sum of the gaps, and the
    # estimates to what the flat directions of a 200-value likelihood at n = 20,000 allow (~1e-6 here)
    assert compiled.kkt < 1e-9 and reference.kkt < 1e-9
    assert abs(compiled.loglik - reference.loglik) <= compiled.gap + reference.gap
    np.testing.assert_allclose(compiled.distribution, reference.distribution, rtol=1e-4, atol=1e-8)


def test_without_numba_the_numpy_loops_run(monkeypatch):
    monkeypatch.setattr(bitvectors, "KERNEL_MIN_HALFWORDS", 0)
    monkeypatch.setitem(sys.modules, "ldpsim.model.kernels", None)  # an import of it raises ImportError
    monkeypatch.delattr(ldpsim.model, "kernels", raising=False)
    assert packed_kernels(1 << 30) is None
