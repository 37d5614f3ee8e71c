"""Apple's sequence-fragment puzzle: parametrisation, sampler law, the search, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ldpsim_plugins.datasets.open_domain import zipf
from ldpsim_plugins.estimators.sfp import sfp_candidates, sfp_heavy_hitters
from ldpsim_plugins.mechanisms.sfp import SFP
from ldpsim_plugins.mechanisms.sketch_channels import HCMSLevel
from scipy import stats

from ldpsim import OpenDomain, ParameterError

#: every seeded chi-square test below rejects at this level: a false alarm once in 10^4 runs each
ALPHA = 1e-4


def test_fragments_assemble_and_hash() -> None:
    sfp = SFP(OpenDomain(bits=32), 4.0, fragment_bits=8, hash_bits=8, hashes=16, buckets=64)
    words = np.random.default_rng(0).integers(0, 2**32, size=50, dtype=np.uint64)
    parts = [sfp.fragment(words, i) for i in range(sfp.positions)]
    assert sfp.positions == 4 and np.array_equal(sfp.assemble(parts), words)
    assert int(sfp.fragment(np.array([0xDEADBEEF], dtype=np.uint64), 1)[0]) == 0xAD
    assert int(sfp.word_hash(words).max()) < 256
    keys = [sfp.keys(words[:3], i) for i in range(4)]
    assert (keys[2] >> np.uint64(8) == sfp.word_hash(words[:3])).all()
    # the true words are among the puzzle's candidates built from their own keys (plus decoys sharing a hash)
    assert np.isin(words[:3], sfp_candidates(sfp, keys)).all()


def test_sampler_follows_law() -> None:
    sfp = SFP(OpenDomain(bits=8), 3.0, fragment_bits=4, hash_bits=2, oracle="hcms", hashes=2, buckets=4, seed=1)
    word = np.uint64(0xB7)
    n = 40_000
    positions, words = sfp.sample(np.full(n, word), np.random.default_rng(6))
    sizes = np.array([c.sum() for _, c in positions])
    assert stats.chisquare(sizes).pvalue > ALPHA  # positions uniform
    outputs = np.array([(j, c, y) for j in range(2) for c in range(4) for y in (0, 1)], dtype=np.int64)
    index = {tuple(r): i for i, r in enumerate(outputs.tolist())}
    cases = [(r, c, sfp.keys(np.array([word]), i), sfp.fragments) for i, (r, c) in enumerate(positions)]
    cases.append((*words, np.array([word]), sfp.words))
    for reports, counts, key, family in cases:  # each report is HCMS at eps/2 of its key or word
        law = HCMSLevel(key, sfp.part_eps, family).likelihood(outputs)[:, 0]
        observed = np.zeros(outputs.shape[0])
        observed[[index[tuple(r)] for r in reports.tolist()]] = counts
        assert stats.chisquare(observed, observed.sum() * law).pvalue > ALPHA


@pytest.mark.parametrize("oracle", ["cms", "hcms"])
def test_finds_planted_heavy_hitters(oracle: str) -> None:
    domain = OpenDomain(bits=16)
    rng = np.random.default_rng(4)
    data = zipf(domain, 20_000, rng, exponent=1.5, support=200)
    sfp = SFP(domain, 8.0, k=4, fragment_bits=8, hash_bits=4, oracle=oracle, hashes=64, buckets=64, work=64)
    found = sfp_heavy_hitters(sfp, sfp.sample(data.values, rng))
    assert set(data.items[:3].tolist()) <= set(found.items.tolist())
    assert np.all(np.diff(found.frequency) <= 0)  # most frequent first
    top = found.frequency[np.isin(found.items, data.items[:1])][0]
    assert abs(top - data.frequency[0]) < 0.03  # the top word's frequency (sd ~0.004 at eps/2 = 4)
    assert len(found.levels) == sfp.positions + 1


def test_bad_input_one_line() -> None:
    with pytest.raises(ParameterError, match="fragment_bits") as err:
        SFP(OpenDomain(bits=32), 4.0, fragment_bits=5)
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match="fragment_bits"):
        SFP(OpenDomain(bits=32), 4.0, fragment_bits=16, hash_bits=8)  # 2^24 keys per position
    with pytest.raises(ParameterError, match="oracle"):
        SFP(OpenDomain(bits=32), 4.0, oracle="olh")
    with pytest.raises(ParameterError, match="rule"):
        sfp = SFP(OpenDomain(bits=8), 4.0, fragment_bits=4, hash_bits=2, hashes=4, buckets=8)
        sfp_heavy_hitters(sfp, sfp.sample(np.zeros(10, dtype=np.uint64), np.random.default_rng(0)), rule="best")


def test_too_many_assembled_words_drop_the_least_frequent_fragments(monkeypatch):
    """Few users: every position keeps k noisy fragments per hash and their product outgrows MAX_KEYS. The
    least frequent fragments go first, so the word made of each position's most frequent fragment stays."""
    import ldpsim_plugins.estimators.sfp as server

    monkeypatch.setattr(server, "MAX_KEYS", 100)
    protocol = SFP(OpenDomain(bits=16), 4.0, k=64, fragment_bits=4, hashes=16, buckets=64)
    word = np.array([0xBEEF], dtype=np.uint64)
    h = np.uint64(int(protocol.word_hash(word)[0]))
    kept = []
    for position in range(protocol.positions):
        first = protocol.keys(word, position)
        others = (h << np.uint64(4)) | np.arange(16, dtype=np.uint64)  # every fragment under the word's hash
        kept.append(np.concatenate([first, others[others != first[0]]]))  # most frequent first
    words = sfp_candidates(protocol, kept)
    assert 0 < words.size <= 100 and 0xBEEF in words.tolist()
