"""Apple's sequence-fragment puzzle (SFP; Differential Privacy Team, "Learning with privacy at scale", 2017).

Apple pads a new word to 10 characters and cuts it into 2-character fragments at positions 1, 3, ..., 9. A
user draws one position ``l`` uniformly and reports, through a count-mean sketch, the fragment prefixed by
an 8-bit hash of the *whole* word (``h(s) || s[l:l+1]``), with ``l`` in the clear; and the whole word
through a second sketch. The server finds the frequent (hash, fragment) pairs of each position; fragments
sharing a hash are likely pieces of the same word, so the candidate words are, per hash value, the cartesian
product of that hash's frequent fragments over the positions; the word sketch then estimates them.

Here a word is a ``bits``-bit id of an :class:`ldpsim.OpenDomain` and a fragment a slice of
``fragment_bits`` bits (position 0 the top bits); ``fragment_bits`` must divide ``bits``. A fragment
report's value is the key ``word_hash(x) << fragment_bits | fragment_l(x)`` (``hash_bits + fragment_bits``
bits), ``word_hash`` the top ``hash_bits`` bits of SplitMix64's finaliser of the id. Each user spends
eps/2 on the fragment sketch and eps/2 on the word sketch (sequential composition: eps-LDP in all; the
position is drawn independently of the value), as pure-ldp's SFP does. The sketches are Apple's CMS or
HCMS at its deployed sizes by default (CMS: 65,536 hashes x 1,024 buckets; HCMS: 1,024 x 32,768), with
independent hash families for fragments and words.
"""

from __future__ import annotations

import numpy as np

from ldpsim import OpenDomain, ParameterError

from .heavy_hitters import mix64
from .sketch_channels import SketchHashes, cms_reports, hcms_reports

#: Apple's deployed sketch sizes (hashes, buckets) per oracle
APPLE_SIZES = {"cms": (65536, 1024), "hcms": (1024, 32768)}
#: the most keys (hash x fragment values) a position's dictionary may hold: each is scored against every
#: used hash of the sketch (at Apple's CMS size, 2^20 keys are 6.9 x 10^10 look-ups per pass)
MAX_KEYS = 1 << 20
#: the key mixed into the whole-word hash (fixed: the word hash is part of the protocol, not a seed)
WORD_HASH_KEY = np.uint64(0x243F6A8885A308D3)


class SFP:
    """SFP's parametrisation and user-side sampler.

    Parameters
    ----------
    domain : OpenDomain
        The users' domain (words are its ids).
    eps : float
        Each user's budget: eps/2 on its fragment, eps/2 on its word.
    k : int
        The top-k rule's size (per position and at the end).
    fragment_bits : int
        Bits per fragment; must divide ``domain.bits``.
    hash_bits : int
        Bits of the whole-word hash prefixed to fragments (Apple's: 8).
    oracle : str
        ``"cms"`` or ``"hcms"``.
    hashes, buckets : int or None
        The sketches' d and m (default: Apple's deployed sizes for the oracle).
    seed : int
        Seed of the sketches' hash families (the collector's, public).
    work : int
        Working-set size of the dictionary decoder.
    """

    name = "sfp"

    def __init__(
        self,
        domain: OpenDomain,
        eps: float,
        k: int = 64,
        fragment_bits: int = 8,
        hash_bits: int = 8,
        oracle: str = "cms",
        hashes: int | None = None,
        buckets: int | None = None,
        seed: int = 0,
        work: int = 256,
    ):
        if not eps > 0:
            raise ParameterError(f"is {eps}", field="eps", hint="use a positive privacy level")
        if k < 1:
            raise ParameterError(f"is {k}", field="k", hint="keep at least one fragment")
        if oracle not in APPLE_SIZES:
            raise ParameterError(f"is '{oracle}'", field="oracle", hint=f"use one of {', '.join(APPLE_SIZES)}")
        if fragment_bits < 1 or domain.bits % fragment_bits:
            raise ParameterError(
                f"{fragment_bits} does not divide bits={domain.bits}",
                field="fragment_bits",
                hint="use a divisor of the domain's bits (every fragment has the same width)",
            )
        if not 1 <= hash_bits <= 32:
            raise ParameterError(f"is {hash_bits}", field="hash_bits", hint="use 1..32 bits (Apple's: 8)")
        if 2 ** (hash_bits + fragment_bits) > MAX_KEYS:
            raise ParameterError(
                f"a position's dictionary would hold 2^{hash_bits + fragment_bits} keys, more than {MAX_KEYS:,}",
                field="fragment_bits",
                hint="lower fragment_bits or hash_bits (keys are hash_bits + fragment_bits bits)",
            )
        d, m = APPLE_SIZES[oracle]
        self.domain, self.eps, self.k, self.oracle = domain, float(eps), int(k), oracle
        self.fragment_bits, self.hash_bits, self.work = int(fragment_bits), int(hash_bits), int(work)
        self.positions = domain.bits // fragment_bits
        self.fragments = SketchHashes(hashes or d, buckets or m, seed=2 * seed)
        self.words = SketchHashes(hashes or d, buckets or m, seed=2 * seed + 1)
        if oracle == "hcms" and self.words.buckets & (self.words.buckets - 1):
            raise ParameterError(f"is {self.words.buckets}", field="buckets", hint="HCMS needs a power of 2")

    @property
    def part_eps(self) -> float:
        """The budget of each of a user's two reports, eps/2."""
        return self.eps / 2

    def word_hash(self, values: np.ndarray) -> np.ndarray:
        """The ``hash_bits``-bit hash of whole words (uint64)."""
        return mix64(np.asarray(values, dtype=np.uint64) ^ WORD_HASH_KEY) >> np.uint64(64 - self.hash_bits)

    def fragment(self, values: np.ndarray, position: int) -> np.ndarray:
        """Fragment ``position`` (0: the top bits) of each word (uint64)."""
        shift = np.uint64(self.domain.bits - (position + 1) * self.fragment_bits)
        return (np.asarray(values, dtype=np.uint64) >> shift) & np.uint64(2**self.fragment_bits - 1)

    def keys(self, values: np.ndarray, position: int) -> np.ndarray:
        """The fragment reports' values: ``word_hash << fragment_bits | fragment``."""
        return (self.word_hash(values) << np.uint64(self.fragment_bits)) | self.fragment(values, position)

    def assemble(self, fragments: list[np.ndarray]) -> np.ndarray:
        """Words from one fragment per position (broadcast arrays, position 0 first)."""
        out = np.zeros(np.broadcast_shapes(*(np.shape(f) for f in fragments)), dtype=np.uint64)
        for position, part in enumerate(fragments):
            shift = np.uint64(self.domain.bits - (position + 1) * self.fragment_bits)
            out |= np.asarray(part, dtype=np.uint64) << shift
        return out

    def report(self, keys: np.ndarray, family: SketchHashes, rng: np.random.Generator) -> np.ndarray:
        """Sketch reports of ``keys`` at eps/2 through ``family``."""
        draw = cms_reports if self.oracle == "cms" else hcms_reports
        return draw(keys, family, self.part_eps, rng)

    def sample(
        self, values: np.ndarray, rng: np.random.Generator
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
        """The users' reports: per position the distinct fragment reports and their counts, and the word reports.

        Parameters
        ----------
        values : numpy.ndarray
            The users' uint64 words.
        rng : numpy.random.Generator
            The randomness.

        Returns
        -------
        tuple
            ``(positions, words)``: per position ``(reports, counts)`` of the users that drew it; and the
            distinct word reports with their counts.
        """
        values = self.domain.check(values)
        position = np.asarray(rng.integers(self.positions, size=values.shape[0]))
        order = np.argsort(position, kind="stable")
        bounds = np.searchsorted(position[order], np.arange(self.positions + 1))
        parts = []
        for i in range(self.positions):  # one pass per position (a handful), never per user
            mine = values[order[bounds[i] : bounds[i + 1]]]
            parts.append(_distinct(self.report(self.keys(mine, i), self.fragments, rng)))
        return parts, _distinct(self.report(values, self.words, rng))


def _distinct(reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, counts = np.unique(reports, axis=0, return_counts=True)
    return uniq, counts
