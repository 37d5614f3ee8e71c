"""Unary encodings at scale: the samplers' laws, the packed-bits likelihood operator, the MLE's certificate.

The operator is compared with the brute-force product likelihood (each bit's probability
multiplied out, reports decoded by hand); the sampler with its exact law by seeded chi-square
tests, each with a false-alarm rate of 1e-3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import decode_bits as decode
from helpers import encode_bits as encode
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, chisquare

from ldpsim import Integers, Likelihood, Observations, constant_plus_bits, constant_plus_halfwords, gibu

WORD_BITS = 62
#: false-alarm rate of each seeded chi-square test
ALPHA = 1e-3


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(1, 200),
    rows=st.integers(1, 30),
    r=st.floats(1e-3, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_packed_bits_operator_equals_the_dense_matrix(k, rows, r, seed):
    rng = np.random.default_rng(seed)
    bits = rng.random((rows, k)) < rng.random()
    op = constant_plus_bits(encode(bits), k, r)
    dense = np.where(bits, 1.0, r)
    theta, w = rng.random(k), rng.random(rows)
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-12)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-12)
    np.testing.assert_allclose(op.rows(np.arange(rows)), dense, rtol=1e-15)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 300), rows=st.integers(1, 20), seed=st.integers(0, 2**32 - 1))
def test_packed_bits_operator_reads_every_bit_of_full_words(k, rows, seed):
    # 64 bits per word (local hashing's layout): every byte holds bits, an odd count of them is paired
    # with a byte beyond the domain, whose bits (set here at random) must be ignored
    rng = np.random.default_rng(seed)
    words = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, (rows, -(-k // 64) + 1), endpoint=True)
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, :k].astype(bool)
    op = constant_plus_bits(words, k, 0.25, word_bits=64)
    dense = np.where(bits, 1.0, 0.25)
    theta, w = rng.random(k), rng.random(rows)
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-12)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 300), rows=st.integers(0, 20), seed=st.integers(0, 2**32 - 1))
def test_halfwords_operator_is_the_packed_bits_operator_of_the_same_bits(k, rows, seed):
    # value-major halfwords (local hashing's layout) against 64-bit words: the same products and rows, bit
    # for bit; bits from k on (random here) are ignored by both
    rng = np.random.default_rng(seed)
    words = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, (rows, -(-k // 64)), endpoint=True)
    halves = words.view(np.uint8)[:, : 2 * -(-k // 16)].copy().view("<u2").T
    by_words, by_halves = constant_plus_bits(words, k, 0.25, word_bits=64), constant_plus_halfwords(halves, k, 0.25)
    theta, w = rng.random(k), rng.random(rows)
    np.testing.assert_array_equal(by_halves @ theta, by_words @ theta)
    np.testing.assert_array_equal(by_halves.T @ w, by_words.T @ w)
    np.testing.assert_array_equal(by_halves.rows(np.arange(rows)), by_words.rows(np.arange(rows)))
    assert by_halves.rows(np.arange(rows)).strides == by_words.rows(np.arange(rows)).strides  # BLAS rounds by layout
    with pytest.raises(ValueError, match="halfword positions"):
        constant_plus_halfwords(halves[:-1], k, 0.25)


def test_packed_bits_operator_without_reports():
    op = constant_plus_bits(np.zeros((0, 2), dtype=np.int64), 100, 0.5)
    assert (op @ np.ones(100)).shape == (0,)
    np.testing.assert_array_equal(op.T @ np.ones(0), np.zeros(100))


def test_packed_bits_operator_across_its_blocks_of_reports():
    from ldpsim.model.bitvectors import _PACK_ROWS

    rng = np.random.default_rng(3)
    bits = rng.random((_PACK_ROWS + 7, 70)) < 0.4  # the last block holds 7 reports
    op = constant_plus_bits(encode(bits), 70, 0.5)
    dense = np.where(bits, 1.0, 0.5)
    theta, w = rng.random(70), rng.random(bits.shape[0])
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-12)
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-12)


def test_bit_frequencies_across_blocks_of_reports_are_the_unpacked_sums(monkeypatch):
    """Several blocks (the last one short) count each report's set bits once: the sums of the unpacked bits."""
    import ldpsim.model.bitvectors as bv

    monkeypatch.setattr(bv, "_SUM_BYTES", 8 * 3 * 1000)  # 1,000 reports of 3 words per block
    mech = make("mechanism", "oue", Integers(low=0, high=149), eps=1.0)
    rng = np.random.default_rng(5)
    reports = mech.sample(rng.integers(0, 150, 2500), rng)
    counts = rng.integers(1, 7, 2500)
    ones = counts @ mech.unpack_bits(reports).astype(np.int64)
    np.testing.assert_array_equal(mech.bit_frequencies(reports, counts), ones / counts.sum())


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["oue", "rappor", "the"]),
    k=st.integers(2, 140),
    eps=st.floats(0.1, 5.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_whole_report_likelihood_equals_the_product_of_bit_probabilities(name, k, eps, seed):
    mech = make("mechanism", name, Integers(low=0, high=k - 1), eps=eps)
    rng = np.random.default_rng(seed)
    reports = mech.sample(rng.integers(0, k, size=20), rng)
    bits = decode(reports, k)
    p, q = mech.p, mech.q
    # brute force: log P(beta | x) = sum_j log P(beta_j | [j == x])
    own = np.eye(k, dtype=bool)[None, :, :]  # (1, x, j)
    prob = np.where(own, p, q)
    per_bit = np.where(bits[:, None, :] == 1, prob, 1 - prob)  # (D, x, j)
    brute = np.log(per_bit).sum(axis=2)
    shift, op = mech.likelihood_operator(reports)
    structured = shift[:, None] + np.log(op @ np.eye(k))
    np.testing.assert_allclose(structured, brute, rtol=1e-10, atol=1e-8)


def test_sampler_follows_the_whole_report_law_on_a_small_domain():
    # k = 5: 32 reports, each with its exact probability from the mechanism's matrix
    mech = make("mechanism", "oue", Integers(low=0, high=4), eps=1.3, sampler="bytes")
    rng = np.random.default_rng(2024)
    n, x = 40_000, 3
    reports = mech.sample(np.full(n, x), rng)[:, 0]
    observed = np.bincount(reports, minlength=32)
    expected = n * mech.matrix[x]
    assert chisquare(observed, expected).pvalue > ALPHA


def _decoded_with_set_bit_law(mech, reports, k):
    """The reports' bits (checked: valid words, nothing beyond bit k - 1), p, q, and the law of the number of
    set bits per report: Bernoulli(p) + Binomial(k - 1, q)."""
    assert np.all(reports >= 0) and np.all(reports < 1 << WORD_BITS)
    assert np.all(reports[:, -1] >> (k - 2 * WORD_BITS) == 0)  # nothing beyond bit k - 1
    bits = decode(reports, k)
    p, q = mech.p, mech.q
    support = np.arange(k + 1)
    return bits, p, q, (1 - p) * binom.pmf(support, k - 1, q) + p * binom.pmf(support - 1, k - 1, q)


def test_sampler_set_bit_count_and_positions_follow_their_laws_across_words():
    # k = 130 spans three words (padding bits in each): the number of set bits is
    # Bernoulli(p) + Binomial(k - 1, q); each other position is set with probability q
    k, eps, n, x = 130, 1.0, 20_000, 70
    mech = make("mechanism", "oue", Integers(low=0, high=k - 1), eps=eps, sampler="bytes")
    rng = np.random.default_rng(7)
    reports = mech.sample(np.full(n, x), rng)
    bits, p, q, law = _decoded_with_set_bit_law(mech, reports, k)
    ones = bits.sum(axis=1)
    keep = law * n >= 5  # pool the tails so every cell expects at least 5
    observed = np.append(np.bincount(ones, minlength=k + 1)[keep], (~keep[ones]).sum())
    expected = n * np.append(law[keep], law[~keep].sum())
    assert chisquare(observed, expected).pvalue > ALPHA
    set_at = bits.sum(axis=0)
    others = np.delete(set_at, x)
    # every other bit position: a chi-square of the k - 1 counts against n q (bits independent of one another)
    stat = float(np.sum((others - n * q) ** 2 / (n * q * (1 - q))))
    from scipy.stats import chi2

    assert chi2.sf(stat, k - 1) > ALPHA
    assert abs(set_at[x] - n * p) < 4 * math.sqrt(n * p * (1 - p))


def test_mle_on_the_packed_operator_holds_its_kkt_certificate():
    k, n = 60, 3000
    mech = make("mechanism", "oue", Integers(low=0, high=k - 1), eps=1.0)
    rng = np.random.default_rng(5)
    values = np.minimum(rng.zipf(1.5, size=n) - 1, k - 1)
    obs = Observations.from_reports(mech.domain, [(mech, mech.sample(values, rng))])
    lik = Likelihood.of(obs)
    result = gibu(lik, np.full(k, 1 / k), stop="kkt", tol=1e-6, accelerate="squarem")
    assert result.converged
    # the certificate recomputed from the dense brute-force likelihood: the gradient of the mean
    # log-likelihood is <= 1 everywhere (to the tolerance) and = 1 where theta > 0, in the sense the
    # certificate implies: sum_x theta_x grad_x = 1, so sum_x theta_x (1 - grad_x)_+ equals
    # sum_x theta_x (grad_x - 1)_+ <= max grad - 1 (complementary slackness to the tolerance)
    groups = obs.groups[0]
    dense = np.exp(mech.log_likelihood(groups.reports))
    grad = (groups.counts / (dense @ result.theta)) @ dense / groups.counts.sum()
    assert grad.max() <= 1 + 1e-5
    assert result.theta @ grad == pytest.approx(1.0, abs=1e-12)
    assert float(result.theta @ np.maximum(1 - grad, 0)) <= max(grad.max() - 1, 0) + 1e-12
    assert np.all(np.abs(grad[result.theta > 1e-2] - 1) < 1e-4)


@settings(max_examples=20, deadline=None)
@given(
    k=st.integers(2, 80),
    m=st.integers(2, 140),
    hashes=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_cms_packed_operator_equals_its_bits_read_by_hand(k, m, hashes, seed):
    # reports spanning up to three words, some hashes possibly unused: H[d, x] = 1 if bit h_j(x) of v_d is set
    mech = make("mechanism", "cms", Integers(low=0, high=k - 1), eps=1.1, buckets=m, hashes=hashes)
    rng = np.random.default_rng(seed)
    reports = mech.sample(rng.integers(0, k, size=25), rng)
    bits = decode(reports[:, 1:], m)
    support = np.take_along_axis(bits, mech.table[reports[:, 0]], axis=1)
    r = math.exp(-1.1)
    shift, op = mech.structured_likelihood(reports)
    np.testing.assert_allclose(op @ np.eye(k), np.where(support == 1, 1.0, r), rtol=1e-12)
    w = rng.random(reports.shape[0])
    np.testing.assert_allclose(op.T @ w, np.where(support == 1, 1.0, r).T @ w, rtol=1e-12)
    log_f, log_keep = -math.log1p(math.exp(0.55)), -math.log1p(math.exp(-0.55))
    ones = bits.sum(axis=1)
    np.testing.assert_allclose(shift, ones * log_f + (m - ones) * log_keep + 0.55 - math.log(hashes), rtol=1e-12)


def test_the_byte_sampler_meets_the_mechanism_contract():
    """`sampler = "bytes"`: the contract kit's sampler-law and privacy checks, as for the default."""
    from ldpsim.testing import check_mechanism

    for name in ("oue", "rappor", "the"):
        check_mechanism(make("mechanism", name, Integers(low=0, high=5), eps=1.0, sampler="bytes"))


# ------------------------------------------------------------ the bit-sliced sampler ("words", the default)
@pytest.mark.parametrize("q", [0.3669888157901474, 1 / 3, 0.9, 2.0**-30 + 2.0**-60, 0.5, 0.25, 13 / 16, 77 / 256])
@pytest.mark.parametrize("generator", ["PCG64", "MT19937"])
def test_bernoulli_words_bits_are_independent_bernoulli(q, generator):
    """Each bit of a word is 1 w.p. q, independently: the set bits per word are Binomial(64, q) and
    every bit position is set n q times (chi-squares, false-alarm rate 1e-3 each). MT19937's raw
    outputs are 32 bits wide: its words come from ``integers`` instead."""
    from ldpsim.model.bitvectors import bernoulli_words

    n = 200_000
    rng = np.random.Generator(getattr(np.random, generator)(31))
    words = bernoulli_words(q, n, rng)
    assert words.dtype == np.uint64 and words.shape == (n,)
    bits = np.unpackbits(words.view(np.uint8).reshape(n, 8), axis=1, bitorder="little").astype(bool)
    ones = bits.sum(axis=1)
    if q < 1e-6:  # 64 n q = 1.2e-2 expected set bits in all: none is the likely outcome
        assert ones.sum() <= 3
        return
    law = binom.pmf(np.arange(65), 64, q)
    keep = law * n >= 5
    observed = np.append(np.bincount(ones, minlength=65)[keep], (~keep[ones]).sum())
    expected = n * np.append(law[keep], law[~keep].sum())
    assert chisquare(observed, expected).pvalue > ALPHA
    from scipy.stats import chi2

    stat = float(np.sum((bits.sum(axis=0) - n * q) ** 2 / (n * q * (1 - q))))
    assert chi2.sf(stat, 64) > ALPHA


def test_bernoulli_words_at_the_ends_and_into_a_given_array():
    from ldpsim.model.bitvectors import bernoulli_words

    rng = np.random.default_rng(0)
    assert np.all(bernoulli_words(0.0, 10, rng) == 0)
    assert np.all(bernoulli_words(1.0, 10, rng) == np.iinfo(np.uint64).max)
    out = np.full(7, 5, dtype=np.uint64)
    assert bernoulli_words(0.25, 7, rng, out=out) is out


@pytest.mark.parametrize("name", ["the", "oue", "rappor"])
def test_the_default_sampler_follows_the_whole_report_law_on_a_small_domain(name):
    # the unary encodings sample 64 bits per random word by default; k = 5: 32 reports with their exact probabilities
    mech = make("mechanism", name, Integers(low=0, high=4), eps=1.3)
    assert mech.sampler == "words"
    rng = np.random.default_rng(2025)
    n = 40_000
    for x in (0, 3):
        reports = mech.sample(np.full(n, x), rng)[:, 0]
        observed = np.bincount(reports, minlength=32)
        assert chisquare(observed, n * mech.matrix[x]).pvalue > ALPHA


@pytest.mark.parametrize("name", ["the", "oue"])
def test_the_words_sampler_set_bit_count_and_positions_follow_their_laws_across_words(name):
    # k = 130: three words, padding in each; values in every word. The number of set bits is
    # Bernoulli(p) + Binomial(k - 1, q); each position is set w.p. q, or p for its own users
    k, eps, n = 130, 1.0, 30_000
    mech = make("mechanism", name, Integers(low=0, high=k - 1), eps=eps, sampler="words")
    rng = np.random.default_rng(8)
    values = np.array([0, 61, 62, 70, 124, 129]).repeat(n // 6)
    reports = mech.sample(values, rng)
    bits, p, q, law = _decoded_with_set_bit_law(mech, reports, k)
    ones = bits.sum(axis=1)
    keep = law * n >= 5
    observed = np.append(np.bincount(ones, minlength=k + 1)[keep], (~keep[ones]).sum())
    expected = n * np.append(law[keep], law[~keep].sum())
    assert chisquare(observed, expected).pvalue > ALPHA
    from scipy.stats import chi2

    own = bits[np.arange(n), values].astype(bool)
    assert abs(own.sum() - n * p) < 4 * math.sqrt(n * p * (1 - p))
    others = bits.sum(axis=0) - np.bincount(values[own], minlength=k)  # set bits at positions not held
    held = np.bincount(values, minlength=k)
    trials = n - held
    stat = float(np.sum((others - trials * q) ** 2 / (trials * q * (1 - q))))
    assert chi2.sf(stat, k) > ALPHA


def test_the_words_sampler_meets_the_mechanism_contract():
    from ldpsim.testing import check_mechanism

    for name in ("oue", "rappor", "the"):
        check_mechanism(make("mechanism", name, Integers(low=0, high=70), eps=1.0, sampler="words"))


@pytest.mark.parametrize("name", ["oue", "rappor"])
def test_the_default_reports_of_oue_and_rappor_follow_their_per_bit_law(name):
    """The default reports (``sampler = "words"``) at k = 130, eps = 0.7, 6 values spread over the three words.

    For the users of each value x, bit x is set Binomial(n_x, p) times: a two-sided binomial z test
    per value at |z| < 4.42 (false-alarm rate 1e-5 each, 6e-5 for the six). Every other bit j is set
    Binomial(n - n_j, q) times: one chi-square over the k positions at a false-alarm rate of 1e-3.
    """
    from scipy.stats import chi2

    k, eps, n = 130, 0.7, 36_000
    mech = make("mechanism", name, Integers(low=0, high=k - 1), eps=eps)
    assert mech.sampler == "words"
    rng = np.random.default_rng(11)
    held_values = np.array([0, 5, 61, 62, 123, 129])
    values = held_values.repeat(n // held_values.size)
    bits = decode(mech.sample(values, rng), k).astype(bool)
    p, q = mech.p, mech.q
    own = bits[np.arange(n), values]
    for x in held_values:
        n_x = int((values == x).sum())
        z = (own[values == x].sum() - n_x * p) / math.sqrt(n_x * p * (1 - p))
        assert abs(z) < 4.42, (x, z)
    held = np.bincount(values, minlength=k)
    others = bits.sum(axis=0) - np.bincount(values[own], minlength=k)
    trials = n - held
    stat = float(np.sum((others - trials * q) ** 2 / (trials * q * (1 - q))))
    assert chi2.sf(stat, k) > ALPHA


def test_the_default_samplers_meet_the_mechanism_contract():
    from ldpsim.testing import check_mechanism

    for name in ("oue", "rappor", "adp"):
        mech = make("mechanism", name, Integers(low=0, high=40), eps=1.0)
        check_mechanism(mech)
    assert make("mechanism", "adp", Integers(low=0, high=40), eps=1.0).chosen == "oue"


def test_uniforms_gives_the_reports_of_earlier_versions_back():
    # seed 0, one user per value 0..4: the reports the default sampler gave before "words" became it
    mech = make("mechanism", "oue", Integers(low=0, high=4), eps=1.0, sampler="uniforms")
    reports = mech.sample(np.arange(5), np.random.default_rng(0))[:, 0]
    u = np.random.default_rng(0).random((5, 5))
    expected = np.where(np.eye(5, dtype=bool), u < mech.p, u < mech.q) @ (1 << np.arange(5))
    np.testing.assert_array_equal(reports, expected)


def test_a_likelihood_over_positive_entries_makes_no_pass_to_find_impossible_reports(monkeypatch):
    from scipy.sparse.linalg import LinearOperator

    mech = make("mechanism", "oue", Integers(low=0, high=49), eps=1.0)
    rng = np.random.default_rng(5)
    obs = Observations.from_reports(mech.domain, [(mech, mech.sample(rng.integers(0, 50, 300), rng))])
    _, op = mech.likelihood_operator(obs.groups[0].reports)
    assert op.min_entry == pytest.approx(mech.q * (1 - mech.p) / (mech.p * (1 - mech.q)))
    products = []
    original = LinearOperator.matvec
    monkeypatch.setattr(LinearOperator, "matvec", lambda self, x: products.append(1) or original(self, x))
    likelihood = Likelihood(obs)
    assert products == []  # every entry is at least r > 0: no H @ 1
    likelihood.loglik(np.full(50, 0.02))
    assert products == [1]  # the counter counts


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 20), width=st.integers(1, 5), seed=st.integers(0, 2**32 - 1), table=st.booleans())
def test_set_bit_counts_count_every_bit_of_the_words(rows, width, seed, table):
    from ldpsim import set_bit_counts

    words = np.random.default_rng(seed).integers(
        np.iinfo(np.int64).min, np.iinfo(np.int64).max, (rows, width), endpoint=True
    )
    expected = np.unpackbits(words.view(np.uint8), axis=1).sum(axis=1)  # sign bits included
    with pytest.MonkeyPatch.context() as patch:
        if table:  # numpy 1.26 has no popcount: the per-byte table
            patch.delattr(np, "bitwise_count", raising=False)
        np.testing.assert_array_equal(set_bit_counts(words), expected)
