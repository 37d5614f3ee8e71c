"""The exact MLE of OUE and OLH (or other oracles) end to end at k = 1024, n = 10^6, eps = 1, phase by phase.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_oracle_mle.py [--only oue --only olh ...] [--users 1000000]
    # --only also takes the, subset_selection, blh, cms, rappor

Issue 16's target: the exact MLE (relative KKT < 1e-6) of 10^6 OUE or OLH reports in under 10 s.
Each oracle runs once from its users' values (Zipf 1.1, seeded): simulate the reports, group them
(``Observations.from_reports``), build the whole-report likelihood (``Likelihood.of``: for OLH
this hashes every (report, value) pair), then ``mle`` to KKT 1e-6; "total" is their sum. "pass"
is one ``H @ theta`` and one ``H.T @ w`` on that likelihood, timed separately (best of 3). To
compare trees, run the same command with another checkout first on PYTHONPATH (its ``ldpsim``,
and its plugins through a directory holding a ``ldpsim_plugins`` link to its ``plugins``). A
measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from timing import best  # benchmarks/timing.py: scripts run from benchmarks/

import ldpsim
from ldpsim import Integers, Likelihood, Observations

ORACLES = ("oue", "olh")
#: the other oracles whose likelihood reads its rows (the sampled Hessian), on request with --only
OTHERS = ("the", "subset_selection", "blh", "cms", "rappor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=ORACLES + OTHERS, action="append")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--values", type=int, default=1024)
    args = parser.parse_args()
    registry = ldpsim.get_registry()
    k, n = args.values, args.users
    domain = Integers(low=0, high=k - 1)
    p = 1 / np.arange(1, k + 1) ** 1.1
    print(f"ldpsim from {ldpsim.__file__}; k = {k}, n = {n:,}, eps = 1, Zipf 1.1, KKT 1e-6\n")
    columns = ["oracle", "simulate s", "group s", "likelihood s", "pass s (H theta + H^T w)", "mle s", "passes"]
    columns += ["KKT", "zeros", "total s"]
    print("| " + " | ".join(columns) + " |")
    print("|" + " --- |" * len(columns))
    for name in args.only or ORACLES:
        run(registry, name, domain, p / p.sum(), 1_000)  # imports and first calls, untimed
        phases, forward, backward, est = run(registry, name, domain, p / p.sum(), n)
        print(
            f"| {name} | {phases[0]:.2f} | {phases[1]:.2f} | {phases[2]:.2f} | {forward:.3f} + {backward:.3f} | "
            f"{phases[3]:.2f} | {est.iterations} | {est.kkt:.1e} | {int(np.sum(est.distribution == 0))} |"
            f" {sum(phases):.2f} |",
            flush=True,
        )


def run(registry, name, domain, p, n):
    """Seconds of each phase, of H theta and H^T w, and the estimate."""
    rng = np.random.default_rng(16)
    mech = registry.create("mechanism", name, domain, eps=1.0)
    values = rng.choice(domain.size, n, p=p)
    phases = []
    start = time.perf_counter()
    reports = mech.sample(values, rng)
    phases.append(time.perf_counter() - start)
    start = time.perf_counter()
    obs = Observations.from_reports(domain, [(mech, reports)])
    phases.append(time.perf_counter() - start)
    start = time.perf_counter()
    likelihood = Likelihood.of(obs, obs.likely_subset())
    phases.append(time.perf_counter() - start)
    theta, w = np.full(likelihood.size, 1.0 / likelihood.size), np.ones(likelihood.H.shape[0])
    forward, _ = best(lambda: likelihood.H @ theta, 3)
    backward, _ = best(lambda: likelihood.H.T @ w, 3)
    start = time.perf_counter()
    est = registry.create("estimator", "mle", tol=1e-6).estimate(obs)  # reuses the cached likelihood
    phases.append(time.perf_counter() - start)
    return phases, forward, backward, est


if __name__ == "__main__":
    main()
