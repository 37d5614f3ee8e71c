"""A planar likely subset on a grid far larger than the data costs what the data's region does (004 Sec. 8.3)."""

from __future__ import annotations

import numpy as np
import pytest

import ldpsim
from ldpsim import Grid, Likelihood, Observations


def _planar(name: str, rows: int, cols: int, eps: float, window: list[int] | None = None):
    extra = {} if window is None else {"window": window}
    return ldpsim.get_registry().create("mechanism", name, Grid(rows=rows, cols=cols), eps=eps, **extra)


def _clustered(mech, users: int, region: tuple[int, int, int, int], seed: int) -> Observations:
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    r0, c0, h, w = region
    values = rng.integers(r0, r0 + h, users) * mech.domain.cols + rng.integers(c0, c0 + w, users)
    return Observations.from_reports(mech.domain, [(mech, mech.sample(values, rng))])


@pytest.mark.parametrize(
    ("name", "window", "region"),
    [
        ("planar-geometric", None, (9, 6, 4, 3)),
        ("planar-laplace", None, (9, 6, 4, 3)),
        ("planar-geometric", [2, 3, 15, 12], (8, 7, 3, 3)),
        ("planar-laplace", None, (0, 0, 3, 4)),  # the box touches the grid's corner: folded edges
    ],
)
def test_the_box_built_alone_is_the_whole_likelihood_on_the_subset(name, window, region):
    """Every entry of the box's own likelihood equals the whole grid's, to rounding."""
    mech = _planar(name, 20, 18, 0.8, window)
    obs = _clustered(mech, 400, region, 3)
    reports = obs.groups[0].reports
    mask = obs.likely_subset()
    own = mech.subset_likelihood(reports, mask)
    assert own is not None
    shift_box, box = own
    assert box.shape == (reports.shape[0], int(mask.sum()))
    shift, op = mech.structured_likelihood(reports)
    rows = np.arange(reports.shape[0])
    expected = np.exp(shift)[:, None] * op.rows(rows)[:, mask]
    np.testing.assert_allclose(np.exp(shift_box)[:, None] * box.rows(rows), expected, rtol=1e-12, atol=0)
    # the box's kernel, not the grid's: a mechanism built fresh never computes the grid's kernel
    fresh = _planar(name, 20, 18, 0.8, window)
    fresh.subset_likelihood(reports, mask)
    assert "_kernel" not in vars(fresh)


def test_a_support_that_is_not_its_box_gets_no_box_likelihood():
    mech = _planar("planar-geometric", 16, 16, 1.0)
    obs = _clustered(mech, 200, (6, 6, 3, 3), 1)
    mask = obs.likely_subset()
    holed = mask.copy()
    holed[np.flatnonzero(mask)[1]] = False
    assert mech.subset_likelihood(obs.groups[0].reports, holed) is None
    # the estimate still runs, through the whole likelihood's columns
    assert Likelihood(obs, holed).size == int(holed.sum())


def test_on_a_512_by_512_grid_the_mle_costs_the_region_and_is_the_whole_grids_mle():
    """004 Thm. 8.1 on a grid far larger than the data: the likely subset's MLE, padded with zeros, is
    certified on the whole grid (no value outside would raise L), and its likelihood is the box's size."""
    mech = _planar("planar-geometric", 512, 512, 2.0)
    obs = _clustered(mech, 3_000, (300, 200, 4, 5), 7)
    mask = obs.likely_subset()
    likelihood = Likelihood.of(obs, mask)
    fresh_kernel = "_kernel" not in vars(mech)
    estimate = ldpsim.get_registry().create("estimator", "mle").estimate(obs)
    assert estimate.kkt <= 1e-6
    assert np.all(estimate.distribution[~mask] == 0)
    # cost: the operator, its FFT and its kernel are the box's, a fraction 1e-3 of the grid's
    box = likelihood.H
    assert box.shape[1] == mask.sum() < 1e-3 * mask.size
    assert np.prod(box.fft_shape) < 1e-2 * 1024**2  # the grid's own FFT would be >= (512 + 2*511)^2 / 2
    assert box.kernel.size < 1e-2 * (2 * 512 + 1) ** 2
    assert fresh_kernel and "_kernel" not in vars(mech)  # the grid's kernel was never built
    # the same MLE: KKT on the whole grid holds for the padded estimate (gradients from the grid's
    # likelihood, evaluated only now)
    whole = Likelihood.of(obs)
    kkt, _ = whole.certificate(whole.gradient(estimate.distribution))
    assert kkt <= 1e-5
