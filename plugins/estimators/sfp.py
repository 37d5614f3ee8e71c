"""SFP's server: frequent (hash, fragment) keys per position, words assembled per hash, then the word sketch.

Per position, the exact MLE over every key (``2^(hash_bits + fragment_bits)`` of them) plus "other" from
that position's fragment reports (:func:`~ldpsim_plugins.estimators.sketch_dictionary.dictionary_mle`),
pruned by the rule. Per hash value present at every position, the candidate words are the cartesian
product of its kept fragments, keeping those whose own word hash is that value (a true word's fragments
carry its own hash, so this loses none).

The keys are every value a fragment report can be about, yet "other" is kept: the keys of the rare words
are many (up to one per word), each with a tiny mass, and the working-set decoder holds the keys outside
its set at zero; "other", whose row is that of a key with a uniform bucket, takes that diffuse tail, as it
takes the non-candidate prefixes of a PEM level. (With ``complete=True`` the tail's mass had to go to keys
inside the set, which then grew towards the whole 2^16.) The word sketch's exact MLE over the candidates + "other" gives
the found words' frequencies; the rule prunes them once more.
"""

from __future__ import annotations

import numpy as np

from ldpsim import FoundItems

from ..mechanisms.sfp import MAX_KEYS, SFP
from .heavy_hitters import LevelEstimate, check_rule, prune
from .sketch_dictionary import dictionary_mle


def sfp_candidates(protocol: SFP, kept_keys: list[np.ndarray]) -> np.ndarray:
    """Candidate words from each position's kept keys: per hash, the product of its fragments, hash-checked.

    Parameters
    ----------
    protocol : SFP
        The protocol.
    kept_keys : list of numpy.ndarray
        Per position, the kept keys (``hash << fragment_bits | fragment``), most frequent first.

    Returns
    -------
    numpy.ndarray
        Distinct sorted uint64 words, at most :data:`MAX_KEYS` of them: where a hash's product would hold
        more (few users: the kept fragments are mostly noise), its least frequent fragments are dropped
        from its largest position until the product fits its share of MAX_KEYS.
    """
    f = np.uint64(protocol.fragment_bits)
    low = np.uint64(2**protocol.fragment_bits - 1)
    hashes = [np.asarray(k, dtype=np.uint64) >> f for k in kept_keys]
    common = hashes[0]
    for h in hashes[1:]:
        common = np.intersect1d(common, h)
    words = []
    common = np.unique(common)
    share = max(1, MAX_KEYS // max(1, common.size))
    for h in common:  # hashes present everywhere: a few (at most k)
        parts = [np.asarray(k, dtype=np.uint64)[hk == h] & low for k, hk in zip(kept_keys, hashes)]
        while int(np.prod([p.size for p in parts], dtype=float)) > share:  # the least frequent go first
            widest = int(np.argmax([p.size for p in parts]))
            parts[widest] = parts[widest][:-1]
        grids = np.meshgrid(*parts, indexing="ij")
        built = protocol.assemble([g.ravel() for g in grids])
        words.append(built[protocol.word_hash(built) == h])
    if not words:
        return np.zeros(0, dtype=np.uint64)
    return np.unique(np.concatenate(words))


def sfp_heavy_hitters(
    protocol: SFP,
    reports: tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]],
    *,
    rule: str = "topk",
    threshold: float = 0.01,
    cap: int | None = None,
    level: float = 0.95,
) -> FoundItems:
    """SFP's heavy hitters: per position the MLE over keys + "other", pruned; words assembled; then estimated.

    Parameters
    ----------
    protocol : SFP
        The protocol the reports came from.
    reports : tuple
        ``SFP.sample``'s ``(positions, words)``.
    rule, threshold : str, float
        The pruning rule (``"topk"`` or ``"ucb"``); ``threshold`` is a frequency (among a position's users
        for keys, among all users for words).
    cap : int or None
        Most keys ``"ucb"`` keeps per position and words at the end (default ``protocol.k``).
    level : float
        Confidence level of the upper bounds.

    Returns
    -------
    FoundItems
        The found words by estimated frequency, their bounds, and every position's estimate then the words'.
    """
    check_rule(rule, threshold)
    cap = cap or protocol.k
    keys = np.arange(2 ** (protocol.hash_bits + protocol.fragment_bits), dtype=np.uint64)
    key_bits = protocol.hash_bits + protocol.fragment_bits
    levels: list[LevelEstimate] = []
    kept_keys = []
    for frag_reports, counts in reports[0]:
        fit = dictionary_mle(
            protocol.oracle,
            keys,
            protocol.part_eps,
            protocol.fragments,
            frag_reports,
            counts,
            work=protocol.work,
            level=level,
            bounds=rule == "ucb",
        )
        kept = prune(fit.frequency, fit.upper, rule=rule, k=protocol.k, threshold=threshold, cap=cap)
        levels.append(LevelEstimate(key_bits, keys, fit.frequency, fit.upper, fit.other, kept))
        kept_keys.append(keys[kept])
    words = sfp_candidates(protocol, kept_keys)
    if words.size == 0:
        return FoundItems(words, np.zeros(0), np.zeros(0), levels)
    fit = dictionary_mle(
        protocol.oracle,
        words,
        protocol.part_eps,
        protocol.words,
        *reports[1],
        work=protocol.work,
        level=level,
        bounds=rule == "ucb",
    )
    kept = prune(fit.frequency, fit.upper, rule=rule, k=protocol.k, threshold=threshold, cap=cap)
    levels.append(LevelEstimate(protocol.domain.bits, words, fit.frequency, fit.upper, fit.other, kept))
    return FoundItems(words[kept], fit.frequency[kept], fit.upper[kept], levels)
