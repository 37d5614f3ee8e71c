"""Small helpers shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

import ldpsim
from ldpsim import Categorical, Observations


def make(kind: str, name: str, *args, **params):
    return ldpsim.get_registry().create(kind, name, *args, **params)


def matrix_mechanism(rows, domain=None):
    """A `matrix` mechanism on a categorical domain with one label per row."""
    rows = np.asarray(rows, dtype=float)
    domain = domain or Categorical(values=[str(i + 1) for i in range(rows.shape[0])])
    return make("mechanism", "matrix", domain, rows=rows.tolist())


def observe(mech, outputs):
    """Observations of single reports given as output indices (a list with repeats)."""
    return Observations.from_reports(mech.domain, [(mech, np.asarray(outputs)[:, None])])


def shared_data(name: str) -> Path:
    """A file of the workplace's shared data folder: ``$LDPSIM_SHARED_DATA`` if set, else
    ``shared/data`` beside the checkout. The test is skipped, naming where it looked, if absent."""
    beside_checkout = Path(__file__).resolve().parents[2] / "shared" / "data"
    candidates = [Path(os.environ["LDPSIM_SHARED_DATA"])] if os.environ.get("LDPSIM_SHARED_DATA") else []
    candidates.append(beside_checkout)
    for folder in candidates:
        if (folder / name).is_file():
            return folder / name
    pytest.skip(f"shared data file {name} not found in {' or '.join(map(str, candidates))} (set $LDPSIM_SHARED_DATA)")


@st.composite
def em_problems(draw, max_count: int = 50):
    """(row-stochastic k x m matrix with positive entries, counts of the m outputs, full-support start)."""
    k = draw(st.integers(2, 6))
    m = draw(st.integers(2, 6))
    rows = draw(st.lists(st.lists(st.floats(0.01, 1.0), min_size=m, max_size=m), min_size=k, max_size=k))
    counts = draw(st.lists(st.integers(0, max_count), min_size=m, max_size=m).filter(lambda c: sum(c) > 0))
    start = draw(st.lists(st.floats(0.01, 1.0), min_size=k, max_size=k))
    a = np.array(rows) / np.sum(rows, axis=1, keepdims=True)
    return a, np.array(counts), np.array(start) / np.sum(start)


#: a third party's metric module, written to disk by tests of plugin provenance
HALF_L1 = """
import numpy as np
from ldpsim import Metric, hookimpl


class HalfL1(Metric):
    \"\"\"Half the L1 distance.\"\"\"

    name = "half-l1"

    def _compute(self, estimate, truth, domain):
        return 0.5 * float(np.abs(estimate - truth).sum())


@hookimpl
def register_metrics(register):
    register(HalfL1)
"""


#: variables that time the run rather than compute it
TIMING = {"seconds", "simulation_seconds"}


def assert_same_numbers(a, b) -> None:
    """Two results datasets hold the same variables with bit-identical values (timings aside)."""
    assert set(a.data_vars) == set(b.data_vars)
    for name in set(a.data_vars) - TIMING:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def forget_modules_from(folder: Path, before: set[str]) -> None:
    """Drop from ``sys.modules`` the modules imported since ``before`` whose files live in ``folder``.

    Only those: dropping every module imported during a test also drops numpy's or scipy's
    submodules that the test happened to import first, and re-importing a C extension later fails
    ("cannot load module more than once per process"), in whichever test comes next.
    """
    import sys

    root = os.path.realpath(folder)
    for name in set(sys.modules) - before:
        origin = getattr(sys.modules[name], "__file__", None)
        if origin and os.path.realpath(origin).startswith(root + os.sep):
            del sys.modules[name]


#: bits per packed report word, written out by hand (the documented layout, not ldpsim's constant)
PACKED_WORD_BITS = 62


def encode_bits(bits: np.ndarray) -> np.ndarray:
    """The documented packing, by hand: bit j at bit j % 62 of word j // 62."""
    k = bits.shape[1]
    words = np.zeros((bits.shape[0], -(-k // PACKED_WORD_BITS)), dtype=np.int64)
    for j in range(k):
        words[:, j // PACKED_WORD_BITS] |= bits[:, j].astype(np.int64) << (j % PACKED_WORD_BITS)
    return words


def decode_bits(words: np.ndarray, k: int) -> np.ndarray:
    """The documented encoding, by hand: bit j is bit j % 62 of word j // 62."""
    j = np.arange(k)
    return (words[:, j // PACKED_WORD_BITS] >> (j % PACKED_WORD_BITS)) & 1
