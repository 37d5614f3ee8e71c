"""Mechanisms whose reports are k-bit vectors (unary encodings, subset selection), packed into int64 words.

A report is ``report_width = ceil(k / WORD_BITS)`` int64 words, bit j of the vector at bit
``j % WORD_BITS`` of word ``j // WORD_BITS`` (little-endian); the top bits of each word stay 0, so
every word is a non-negative int64 and a report is a row of small integers like any other.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from ..base.errors import EstimationError
from .mechanism import Mechanism

#: bits per int64 word of a report
WORD_BITS = 62
#: set bits of each byte value
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def set_bit_counts(words: np.ndarray) -> np.ndarray:
    """The number of set bits of each row of packed int64 words, by a per-byte table (no unpacking).

    Parameters
    ----------
    words
        (D, w) non-negative int64 words, as :class:`BitVectorMechanism` packs its reports.

    Returns
    -------
    numpy.ndarray
        (D,) int64 counts.
    """
    raw = np.ascontiguousarray(words, dtype="<i8").view(np.uint8).reshape(words.shape[0], -1)
    return _POPCOUNT[raw].sum(axis=1, dtype=np.int64)


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
        ones = np.zeros(self.domain.size)
        for rows, bits in self.bit_chunks(reports):
            # einsum, not @: a BLAS call on long vectors spins threads and crawls on a busy machine
            ones += np.einsum("d,dx->x", counts[rows], bits)
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
