"""The joint MLE of range-query protocols (hh, haar-hrr) over 2^20 leaves and 10^7 users, phase by phase.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ranges.py [--users 10000000] [--bits 20] [--only haar-hrr ...]

Issue 29's target: the joint GIBU of 10^7 users on 2^20 leaves in under 30 s. Each protocol runs once
from its users' values (a discretised normal over the leaves, seeded): simulate the reports, group them
(``Observations.from_reports``: at most ``2 |X|`` distinct Haar reports, ``sum_l b^l`` for hh over k-RR),
build the level likelihood (``Likelihood.of``), then ``mle`` to its KKT tolerance (1e-6 relative) and,
for comparison, the published pipeline ``range-ci``. "pass" is one ``H @ theta`` and one ``H.T @ w``
(best of 3). Times are the process's CPU seconds (``time.process_time``; one thread: with
``OPENBLAS_NUM_THREADS=1`` the script runs single-threaded), which on a shared machine stand for the
wall time an unloaded core would take; the last column is the wall time of the whole protocol. The
range MSE is over 200 random ranges of 10% of the domain (``range-mse``). A measurement, not a test:
nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpsim
from ldpsim import Integers, Likelihood, Observations

PROTOCOLS = {"haar-hrr": {}, "hh-b4": {"branching": 4}, "hh-b32": {"branching": 32}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=tuple(PROTOCOLS), action="append")
    parser.add_argument("--users", type=int, default=10_000_000)
    parser.add_argument("--bits", type=int, default=20)
    args = parser.parse_args()
    registry = ldpsim.get_registry()
    k, n = 1 << args.bits, args.users
    domain = Integers(low=0, high=k - 1)
    print(f"ldpsim from {ldpsim.__file__}; |X| = 2^{args.bits}, n = {n:,}, eps = 1, normal(k/3, k/10), KKT 1e-6\n")
    columns = ["protocol", "simulate s", "group s", "distinct", "likelihood s", "pass s (H theta + H^T w)"]
    columns += ["mle s", "iterations", "KKT", "range-ci s", "MSE@10% mle"]
    columns += ["MSE@10% range-ci", "total mle s", "wall s"]
    print("| " + " | ".join(columns) + " |")
    print("|" + " --- |" * len(columns))
    metric = registry.create("metric", "range-mse", volume=0.1)
    for label in args.only or PROTOCOLS:
        run(registry, label, domain, 10_000, metric)  # imports and first calls, untimed
        wall = time.perf_counter()
        phases, distinct, forward, backward, est, ci, ci_s, truth = run(registry, label, domain, n, metric)
        print(
            f"| {label} | {phases[0]:.2f} | {phases[1]:.2f} | {distinct:,} | {phases[2]:.2f} |"
            f" {forward:.3f} + {backward:.3f} | {phases[3]:.2f} | {est.iterations} | {est.kkt:.1e} | {ci_s:.2f} |"
            f" {metric(est.distribution, truth, domain):.2e} | {metric(ci.distribution, truth, domain):.2e} |"
            f" {sum(phases):.2f} | {time.perf_counter() - wall:.0f} |",
            flush=True,
        )


def cpu_best(fn, repeat):
    """The smallest CPU time of ``repeat`` calls of ``fn`` (benchmarks/timing.py's ``best``, in CPU seconds)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times), None


def run(registry, label, domain, n, metric):
    """Seconds of each phase, the distinct reports, one pass each way, the two estimates and the truth."""
    rng = np.random.default_rng(29)
    name = "hh" if label.startswith("hh") else label
    mech = registry.create("mechanism", name, domain, eps=1.0, **PROTOCOLS[label])
    k = domain.size
    values = np.clip(np.rint(rng.normal(k / 3, k / 10, n)), 0, k - 1).astype(np.int64)
    truth = np.bincount(values, minlength=k) / n
    phases = []
    start = time.process_time()
    reports = mech.sample(values, rng)
    phases.append(time.process_time() - start)
    start = time.process_time()
    obs = Observations.from_reports(domain, [(mech, reports)])
    phases.append(time.process_time() - start)
    start = time.process_time()
    likelihood = Likelihood.of(obs)
    phases.append(time.process_time() - start)
    theta, w = np.full(likelihood.size, 1.0 / likelihood.size), np.ones(likelihood.H.shape[0])
    forward, _ = cpu_best(lambda: likelihood.H @ theta, 3)
    backward, _ = cpu_best(lambda: likelihood.H.T @ w, 3)
    start = time.process_time()
    est = registry.create("estimator", "mle", tol=1e-6).estimate(obs)  # reuses the cached likelihood
    phases.append(time.process_time() - start)
    start = time.process_time()
    ci = registry.create("estimator", "range-ci").estimate(obs)
    ci_s = time.process_time() - start
    return phases, likelihood.H.shape[0], forward, backward, est, ci, ci_s, truth


if __name__ == "__main__":
    main()
