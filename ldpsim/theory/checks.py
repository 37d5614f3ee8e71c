"""The contract every mechanism must meet, as checks a plugin author runs in one line.

    from ldpsim.testing import check_mechanism
    def test_my_mechanism():
        check_mechanism(MyMechanism(Integers(low=0, high=9), eps=1.0))

Each check raises ``AssertionError`` explaining the first violation. The
sampler check is a chi-square goodness-of-fit test at a fixed seed: its result
is deterministic, and for a correct mechanism the chance that a given seed
makes it fail is at most ``alpha`` (default 1e-4, Bonferroni-corrected over
the true values tested).

The capability checks (:func:`check_capabilities`) test each optional hook a
mechanism declares (:attr:`Mechanism.capabilities`) against what it must
agree with: the dense log-likelihood, the matrix, and the definition of a
likely subset; an undeclared capability, or a hook returning None, is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..base.hooks import overrides
from ..model.domains import Domain
from ..model.mechanism import PUBLIC_WRAPPERS, ROW_SUM_TOL, Mechanism
from ..model.privacy import geo_level, ldp_level, lip_level
from .contracts import check_configurable

__all__ = [
    "check_capabilities",
    "check_density_sampler",
    "check_deterministic",
    "check_estimate_variance",
    "check_hooks",
    "check_likelihood",
    "check_likely_subset",
    "check_matrix",
    "check_mechanism",
    "check_named_value_likelihood",
    "check_output_count",
    "check_parameters",
    "check_privacy_claim",
    "check_rounds",
    "check_sample_counts",
    "check_diagonal_plus_constant",
    "check_sample_bit_counts",
    "check_sampler",
    "check_structured_likelihood",
    "check_unbiased_estimate",
    "mechanism_checks",
]

#: structured products agree with the dense likelihood to this share of each report's largest entry
STRUCTURED_RTOL = 1e-9
#: an unbiased estimate is checked exactly, output by output, on matrices with at most this many columns
MAX_EXACT_OUTPUTS = 1024
#: batches of reports whose estimates the statistical unbiasedness test compares
UNBIASED_BATCHES = 20
#: values outside a likely subset that are checked for being beaten (evenly spread over them)
MAX_OUTSIDE_CHECKED = 256


def check_mechanism(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """All mechanism checks below, in order (parameters are checked around ``mech``'s own values).

    Parameters
    ----------
    mech
        The mechanism to check, on a small domain (the matrix is built, and likelihoods are dense).
    samples
        Reports drawn per tested value by the statistical checks.
    seed
        Seed of every generator the checks use: the outcome is deterministic.
    alpha
        Chance that a correct mechanism fails a statistical check at a given seed.

    Raises
    ------
    AssertionError
        Naming the first violation of the contract.
    """
    for _, check in mechanism_checks(samples=samples, seed=seed, alpha=alpha):
        check(mech)


#: a named check of one mechanism
NamedCheck = tuple[str, Callable[[Mechanism], None]]


def mechanism_checks(*, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> list[NamedCheck]:
    """The checks :func:`check_mechanism` runs, in its order, as (name, check of one mechanism) pairs.

    One list serves both the one-line check and a test suite that wants one test id per check
    (:func:`ldpsim.testing.parametrize_with_checks`).
    """
    return [
        ("check_parameters", lambda mech: check_parameters(type(mech), mech.domain, mech.get_params())),
        ("check_hooks", check_hooks),
        ("check_matrix", check_matrix),
        ("check_likelihood", check_likelihood),
        ("check_deterministic", partial(check_deterministic, seed=seed)),
        ("check_sampler", partial(check_sampler, samples=samples, seed=seed, alpha=alpha)),
        ("check_privacy_claim", partial(check_privacy_claim, seed=seed)),
        *_capability_checks(samples=samples, seed=seed, alpha=alpha),
    ]


def _capability_checks(*, samples: int, seed: int, alpha: float) -> list[NamedCheck]:
    return [
        ("check_output_count", check_output_count),
        ("check_named_value_likelihood", partial(check_named_value_likelihood, seed=seed)),
        ("check_structured_likelihood", partial(check_structured_likelihood, seed=seed)),
        ("check_likely_subset", partial(check_likely_subset, seed=seed)),
        ("check_unbiased_estimate", partial(check_unbiased_estimate, samples=samples, seed=seed, alpha=alpha)),
        ("check_rounds", partial(check_rounds, seed=seed)),
        ("check_estimate_variance", partial(check_estimate_variance, seed=seed)),
        ("check_sample_counts", partial(check_sample_counts, samples=samples, seed=seed, alpha=alpha)),
        ("check_diagonal_plus_constant", check_diagonal_plus_constant),
        ("check_sample_bit_counts", partial(check_sample_bit_counts, samples=samples, seed=seed, alpha=alpha)),
    ]


def check_hooks(mech: Mechanism) -> None:
    """The mechanism implements hooks, not the checked public methods the core calls instead."""
    replaced = [name for name in PUBLIC_WRAPPERS if overrides(type(mech), Mechanism, name)]
    assert not replaced, (
        f"{type(mech).__name__} overrides {', '.join(replaced)}, which check the hooks behind them:"
        " implement the hooks instead (_matrix, _sample, _log_likelihood, _structured_likelihood, ...;"
        " see ldpsim.model.mechanism)"
    )


def check_capabilities(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """Every capability the mechanism declares keeps its promise (the checks below that apply)."""
    for _, check in _capability_checks(samples=samples, seed=seed, alpha=alpha):
        check(mech)


def check_sample_counts(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """Declared report counts follow the matrix: ``samples`` users holding one tested value x give counts
    distributed as Multinomial(samples, matrix[x]) (chi-square test, Bonferroni over the values), and
    users of every value at once give one count per output summing to the users."""
    from scipy.stats import chi2

    if not mech.capabilities.sample_counts:
        return
    k = mech.domain.size
    if mech.sample_counts(np.ones(k, dtype=np.int64), np.random.default_rng([seed, 7])) is None:
        return
    m = mech.matrix
    assert m is not None, f"{mech!r}: draws report counts but has no matrix to check them against"
    values = _tested_values(mech.domain)
    for x in values:
        counts = np.zeros(k, dtype=np.int64)
        counts[x] = samples
        got = mech.sample_counts(counts, np.random.default_rng([seed, 7, int(x)]))
        assert got is not None and got.shape == (m.shape[1],), f"{mech!r}: sample_counts gave no count per output"
        expected = samples * m[x]
        assert np.all(got[expected == 0] == 0), f"{mech!r}: sample_counts gave an output of probability 0 for {x}"
        big = expected >= 5
        o = np.append(got[big], got[~big].sum()).astype(float)
        e = np.append(expected[big], expected[~big].sum())
        keep = e > 0
        o, e = o[keep], e[keep]
        if o.size < 2:
            continue
        p_value = float(chi2.sf(float(((o - e) ** 2 / e).sum()), o.size - 1))
        assert p_value >= alpha / len(values), (
            f"{mech!r}: sample_counts for value {x} does not follow its matrix row (chi-square p = {p_value:.2g})"
        )


def check_diagonal_plus_constant(mech: Mechanism) -> None:
    """A declared ``a I + b 11^T`` is the matrix, entry by entry (to 1e-12), where the matrix is built."""
    pair = mech.diagonal_plus_constant()
    if pair is None or mech.domain.size > MAX_EXACT_OUTPUTS:
        return
    m = mech.matrix
    assert m is not None and m.shape == (mech.domain.size,) * 2, (
        f"{mech!r}: declares a I + b 11^T without a square matrix"
    )
    a, b = pair
    error = float(np.abs(m - (a * np.eye(m.shape[0]) + b)).max())
    assert error <= 1e-12, f"{mech!r}: its matrix differs from the declared a I + b 11^T by {error:.2g}"


def check_sample_bit_counts(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """Declared per-bit counts keep their promises: the estimate from the counts of reports is the reports'
    own unbiased estimate, and counts drawn without reports have the mean of the counts of ``samples``
    users' reports, count by count (the difference of two independent sums of Bernoullis has variance at
    most their summed means, estimated by the sum: a conservative z-test, Bonferroni over the counts)."""
    from scipy.stats import norm

    if not mech.capabilities.sample_bit_counts:
        return
    values = _tested_values(mech.domain)
    counts = np.bincount(values.repeat(-(-samples // values.size)), minlength=mech.domain.size)
    rng = np.random.default_rng([seed, 8])
    reports = mech.sample(np.repeat(np.arange(mech.domain.size), counts), rng)
    uniq, mult = np.unique(reports, axis=0, return_counts=True)
    tally = mech.bit_counts(uniq, mult)
    own = mech.unbiased_estimate(uniq, mult)
    if own is not None:
        from_bits = mech.bit_count_estimate(tally, int(counts.sum()))
        assert from_bits is not None and np.allclose(from_bits, own, rtol=1e-12, atol=1e-12), (
            f"{mech!r}: bit_count_estimate of the reports' bit counts is not their unbiased estimate"
        )
    drawn = mech.sample_bit_counts(counts, rng)
    if drawn is None:
        return
    assert drawn.shape == tally.shape, f"{mech!r}: sample_bit_counts gave shape {drawn.shape}, bit_counts {tally.shape}"
    z = np.abs(drawn - tally) / np.sqrt(drawn + tally + 1.0)
    worst = int(np.argmax(z))
    p_value = float(2 * norm.sf(z[worst]))
    assert p_value >= alpha / z.size, (
        f"{mech!r}: per-bit count {worst} drawn without reports ({int(drawn[worst])}) is far from the reports'"
        f" ({int(tally[worst])}): p = {p_value:.2g}"
    )


def check_rounds(mech: Mechanism, *, seed: int = 0) -> None:
    """A mechanism spanning several rounds lays its rounds out consistently.

    The rounds' columns tile the report in order, ``prefix(t)`` reports the columns of the first
    t rounds and ``prefix(rounds)`` is the mechanism's width, each round's channel reads the round's
    columns, and a sampled report (and each truncation, each round's part) is possible under the
    true value for the prefix and the round's channel.
    """
    tau = mech.rounds
    assert isinstance(tau, (int, np.integer)) and not isinstance(tau, bool) and tau >= 1, (
        f"{mech!r}: rounds must be a positive integer, got {tau!r}"
    )
    if not mech.capabilities.rounds:
        return
    columns = [mech.round_columns(t) for t in range(tau)]
    starts = [c.start for c in columns]
    stops = [c.stop for c in columns]
    assert starts == [0, *stops[:-1]] and stops[-1] == mech.report_width, (
        f"{mech!r}: round columns {columns} do not tile its {mech.report_width} report columns in order"
    )
    assert mech.prefix(tau).report_width == mech.report_width, f"{mech!r}: prefix(rounds) is not the whole report"
    values = _tested_values(mech.domain).repeat(50)
    reports = mech.sample(values, np.random.default_rng([seed, 4]))
    at_truth = (np.arange(values.shape[0]), values)
    for t in range(1, tau + 1):
        head = mech.prefix(t)
        assert head.report_width == stops[t - 1], (
            f"{mech!r}: prefix({t}) reports {head.report_width} columns, rounds 0..{t - 1} have {stops[t - 1]}"
        )
        assert np.all(head.log_likelihood(reports[:, : stops[t - 1]])[at_truth] > -np.inf), (
            f"{mech!r}: a sampled report's first {t} rounds are impossible under prefix({t})"
        )
        channel = mech.round_channel(t - 1)
        part = reports[:, columns[t - 1]]
        assert channel.report_width == part.shape[1], (
            f"{mech!r}: round_channel({t - 1}) reports {channel.report_width} columns, the round has {part.shape[1]}"
        )
        assert np.all(channel.log_likelihood(part)[at_truth] > -np.inf), (
            f"{mech!r}: a sampled report of round {t - 1} is impossible under round_channel({t - 1})"
        )


def check_output_count(mech: Mechanism) -> None:
    """A declared output count is the number of columns of the matrix."""
    count = mech.output_count()
    if count is None:
        return
    m = mech.matrix
    assert m is not None, f"{mech!r}: declares {count} outputs but has no matrix"
    assert m.shape[1] == count, f"{mech!r}: declares {count} outputs, its matrix has {m.shape[1]}"


def check_named_value_likelihood(mech: Mechanism, *, seed: int = 0) -> None:
    """A declared named-value likelihood is the log-likelihood of sampled reports, value by value."""
    pair = mech.named_value_likelihood()
    if pair is None:
        return
    hit, miss = pair
    reports = _sampled_reports(mech, seed)
    z = reports[:, 0]
    k = mech.domain.size
    assert np.all((z >= 0) & (z < k)), f"{mech!r}: declares that reports name values, but sampled report {z.max()}"
    expected = np.where(np.arange(k)[None, :] == z[:, None], hit, miss)
    got = mech.log_likelihood(reports)
    bad = ~np.isclose(got, expected, rtol=1e-12, atol=1e-12)
    if bad.any():
        row, x = np.argwhere(bad)[0]
        raise AssertionError(
            f"{mech!r}: named_value_likelihood() = {pair}, but the log-likelihood of report {int(z[row])}"
            f" at value {int(x)} is {got[row, x]:.12g}"
        )


def check_structured_likelihood(mech: Mechanism, *, seed: int = 0) -> None:
    """A declared structured likelihood ``(shift, H)`` is ``exp(log_likelihood - shift)`` on sampled reports.

    ``H`` is compared through its products (``H @ theta`` and ``H.T @ w``), each entry within
    :data:`STRUCTURED_RTOL` of its report's largest likelihood entry.
    """
    if not mech.capabilities.structured_likelihood:
        return
    reports = _sampled_reports(mech, seed)
    parts = mech.structured_likelihood(reports)
    if parts is None:
        return
    shift, op = parts
    assert np.all(np.isfinite(shift)), f"{mech!r}: structured likelihood: shift is not finite for a sampled report"
    dense = np.exp(mech.log_likelihood(reports) - shift[:, None])
    rng = np.random.default_rng([seed, 4])
    k = mech.domain.size
    probes = np.eye(k) if k <= 512 else rng.dirichlet(np.ones(k), size=8).T
    got = np.asarray(op @ probes, dtype=float).reshape(reports.shape[0], -1)
    scale = np.maximum(dense.max(axis=1, keepdims=True), 1e-300)
    bad = ~(np.abs(got - dense @ probes) <= STRUCTURED_RTOL * scale)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        where = f"value {int(col)}" if k <= 512 else "a random distribution"
        raise AssertionError(
            f"{mech!r}: the structured likelihood of report {tuple(int(v) for v in reports[row])} at {where} is"
            f" {got[row, col]:.12g} (times exp(shift)), log_likelihood gives {(dense @ probes)[row, col]:.12g}"
        )
    w = rng.uniform(0.5, 2.0, reports.shape[0]) / scale.ravel()
    back, expected = np.ravel(op.T @ w), dense.T @ w
    assert np.linalg.norm(back - expected) <= STRUCTURED_RTOL * np.linalg.norm(expected), (
        f"{mech!r}: the transpose of the structured likelihood disagrees with log_likelihood"
    )


def check_likely_subset(mech: Mechanism, *, seed: int = 0) -> None:
    """A declared likely subset leaves out only values beaten by another on every report, strictly on
    one (004 Definitions 2-3), on reports of a few users holding one value and of users holding many;
    a declared subset likelihood is the log-likelihood's on the subset's values."""
    if not mech.capabilities.likely_subset:
        return
    rng = np.random.default_rng([seed, 5])
    tested = _tested_values(mech.domain)
    for values in (np.full(5, tested[0]), tested.repeat(5)):
        reports = np.unique(mech.sample(values, rng), axis=0)
        mask = mech.likely_subset(reports)
        if mask is None:
            continue
        log_p = mech.log_likelihood(reports)
        own = mech.subset_likelihood(reports, mask)  # declared: the same likelihood on the subset's values
        if own is not None:
            theta = rng.dirichlet(np.ones(int(mask.sum())))
            expected = np.exp(log_p[:, mask]) @ theta
            got = np.exp(own[0]) * np.asarray(own[1] @ theta).ravel()
            assert np.linalg.norm(got - expected) <= STRUCTURED_RTOL * np.linalg.norm(expected), (
                f"{mech!r}: subset_likelihood disagrees with log_likelihood on the likely subset"
            )
        outside = np.flatnonzero(~mask)
        if outside.size > MAX_OUTSIDE_CHECKED:
            outside = outside[np.linspace(0, outside.size - 1, MAX_OUTSIDE_CHECKED).round().astype(int)]
        for out in outside:
            column = log_p[:, [out]]
            slack = np.where(np.isfinite(column), 1e-12 * np.maximum(1.0, np.abs(column)), 0.0)
            beats = np.all(log_p >= column - slack, axis=0) & np.any(log_p > column + slack, axis=0)
            assert beats.any(), (
                f"{mech!r}: value {mech.domain.labels()[out]} is outside the likely subset of reports of users"
                f" holding {sorted(set(mech.domain.labels()[int(v)] for v in values))}, yet no value beats it"
                " on every report"
            )


def check_unbiased_estimate(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """A declared unbiased estimate has the true distribution as its expectation.

    Exactly when the matrix has at most :data:`MAX_EXACT_OUTPUTS` columns: for one user,
    ``sum_z M[x, z] v(z) = e_x`` for every value x. Otherwise, for each tested value, from
    ``samples`` users holding it in :data:`UNBIASED_BATCHES` batches: a t-test per coordinate of
    the batches' mean, failing a correct mechanism with probability at most ``alpha``.
    """
    if not mech.capabilities.unbiased_estimate:
        return
    k = mech.domain.size
    m = mech.matrix if mech.report_width == 1 else None
    if m is not None and m.shape[1] <= MAX_EXACT_OUTPUTS:
        outputs = np.flatnonzero(m.max(axis=0) > 0)
        rows = []
        for z in outputs:  # per output, not per user: one user's estimate for each report it may send
            v = mech.unbiased_estimate(np.array([[z]]), np.array([1]))
            if v is None:
                return
            rows.append(v)
        estimates = np.array(rows)
        mean = m[:, outputs] @ estimates  # row x: E[estimate] for one user holding x
        bad = ~(np.abs(mean - np.eye(k)) <= 1e-9 * max(1.0, float(np.abs(estimates).max())))
        if bad.any():
            x = int(np.argwhere(bad)[0][0])
            raise AssertionError(
                f"{mech!r}: for a user holding {mech.domain.labels()[x]} the unbiased estimate's expectation is"
                f" {np.round(mean[x], 6).tolist()}, not the point mass"
            )
        return
    from scipy.stats import t as student

    tested = _tested_values(mech.domain)
    size = max(2, samples // UNBIASED_BATCHES)
    for x in tested:
        rng = np.random.default_rng([seed, 6, int(x)])
        batches = []
        for _ in range(UNBIASED_BATCHES):
            reports, counts = np.unique(mech.sample(np.full(size, x), rng), axis=0, return_counts=True)
            v = mech.unbiased_estimate(reports, counts)
            if v is None:
                return
            batches.append(v)
        estimates = np.array(batches)
        truth = np.eye(k)[x]
        mean = estimates.mean(axis=0)
        se = estimates.std(axis=0, ddof=1) / math.sqrt(UNBIASED_BATCHES)
        with np.errstate(divide="ignore", invalid="ignore"):
            p_value = 2 * student.sf(np.abs(mean - truth) / se, UNBIASED_BATCHES - 1)
        # a coordinate that does not vary must be exact
        p_value = np.where(se > 0, p_value, np.where(np.abs(mean - truth) <= 1e-9, 1.0, 0.0))
        worst = int(np.argmin(p_value))
        assert p_value[worst] >= alpha / (tested.size * k), (
            f"{mech!r}: for {UNBIASED_BATCHES * size} users holding {mech.domain.labels()[int(x)]} the unbiased"
            f" estimate of value {mech.domain.labels()[worst]} averages {mean[worst]:.6g}, not {truth[worst]:g}"
            f" (t-test p = {p_value[worst]:.2g})"
        )


def check_estimate_variance(mech: Mechanism, *, seed: int = 0) -> None:
    """A declared estimate variance is the exact one, on matrices with at most :data:`MAX_EXACT_OUTPUTS` columns.

    The estimate of n users is the mean of one-report estimates v(z) (the mechanism's own,
    else a row of the matrix's pseudo-inverse), so for a fixed population with distribution
    theta, ``n Var[f_hat(x)] = sum_x' theta_x' sum_z M[x', z] v_x(z)^2 - theta_x``; checked at a
    random theta to 1e-9 relative. Mechanisms without such a matrix are left to their own tests.
    """
    if not mech.capabilities.estimate_variance:
        return
    m = mech.matrix if mech.report_width == 1 else None
    if m is None or m.shape[1] > MAX_EXACT_OUTPUTS:
        return
    k = mech.domain.size
    outputs = np.flatnonzero(m.max(axis=0) > 0)
    m = m[:, outputs]
    own = [mech.unbiased_estimate(np.array([[z]]), np.array([1])) for z in outputs]
    v = np.linalg.pinv(m) if any(e is None for e in own) else np.array(own)
    theta = np.random.default_rng([seed, 7]).dirichlet(np.ones(k))
    declared = mech.estimate_variance(theta)
    if declared is None:
        return
    exact = theta @ m @ v**2 - theta
    bad = ~(np.abs(declared - exact) <= 1e-9 * np.maximum(np.abs(exact), 1e-12))
    if bad.any():
        x = int(np.argmax(bad))
        raise AssertionError(
            f"{mech!r}: estimate_variance gives n Var = {declared[x]:.12g} at value {mech.domain.labels()[x]},"
            f" the matrix and the unbiased estimate give {exact[x]:.12g}"
        )


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
    """For each tested true value, reports follow P(report | x) (chi-square test; a likelihood-ratio
    test for mechanisms whose reports have a density, :attr:`Mechanism.report_density`)."""
    from scipy.stats import chi2

    if mech.report_density:
        check_density_sampler(mech, samples=samples, seed=seed, alpha=alpha)
        return
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


def check_density_sampler(mech: Mechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4) -> None:
    """Reports with a density follow it: ``E_x[p(Z | x') / p(Z | x)] = 1`` for reports Z of a user holding x.

    The identity holds for any sampler that draws from p(. | x) and fails, for some x', for one that
    does not (or for a density whose ratios are wrong). For each tested pair a z-test of the mean
    ratio over ``samples`` reports (ratios are bounded by the LDP level, so the mean is near normal),
    failing a correct mechanism with probability at most ``alpha`` overall.
    """
    from scipy.stats import norm

    values = _tested_values(mech.domain)
    pairs = values.size * (values.size - 1)
    for x in values:
        reports = mech.sample(np.full(samples, x), np.random.default_rng([seed, int(x)]))
        log_p = mech.log_likelihood(reports)[:, values]
        ratio = np.exp(log_p - log_p[:, values == x])
        mean, se = ratio.mean(axis=0), ratio.std(axis=0, ddof=1) / math.sqrt(samples)
        with np.errstate(divide="ignore", invalid="ignore"):
            p_value = np.where(values == x, 1.0, 2 * norm.sf(np.abs(mean - 1) / se))
        worst = int(np.argmin(p_value))
        assert p_value[worst] >= alpha / max(pairs, 1), (
            f"{mech!r}: reports of a user holding {mech.domain.labels()[int(x)]} give a mean density ratio of"
            f" {mean[worst]:.6g} to value {mech.domain.labels()[int(values[worst])]}, not 1 (p = {p_value[worst]:.2g})"
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
    ParameterError that names the parameter (:func:`~ldpsim.theory.contracts.check_configurable`)."""
    check_configurable(cls, valid, domain)


def _sampled_reports(mech: Mechanism, seed: int, per_value: int = 200) -> np.ndarray:
    """Distinct reports of ``per_value`` users at each tested value."""
    values = _tested_values(mech.domain).repeat(per_value)
    return np.unique(mech.sample(values, np.random.default_rng([seed, 3])), axis=0)


def _tested_values(domain: Domain) -> np.ndarray:
    if domain.size <= 12:
        return np.arange(domain.size)
    return np.unique(np.linspace(0, domain.size - 1, 8).round().astype(int))
