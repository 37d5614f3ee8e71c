"""observe = "expected": each cohort's exact expected report counts, the infinite-data limit of 004."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make, matrix_mechanism

import ldpsim
from ldpsim import Integers, LdpsimError, Observations
from ldpsim.running.expected import expected_group, expected_refusal

M = [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]
#: 004 Thm. 6.1: two independent columns for three values, so the distribution is not identified
NOT_IDENTIFYING = [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]


def _doc(reports, p, estimators, users=100_000, observe="expected", **extra):
    return {
        "seed": 3,
        "users": users,
        "repetitions": 1,
        "observe": observe,
        "domain": {"kind": "integers", "low": 0, "high": len(p) - 1},
        "dataset": {"name": "pmf", "p": p},
        "cohorts": {"everyone": {"share": 1, "reports": reports}},
        "estimators": estimators,
        "metrics": ["tv"],
        **extra,
    }


def test_expected_counts_are_the_users_values_times_the_matrix():
    mech = matrix_mechanism(M)
    counts = np.array([5, 0, 2])
    group = expected_group((mech,), counts)
    full = np.zeros(3)
    full[group.reports[:, 0]] = group.counts
    np.testing.assert_allclose(full, counts @ np.array(M), rtol=1e-15)
    assert group.counts.dtype == float and group.n == pytest.approx(7)


def test_expected_counts_of_two_reports_are_the_joint_law():
    mech = matrix_mechanism(M)
    counts = np.array([1, 3, 0])
    group = expected_group((mech, mech), counts)
    m = np.array(M)
    want = {(a, b): 1 * m[0, a] * m[0, b] + 3 * m[1, a] * m[1, b] for a in range(3) for b in range(3)}
    got = {tuple(r): c for r, c in zip(group.reports.tolist(), group.counts)}
    assert got.keys() == {k for k, v in want.items() if v > 0}
    for key, value in got.items():
        assert value == pytest.approx(want[key], rel=1e-14)


def test_observations_keep_real_counts_through_merging():
    mech = matrix_mechanism(M)
    drawn = Observations.from_counts(mech.domain, mech, [0, 1], [3, 4])
    assert drawn.counts.dtype == np.int64 and drawn.n == 7
    expected = Observations.from_counts(mech.domain, (mech, mech), [[0, 1], [1, 0]], [0.25, 0.5])
    canonical = expected.groups[0].canonical()  # (0, 1) and (1, 0) are one exchangeable tuple
    assert canonical.counts.tolist() == [0.75] and canonical.counts.dtype == float


def test_identifying_mechanism_recovers_the_truth_exactly_in_the_limit():
    # 004 Thm. 6.1: the truncated geometric matrix is invertible, so on q = theta A the MLE is theta:
    # IBU converges to it, and matrix inversion returns it to rounding
    p = [0.05, 0.3, 0.1, 0.0, 0.2, 0.15, 0.05, 0.1, 0.05, 0.0]
    ibu = {"name": "ibu", "stop": "kkt", "tol": 1e-9, "accelerate": "squarem", "max_iter": 100_000, "likely": False}
    doc = _doc([{"mechanism": "geometric", "eps": 1.0}], p, {"ibu": ibu, "inv-n": {}, "inv-p": {}})
    ds = ldpsim.run_scenario(doc)
    truth = ds["truth"].values.ravel()
    for inversion in ("inv-n", "inv-p"):
        np.testing.assert_allclose(ds["estimate"].sel(estimator=inversion).values.ravel(), truth, atol=1e-10)
    assert float(ds["tv"].sel(estimator="ibu").item()) < 1e-4
    assert int(ds["distinct_reports"].item()) == len(p)  # every output has a positive expected count


def test_krr_mle_and_mmse_accept_expected_counts():
    p = [0.5, 0.3, 0.2, 0.0]
    doc = _doc([{"mechanism": "krr", "eps": 2.0}], p, {"krr-mle": {}, "mmse": {"prior": [0.25] * 4}})
    ds = ldpsim.run_scenario(doc)
    truth = ds["truth"].values.ravel()
    # the truth lies in the simplex and q = theta A is matched there: the k-RR MLE is the truth
    np.testing.assert_allclose(ds["estimate"].sel(estimator="krr-mle").values.ravel(), truth, atol=1e-12)
    assert np.isfinite(ds["estimate"].sel(estimator="mmse").values).all()


def test_non_identifying_mechanism_does_not_recover_the_truth_in_the_limit():
    # 004 Thm. 6.1 / Fig. 6: every theta with theta A = q is an MLE; IBU from uniform stops at one of
    # them, at a TV above 0.1 from the truth, with the same noisy distribution (the same likelihood)
    p = [0.1, 0.8, 0.1]
    ibu = {"name": "ibu", "stop": "kkt", "tol": 1e-10, "max_iter": 1_000_000, "likely": False}
    doc = _doc([{"mechanism": "matrix", "rows": NOT_IDENTIFYING}], p, {"ibu": ibu})
    ds = ldpsim.run_scenario(doc)
    truth = ds["truth"].values.ravel()
    estimate = ds["estimate"].sel(estimator="ibu").values.ravel()
    assert float(ds["tv"].sel(estimator="ibu").item()) > 0.1
    a = np.array(NOT_IDENTIFYING)
    np.testing.assert_allclose(estimate @ a, truth @ a, atol=1e-8)


def test_a_cohort_may_observe_differently_from_the_scenario():
    # the sampled cohort's reports do not depend on whether its neighbour is drawn or expected
    p = [0.25, 0.25, 0.5]
    cohorts = {
        "drawn": {"share": 0.5, "reports": [{"mechanism": "krr", "eps": 1.0}], "observe": "sampled"},
        "limit": {"share": 0.5, "reports": [{"mechanism": "krr", "eps": 3.0}]},
    }
    runs = []
    for limit in ("expected", "sampled"):
        cohorts["limit"]["observe"] = limit
        doc = _doc([], p, {"ibu": {"per_plan": True}}, users=1000, cohorts=cohorts)
        _, _, obs = _simulate(doc)
        runs.append({g.plan[0].eps: g for g in obs.groups})
    assert runs[0][3.0].counts.dtype == float and runs[1][3.0].counts.dtype == np.int64
    np.testing.assert_array_equal(runs[0][1.0].counts, runs[1][1.0].counts)
    np.testing.assert_array_equal(runs[0][1.0].reports, runs[1][1.0].reports)


def _simulate(doc):
    from ldpsim.running.runner import simulate, tasks
    from ldpsim.running.scenario import load_scenario

    scenario = load_scenario(doc)
    return simulate(tasks(scenario)[0], scenario.builder)


@pytest.mark.parametrize(
    ("report", "words"),
    [
        ({"mechanism": "geometric", "eps": 1.0, "truncate": False}, "infinitely many outputs"),
        ({"mechanism": "olh", "eps": 1.0}, "reports 3 integers"),
    ],
)
def test_mechanisms_without_a_finite_output_law_are_refused_in_one_line(report, words):
    doc = _doc([report], [0.5, 0.5], {"ibu": {}})
    with pytest.raises(LdpsimError) as err:
        ldpsim.run_scenario(doc)
    assert err.value.field == "observe" and words in str(err.value) and "\n" not in str(err.value)
    assert expected_refusal((make("mechanism", "krr", Integers(low=0, high=1), eps=1.0),)) is None


def test_an_unknown_mode_is_refused_at_its_field():
    doc = _doc([{"mechanism": "krr", "eps": 1.0}], [0.5, 0.5], {"ibu": {}})
    doc["cohorts"]["everyone"]["observe"] = "exact"
    with pytest.raises(LdpsimError, match="cohorts.everyone.observe: must be one of 'sampled', 'expected'"):
        ldpsim.run_scenario(doc)
