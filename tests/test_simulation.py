"""Count-level simulation: same law as simulating every user, exact cohort sizes, bounded memory."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import make, matrix_mechanism
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import ldpsim
from ldpsim import Integers, LdpsimError
from ldpsim.base.memory import MemoryLimitError
from ldpsim.running.runner import simulate, tasks
from ldpsim.running.scenario import load_scenario
from ldpsim.theory import sampling as sim

M = [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]


def _exact_law(matrix, values):
    """P(report counts) for users with these true values, by enumerating every user's report."""
    matrix = np.asarray(matrix)
    law: dict[tuple[int, ...], float] = {}
    for outs in itertools.product(range(matrix.shape[1]), repeat=len(values)):
        p = math.prod(matrix[x, z] for x, z in zip(values, outs))
        key = tuple(np.bincount(outs, minlength=matrix.shape[1]))
        law[key] = law.get(key, 0.0) + p
    return law


def _chi_square_p(samples, law):
    observed = np.array([samples.count(k) for k in law])
    expected = np.array(list(law.values())) * len(samples)
    assert sum(observed) == len(samples)  # nothing outside the support
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize("path", ["counts", "users"])
def test_report_counts_follow_the_per_user_law(path, monkeypatch):
    mech = matrix_mechanism(M)
    counts = np.array([3, 2, 1])
    if path == "users":  # force the per-user sampler
        monkeypatch.setattr(sim, "count_matrix", lambda mech: None)
    assert _chi_square_p(_cohort_outcomes(mech, counts, seed=7), _exact_law(M, [0, 0, 0, 1, 1, 2])) > 1e-4


def _cohort_outcomes(mech, counts, seed, draws=4000):
    """The per-output report counts of ``draws`` simulations of a one-report cohort, as tuples."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(draws):
        reports, n = sim.sample_cohort((mech,), counts, [rng])
        full = np.zeros(mech.domain.size, dtype=np.int64)
        full[reports[:, 0]] = n
        samples.append(tuple(full))
    return samples


@pytest.mark.parametrize("eps", [0.4, 2.5])
def test_krr_count_sampler_follows_the_per_user_law(eps):
    """k-RR draws its counts itself (kept reports, then one uniform multinomial for all values): the
    counts of a mixed cohort have the law of every user's report enumerated (chi-square over the
    outcomes, false-alarm rate 1e-4)."""
    mech = make("mechanism", "krr", Integers(low=0, high=2), eps=eps)
    assert mech.capabilities.sample_counts
    counts = np.array([3, 2, 1])
    assert sim.counted((mech,), int(counts.sum()))
    assert _chi_square_p(_cohort_outcomes(mech, counts, seed=11), _exact_law(mech.matrix, [0, 0, 0, 1, 1, 2])) > 1e-4


def test_krr_count_sampler_at_scale_follows_the_matrix():
    """k = 1024, 10^6 users of one value: the counts are Multinomial(n, M[x]): the kept count within 5
    sigma of n p, and a chi-square of the k - 1 other outputs against their equal share (1e-4)."""
    k, n, x = 1024, 10**6, 700
    mech = make("mechanism", "krr", Integers(low=0, high=k - 1), eps=1.0)
    counts = np.zeros(k, dtype=np.int64)
    counts[x] = n
    reports, got = sim.sample_cohort((mech,), counts, [np.random.default_rng(5)])
    full = np.zeros(k, dtype=np.int64)
    full[reports[:, 0]] = got
    keep = math.e / (k - 1 + math.e)
    assert abs(full[x] - n * keep) < 5 * math.sqrt(n * keep * (1 - keep))
    others = np.delete(full, x)
    expected = (n - full[x]) / (k - 1)  # given the kept count, the others are Multinomial(n - kept, uniform)
    assert stats.chi2.sf(float(((others - expected) ** 2 / expected).sum()), k - 2) > 1e-4


def test_split_counts_has_the_law_of_a_random_permutation():
    counts, sizes = np.array([2, 1, 1]), [2, 1, 1]
    users = np.repeat(np.arange(3), counts)
    law: dict[tuple, float] = {}
    perms = list(itertools.permutations(range(4)))
    for perm in perms:  # cut every ordering of the users into consecutive groups
        ordered = users[list(perm)]
        key = tuple(np.bincount(ordered[:2], minlength=3)) + tuple(np.bincount(ordered[2:3], minlength=3))
        law[key] = law.get(key, 0.0) + 1 / len(perms)
    rng = np.random.default_rng(3)
    samples = []
    for _ in range(3000):
        parts = sim.split_counts(counts, sizes, rng)
        samples.append(tuple(parts[0]) + tuple(parts[1]))
    assert _chi_square_p(samples, law) > 1e-4


@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=8).filter(lambda c: sum(c) > 0),
    st.lists(st.integers(0, 50), min_size=1, max_size=5).filter(lambda w: sum(w) > 0),
    st.integers(0, 2**32 - 1),
)
def test_split_counts_is_exact(counts, weights, seed):
    total = sum(counts)
    sizes = [total * w // sum(weights) for w in weights]
    sizes[-1] += total - sum(sizes)
    parts = sim.split_counts(np.array(counts), sizes, np.random.default_rng(seed))
    assert [int(p.sum()) for p in parts] == sizes
    assert all(p.min() >= 0 for p in parts)
    np.testing.assert_array_equal(sum(parts), counts)


def _two_cohorts(**changes):
    doc = {
        "seed": 5,
        "users": 10**7,
        "repetitions": 1,
        "domain": {"kind": "integers", "low": 0, "high": 99},
        "dataset": {"name": "binomial", "p": 0.3},
        "cohorts": {
            "a": {"share": "1/3", "reports": [{"mechanism": "krr", "eps": 1.0}]},
            "b": {"share": "2/3", "reports": [{"mechanism": "geometric", "eps": 0.5}]},
        },
        "estimators": ["inv-n"],
        "metrics": ["tv"],
    }
    doc.update(changes)
    return load_scenario(doc)


def test_single_report_cohorts_never_sample_a_report_per_user(monkeypatch):
    loaded = _two_cohorts()

    def refuse(self, values, rng):
        raise AssertionError("a single report through a matrix must be drawn as counts")

    monkeypatch.setattr(ldpsim.Mechanism, "sample", refuse)
    monkeypatch.setattr(ldpsim.Dataset, "sample", refuse)
    (task,) = tasks(loaded)
    setup, truth, obs = simulate(task, loaded.builder)
    assert [g.n for g in obs.groups] == [c.users for c in setup.cohorts] == [3_333_333, 6_666_667]  # exact shares
    assert obs.n == 10**7
    np.testing.assert_allclose(truth.sum(), 1.0)
    np.testing.assert_allclose(truth * 10**7, np.round(truth * 10**7), rtol=0, atol=1e-6)  # whole users
    again = simulate(task, loaded.builder)
    np.testing.assert_array_equal(again[1], truth)
    for g, h in zip(obs.groups, again[2].groups):
        np.testing.assert_array_equal(g.reports, h.reports)
        np.testing.assert_array_equal(g.counts, h.counts)


def test_users_are_grouped_by_value_across_chunks(monkeypatch):
    # An identity mechanism reports the true value: each distinct tuple (x, x) must carry exactly x's count,
    # however the users are cut into chunks.
    monkeypatch.setattr(sim, "CHUNK_INTS", 14)
    mech = matrix_mechanism(np.eye(4))
    counts = np.array([5, 0, 17, 3])
    rngs = [np.random.default_rng(1), np.random.default_rng(2)]
    reports, n = sim.sample_cohort((mech, mech), counts, rngs)
    np.testing.assert_array_equal(reports, [[0, 0], [2, 2], [3, 3]])
    np.testing.assert_array_equal(n, [5, 17, 3])


def test_multi_report_cohorts_keep_their_law():
    # Two k-RR reports of a user are independent given the value: the count of (x, x) pairs among users with
    # value x is Binomial(c_x, keep^2).
    domain = Integers(low=0, high=2)
    mech = make("mechanism", "krr", domain, eps=1.0)
    keep = mech.matrix[0, 0]
    counts = np.array([40_000, 0, 0])
    reports, n = sim.sample_cohort((mech, mech), counts, [np.random.default_rng(8), np.random.default_rng(9)])
    both = int(n[(reports[:, 0] == 0) & (reports[:, 1] == 0)].sum())
    assert stats.binomtest(both, 40_000, keep**2).pvalue > 1e-4


def test_per_user_reports_beyond_memory_are_refused_up_front(monkeypatch):
    monkeypatch.setattr("ldpsim.base.memory.available_memory", lambda: 10**9)
    domain = Integers(low=0, high=99)
    olh = make("mechanism", "olh", domain, eps=1.0)
    counts = np.full(100, 10**7)
    with pytest.raises(
        MemoryLimitError,
        match=r"the distinct reports of 1000000000 users of olh .* would need 72\.0 GB.*; use fewer users, or a single report through a mechanism with finitely many outputs",
    ):
        sim.sample_cohort((olh,), counts, [np.random.default_rng(0)])
    # a k-RR pair has at most 100^2 distinct tuples: no refusal however many users
    krr = make("mechanism", "krr", domain, eps=1.0)
    assert sim.distinct_bound((krr, krr), 10**9) == 10_000


def test_drawing_values_one_by_one_beyond_memory_is_refused(monkeypatch):
    class Opaque(ldpsim.Dataset):
        """Values from somewhere."""

        name = "opaque"

        def _sample(self, n, rng):  # pragma: no cover - refused before
            raise AssertionError

    monkeypatch.setattr("ldpsim.base.memory.available_memory", lambda: 10**9)
    with pytest.raises(LdpsimError, match=r"drawing the values of 100000000 users one by one .* would need 1\.6 GB"):
        Opaque(Integers(low=0, high=9)).sample_counts(10**8, np.random.default_rng(0))


def test_synthetic_counts_follow_the_pmf():
    ds = make("dataset", "zipf", Integers(low=0, high=9), s=1.1)
    counts = ds.sample_counts(50_000, np.random.default_rng(2))
    assert counts.sum() == 50_000
    assert stats.chisquare(counts, ds.pmf() * 50_000).pvalue > 1e-4


def test_default_counts_are_the_counts_of_the_sample():
    class Fixed(ldpsim.Dataset):
        """The first n values of a cycle."""

        name = "fixed"

        def _sample(self, n, rng):
            return np.arange(n) % 3

    np.testing.assert_array_equal(
        Fixed(Integers(low=0, high=3)).sample_counts(7, np.random.default_rng(0)), [3, 2, 2, 0]
    )


def test_a_dataset_whose_counts_do_not_add_up_is_caught():
    class Broken(ldpsim.Dataset):
        """Loses a user."""

        name = "broken"

        def _sample_counts(self, n, rng):
            return np.array([n - 1, 0])

    with pytest.raises(ValueError, match="must return 2 non-negative counts summing to 5"):
        Broken(Integers(low=0, high=1)).sample_counts(5, np.random.default_rng(0))
