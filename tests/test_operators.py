"""Structured likelihood operators agree with the dense likelihoods they replace; what cannot fit is refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import make
from hypothesis import given, settings
from hypothesis import strategies as st

import ldpsim
import ldpsim.base.memory
import ldpsim.estimation.operators
from ldpsim import Categorical, Grid, Integers, Likelihood, Observations, constant_plus_column, convolution_likelihood
from ldpsim.base.memory import MemoryLimitError
from ldpsim.estimation.operators import exact_block

#: products are FFT convolutions, whose rounding is relative to the norms: they agree with the dense
#: products to 1e-12 of the norm, and each entry of H theta to 1 / GUARD of itself (smaller ones are recomputed)
NORM_RTOL = 1e-12


def _close(actual, expected, *, entrywise=True):
    assert np.linalg.norm(actual - expected) <= NORM_RTOL * np.linalg.norm(expected)
    if entrywise:
        np.testing.assert_allclose(actual, expected, rtol=1 / ldpsim.estimation.operators.GUARD, atol=0)


def _compare(mech, reports, rng):
    """Products and rows of the structured operator against the dense, row-rescaled likelihood."""
    reports = np.asarray(reports, dtype=np.int64)[:, None]
    shift, op = mech.structured_likelihood(reports)
    dense = np.exp(mech.log_likelihood(reports) - shift[:, None])  # H from the dense path, same rescaling
    # each row is scaled by its maximum; the exponential mechanism's normalizers Z_x differ by at most 2 per axis
    assert np.all(np.isfinite(shift)) and dense.max(axis=1).min() >= 1 - 1e-12 and dense.max() <= 4
    if mech.name != "exponential":
        assert dense.max() <= 1 + 1e-12
    theta = rng.dirichlet(np.full(mech.domain.size, 0.5))
    _close(op @ theta, dense @ theta)
    w = rng.uniform(0.1, 10, reports.shape[0])
    _close(op.T @ w, dense.T @ w, entrywise=False)  # a gradient: its small entries multiply small theta_x
    if hasattr(op, "rows"):  # exact rows: sums of positive terms
        np.testing.assert_allclose(op.rows(np.arange(reports.shape[0])), dense, rtol=1e-12, atol=1e-300)


eps_values = st.floats(0.05, 5.0)


@settings(max_examples=25, deadline=None)
@given(eps=eps_values, k=st.integers(2, 40), step=st.sampled_from([1, 3]), seed=st.integers(0, 2**32 - 1))
def test_line_mechanisms_agree_with_their_matrices(eps, k, step, seed):
    rng = np.random.default_rng(seed)
    domain = Integers(low=-5, high=-5 + step * (k - 1), step=step)
    outputs = np.unique(rng.integers(0, k, size=k))
    for name, params in (("krr", {}), ("geometric", {}), ("laplace", {}), ("exponential", {})):
        _compare(make("mechanism", name, domain, eps=eps, **params), outputs, rng)
    # untruncated: reports anywhere on the lattice, far beyond the domain included
    reports = np.unique(np.concatenate([outputs, rng.integers(-3 * k - 50, 4 * k + 50, size=10)]))
    _compare(make("mechanism", "geometric", domain, eps=eps, truncate=False), reports, rng)


@settings(max_examples=15, deadline=None)
@given(
    eps=st.floats(0.3, 4.0),
    rows=st.integers(1, 6),
    cols=st.integers(2, 6),
    window=st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 6), st.integers(1, 6)),
    seed=st.integers(0, 2**32 - 1),
)
def test_planar_mechanisms_agree_with_their_matrices(eps, rows, cols, window, seed):
    rng = np.random.default_rng(seed)
    grid = Grid(rows=rows, cols=cols, cell=0.7)
    r0, c0 = min(window[0], rows - 1), min(window[1], cols - 1)
    win = [r0, c0, min(window[2], rows - r0), min(window[3], cols - c0)]
    outputs = np.unique(rng.integers(0, win[2] * win[3], size=8))
    _compare(make("mechanism", "planar-geometric", grid, eps=eps, window=win), outputs, rng)
    _compare(make("mechanism", "exponential", grid, eps=eps), np.unique(rng.integers(0, rows * cols, size=8)), rng)


def test_planar_laplace_and_categorical_exponential_agree(rng):
    _compare(
        make("mechanism", "planar-laplace", Grid(rows=5, cols=4), eps=0.6, window=[1, 0, 3, 4]), np.arange(12), rng
    )
    _compare(make("mechanism", "exponential", Categorical(values=list("abcdefg")), eps=1.3), [0, 3, 6], rng)


def test_constant_plus_column_is_the_matrix_it_describes():
    h = constant_plus_column(np.array([2, 0, 2]), 4, 0.25)
    expected = np.full((3, 4), 0.25)
    expected[[0, 1, 2], [2, 0, 2]] = 1
    np.testing.assert_array_equal(h @ np.eye(4), expected)
    np.testing.assert_array_equal(h.T @ np.eye(3), expected.T)


def test_convolution_with_clamping_folds_every_offset_beyond_the_window():
    # kernel over offsets -2..2 on a line of 3 values, window = cell 1 only: every report is cell 1
    kernel = np.array([0.1, 0.2, 0.4, 0.2, 0.1])
    shift, op = convolution_likelihood(kernel, (3,), np.array([0]), start=(1,), window=(1,))
    np.testing.assert_allclose(np.exp(shift[0]) * op.rows([0]), [[1.0, 1.0, 1.0]])


def test_small_ffts_entries_are_recomputed_exactly(rng):
    # theta far from a report: its probability is ~e^-60 of the largest, below FFT rounding, yet exact
    domain = Integers(low=0, high=99)
    geo = make("mechanism", "geometric", domain, eps=2.0)
    shift, op = geo.structured_likelihood(np.array([[0], [99]]))
    theta = np.zeros(100)
    theta[-1] = 1.0
    dense = np.exp(geo.log_likelihood(np.array([[0], [99]])) - shift[:, None])
    assert (dense @ theta)[0] < 1e-80
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-12, atol=0)


def test_large_domains_use_the_structured_operator_and_small_ones_the_dense_array(rng):
    for k, structured in ((ldpsim.STRUCTURED_MIN_SIZE - 1, False), (ldpsim.STRUCTURED_MIN_SIZE, True)):
        domain = Integers(low=0, high=k - 1)
        for name in ("krr", "geometric", "laplace", "exponential"):
            mech = make("mechanism", name, domain, eps=0.5)
            obs = Observations.from_reports(domain, [(mech, mech.sample(rng.integers(0, k, 300), rng))])
            assert isinstance(Likelihood(obs).H, np.ndarray) is not structured, (name, k)


@pytest.fixture
def little_memory(monkeypatch):
    monkeypatch.setattr(ldpsim.base.memory, "available_memory", lambda: 100_000_000)


def test_a_matrix_beyond_memory_is_refused_with_its_size_and_the_alternative(little_memory):
    planar = make("mechanism", "planar-geometric", Grid(rows=256, cols=256), eps=1.0)
    with pytest.raises(MemoryLimitError) as info:
        planar.matrix  # noqa: B018
    msg = str(info.value)
    assert "\n" not in msg and "65536 x 65536 matrix of planar-geometric" in msg and "34.4 GB" in msg
    assert "ibu" in msg and "fewer values" in msg


def test_a_dense_likelihood_beyond_memory_is_refused(little_memory, rng):
    domain = Integers(low=0, high=9_999)
    geo = make("mechanism", "geometric", domain, eps=1.0)  # two reports per user: no structured product
    reports = np.column_stack([geo.sample(rng.integers(0, 10_000, 2_000), rng) for _ in range(2)])
    obs = Observations.from_reports(domain, [((geo, geo), reports)])
    with pytest.raises(
        MemoryLimitError, match=r"dense \d+ x 10000 likelihood of plan \[geometric, geometric\].*fewer values"
    ):
        Likelihood(obs)


def test_several_krr_reports_per_user_fit_where_their_dense_likelihood_would_not(little_memory, rng):
    domain = Integers(low=0, high=9_999)
    krr = make("mechanism", "krr", domain, eps=1.0)
    reports = np.column_stack([krr.sample(rng.integers(0, 10_000, 2_000), rng) for _ in range(3)])
    obs = Observations.from_reports(domain, [((krr, krr, krr), reports)])
    likelihood = Likelihood(obs)  # the dense 2000 x 10000 array would exceed little_memory
    # L(uniform) in closed form: P(tuple | x) = keep^m other^(3 - m), m = how many reports name x
    keep, other = krr._keep, krr._other
    expected = 0.0
    for row, count in zip(obs.groups[0].reports, obs.groups[0].counts, strict=True):
        named, m = np.unique(row, return_counts=True)
        total = (10_000 - named.size) * other**3 + np.sum(keep**m * other ** (3 - m))
        expected += count * np.log(total / 10_000)
    assert likelihood.loglik(np.full(10_000, 1e-4)) == pytest.approx(expected, rel=1e-12)


def test_the_256_by_256_grid_is_simulated_and_estimated_without_its_matrix(little_memory, rng):
    grid = Grid(rows=256, cols=256)
    planar = make("mechanism", "planar-geometric", grid, eps=1.0)
    values = rng.integers(0, grid.size, 5_000)
    obs = Observations.from_reports(grid, [(planar, planar.sample(values, rng))])
    estimate = make("estimator", "ibu", max_iter=3, likely=False).estimate(obs)
    assert estimate.iterations == 3 and estimate.distribution.shape == (65_536,)
    assert estimate.loglik > Likelihood.of(obs).loglik(np.full(65_536, 1 / 65_536))  # EM moved uphill


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 9),
    st.lists(st.floats(0.05, 8.0), min_size=2, max_size=5),
    st.integers(1, 30),
    st.integers(0, 2**32 - 1),
)
def test_reports_naming_values_give_a_sparse_likelihood_equal_to_the_dense_one(k, eps, rows, seed):
    """Several k-RR reports per user: H = c 1^T + S, with the dense product's values and GIBU's iterates."""
    rng = np.random.default_rng(seed)
    domain = Integers(low=0, high=k - 1)
    plan = [make("mechanism", "krr", domain, eps=e) for e in eps]
    reports = rng.integers(0, k, size=(rows, len(plan)))
    reports[0] = reports[0, 0]  # a tuple naming one value several times
    obs = Observations.from_reports(domain, [(plan, reports)])
    group = obs.groups[0].canonical()
    shift, op = ldpsim.estimation.engine._block(group)
    assert not isinstance(op, np.ndarray)  # the sparse path was taken
    log_dense = group.log_likelihood()
    np.testing.assert_allclose(shift, log_dense.max(axis=1), rtol=1e-12, atol=1e-12)  # rows scaled by their maximum
    dense = np.exp(log_dense - shift[:, None])
    theta = rng.dirichlet(np.ones(k))
    np.testing.assert_allclose(op @ theta, dense @ theta, rtol=1e-12)
    w = rng.uniform(0.1, 10, group.reports.shape[0])
    np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-12)


def test_many_krr_reports_per_user_do_not_underflow_and_give_gibus_dense_iterates():
    domain = Integers(low=0, high=5)
    plan = [make("mechanism", "krr", domain, eps=0.5)] * 500  # a tuple's probability is far below 1e-308
    rng = np.random.default_rng(3)
    values = rng.integers(0, 6, size=300)
    reports = np.concatenate([m.sample(values, rng) for m in plan], axis=1)
    obs = Observations.from_reports(domain, [(plan, reports)])
    group = obs.groups[0].canonical()
    log_g = group.log_likelihood()
    assert log_g.max() < -700  # exp would underflow without the per-row rescaling
    h = np.exp(log_g - log_g.max(axis=1, keepdims=True))
    likelihood = Likelihood(obs)
    theta = np.full(6, 1 / 6)
    for _ in range(5):
        nxt, loglik = likelihood.em_step(theta)
        p = h @ theta
        assert loglik == pytest.approx(float(group.counts @ (np.log(p) + log_g.max(axis=1))), rel=1e-12)
        np.testing.assert_allclose(nxt, theta * (h.T @ (group.counts / p)) / group.n, rtol=1e-10)
        theta = nxt


@pytest.mark.parametrize(
    ("name", "params", "width"),
    [
        ("oue", {}, 1),
        ("the", {}, 1),
        ("subset_selection", {}, 1),
        ("olh", {}, 1),
        ("blh", {}, 1),
        ("cms", {"hashes": 3, "buckets": 8}, 1),
        ("krr", {}, 3),  # three reports per user: named_values_likelihood
    ],
)
def test_exact_rows_are_the_operator_applied_to_identity_columns(name, params, width):
    """What a sampled Newton Hessian reads (``rows``) is exactly what the operator's products give."""
    rng = np.random.default_rng(7)
    domain = ldpsim.Integers(low=0, high=20)
    mech = ldpsim.get_registry().create("mechanism", name, domain, eps=1.2, **params)
    plan = (mech,) * width
    values = rng.integers(0, 21, 300)
    reports = np.concatenate([np.asarray(mech.sample(values, rng)).reshape(300, -1) for _ in plan], axis=1)
    lik = ldpsim.Likelihood(ldpsim.Observations.from_reports(domain, [(plan, reports)]))
    index = np.array([0, 5, 2, lik.H.shape[0] - 1])
    np.testing.assert_allclose(lik.H.rows(index), (lik.H @ np.eye(21))[index], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("clamp", [True, False])
def test_a_convolutions_rows_restricted_to_some_columns_are_those_columns_of_its_whole_rows(clamp):
    """The active set reads ``H[:, S]`` alone: every entry computed as in the whole rows, so equal to the bit."""
    rng = np.random.default_rng(3)
    kernel = rng.random((7, 9)) + 0.01
    shape = (5, 6)
    outputs = np.column_stack([rng.integers(0, 4, 40), rng.integers(0, 6, 40)])
    _, op = ldpsim.convolution_likelihood(
        kernel, shape, outputs, start=(1, 0), window=(4, 6), clamp=clamp, column_scale=rng.random(30) + 0.5
    )
    index = np.array([3, 0, 17, 39, 5])
    columns = np.array([29, 0, 7, 8, 15])
    whole = op.rows(index)
    np.testing.assert_array_equal(op.rows(index, columns), whole[:, columns])
    np.testing.assert_array_equal(exact_block(op, index, columns), whole[:, columns])
    np.testing.assert_array_equal(exact_block(op, index, columns, np.float32), whole[:, columns].astype(np.float32))


def test_exact_blocks_of_dense_and_row_reading_operators():
    """Without ``rows_take_columns`` an operator's whole rows are read and cut; without rows there is no block."""
    from scipy.sparse.linalg import aslinearoperator

    dense = np.arange(24.0).reshape(4, 6)
    index, columns = np.array([2, 0]), np.array([5, 1, 1])
    np.testing.assert_array_equal(exact_block(dense, index, columns), dense[np.ix_(index, columns)])
    op = ldpsim.with_exact_rows(aslinearoperator(dense), lambda rows: dense[rows])
    np.testing.assert_array_equal(exact_block(op, index, columns), dense[np.ix_(index, columns)])
    assert exact_block(aslinearoperator(dense), index, columns) is None


@given(
    st.integers(2, 7),
    st.integers(1, 6),
    st.integers(0, 2),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=60, deadline=None)
def test_a_convolutions_local_minima_are_the_cells_smallest_within_the_radius(rows, cols, radius, seed):
    """Each flagged value is at most every value within ``radius`` cells along both axes of its grid, and every
    such value is flagged (brute force over the neighbourhoods; ties included, infinite cells too)."""
    rng = np.random.default_rng(seed)
    _, op = ldpsim.convolution_likelihood(np.ones((3, 3)), (rows, cols), np.array([[0, 0]]))
    field = rng.integers(0, 4, rows * cols).astype(float)  # few levels: ties are common
    field[rng.random(field.size) < 0.3] = np.inf
    grid = field.reshape(rows, cols)
    expected = [
        grid[i, j] <= grid[max(0, i - radius) : i + radius + 1, max(0, j - radius) : j + radius + 1].min()
        for i in range(rows)
        for j in range(cols)
    ]
    np.testing.assert_array_equal(op.local_minima(field, radius), expected)


@given(
    st.tuples(st.integers(1, 5), st.integers(1, 5)),
    st.tuples(st.integers(0, 3), st.integers(0, 3)),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=80, deadline=None)
def test_a_convolutions_exact_entries_are_the_definitions_sums(shape, halves, clamp, scaled, seed):
    """Every entry of ``rows`` (whole or some columns) is ``s_x * sum of kernel[o] over the offsets o with
    clamp(x + o) = z``, summed offset by offset here: kernels shorter and longer than the grid, windows of every
    width (1 included), reports on every edge, with and without clamping (then offsets that leave the window
    reach no report) and column scales."""
    rng = np.random.default_rng(seed)
    kernel = rng.random(tuple(2 * h + 1 for h in halves)) + 0.01
    start = tuple(int(rng.integers(0, n)) for n in shape)
    window = tuple(int(rng.integers(1, n - s + 1)) for n, s in zip(shape, start))
    outputs = np.column_stack([rng.integers(0, w, 12) for w in window])
    column_scale = rng.uniform(0.5, 2.0, math.prod(shape)) if scaled else None
    _, op = convolution_likelihood(
        kernel, shape, outputs, start=start, window=window, clamp=clamp, column_scale=column_scale
    )
    expected = np.zeros((outputs.shape[0], math.prod(shape)))
    cells = list(np.ndindex(*shape))
    for x, cell in enumerate(cells):
        for offset in np.ndindex(*kernel.shape):
            z = [c + o - h for c, o, h in zip(cell, offset, halves)]
            if clamp:
                z = [min(max(v, s), s + w - 1) for v, s, w in zip(z, start, window)]
            hit = np.all(outputs + np.asarray(start) == z, axis=1)
            expected[hit, x] += kernel[offset] * (1.0 if column_scale is None else column_scale[x])
    expected *= op.row_scale[:, None]
    np.testing.assert_allclose(op.rows(np.arange(12)), expected, rtol=1e-12, atol=1e-300)
    columns = rng.permutation(len(cells))[: max(1, len(cells) // 2)]
    np.testing.assert_allclose(op.rows(np.arange(12), columns), expected[:, columns], rtol=1e-12, atol=1e-300)
