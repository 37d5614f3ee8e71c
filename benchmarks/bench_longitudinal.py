"""Memoized L-GRR over rounds: ldpsim's whole-sequence MLE beside multi-freq-ldpy's per-round aggregators.

    pip install multi-freq-ldpy==0.2.5   # optional: the peer rows
    python benchmarks/bench_longitudinal.py [--users 1000000] [--values 100] [--rounds 10]
        [--eps-inf 2] [--eps-1 1] [--seed 1]

One population (values from a binomial(k - 1, 0.3)) reports through L-GRR for --rounds rounds with
the paper's published p2 (``published = true``), so every estimator assumes the protocol that made
the data. ldpsim simulates the memoized sequences once (one permanent response per user, one
vectorized draw per round of all users) and estimates by ``mle`` (GIBU to a KKT certificate) from
each prefix of the sequences, rounds 1..t, for every t. multi-freq-ldpy estimates one round at a
time (L_GRR_Aggregator_MI, L_GRR_Aggregator_IBU, its composite matrix without the (k-2) q1 q2 term):
its round-t estimate and the mean of its estimates of rounds 1..t are shown. Its client redraws
the permanent response at every call (it does not memoize), so it cannot simulate the sequences;
its one-round client is timed on --client-users users and scaled. Peak memory is the process's
maximum resident set. A measurement, not a test.
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


def tv(a, b) -> float:
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--values", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--eps-inf", type=float, default=2.0)
    parser.add_argument("--eps-1", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--client-users", type=int, default=20_000)
    args = parser.parse_args()
    n, k, tau = args.users, args.values, args.rounds
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    mech = registry.create(
        "mechanism", "l-grr", domain, eps_inf=args.eps_inf, eps_1=args.eps_1, rounds=tau, published=True
    )
    mle = registry.create("estimator", "mle")
    seeds = np.random.SeedSequence(args.seed).spawn(2)
    pmf = np.bincount(np.random.default_rng(seeds[0]).binomial(k - 1, 0.3, size=n), minlength=k)
    truth = pmf / n
    values = np.repeat(np.arange(k), pmf)

    start = time.perf_counter()
    reports = mech.sample(values, np.random.default_rng(seeds[1]))
    simulate = time.perf_counter() - start
    observations = Observations.from_reports(domain, [(mech, reports)])  # groups the distinct sequences once
    grouped = time.perf_counter() - start
    whole = mle.estimate(observations)
    target = time.perf_counter() - start
    del observations
    print(f"{n:,} users, k = {k}, L-GRR eps_inf = {args.eps_inf}, eps_1 = {args.eps_1}, {tau} rounds")
    print(f"{platform.processor() or platform.machine()}, numpy {np.__version__}")
    print(f"levels: {mech.privacy_over_time}")
    print(
        f"simulate {simulate:.1f} s, + group the distinct sequences {grouped:.1f} s, + mle on the whole {tau}-round"
        f" sequences {target:.1f} s ({whole.iterations} SQUAREM iterations, KKT {whole.kkt:.1e}),"
        f" TV {tv(whole.distribution, truth):.4f}; peak memory so far"
        f" {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB"
    )
    print()
    print(
        "| after round t | ldpsim mle: seconds (grouping + estimate) | distinct sequences | TV | peer MI round t | "
        "peer IBU round t | peer MI mean 1..t | peer IBU mean 1..t |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        from multi_freq_ldpy.long_freq_est import L_GRR
    except ImportError:
        L_GRR = None
    peer_mi: list[np.ndarray] = []
    peer_ibu: list[np.ndarray] = []
    peer_seconds = 0.0
    total = simulate
    for t in range(1, tau + 1):
        start = time.perf_counter()
        prefix = mech.prefix(t)
        obs = Observations.from_reports(domain, [(prefix, reports[:, :t])])
        theta = mle.estimate(obs).distribution
        seconds = time.perf_counter() - start
        total += seconds
        cells = ["", "", "", ""]
        if L_GRR is not None:
            start = time.perf_counter()
            peer_mi.append(L_GRR.L_GRR_Aggregator_MI(reports[:, t - 1], k, args.eps_inf, args.eps_1))
            peer_ibu.append(L_GRR.L_GRR_Aggregator_IBU(reports[:, t - 1], k, args.eps_inf, args.eps_1))
            peer_seconds += time.perf_counter() - start
            cells = [
                f"{tv(peer_mi[-1], truth):.4f}",
                f"{tv(peer_ibu[-1], truth):.4f}",
                f"{tv(np.mean(peer_mi, axis=0), truth):.4f}",
                f"{tv(np.mean(peer_ibu, axis=0), truth):.4f}",
            ]
        print(
            f"| {t} | {seconds:.2f} | {obs.groups[0].reports.shape[0]:,} | {tv(theta, truth):.4f} | "
            + " | ".join(cells)
            + " |"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print()
    print(
        f"ldpsim: simulate {simulate:.2f} s; simulate + mle after each of the {tau} rounds {total:.1f} s;"
        f" peak memory {peak:.2f} GB"
    )
    if L_GRR is not None:
        m = min(n, args.client_users)
        start = time.perf_counter()
        for v in values[:: max(1, n // m)][:m]:
            L_GRR.L_GRR_Client(int(v), k, args.eps_inf, args.eps_1)
        client = (time.perf_counter() - start) * n / m
        print(
            f"multi-freq-ldpy: the {tau} rounds' MI + IBU aggregations {peer_seconds:.1f} s; its client, one round"
            f" of {n:,} users (timed on {m:,}, scaled) {client:.1f} s, {tau} rounds {client * tau:.0f} s"
        )


if __name__ == "__main__":
    with threadpool_limits(limits=1, user_api="blas"):  # as ldpsim's runner does: contended BLAS threads cost more
        main()
