"""Deployed sizes (issue 31): the Python API's estimates run with one BLAS thread; per-user simulations and samples
are refused, before anything is drawn, when they would not fit in memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

from ldpsim import Integers, Observations
from ldpsim.base import memory
from ldpsim.base.memory import MemoryLimitError
from ldpsim.base.threads import holds_one_blas_thread
from ldpsim.estimation.observations import sum_equal_parts, sum_equal_rows, unique_rows
from ldpsim.theory.sampling import per_user_bytes, sample_cohort

DOMAIN = Integers(low=0, high=1023)


def test_an_estimate_made_through_the_python_api_holds_one_blas_thread(monkeypatch):
    est = make("estimator", "inv-p")
    mech = make("mechanism", "krr", Integers(low=0, high=9), eps=1.0)
    seen = []
    original = type(est)._postprocess

    def spy(self, unbiased):
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        seen.append((holds_one_blas_thread(), max(blas, default=1)))
        return original(self, unbiased)

    monkeypatch.setattr(type(est), "_postprocess", spy)
    before = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    est.estimate(Observations.from_reports(mech.domain, [(mech, np.arange(10)[:, None])]))
    assert seen == [(True, 1)]
    assert max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas") == before  # restored


@pytest.mark.parametrize("users", [100_000, 300_000])  # one chunk, and several (grouped again at the end)
def test_per_user_bytes_bound_the_measured_peak_of_grouping(users):
    """The preflight's bytes bound the peak of drawing and grouping per-user reports (tracemalloc sees numpy's)."""
    mech = make("mechanism", "oue", DOMAIN, eps=1.0)
    counts = np.random.default_rng(1).multinomial(users, np.full(1024, 1 / 1024))
    tracemalloc.start()
    try:
        sample_cohort((mech,), counts, [np.random.default_rng(2)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= per_user_bytes((mech,), users) <= 2 * peak


def test_a_per_user_cohort_beyond_memory_is_refused_before_drawing(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 24 * 10**9)
    mech = make("mechanism", "oue", DOMAIN, eps=1.0)
    counts = np.full(1024, 10**8 // 1024)  # 10^8 users: about 44 GB at the peak of grouping
    rng = np.random.default_rng(0)
    monkeypatch.setattr(type(mech), "_sample", lambda *a: pytest.fail("drew reports before refusing"))
    with pytest.raises(MemoryLimitError, match="distinct reports of 99999744 users"):
        sample_cohort((mech,), counts, [rng])


def test_sampling_she_reports_beyond_memory_is_refused_up_front(monkeypatch):
    """SHE sends k integers per user: 10^6 users at k = 1024 are 8.2 GB of reports, refused on a 4 GB machine."""
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * 10**9)
    she = make("mechanism", "she", DOMAIN, eps=1.0)
    monkeypatch.setattr(type(she), "_sample", lambda *a: pytest.fail("drew reports before refusing"))
    with pytest.raises(MemoryLimitError, match=r"1,000,000 reports of she \(1024 integers each\).*8\.2 GB"):
        she.sample(np.zeros(10**6, dtype=np.int64), np.random.default_rng(0))


def _rows(rng: np.random.Generator, n: int, width: int, spread: int) -> np.ndarray:
    """Integer rows with many equal ones when ``spread`` is small, none when it is 2^62."""
    return rng.integers(0, spread, size=(n, width), dtype=np.int64)


@settings(max_examples=40)
@given(
    sizes=st.lists(st.integers(0, 60), min_size=1, max_size=5),
    width=st.integers(1, 5),
    spread=st.sampled_from([2, 5, 1 << 30, 1 << 62]),
    real=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_parts_grouped_in_place_equal_their_concatenation_grouped(sizes, width, spread, real, seed):
    """Same rows, counts, order and dtype as ``sum_equal_rows`` of the concatenation: few distinct rows, all
    distinct, several int64 keys (spread 2^30 over 3+ columns), a column too wide for one (2^62 + 1: the
    fallback), real counts (expected reports)."""
    rng = np.random.default_rng(seed)
    parts = [(_rows(rng, n, width, spread), rng.random(n) * 3 if real else rng.integers(1, 4, size=n)) for n in sizes]
    if spread == 1 << 62 and sum(sizes):
        parts[0][0][:1, 0] = (1 << 62) + 1  # a span past 2^62: no int64 key
    expected = sum_equal_rows(np.concatenate([r for r, _ in parts]), np.concatenate([c for _, c in parts]))
    rows, counts = sum_equal_parts(list(parts))
    np.testing.assert_array_equal(rows, expected[0])
    np.testing.assert_array_equal(counts, expected[1])
    assert rows.dtype == np.int64 and counts.dtype == expected[1].dtype


def test_grouping_per_user_reports_in_place_peaks_below_one_and_a_half_their_size():
    """Distinct 17-word reports (OUE at k = 1024) in chunks, as a cohort draws them: grouped in place the peak
    (tracemalloc, parts included) stays under 1.5x the reports' bytes; concatenated then grouped it was 3.4x."""
    mech = make("mechanism", "oue", DOMAIN, eps=1.0)
    rng = np.random.default_rng(4)
    users = 200_000
    values = rng.integers(0, 1024, size=users)
    tracemalloc.start()
    try:
        parts = [unique_rows(mech.sample(values[lo : lo + 20_000], rng)) for lo in range(0, users, 20_000)]
        rows, counts = sum_equal_parts(parts)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not parts and counts.sum() == users
    assert peak < 1.5 * users * mech.report_width * 8, peak / (users * mech.report_width * 8)
