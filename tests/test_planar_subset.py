"""Planar likely subsets (004 Sec. 8.3): the reports' box, and GIBU on a convolution over the box only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ldpsim
from ldpsim import Grid, Likelihood, Observations
from ldpsim.testing import check_likely_subset


def _planar(name: str, rows: int, cols: int, eps: float, window: list[int] | None = None):
    extra = {} if window is None else {"window": window}
    return ldpsim.get_registry().create("mechanism", name, Grid(rows=rows, cols=cols), eps=eps, **extra)


def _clustered(mech, users: int, region: tuple[int, int, int, int], seed: int):
    """Reports of users on the cells of ``region`` = (row0, col0, rows, cols), uniformly."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    r0, c0, h, w = region
    rows = rng.integers(r0, r0 + h, users)
    cols = rng.integers(c0, c0 + w, users)
    values = rows * mech.domain.cols + cols
    return Observations.from_reports(mech.domain, [(mech, mech.sample(values, rng))])


@pytest.mark.parametrize(
    ("name", "window"),
    [("planar-geometric", None), ("planar-laplace", None), ("planar-geometric", [3, 4, 9, 7])],
)
def test_values_outside_the_subset_are_beaten_on_every_report(name, window):
    """The contract kit's check: each value left out is beaten by another on every report (004 Def. 2-3)."""
    check_likely_subset(_planar(name, 14, 12, 0.7, window), seed=5)


@given(
    name=st.sampled_from(["planar-geometric", "planar-laplace"]),
    rows=st.integers(6, 14),
    cols=st.integers(6, 14),
    eps=st.floats(0.2, 3.0),
    use_window=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_box_convolution_is_the_likelihood_on_the_subset(name, rows, cols, eps, use_window, seed):
    window = [1, 2, rows - 3, cols - 4] if use_window else None
    mech = _planar(name, rows, cols, eps, window)
    obs = _clustered(mech, 300, (rows // 3, cols // 3, 3, 3), seed)
    reports = obs.groups[0].reports
    mask = obs.likely_subset()
    shift, op = mech.structured_likelihood(reports)
    restricted = op.restricted(mask)
    assert restricted is not None
    shift_box, box = restricted
    assert box.shape == (reports.shape[0], int(mask.sum()))
    rows_all = np.arange(reports.shape[0])
    full = np.exp(shift)[:, None] * op.rows(rows_all)[:, mask]
    np.testing.assert_allclose(np.exp(shift_box)[:, None] * box.rows(rows_all), full, rtol=1e-12, atol=0)
    theta = np.random.default_rng(seed).dirichlet(np.ones(int(mask.sum())))
    padded = np.zeros(mask.size)
    padded[mask] = theta
    np.testing.assert_allclose(np.exp(shift_box) * (box @ theta), np.exp(shift) * (op @ padded), rtol=1e-9)


def test_a_support_that_is_not_a_box_or_cuts_the_window_at_a_report_is_refused():
    mech = _planar("planar-geometric", 12, 12, 1.0)
    obs = _clustered(mech, 200, (4, 4, 3, 3), 1)
    reports = obs.groups[0].reports
    _, op = mech.structured_likelihood(reports)
    mask = obs.likely_subset()
    holed = mask.copy()
    holed[np.flatnonzero(mask)[1]] = False  # a hole in the box
    assert op.restricted(holed) is None
    positions = np.column_stack(np.divmod(reports[:, 0], 12))
    tight = np.zeros((12, 12), dtype=bool)  # the bare bounding box: reports sit on its cut sides
    tight[positions[:, 0].min() : positions[:, 0].max() + 1, positions[:, 1].min() : positions[:, 1].max() + 1] = True
    if tight.all():
        pytest.skip("the reports reach every edge of the grid")
    assert op.restricted(tight.ravel()) is None


def test_the_mle_on_the_subset_is_the_mle_on_the_whole_grid_at_a_fraction_of_the_cost():
    """004 Thm. 8.1: every MLE lies in the likely subset, so both estimates are the same MLE."""
    mech = _planar("planar-geometric", 40, 40, 1.5)
    obs = _clustered(mech, 5_000, (18, 10, 5, 5), 11)
    mask = obs.likely_subset()
    on_subset = ldpsim.get_registry().create("estimator", "mle").estimate(obs)
    whole = ldpsim.get_registry().create("estimator", "mle", likely=False).estimate(obs)
    assert on_subset.kkt <= 1e-6 and whole.kkt <= 1e-6
    assert np.all(on_subset.distribution[~mask] == 0)
    assert 0.5 * np.abs(on_subset.distribution - whole.distribution).sum() < 1e-3
    assert abs(on_subset.loglik - whole.loglik) < 1e-3
    # the subset's estimate is also certified on the whole grid: no value outside it would raise L
    full = Likelihood.of(obs)
    kkt, _ = full.certificate(full.gradient(on_subset.distribution))
    assert kkt <= 1e-5
    # and its operator is a convolution over the box: a fraction of the grid's FFT work
    _, op = mech.structured_likelihood(obs.groups[0].reports)
    _, box = op.restricted(mask)
    assert box.shape[1] == mask.sum() < 0.2 * mask.size
    assert np.prod(box.fft_shape) < 0.25 * np.prod(op.fft_shape)


def test_gowalla_with_a_margin_is_the_same_check_ins_amid_empty_cells():
    registry = ldpsim.get_registry()
    plain = registry.create("dataset", "gowalla", Grid(rows=16, cols=24, cell=0.5))
    wide = registry.create("dataset", "gowalla", Grid(rows=22, cols=30, cell=0.5), margin=3)
    counts = wide.counts.reshape(22, 30)
    np.testing.assert_array_equal(counts[3:-3, 3:-3], plain.counts.reshape(16, 24))
    assert counts.sum() == plain.counts.sum()
    with pytest.raises(ldpsim.ParameterError, match="22 x 30"):
        registry.create("dataset", "gowalla", Grid(rows=16, cols=24, cell=0.5), margin=3)
