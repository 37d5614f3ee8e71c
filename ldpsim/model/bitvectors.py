"""Mechanisms whose reports are k-bit vectors (unary encodings, subset selection), packed into int64 words.

A report is ``report_width = ceil(k / WORD_BITS)`` int64 words, bit j of the vector at bit
``j % WORD_BITS`` of word ``j // WORD_BITS`` (little-endian); the top bits of each word stay 0, so
every word is a non-negative int64 and a report is a row of small integers like any other.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from ..base.errors import EstimationError
from .mechanism import Mechanism

#: bits per int64 word of a report
WORD_BITS = 62
#: set bits of each byte value
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)
#: numpy bit generators whose raw outputs are 64 uniform bits (MT19937's are 32)
_RAW_64 = frozenset({"PCG64", "PCG64DXSM", "Philox", "SFC64"})
#: reports per block when the packed bytes are regrouped into halfword positions (a few MB)
_PACK_ROWS = 1 << 15
#: bytes of halfwords per block of :meth:`BitVectorMechanism.bit_frequencies` (its memory, whatever the reports)
_SUM_BYTES = 1 << 24
#: halfwords (positions x reports) from which bit sums and the packed-bit likelihood's products run compiled
#: (:mod:`ldpsim.model.kernels`): below, numpy's loops cost less than importing numba and loading the kernels
#: (about 0.5 s once per process; a pass over 2^20 halfwords takes about 5 ms in numpy)
KERNEL_MIN_HALFWORDS = 1 << 20
#: digits of q drawn for every word before only the words with undecided bits are kept (a word has one
#: left after d digits w.p. 1 - (1 - 2^-d)^64: 22% at d = 8)
_FULL_DIGITS = 8


def random_words(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` uniform 64-bit words from ``rng``.

    The bit generator's raw output where it is 64 uniform bits (numpy's default PCG64: about
    5x faster than ``integers`` over the full range), else ``integers``.

    Parameters
    ----------
    rng
        The generator of the words (its bit generator advances).
    size
        How many words.

    Returns
    -------
    numpy.ndarray
        (size,) uint64.
    """
    bitgen = rng.bit_generator
    if type(bitgen).__name__ in _RAW_64:
        return np.asarray(bitgen.random_raw(size), dtype=np.uint64)
    return rng.integers(0, np.iinfo(np.uint64).max, size=size, dtype=np.uint64, endpoint=True)


def bernoulli_words(q: float, size: int, rng: np.random.Generator, out: np.ndarray | None = None) -> np.ndarray:
    """``size`` 64-bit words whose bits are independent Bernoulli(q), exactly (q as the float it is).

    Bit-sliced comparison of a uniform U = 0.u_1 u_2 ... with q = 0.b_1 b_2 ... (q's binary
    digits, finitely many): bit i of a random word is u_i for all 64 bits of a word at once. At
    the first digit where u_i differs from b_i the bit is decided (1 iff b_i = 1, i.e. U < q);
    bits equal to q on all its digits have U >= q and stay 0. Every word takes the first digits;
    then only the words with undecided bits go on (2 random bits per output bit on average, 8
    for the first digits of every word, against 8 or 64 for a random byte or a float per bit).

    Parameters
    ----------
    q
        The probability of each bit, in [0, 1].
    size
        How many words.
    rng
        The generator of every draw.
    out
        A (size,) uint64 array to fill (e.g. a view of the reports), else a new one.

    Returns
    -------
    numpy.ndarray
        (size,) uint64: ``out`` if given.
    """
    result = np.empty(size, dtype=np.uint64) if out is None else out
    if q >= 1.0:
        result.fill(np.iinfo(np.uint64).max)
        return result
    if q <= 0.0 or size == 0:
        result.fill(0)
        return result
    num, den = float(q).as_integer_ratio()  # q = num / 2^e exactly, num odd
    e = den.bit_length() - 1
    if e <= _FULL_DIGITS:
        # few digits: from the last one up, P(bit) = (b_i + P(bit of the digits after i)) / 2 by one OR
        # (b_i = 1) or AND (b_i = 0) with a random word: e words per word, no bit left open
        result[:] = random_words(rng, size)
        for i in range(e - 1, 0, -1):
            r = random_words(rng, size)
            (np.bitwise_or if (num >> (e - i)) & 1 else np.bitwise_and)(result, r, out=result)
        return result
    result.fill(0)
    open_bits = np.full(size, np.iinfo(np.uint64).max, dtype=np.uint64)  # bits still equal to q's digits
    done = result  # the decided ones of the words in play: all words, then only those with open bits
    where = None
    for i in range(1, e + 1):
        if i == _FULL_DIGITS + 1 or (where is not None and i % 4 == 0):
            # keep only the words with open bits (again every 4 digits as they thin out)
            if where is not None:
                result[where] = done
            keep = np.flatnonzero(open_bits)
            where = keep if where is None else where[keep]
            open_bits = open_bits[keep]
            done = result[where]
            if where.size == 0:
                break
        r = random_words(rng, open_bits.size)
        np.invert(r, out=r)  # where u_i = 0
        if (num >> (e - i)) & 1:  # b_i = 1: u_i = 0 decides U < q, a 1
            np.bitwise_and(r, open_bits, out=r)
            np.bitwise_or(done, r, out=done)
            np.bitwise_xor(open_bits, r, out=open_bits)
        else:  # b_i = 0: u_i = 1 decides U > q, a 0; u_i = 0 stays open
            np.bitwise_and(open_bits, r, out=open_bits)
    if where is not None:
        result[where] = done
    return result


def set_bit_counts(words: np.ndarray) -> np.ndarray:
    """The number of set bits of each row of packed int64 words, without unpacking.

    numpy's popcount (``np.bitwise_count``, numpy >= 2.0) where it exists: 0.04 s for 10^6 reports of
    17 words, against 0.87 s by a per-byte table (the fallback on numpy 1.26).

    Parameters
    ----------
    words
        (D, w) non-negative int64 words, as :class:`BitVectorMechanism` packs its reports.

    Returns
    -------
    numpy.ndarray
        (D,) int64 counts.
    """
    words = np.ascontiguousarray(words, dtype="<i8")
    popcount = getattr(np, "bitwise_count", None)
    if popcount is not None:  # unsigned: numpy counts the bits of a signed integer's absolute value
        return popcount(words.view(np.uint64)).sum(axis=1, dtype=np.int64)
    raw = words.view(np.uint8).reshape(words.shape[0], 8 * words.shape[1])  # no -1: zero rows reshape too
    return _POPCOUNT[raw].sum(axis=1, dtype=np.int64)


@functools.cache
def byte_patterns() -> np.ndarray:
    """(256, 8) float: bit t of byte value v at ``[v, t]`` (read-only)."""
    pattern = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(float)
    pattern.setflags(write=False)
    return pattern


def halfword_rows(words: np.ndarray, size: int, word_bits: int = WORD_BITS) -> tuple[np.ndarray, np.ndarray]:
    """Packed reports regrouped by halfword position: one contiguous row of D halfwords per position.

    Parameters
    ----------
    words
        (D, w) int64 words holding bit x at bit ``x % word_bits`` of word ``x // word_bits``.
    size
        The number of bits that are vector bits (k); the others are ignored.
    word_bits
        Vector bits per word.

    Returns
    -------
    halves : numpy.ndarray
        (P, D) uint16: the words' used bytes, two per row (byte ``2 p`` low, ``2 p + 1`` high).
    column : numpy.ndarray
        (2 P, 8) int: the vector bit held by bit t of used byte j, -1 where none.
    """
    words = np.ascontiguousarray(words, dtype="<i8")
    rows, width = words.shape
    raw = words.view(np.uint8).reshape(rows, width * 8)
    # column of bit t of byte j, or -1 where the byte's bit holds no vector bit
    word, in_word = np.divmod(np.arange(width * 64), 64)
    column = np.where(in_word < word_bits, word * word_bits + in_word, -1)
    column = np.where(column < size, column, -1).reshape(width * 8, 8)
    used = np.flatnonzero((column >= 0).any(axis=1))  # bytes that hold at least one bit
    if used.size % 2:  # pair the bytes: a last odd one goes with a byte that holds no bit (there is one:
        # the words have an even number of bytes), whose table is all zeros
        used = np.concatenate([used, np.setdiff1d(np.arange(width * 8), used)[:1]])
    column = column[used]
    nbytes = used.size
    # the used bytes are usually the words' first ones (all but those beyond the domain): a slice, no copy
    pick = slice(0, nbytes) if np.array_equal(used, np.arange(nbytes)) else used
    halves = np.empty((nbytes // 2, rows), dtype=np.uint16)  # halfword positions as rows
    for lo in range(0, rows, _PACK_ROWS):  # by blocks of reports: row-wise reads, one transposed write
        block = raw[lo : lo + _PACK_ROWS, pick]
        halves[:, lo : lo + _PACK_ROWS] = block.view("<u2").T  # byte 2j low, byte 2j + 1 high
    return halves, column


def packed_kernels(halfwords: int) -> ModuleType | None:
    """The compiled loops of the packed-bit likelihood (:mod:`ldpsim.model.kernels`) for a pass over
    ``halfwords`` halfwords, or None where numpy's loops are the ones to run.

    None below :data:`KERNEL_MIN_HALFWORDS` (numba's import would cost more than it saves) and where numba
    cannot be imported: numpy's loops are the reference, and the compiled ones give the same sums (the
    same bits for ``B @ theta``; ``B^T w`` in another order, exact for whole-number weights).

    Parameters
    ----------
    halfwords
        The size of the pass: halfword positions times reports.

    Returns
    -------
    module or None
        :mod:`ldpsim.model.kernels`, imported (numba with it) on first use.
    """
    if halfwords < KERNEL_MIN_HALFWORDS:
        return None
    try:
        from . import kernels
    except ImportError:  # numba missing or unusable on this platform: numpy's loops
        return None
    return kernels


def bit_sums(halves: np.ndarray, column: np.ndarray, size: int, w: np.ndarray) -> np.ndarray:
    """``B^T w``: for each vector bit, the total weight of the reports that set it (:func:`halfword_rows`'s layout).

    Compiled (:func:`packed_kernels`): two 256-bin weighted histograms per halfword position in one
    sweep, folded to the bits. numpy: one weighted count per (halfword position, pattern), folded to
    its 16 bits: D counts per 16 bits, not one per set bit. Whole-number weights (report counts) give
    exact sums either way.
    """
    hit = column >= 0
    out = np.zeros(size)
    kernels = packed_kernels(halves.size)
    if kernels is not None:
        hist = np.zeros((2 * halves.shape[0], 256))
        kernels.byte_histograms(halves, np.ascontiguousarray(w, dtype=float), hist)
        out[column[hit]] = kernels.fold_bits(hist)[hit]
        return out
    pattern = byte_patterns()
    per_bit = np.empty(column.shape)  # (bytes, 8): weight of the reports setting each bit
    for j in range(halves.shape[0]):
        counts = np.bincount(halves[j], weights=w, minlength=1 << 16).reshape(256, 256)  # (high, low)
        per_bit[2 * j] = counts.sum(axis=0) @ pattern
        per_bit[2 * j + 1] = counts.sum(axis=1) @ pattern
    out[column[hit]] = per_bit[hit]
    return out


class BitVectorMechanism(Mechanism):
    """Base of mechanisms reporting k-bit vectors: packing, unpacking in bounded chunks, report checks.

    Subclasses call ``super()._validate()`` (it sets the instance's ``report_width`` from the
    domain) and use :meth:`pack_bits`, :meth:`bit_chunks` and :meth:`checked_bits`.
    """

    #: elements per temporary (chunk of users x k) in sampling and unpacking: ~16 MB of float64
    chunk_elements: ClassVar[int] = 1 << 21

    def _validate(self) -> None:
        # An instance attribute shadows the class default: the width depends on the domain.
        self.report_width = -(-self.domain.size // WORD_BITS)

    def pack_bits(self, bits: np.ndarray) -> np.ndarray:
        """(m, k) bool -> (m, report_width) int64 words."""
        m, k = bits.shape
        w = self.report_width
        words = np.zeros((m, w * WORD_BITS), dtype=bool)
        words[:, :k] = bits
        padded = np.zeros((m, w, 64), dtype=bool)  # the top bits of each word stay 0
        padded[:, :, :WORD_BITS] = words.reshape(m, w, WORD_BITS)
        return np.packbits(padded, axis=-1, bitorder="little").view("<i8").reshape(m, w).astype(np.int64)

    def unpack_bits(self, words: np.ndarray) -> np.ndarray:
        """(m, report_width) int64 words -> (m, k) bool."""
        m = words.shape[0]
        raw = np.ascontiguousarray(words, dtype="<i8").view(np.uint8).reshape(m, self.report_width, 8)
        bits = np.unpackbits(raw, axis=-1, bitorder="little")[:, :, :WORD_BITS]
        return bits.reshape(m, -1)[:, : self.domain.size].astype(bool)

    def chunk_rows(self) -> int:
        """Users (or reports) per chunk, so a chunk's (rows, k) temporaries stay bounded."""
        return max(1, self.chunk_elements // self.domain.size)

    def bit_chunks(self, reports: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """(rows, bits) for bounded chunks of checked reports."""
        step = self.chunk_rows()
        for start in range(0, reports.shape[0], step):
            rows = slice(start, min(start + step, reports.shape[0]))
            yield rows, self.unpack_bits(reports[rows])

    def bit_frequencies(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Share of the users (``counts`` per distinct report) whose report sets each bit: the statistic of
        the unary encodings' unbiased estimates, ``E = q + (p - q) theta``."""
        reports = self.checked_bits(reports)
        counts = np.asarray(counts, dtype=float)
        size = self.domain.size
        ones = np.zeros(size)
        # by blocks of reports regrouped as the likelihood reads them: sums of whole counts, exact in any order
        # (the same numbers as summing unpacked bits, 2x faster at k = 1000, 10^6 reports)
        step = max(1, _SUM_BYTES // (8 * max(1, reports.shape[1])))
        for lo in range(0, reports.shape[0], step):
            halves, column = halfword_rows(reports[lo : lo + step], size)
            ones += bit_sums(halves, column, size, counts[lo : lo + step])
        return ones / counts.sum()

    def bit_matrix(self, reports: np.ndarray) -> Any:
        """The (D, k) 0/1 scipy CSR matrix B[d, x] = bit x of report d, built in bounded chunks."""
        from scipy.sparse import csr_matrix

        indices, lengths = [], []
        for _, bits in self.bit_chunks(reports):
            lengths.append(bits.sum(axis=1))
            indices.append(np.nonzero(bits)[1].astype(np.int32))  # row-major: sorted by row, then column
        indptr = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]) if lengths else np.zeros(1, np.int64)
        idx = np.concatenate(indices) if indices else np.zeros(0, np.int32)
        return csr_matrix((np.ones(idx.size), idx, indptr), shape=(reports.shape[0], self.domain.size))

    def sample_unary_words(self, values: np.ndarray, p: float, q: float, rng: np.random.Generator) -> np.ndarray:
        """Packed reports whose bit ``values[i]`` is 1 w.p. ``p`` and every other bit w.p. ``q``, independently.

        Exact Bernoulli(q) bits from one random byte each (not one float): a byte below
        ``floor(256 q)`` sets the bit, above it clears it, and the 1/256 of bytes equal to it are
        settled by a uniform against the remainder ``256 q - floor(256 q)``. The bits are drawn in
        the padded 64-bit layout of the words (the two top bits of each word and the bits beyond k
        cleared afterwards), so packing is one ``packbits``.
        """
        k, w = self.domain.size, self.report_width
        values = np.asarray(values, dtype=np.int64)
        out = np.empty((values.shape[0], w), dtype=np.int64)
        level = q * 256.0
        cut = math.floor(level)
        rest = level - cut
        valid = np.zeros(w * 64, dtype=bool)  # bit positions of the padded layout that hold a vector bit
        columns = np.arange(k)
        valid[(columns // WORD_BITS) * 64 + columns % WORD_BITS] = True
        invalid = np.flatnonzero(~valid)
        own_offset = (values // WORD_BITS) * 64 + values % WORD_BITS
        step = max(1, (self.chunk_elements * 8) // (w * 64))
        for start in range(0, values.shape[0], step):
            m = min(step, values.shape[0] - start)
            draws = rng.integers(0, 256, size=(m, w * 64), dtype=np.uint8)
            bits = draws < cut
            if cut < 256:
                ties = np.flatnonzero(draws == cut)
                bits.ravel()[ties] = rng.random(ties.size) < rest
            bits[:, invalid] = False
            bits[np.arange(m), own_offset[start : start + m]] = rng.random(m) < p
            out[start : start + m] = np.packbits(bits, axis=1, bitorder="little").view("<i8")
        return out

    def sample_unary_bitsliced(self, values: np.ndarray, p: float, q: float, rng: np.random.Generator) -> np.ndarray:
        """Packed reports whose bit ``values[i]`` is 1 w.p. ``p`` and every other bit w.p. ``q``, independently.

        The same law as :meth:`sample_unary_words`, drawn 64 bits at a time: each report word is
        one :func:`bernoulli_words` word (its two top bits, and the bits beyond k, cleared), and the
        bit of the true value is then set to a Bernoulli(p) draw.

        Parameters
        ----------
        values
            (n,) true values (domain indices).
        p, q
            The probability of the true value's bit, and of every other bit.
        rng
            The generator of every draw.

        Returns
        -------
        numpy.ndarray
            (n, report_width) int64 packed reports.
        """
        k, w = self.domain.size, self.report_width
        values = np.asarray(values, dtype=np.int64)
        out = np.empty((values.shape[0], w), dtype=np.int64)
        # the bits of each word that hold vector bits: the low 62, fewer in the last word
        mask = np.full(w, (1 << WORD_BITS) - 1, dtype=np.uint64)
        mask[-1] = (1 << (k - WORD_BITS * (w - 1))) - 1
        word_of, bit_of = values // WORD_BITS, (values % WORD_BITS).astype(np.uint64)
        step = max(1, (self.chunk_elements * 8) // (w * 64))
        for start in range(0, values.shape[0], step):
            m = min(step, values.shape[0] - start)
            words = out[start : start + m].view(np.uint64)  # drawn in place: no copy of the chunk
            bernoulli_words(q, m * w, rng, out=words.reshape(-1))
            words &= mask
            rows, cols, at = np.arange(m), word_of[start : start + m], bit_of[start : start + m]
            own = (rng.random(m) < p).astype(np.uint64)
            words[rows, cols] = (words[rows, cols] & ~(np.uint64(1) << at)) | (own << at)
        return out

    def checked_bits(self, reports: np.ndarray) -> np.ndarray:
        """The reports, or EstimationError if one is not a packed bit vector of length k."""
        k = self.domain.size
        top = k - WORD_BITS * (self.report_width - 1)  # bits used in the last word
        bad = np.any((reports < 0) | (reports >= 1 << WORD_BITS), axis=1) | ((reports[:, -1] >> top) != 0)
        if bad.any():
            report = tuple(int(v) for v in reports[np.argmax(bad)])
            raise EstimationError(
                f"report {report} is not an output of {self!r} (a {k}-bit vector packed {WORD_BITS} bits per word)",
                hint="check that the reports were produced by this mechanism",
            )
        return reports
