"""The contract every mechanism must meet, as checks a plugin author runs in one line.

    from ldpsim.testing import check_mechanism
    def test_my_mechanism():
        check_mechanism(MyMechanism(Integers(low=0, high=9), eps=1.0))

Each check raises ``AssertionError`` explaining the first violation. The
sampler check is a chi-square goodness-of-fit test at a fixed seed: its result
is deterministic, and for a correct mechanism the chance that a given seed
makes it fail is at most ``alpha`` (default 1e-4, Bonferroni-corrected over
the true values tested).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base.errors import ParameterError
from ..model.domains import Domain
from ..model.mechanism import ROW_SUM_TOL, Mechanism
from ..model.privacy import geo_level, ldp_level, lip_level

__all__ = [
    "check_deterministic",
    "check_likelihood",
    "check_matrix",
    "check_mechanism",
    "check_parameters",
    "check_privacy_claim",
    "check_sampler",
]


def check_mechanism(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """All mechanism checks below, in order (parameters are checked around ``mech``'s own values)."""
    check_parameters(type(mech), mech.domain, mech.get_params())
    check_matrix(mech)
    check_likelihood(mech)
    check_deterministic(mech, seed=seed)
    check_sampler(mech, samples=samples, seed=seed, alpha=alpha)
    check_privacy_claim(mech, seed=seed)


def check_matrix(mech: Mechanism) -> None:
    """A finite mechanism's matrix has one row per value, entries >= 0, rows summing to 1."""
    m = mech.matrix
    if m is None:
        return
    assert m.shape[0] == mech.domain.size, f"{mech!r}: matrix has {m.shape[0]} rows for {mech.domain.size} values"
    assert np.all(m >= 0), f"{mech!r}: matrix has negative entries"
    worst = float(np.abs(m.sum(axis=1) - 1).max())
    assert worst <= ROW_SUM_TOL, f"{mech!r}: a matrix row sums to 1 {worst:+.3g}"
    assert mech.output_size == m.shape[1]


def check_likelihood(mech: Mechanism) -> None:
    """log_likelihood of every output agrees with the matrix (finite mechanisms)."""
    m = mech.matrix
    if m is None:
        return
    outputs = np.arange(m.shape[1])[:, None]
    with np.errstate(divide="ignore"):
        expected = np.log(m.T)
    got = mech.log_likelihood(outputs)
    same = np.isclose(got, expected, rtol=1e-9, atol=1e-12) | (np.isneginf(got) & np.isneginf(expected))
    assert same.all(), (
        f"{mech!r}: log_likelihood disagrees with log(matrix) at (output, value) {tuple(np.argwhere(~same)[0])}"
    )


def check_deterministic(mech: Mechanism, *, seed: int = 0) -> None:
    """Equal generators give equal reports: all randomness comes from the rng argument."""
    values = np.arange(mech.domain.size).repeat(3)
    a = mech.sample(values, np.random.default_rng(seed))
    b = mech.sample(values, np.random.default_rng(seed))
    assert np.array_equal(a, b), f"{mech!r}: two generators with the same seed gave different reports"


def check_sampler(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """For each tested true value, reports follow P(report | x) (chi-square test)."""
    from scipy.stats import chi2

    values = _tested_values(mech.domain)
    for x in values:
        reports = mech.sample(np.full(samples, x), np.random.default_rng([seed, int(x)]))
        uniq, observed = np.unique(reports, axis=0, return_counts=True)
        expected = samples * np.exp(mech.log_likelihood(uniq)[:, x])
        assert np.all(expected > 0), f"{mech!r}: sampled a report of probability 0 for value {x}"
        big = expected >= 5
        obs_bins = list(observed[big])
        exp_bins = list(expected[big])
        rest_expected = samples - expected[big].sum()  # unseen reports and small bins
        if rest_expected >= 5:
            obs_bins.append(samples - observed[big].sum())
            exp_bins.append(rest_expected)
        else:
            assert samples - observed[big].sum() <= 5 + 10 * math.sqrt(max(rest_expected, 1)), (
                f"{mech!r}: value {x}: too many reports outside the likely ones"
            )
        if len(obs_bins) < 2:
            continue
        o, e = np.array(obs_bins, float), np.array(exp_bins, float)
        stat = float(((o - e) ** 2 / e).sum())
        p_value = float(chi2.sf(stat, len(o) - 1))
        assert p_value >= alpha / len(values), (
            f"{mech!r}: reports for value {x} do not follow its likelihood (chi-square p = {p_value:.2g})"
        )


def check_privacy_claim(mech: Mechanism, *, seed: int = 0) -> None:
    """The declared level equals the level of the matrix.

    A mechanism with ``tight_privacy = False`` (one that post-processes a
    guarantee, like remapped continuous noise) only has to stay within its
    claim; so does one without a finite matrix, checked on the reports a
    sample produces (a lower bound of its level).
    """
    claim = mech.privacy
    if claim.notion == "none":
        return
    if mech.matrix is not None:
        with np.errstate(divide="ignore"):
            log_p = np.log(mech.matrix).T
        exact = True
    else:  # infinite outputs: the reports a sample produces give a lower bound
        values = np.arange(mech.domain.size).repeat(max(1, 2000 // mech.domain.size))
        reports = np.unique(mech.sample(values, np.random.default_rng(seed)), axis=0)
        log_p = mech.log_likelihood(reports)
        exact = False
    if claim.notion == "ldp":
        actual = ldp_level(log_p)
    elif claim.notion == "geo":
        actual = geo_level(log_p, mech.domain.distances)
    elif claim.notion == "lip":
        assert claim.prior is not None, f"{mech!r}: a LIP claim needs its prior"
        assert mech.matrix is not None, f"{mech!r}: LIP levels are checked on finite mechanisms"
        actual = lip_level(mech.matrix, np.asarray(claim.prior))
    else:
        raise AssertionError(f"{mech!r}: unknown privacy notion {claim.notion!r}")
    tol = 1e-9 * max(1.0, abs(claim.eps))
    if exact and mech.tight_privacy:
        assert math.isclose(actual, claim.eps, rel_tol=1e-9, abs_tol=1e-12) or (
            math.isinf(actual) and math.isinf(claim.eps)
        ), f"{mech!r}: claims {claim} but its matrix gives eps = {actual:.12g}"
    else:
        assert actual <= claim.eps + tol, f"{mech!r}: claims {claim} but its reports show eps >= {actual:.12g}"


def check_parameters(cls: type[Mechanism], domain: Domain, valid: dict[str, Any]) -> None:
    """Valid parameters construct; unknown names, wrong types and out-of-range values raise a
    ParameterError that names the parameter."""
    cls(domain, **valid)
    try:
        cls(domain, **valid, no_such_parameter=1)
    except ParameterError as exc:
        assert "no_such_parameter" in str(exc), f"{cls.__name__}: the error does not name the unknown parameter"
    else:
        raise AssertionError(f"{cls.__name__} accepted an unknown parameter")
    for name, param in cls.parameters().items():
        bad_values: list[Any] = [{"not": "a valid value"}]  # no parameter kind accepts a table
        if {"float", "int"} & set(param.kinds):
            bad_values.append("not a number")
            for bound, delta in ((param.gt, 0), (param.ge, -1), (param.lt, 0), (param.le, 1)):
                if bound is not None:
                    bad_values.append(bound + delta)
        for bad in bad_values:
            try:
                cls(domain, **{**valid, name: bad})
            except ParameterError as exc:
                assert name in str(exc), f"{cls.__name__}: the error for {name}={bad!r} does not name {name}: {exc}"
            else:
                raise AssertionError(f"{cls.__name__} accepted {name}={bad!r}")


def _tested_values(domain: Domain) -> np.ndarray:
    if domain.size <= 12:
        return np.arange(domain.size)
    return np.unique(np.linspace(0, domain.size - 1, 8).round().astype(int))
