"""The compiled passes of the packed-bit likelihood (issue 31): a pass against the memory floor, `mle`
against numpy's per-bit counting of the same reports, and numba's compile and cache-load time.

    python benchmarks/bench_kernels.py                          # OUE, OLH, subset selection, THE at k = 1024, n = 10^6
    python benchmarks/bench_kernels.py --only oue --repeat 3
    python benchmarks/bench_kernels.py --compile                # numba's first-call compile, then a cached load
    python benchmarks/bench_kernels.py --scale --users 10000000 --only oue   # whole-report `mle` at 10^7 users
    python benchmarks/bench_kernels.py --scale --users 10000000 --only oue --numpy   # the same, numpy's loops

Per oracle: the reports are simulated once (seeded, Zipf 1.1, eps = 1) and grouped; then

* floor: ``np.add.reduce`` over the likelihood's packed buffer (the halfwords a pass reads) viewed as uint64;
* pass: ``H @ theta`` then ``H.T @ (c / p)``, compiled (numba) and numpy's loops ("before");
* count: numpy's per-bit counting of the same packed bits, ``np.unpackbits(...).sum(axis=0)`` (by blocks
  of 10^5 reports, 100 MB at a time);
* mle: the `mle` estimator (KKT 1e-6) from the grouped observations, likelihood construction included,
  compiled and numpy's loops.

Times are the best of ``--repeat`` calls (wall). Run with one BLAS thread (OPENBLAS_NUM_THREADS=1), as
ldpsim's runs do. ``--scale`` reports simulate, group and `mle` seconds (wall and the process's CPU time)
and the peak resident memory of the process (``resource.getrusage``). A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

import ldpsim
from ldpsim import Integers, Observations
from ldpsim.model import bitvectors

ORACLES = ("oue", "olh", "subset_selection", "the")


def best(fn, repeat: int):
    """(shortest wall time, shortest CPU time of this process, last result) of ``repeat`` calls: on a
    shared machine the CPU time of these single-threaded loops is the fairer number."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        c, t = time.process_time(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), result


def simulate(name: str, k: int, n: int, seed: int = 1) -> Observations:
    rng = np.random.default_rng(seed)
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", name, domain, eps=1.0)
    p = 1 / np.arange(1, k + 1) ** 1.1
    values = rng.choice(k, n, p=p / p.sum())
    return Observations.from_reports(domain, [(mech, mech.sample(values, rng))])


def numpy_loops(on: bool) -> None:
    """Run numpy's loops (the reference, "before") or the compiled ones from here on."""
    bitvectors.KERNEL_MIN_HALFWORDS = 1 << 62 if on else 1 << 20


def halves_of(H) -> np.ndarray:
    """The (P, D) uint16 halfwords the packed-bit operator reads (from its H^T w closure)."""
    for cell in H._CustomLinearOperator__rmatvec_impl.__closure__:  # the operator's own buffer
        value = cell.cell_contents
        if isinstance(value, np.ndarray) and value.dtype == np.uint16:
            return value
    raise TypeError("not a packed-bit operator")


def per_bit_counts(halves: np.ndarray, block: int = 100_000) -> np.ndarray:
    raw = halves.T  # (D, P): each report's packed bits
    total = np.zeros(halves.shape[0] * 16, dtype=np.int64)
    for lo in range(0, raw.shape[0], block):
        part = np.ascontiguousarray(raw[lo : lo + block]).view(np.uint8)
        total += np.unpackbits(part, axis=1).sum(axis=0, dtype=np.int64)
    return total


def run_oracle(name: str, k: int, n: int, repeat: int) -> None:
    t0 = time.perf_counter()
    obs = simulate(name, k, n)
    print(f"{name}: simulated and grouped in {time.perf_counter() - t0:.2f} s")
    estimator = ldpsim.get_registry().create("estimator", "mle", tol=1e-6)
    rows = {}
    for label, numpy_on in (("compiled", False), ("numpy", True)):
        numpy_loops(numpy_on)
        likelihood = ldpsim.Likelihood.of(Observations(obs.domain, obs.groups))
        H, counts = likelihood.H, likelihood.counts
        theta = np.full(likelihood.size, 1.0 / likelihood.size)
        H @ theta, H.T @ counts  # warm: numba's cached kernels load here

        def one_pass(H=H, counts=counts, theta=theta):
            p = H @ theta
            return H.T @ (counts / p)

        seconds = best(one_pass, repeat)[:2]
        *mle_seconds, est = best(lambda: estimator.estimate(Observations(obs.domain, obs.groups)), repeat)
        rows[label] = (seconds, mle_seconds, est)
        halves = halves_of(H)
    numpy_loops(False)
    flat = halves.view(np.uint64) if halves.nbytes % 8 == 0 else halves.ravel()[: halves.size // 4 * 4].view(np.uint64)
    floor = best(lambda: np.add.reduce(flat, axis=None), max(repeat, 5))[:2]
    count = best(lambda: per_bit_counts(halves), repeat)[:2]
    (cp, cm, ce), (npp, nm, ne) = rows["compiled"], rows["numpy"]

    def both(pair, unit=1.0, digits=3):  # "wall (CPU)"
        return f"{pair[0] * unit:.{digits}f} ({pair[1] * unit:.{digits}f})"

    print(
        f"  [wall (CPU) s] floor {both(floor, 1e3, 1)} ms ({halves.nbytes / 1e6:.0f} MB) | pass compiled {both(cp)}"
        f" ({cp[0] / floor[0]:.0f}x floor), numpy {both(npp)} | per-bit count {both(count, digits=2)} | mle compiled"
        f" {both(cm, digits=2)} ({ce.iterations} passes, KKT {ce.kkt:.1e}), numpy {both(nm, digits=2)}"
        f" ({ne.iterations}, KKT {ne.kkt:.1e}) | mle / count {cm[0] / count[0]:.2f} ({cm[1] / count[1]:.2f})"
        f" | loglik compiled - numpy {ce.loglik - ne.loglik:+.2e} (gaps {ce.gap:.1e}, {ne.gap:.1e}),"
        f" max |theta diff| {np.max(np.abs(ce.distribution - ne.distribution)):.1e}"
    )


def run_scale(name: str, k: int, n: int) -> None:
    clocks = [(time.perf_counter(), time.process_time())]
    rng = np.random.default_rng(1)
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", name, domain, eps=1.0)
    p = 1 / np.arange(1, k + 1) ** 1.1
    reports = mech.sample(rng.choice(k, n, p=p / p.sum()), rng)
    clocks.append((time.perf_counter(), time.process_time()))
    obs = Observations.from_reports(domain, [(mech, reports)])
    del reports
    clocks.append((time.perf_counter(), time.process_time()))
    est = ldpsim.get_registry().create("estimator", "mle", tol=1e-6).estimate(obs)
    clocks.append((time.perf_counter(), time.process_time()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KB on Linux -> GB
    (sw, sc), (gw, gc), (mw, mc) = (np.subtract(b, a) for a, b in zip(clocks, clocks[1:]))
    print(
        f"{name}, k = {k}, n = {n} [wall (CPU) s]: simulate {sw:.1f} ({sc:.1f}), group {gw:.1f} ({gc:.1f}),"
        f" mle {mw:.1f} ({mc:.1f}) ({est.iterations} passes, KKT {est.kkt:.1e}); peak RSS {peak:.2f} GB"
    )


def run_compile() -> None:
    code = (
        "import time, numpy as np\n"
        "t = time.perf_counter()\n"
        "from ldpsim.model import kernels\n"
        "t1 = time.perf_counter()\n"
        "h = np.zeros((4, 10), np.uint16); kernels.halfword_lookups(h, np.zeros((8, 256)), np.zeros(10))\n"
        "hist = np.zeros((8, 256)); kernels.byte_histograms(h, np.ones(10), hist); kernels.fold_bits(hist)\n"
        "print(f'import numba {t1 - t:.2f} s, first calls {time.perf_counter() - t1:.2f} s')\n"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("compile (empty cache)", "cached load"):
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            print(f"{label}: {out.stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=ORACLES)
    parser.add_argument("--values", type=int, default=1024)
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--scale", action="store_true", help="simulate, group and mle only, with peak memory")
    parser.add_argument("--compile", action="store_true", help="numba's compile and cached-load times")
    parser.add_argument("--numpy", action="store_true", help="with --scale: numpy's loops (the code before)")
    args = parser.parse_args()
    numpy_loops(args.numpy)
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.compile:
        run_compile()
        return
    for name in args.only or ORACLES:
        (run_scale if args.scale else lambda a, b, c: run_oracle(a, b, c, args.repeat))(name, args.values, args.users)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
