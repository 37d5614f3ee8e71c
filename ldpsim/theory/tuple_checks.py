"""Contract checks for tuple protocols (``ldpsim.testing.check_tuple_mechanism``).

On top of every mechanism check (sampler against likelihood, structured against dense
likelihood, privacy claim against sampled reports), a tuple protocol's parts must be
mechanisms on its attributes, and its per-attribute estimates, when it declares them,
must be unbiased with the variance it states: tested by repeated simulation of a fixed
population, each test failing a correct protocol with probability at most ``alpha``.
"""

from __future__ import annotations

import numpy as np

from ..model.tuples import TupleMechanism
from .checks import check_mechanism


def check_tuple_mechanism(
    mech: TupleMechanism, *, samples: int = 20_000, seed: int = 0, alpha: float = 1e-4, repetitions: int = 300
) -> None:
    """All checks of a tuple protocol, on a small product domain.

    Parameters
    ----------
    mech
        The protocol to check (a :class:`~ldpsim.TupleMechanism` on a product domain of a few cells).
    samples
        Reports drawn per tested value by the mechanism checks.
    seed
        Seed of every generator the checks use: the outcome is deterministic.
    alpha
        Chance that a correct protocol fails a statistical check at a given seed.
    repetitions
        Simulated populations for the marginal estimates' mean and variance.

    Raises
    ------
    AssertionError
        Naming the first violation of the contract.
    """
    assert isinstance(mech, TupleMechanism), f"{mech!r} is not a TupleMechanism"
    check_mechanism(mech, samples=samples, seed=seed, alpha=alpha)
    parts = mech.parts
    assert len(parts) == len(mech.domain.parts), f"{mech!r}: {len(parts)} parts for {len(mech.domain.parts)} attributes"
    check_marginal_estimates(mech, seed=seed, alpha=alpha, repetitions=repetitions)


def check_marginal_estimates(
    mech: TupleMechanism, *, users: int = 2_000, seed: int = 0, alpha: float = 1e-4, repetitions: int = 300
) -> None:
    """Declared per-attribute estimates are unbiased (z-test of their mean over ``repetitions`` populations),
    and declared variances match the simulated ones (the ratio of sample to stated variance, a scaled
    chi-square with ``repetitions - 1`` degrees of freedom, pooled over each attribute's values).
    """
    from scipy.stats import chi2, norm

    dom = mech.domain
    rng = np.random.default_rng([seed, 31])
    theta = rng.dirichlet(np.ones(dom.size))
    values = np.repeat(np.arange(dom.size), rng.multinomial(users, theta))
    empirical = np.bincount(values, minlength=dom.size) / users
    estimates: list[list[np.ndarray]] = []
    for r in range(repetitions):
        reports = mech.sample(values, np.random.default_rng([seed, 32, r]))
        uniq, counts = np.unique(reports, axis=0, return_counts=True)
        got = mech.marginal_estimates(uniq, counts)
        if got is None:
            return
        estimates.append(got)
    stated = mech.marginal_variances(empirical)
    tests = sum(k for k in dom.sizes) * (2 if stated is not None else 1)
    for j in range(len(dom.parts)):
        draws = np.array([e[j] for e in estimates])  # (repetitions, k_j)
        truth = dom.marginal(empirical, j)
        mean = draws.mean(axis=0)
        var = draws.var(axis=0, ddof=1)
        se = np.sqrt((stated[j] / users) / repetitions) if stated is not None else np.sqrt(var / repetitions)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = 2 * norm.sf(np.abs(mean - truth) / se)
        worst = int(np.nanargmin(p)) if np.isfinite(p).any() else 0
        assert not (p[worst] < alpha / tests), (
            f"{mech!r}: attribute '{dom.names[j]}' value {worst}: the estimates average {mean[worst]:.5g} over"
            f" {repetitions} populations whose frequency is {truth[worst]:.5g} (p = {p[worst]:.2g}): biased"
        )
        if stated is None:
            continue
        expected = stated[j] / users
        keep = expected > 0
        ratio = float((var[keep] / expected[keep]).mean())
        # each ratio is chi2(R-1)/(R-1); their mean over the values is tested (conservatively, as if one ratio)
        dof = repetitions - 1
        low, high = chi2.ppf(alpha / (2 * tests), dof) / dof, chi2.isf(alpha / (2 * tests), dof) / dof
        assert low <= ratio <= high, (
            f"{mech!r}: attribute '{dom.names[j]}': simulated variance is {ratio:.3g} times the stated one"
            f" (expected within [{low:.3g}, {high:.3g}])"
        )
