"""RAPPOR as deployed over rounds: simulate the memoized Bloom-filter reports, estimate by whole-sequence MLE.

    python benchmarks/bench_rappor_deployed.py [--users 100000] [--values 100] [--rounds 10]
        [--bits 128] [--hashes 2] [--cohorts 64] [--seed 1]

One population (values from a binomial(k - 1, 0.3)) reports through ``rappor-deployed`` with the
paper's f = 0.5, p = 0.5, q = 0.75. ldpsim simulates every user's whole sequence once and
estimates by ``mle`` (GIBU to a KKT certificate) from each prefix of the sequences, rounds 1..t,
for every t. Peak memory is the process's maximum resident set. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time

import numpy as np
from threadpoolctl import threadpool_limits

import ldpsim
from ldpsim import Integers, Observations
from ldpsim.estimation.observations import unique_rows


def tv(a, b) -> float:
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--values", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--bits", type=int, default=128)
    parser.add_argument("--hashes", type=int, default=2)
    parser.add_argument("--cohorts", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    n, k, tau = args.users, args.values, args.rounds
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create(
        "mechanism", "rappor-deployed", domain, bits=args.bits, hashes=args.hashes, cohorts=args.cohorts, rounds=tau
    )
    mle = ldpsim.get_registry().create("estimator", "mle")
    seeds = np.random.SeedSequence(args.seed).spawn(2)
    pmf = np.bincount(np.random.default_rng(seeds[0]).binomial(k - 1, 0.3, size=n), minlength=k)
    truth = pmf / n
    values = np.repeat(np.arange(k), pmf)

    start = time.perf_counter()
    reports = mech.sample(values, np.random.default_rng(seeds[1]))
    simulate = time.perf_counter() - start
    print(
        f"{n:,} users, k = {k}, RAPPOR m = {args.bits}, h = {args.hashes}, {args.cohorts} cohorts,"
        f" f = 0.5, p = 0.5, q = 0.75, {tau} rounds"
    )
    print(f"{platform.processor() or platform.machine()}, numpy {np.__version__}")
    print(f"levels: {mech.privacy_over_time}")
    print()
    print("| after round t | mle seconds (grouping + estimate) | distinct sequences | passes | TV |")
    print("| --- | --- | --- | --- | --- |")
    total = simulate
    for t in range(1, tau + 1):
        start = time.perf_counter()
        prefix = mech.prefix(t)
        uniq, counts = unique_rows(reports[:, : t * mech.round_width])
        result = mle.estimate(Observations.from_counts(domain, prefix, uniq, counts))
        seconds = time.perf_counter() - start
        total += seconds
        print(
            f"| {t} | {seconds:.2f} | {uniq.shape[0]:,} | {result.iterations} | {tv(result.distribution, truth):.4f} |"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print()
    print(
        f"simulate {simulate:.2f} s; simulate + mle after each of the {tau} rounds {total:.1f} s;"
        f" peak memory {peak:.2f} GB"
    )


if __name__ == "__main__":
    with threadpool_limits(limits=1, user_api="blas"):  # as ldpsim's runner does: contended BLAS threads cost more
        main()
