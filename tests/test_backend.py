"""The array-backend seam (ldpsim/estimation/backend.py, device.py): the estimation passes on any array API module.

CI has no GPU, so the code a GPU runs is run here on the CPU through the same lines: numpy itself as the array
module, and array_api_strict, which refuses whatever the standard does not define (numpy scalars mixed in,
methods the standard lacks, in-place tricks). Estimates through the seam are compared with ldpsim's native numpy
path by the certificate: both certified to a relative KKT violation below 1e-9, so each is within n log(1 + 1e-9)
of the maximum and their log-likelihoods differ by at most twice that.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest
from helpers import make, matrix_mechanism

import ldpsim
from ldpsim import Likelihood, Observations, ParameterError, gibu, newton_mle
from ldpsim.base.threads import one_blas_thread
from ldpsim.estimation import backend as backends
from ldpsim.estimation.device import on_device
from ldpsim.estimation.operators import convolution_likelihood

xps = pytest.importorskip("array_api_strict", reason="array-api-strict is in the test extra: pip install -e .[test]")

TOL = 1e-9
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """As in a run: threaded BLAS on a loaded 2-core machine made a 552-value Cholesky take 0.7 s instead of 0.02."""
    with one_blas_thread():
        yield


def _gpu_usable(name):
    try:
        backends.resolve_backend(name)
    except ParameterError:
        return False
    return True


def _seams():
    """The array API path with numpy as the module, and with array_api_strict; on a GPU machine (benchmarks/
    gpu_check.py runs this file there) CuPy's and PyTorch's too."""
    found = [backends.from_namespace(np), backends.from_namespace(xps)]
    return found + [backends.resolve_backend(name) for name in ("cupy", "torch") if _gpu_usable(name)]


SEAMS = pytest.mark.parametrize("seam", _seams(), ids=lambda b: b.name)


def _close_to_native(native, through, n):
    """Both certified; the log-likelihoods within the two gaps; the same (unique) MLE to the certificate's accuracy."""
    assert native.kkt < TOL and through.kkt < TOL
    assert abs(native.loglik - through.loglik) <= 2 * n * math.log1p(TOL) + 1e-9 * abs(native.loglik)
    assert isinstance(through.theta, np.ndarray) and through.theta.dtype == np.float64
    np.testing.assert_allclose(through.theta.sum(), 1.0, rtol=1e-12)


def _dense_problem(seed=3, k=12, n=4_000):
    rng = np.random.default_rng(seed)
    a = rng.dirichlet(np.full(k, 0.7), size=k)  # row x: P(. | x), a generic mechanism: a dense H
    mech = matrix_mechanism(a)
    counts = rng.multinomial(n, rng.dirichlet(np.ones(k)) @ a)
    obs = Observations.from_counts(mech.domain, mech, np.arange(k), counts)
    lik = Likelihood(obs)
    assert isinstance(lik.H, np.ndarray)
    return lik


def _grid_problem(rows, cols, eps, users, seed=5):
    rng = np.random.default_rng(seed)
    domain = ldpsim.Grid(rows=rows, cols=cols, cell=1.0)
    mech = make("mechanism", "planar-geometric", domain, eps=eps)
    values = rng.choice(domain.size, users, p=rng.dirichlet(np.full(domain.size, 0.3)))
    lik = Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))
    assert type(lik.H).__name__ == "ConvolutionOperator"
    return lik


def _oue_problem(k=40, users=3_000, seed=7):
    rng = np.random.default_rng(seed)
    domain = ldpsim.Integers(low=0, high=k - 1)
    mech = make("mechanism", "oue", domain, eps=1.0)
    values = rng.choice(k, users, p=rng.dirichlet(np.ones(k)))
    return Likelihood(Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))


# ----------------------------------------------------------------------------- resolution
def test_unknown_names_and_precisions_are_one_line_errors_naming_the_choices():
    with pytest.raises(ParameterError, match="backend: unknown backend 'gpu'; use one of numpy, cupy, torch, auto"):
        ldpsim.resolve_backend("gpu")
    with pytest.raises(ParameterError, match="precision: unknown precision 'float16'"):
        ldpsim.resolve_backend("numpy", "float16")


@pytest.mark.parametrize("name", ["cupy", "torch"])
def test_a_gpu_where_none_is_usable_is_one_line_naming_the_fix_never_a_cpu_run(name):
    if _gpu_usable(name):
        pytest.skip(f"{name} finds a GPU here: nothing to refuse")
    with pytest.raises(ParameterError) as caught:
        ldpsim.resolve_backend(name)
    text = str(caught.value)
    assert text.startswith(f"backend: '{name}'") and "\n" not in text
    assert "ldpsim[gpu]" in text and 'backend = "numpy"' in text


def test_auto_takes_a_gpu_where_there_is_one_and_says_numpy_otherwise():
    chosen = ldpsim.resolve_backend("auto")
    if not (_gpu_usable("cupy") or _gpu_usable("torch")):
        assert chosen is ldpsim.resolve_backend("numpy") and chosen.native


def test_the_default_is_the_native_numpy_path_and_the_context_restores_it():
    assert backends.as_backend(None).native and backends.as_backend("numpy").native
    seam = backends.from_namespace(xps)
    with ldpsim.using_backend(seam) as active:
        assert active is seam and backends.as_backend(None) is seam
        with ldpsim.using_backend(None) as kept:
            assert kept is seam
    assert backends.as_backend(None).native
    assert not backends.from_namespace(np).native  # numpy through the array API path is not the native one
    assert not ldpsim.resolve_backend("numpy", "float32").native


# ----------------------------------------------------------------------------- products
@SEAMS
def test_dense_and_pattern_products_on_the_device_equal_the_hosts(seam, rng):
    for lik in (_dense_problem(), _oue_problem()):
        device = on_device(lik, seam)
        theta, w = rng.dirichlet(np.ones(lik.size)), rng.random(lik.H.shape[0])
        np.testing.assert_allclose(device.host_matvec(theta), np.asarray(lik.H @ theta).ravel(), rtol=1e-13)
        np.testing.assert_allclose(device.host_rmatvec(w), np.asarray(lik.H.T @ w).ravel(), rtol=1e-13)
        scale = rng.random(lik.H.shape[0])
        rows = np.asarray(lik.H.rows(np.arange(lik.H.shape[0]))) if hasattr(lik.H, "rows") else lik.H
        a = rows * scale[:, None]
        gram = device.gram(scale)
        assert gram is not None
        np.testing.assert_allclose(gram, a.T @ a, rtol=1e-12)


@SEAMS
@pytest.mark.parametrize(
    "shape, clamp, scaled",
    [((37,), True, False), ((9, 14), True, True), ((9, 14), False, False), ((1, 6), True, False)],
)
def test_convolution_products_on_the_device_equal_the_fft_operators(seam, shape, clamp, scaled, rng):
    """Against the host operator (its own FFT, folds by reduceat and bincount): a window inside the grid, column
    scales, no clamping (positions beyond the kernel), a window one cell wide on an axis."""
    kernel = rng.random(tuple(2 * s + 1 for s in shape)) + 0.01
    start = tuple(min(1, s - 1) for s in shape)
    window = tuple(max(1, s - 2) for s in shape)
    cells = np.stack([rng.integers(0, w, 300) for w in window], axis=1)
    outputs = np.unique(cells, axis=0)  # distinct reports, as a likelihood's are
    column_scale = rng.random(math.prod(shape)) + 0.5 if scaled else None
    _, op = convolution_likelihood(
        kernel, shape, outputs, start=start, window=window, clamp=clamp, column_scale=column_scale
    )
    device = op.on_device(seam)
    theta, w = rng.dirichlet(np.ones(op.shape[1])), rng.random(op.shape[0])
    theta[rng.random(theta.size) < 0.5] = 0.0  # zeros: the accuracy guard's exact entries
    host = np.asarray(op @ theta).ravel()
    np.testing.assert_allclose(seam.to_numpy(device.matvec(seam.to_device(theta))), host, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(
        seam.to_numpy(device.rmatvec(seam.to_device(w))), np.asarray(op.T @ w).ravel(), rtol=1e-9, atol=1e-14
    )


def test_a_device_copy_is_made_once_per_likelihood_and_dies_with_it():
    seam = backends.from_namespace(xps)
    lik = _dense_problem()
    first = on_device(lik, seam)
    assert on_device(lik, seam) is first
    gone = weakref.ref(first)
    del lik, first
    assert gone() is None


# ----------------------------------------------------------------------------- estimates
@SEAMS
def test_gibu_and_newton_on_a_dense_likelihood_equal_the_native_path_to_the_certificate(seam):
    lik = _dense_problem()
    for solve in (
        lambda b: gibu(lik, stop="kkt", tol=TOL, accelerate="squarem", backend=b),
        lambda b: gibu(lik, stop="kkt", tol=TOL, backend=b, max_iter=200_000),
        lambda b: newton_mle(lik, tol=TOL, backend=b),
    ):
        _close_to_native(solve("numpy"), solve(seam), lik.n)


@SEAMS
def test_gibu_on_a_planar_convolution_equals_the_native_path_to_the_certificate(seam):
    lik = _grid_problem(24, 24, eps=2.0, users=800)  # GIBU passes over the FFT operator itself
    em = gibu(lik, stop="kkt", tol=TOL, accelerate="squarem", backend=seam, max_iter=100_000)
    _close_to_native(gibu(lik, stop="kkt", tol=TOL, accelerate="squarem", max_iter=100_000), em, lik.n)
    assert lik.certificate(lik.gradient(em.theta))[0] < TOL * 1.01  # certified on the host operator too


@pytest.mark.parametrize("seam", [s for s in _seams() if s.xp is not np], ids=lambda b: b.name)
def test_newton_on_a_planar_convolution_equals_the_native_path_to_the_certificate(seam):
    """Its products through the FFT on the device, SQUAREM's passes over the exact dense rows there, the Hessian
    on the host (a convolution has no dense rows on the device)."""
    lik = _grid_problem(23, 24, eps=1.0, users=600)
    _close_to_native(newton_mle(lik, tol=TOL), newton_mle(lik, tol=TOL, backend=seam), lik.n)


@SEAMS
def test_newton_with_a_sampled_hessian_of_a_two_valued_operator_equals_the_native_path(seam):
    lik = _oue_problem()
    assert not isinstance(lik.H, np.ndarray) and lik.H.min_entry > 0
    _close_to_native(newton_mle(lik, tol=TOL), newton_mle(lik, tol=TOL, backend=seam), lik.n)
    _close_to_native(
        newton_mle(lik, tol=TOL, hessian="sampled"), newton_mle(lik, tol=TOL, hessian="sampled", backend=seam), lik.n
    )


def test_the_estimator_api_takes_a_backend_and_returns_numpy_arrays():
    lik = _dense_problem()
    obs = lik.observations
    mle = make("estimator", "mle", tol=TOL)
    native = mle.estimate(obs)
    assert mle.estimate(obs, backend="numpy").distribution.tobytes() == native.distribution.tobytes()
    through = mle.estimate(obs, backend=backends.from_namespace(xps))
    assert isinstance(through.distribution, np.ndarray) and through.kkt < TOL
    assert abs(through.loglik - native.loglik) <= 2 * lik.n * math.log1p(TOL) + 1e-9 * abs(native.loglik)


def test_float32_passes_of_a_two_valued_likelihood_return_a_float64_certificate():
    """float32 is exact for the 0/1 pattern but rounds theta and the products (~1e-7 relative): the certificate
    the estimate carries is recomputed in float64 from it, so it never claims what float32 cannot show."""
    lik = _oue_problem()
    single = ldpsim.resolve_backend("numpy", "float32")
    result = gibu(lik, stop="kkt", tol=1e-6, accelerate="squarem", backend=single, max_iter=3_000)
    loglik, kkt, gap = lik.certify(result.theta)
    assert (result.loglik, result.kkt, result.gap) == (loglik, kkt, gap)
    assert result.converged == (kkt < 1e-6)
    native = gibu(lik, stop="kkt", tol=TOL, accelerate="squarem")
    assert native.loglik - result.loglik <= lik.n * math.log1p(kkt) + 1e-9  # the certificate's own bound
    assert kkt < 1e-4  # float32's rounding limits how close it gets, not whether it gets close
    with pytest.raises(ParameterError, match="precision: float32 passes need a two-valued likelihood"):
        gibu(_dense_problem(), backend=single)


def test_torch_on_the_cpu_runs_the_same_path():
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("array_api_compat") is None:
        pytest.skip("torch (with array-api-compat) is not installed: ldpsim does not depend on it")
    import array_api_compat.torch as xpt

    seam = backends.Backend("torch", xpt, "cpu")
    lik = _grid_problem(23, 24, eps=1.0, users=600)
    _close_to_native(newton_mle(lik, tol=TOL), newton_mle(lik, tol=TOL, backend=seam), lik.n)


# ----------------------------------------------------------------------------- runs
SCENARIO = """
name = "seam"
seed = 11
users = 3000
repetitions = 1
estimators = ["mle"]
metrics = ["tv"]
{extra}
[domain]
kind = "integers"
low = 0
high = 23

[dataset]
name = "binomial"
p = 0.4

[cohorts.everyone]
share = 1
reports = [{{ mechanism = "oue", eps = 1.0 }}]
"""


def test_a_scenario_selects_the_backend_and_the_numpy_default_is_bit_identical(tmp_path):
    runs = {}
    for label, extra in [("none", ""), ("numpy", 'backend = "numpy"'), ("single", 'precision = "float32"')]:
        path = tmp_path / f"{label}.toml"
        path.write_text(SCENARIO.format(extra=extra))
        runs[label] = ldpsim.run_scenario(path, output=tmp_path / f"{label}.nc")
    default, named, single = runs["none"], runs["numpy"], runs["single"]
    for name in map(str, default.data_vars):
        if "seconds" not in name and "time" not in name:
            assert default[name].values.tobytes() == named[name].values.tobytes(), name
    assert float(single["kkt"].values.max()) < 1e-4  # float64's certificate of float32 passes (see above)
    np.testing.assert_allclose(single["estimate"].values, default["estimate"].values, atol=1e-3)


def test_the_command_line_refuses_a_gpu_it_cannot_use_in_one_line_with_exit_2(tmp_path):
    if _gpu_usable("cupy"):
        pytest.skip("cupy finds a GPU here: the run would go ahead")
    path = tmp_path / "seam.toml"
    path.write_text(SCENARIO.format(extra=""))
    exe = Path(sys.executable).with_name("ldpsim")
    done = subprocess.run(
        [str(exe), "run", str(path), "--backend", "cupy"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "backend: 'cupy'" in errors[0] and 'backend = "numpy"' in errors[0]
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seam.toml"]
