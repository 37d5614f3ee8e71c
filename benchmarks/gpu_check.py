"""Issue 32 on a GPU machine: the backend seam's tests on the card, then the issue's benchmark, as one table.

    python benchmarks/gpu_check.py                 # tests, then every case; a few minutes on an H100/H200
    python benchmarks/gpu_check.py --skip-tests    # the benchmark alone
    python benchmarks/gpu_check.py --case oue      # one case (oue, planar512, planar1024, float32)
    python benchmarks/gpu_check.py --rehearse      # no GPU: the same code on numpy's array API path, sizes / 10

Needs CuPy (``pip install ldpsim[gpu]``) or PyTorch with CUDA, and array-api-compat; no network. Each case runs in
its own process under a time limit (``--limit``, seconds), so one that runs long costs its row, not the rest.

Cases (the issue's targets, on an H100 or H200):

- ``oue``: OUE, k = 1024, n = 10^6 users, eps = 1: the certified ``mle`` (Newton, KKT tol 1e-9 here) on the GPU
  after the reports are on the device (their move is timed apart), against the same machine's CPU path
  (numpy, all its cores); target under 0.5 s and at least 20x faster; the estimates' log-likelihoods within
  the two certificates' gaps.
- ``planar512``: planar geometric on 512 x 512 cells, eps = 0.25, 10^6 users: the ``mle`` estimator (likely
  subset, Newton; KKT tol 1e-6, its default); target under 5 s.
- ``planar1024``: the same on 1024 x 1024: feasible (it finishes, certified).
- ``float32``: what float32 passes cost: GIBU with SQUAREM on the OUE problem, the float64 certificate reached in
  float64 and in float32 passes (2,000 passes at most).

A measurement, not a test: it prints, it asserts nothing but the certificates it reports.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASES = ("oue", "planar512", "planar1024", "float32")


def _card() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "no nvidia-smi"
    except (OSError, subprocess.TimeoutExpired):
        return "no nvidia-smi"


#: a rehearsal on a machine without a GPU (``--rehearse``): the array API path on numpy, at a tenth of the sizes
REHEARSE = {"on": False}


def _gpu_backend():
    import ldpsim
    from ldpsim.estimation.backend import from_namespace

    return from_namespace(np) if REHEARSE["on"] else ldpsim.resolve_backend("auto")


def _scaled(count: int) -> int:
    return max(1, count // 10) if REHEARSE["on"] else count


def _timed(fn, backend=None):
    if backend is not None:
        backend.synchronize()
    start = time.perf_counter()
    result = fn()
    if backend is not None:
        backend.synchronize()
    return time.perf_counter() - start, result


def case_oue() -> dict:
    import ldpsim
    from ldpsim.estimation.device import on_device

    gpu = _gpu_backend()
    if gpu.native:
        return {"case": "oue", "error": "no GPU backend usable"}
    rng = np.random.default_rng(32)
    k, n = _scaled(1024), _scaled(1_000_000)
    domain = ldpsim.Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", "oue", domain, eps=1.0)
    values = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.5)))
    obs = ldpsim.Observations.from_reports(domain, [(mech, mech.sample(values, rng))])
    lik = ldpsim.Likelihood(obs)
    moved, _ = _timed(lambda: on_device(lik, gpu), gpu)
    tol = 1e-9
    ldpsim.newton_mle(lik, tol=tol, backend=gpu)  # warm-up: kernels compiled, plans made
    t_gpu, on_gpu = _timed(lambda: ldpsim.newton_mle(lik, tol=tol, backend=gpu), gpu)
    t_cpu, on_cpu = _timed(lambda: ldpsim.newton_mle(lik, tol=tol))
    bound = 2 * lik.n * math.log1p(tol)
    return {
        "case": f"OUE k={k} n={n} distinct={lik.H.shape[0]}",
        "to device s": round(moved, 3),
        "gpu s": round(t_gpu, 3),
        "cpu s": round(t_cpu, 3),
        "speed-up": round(t_cpu / t_gpu, 1),
        "gpu kkt": on_gpu.kkt,
        "cpu kkt": on_cpu.kkt,
        "L gpu - cpu": on_gpu.loglik - on_cpu.loglik,
        "within gaps": abs(on_gpu.loglik - on_cpu.loglik) <= bound,
        "targets": "gpu < 0.5 s, >= 20x",
    }


def case_float32() -> dict:
    """What float32 passes cost in accuracy: GIBU with SQUAREM (2,000 passes at most) on OUE, KKT 1e-9 asked."""
    import ldpsim
    from ldpsim.estimation.backend import Backend

    gpu = _gpu_backend()
    if gpu.native:
        return {"case": "float32", "error": "no GPU backend usable"}
    single = Backend(gpu.name, gpu.xp, gpu.device, "float32")
    rng = np.random.default_rng(33)
    k, n = _scaled(1024), _scaled(1_000_000)
    domain = ldpsim.Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", "oue", domain, eps=1.0)
    values = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.5)))
    lik = ldpsim.Likelihood(ldpsim.Observations.from_reports(domain, [(mech, mech.sample(values, rng))]))
    row = {"case": f"float32 passes, OUE k={k} n={n}"}
    for label, backend in (("float64", gpu), ("float32", single)):
        t, result = _timed(
            lambda b=backend: ldpsim.gibu(lik, stop="kkt", tol=1e-9, accelerate="squarem", max_iter=2_000, backend=b),
            backend,
        )
        row[f"{label} s"] = round(t, 3)
        row[f"{label} passes"] = result.iterations + 1
        row[f"{label} kkt"] = result.kkt  # float64's certificate in both
    return row


def _planar(side: int) -> dict:
    import ldpsim

    gpu = _gpu_backend()
    if gpu.native:
        return {"case": f"planar {side}", "error": "no GPU backend usable"}
    rng = np.random.default_rng(side)
    target = "gpu < 5 s" if side == 512 else "feasible"
    side = _scaled(side)
    domain = ldpsim.Grid(rows=side, cols=side, cell=1.0)
    registry = ldpsim.get_registry()
    mech = registry.create("mechanism", "planar-geometric", domain, eps=0.25)
    # users clustered in a few hundred hot spots, as check-ins are
    centres = rng.choice(domain.size, 300)
    weights = np.zeros(domain.size)
    np.add.at(weights, centres, rng.dirichlet(np.ones(centres.size)))
    weights /= weights.sum()
    values = rng.choice(domain.size, _scaled(1_000_000), p=weights)
    obs = ldpsim.Observations.from_reports(domain, [(mech, mech.sample(values, rng))])
    mle = registry.create("estimator", "mle")
    t_gpu, est = _timed(lambda: mle.estimate(obs, backend=gpu), gpu)
    return {
        "case": f"planar geometric {side}x{side} eps=0.25 n={values.size}",
        "gpu s": round(t_gpu, 2),
        "gpu kkt": est.kkt,
        "converged": bool(est.converged),
        "targets": target,
    }


def case_planar512() -> dict:
    return _planar(512)


def case_planar1024() -> dict:
    return _planar(1024)


def _run_case(name: str, limit: float) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--case", name, "--json", *(["--rehearse"] if REHEARSE["on"] else [])],
            capture_output=True,
            text=True,
            timeout=limit,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return {"case": name, "error": f"over the {limit:.0f} s limit"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"case": name, "error": f"exit {done.returncode}: {tail[0][:200]}"}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--limit", type=float, default=240.0, help="seconds per case")
    parser.add_argument("--rehearse", action="store_true", help="no GPU: numpy's array API path, sizes / 10")
    args = parser.parse_args()
    REHEARSE["on"] = args.rehearse
    if args.case:
        result = globals()[f"case_{args.case}"]()
        print(json.dumps(result, default=float) if args.json else result)
        return
    import ldpsim

    print(f"card: {_card()}; python {platform.python_version()}; ldpsim {ldpsim.__version__}")
    for module in ("cupy", "torch", "jax", "array_api_compat"):
        try:
            print(f"  {module} {__import__(module).__version__}")
        except ImportError:
            print(f"  {module}: not installed")
    print(f"  backend auto -> {ldpsim.resolve_backend('auto')!r}")
    if not args.skip_tests:
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/test_backend.py", "-q", "-p", "no:cacheprovider", "-rs"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        said = (tests.stdout.strip() or tests.stderr.strip() or "no output").splitlines()
        print("tests/test_backend.py on this machine:", said[-1])
        for line in said:
            if line.startswith(("SKIPPED", "FAILED", "ERROR")):
                print("  " + line)
    rows = [_run_case(name, args.limit) for name in CASES if not (args.rehearse and name == "planar1024")]
    print("| case | measured |")
    print("| --- | --- |")
    for row in rows:
        shown = [f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items() if k != "case"]
        print(f"| {row['case']} | {'; '.join(shown)} |")


if __name__ == "__main__":
    main()
