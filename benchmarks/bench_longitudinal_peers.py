"""Longitudinal protocols beside multi-freq-ldpy 0.2.5's clients and aggregators: seconds and TV to the truth.

    pip install multi-freq-ldpy==0.2.5
    python benchmarks/bench_longitudinal_peers.py [--users 20000] [--values 100] [--rounds 10]
        [--eps-inf 2] [--eps-1 1] [--seed 1]

One population (values from a binomial(k - 1, 0.3)) per protocol: L-GRR, L-OUE, L-OSUE, L-SUE, L-SOUE
(eps_inf, eps_1; L-GRR with the paper's p2, ``published = true``) and dBitFlipPM (b = k buckets, d = 1, eps = eps_inf). ldpsim simulates every user's memoized
sequence of --rounds reports and estimates by ``mle`` (GIBU to a KKT certificate) from round 1 alone and from
the whole sequences. multi-freq-ldpy's client draws a fresh permanent response at every call (it does not
memoize), so it gives one round: its client for every user, then its matrix-inversion aggregator (``MI``).
Run with one BLAS thread, as ldpsim's runner does. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import ldpsim
from ldpsim import Integers, Observations


def tv(a, b) -> float:
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def peer(name: str, values: np.ndarray, k: int, eps_inf: float, eps_1: float) -> np.ndarray:
    """multi-freq-ldpy's one round: its client per user, then its MI aggregator."""
    from multi_freq_ldpy.long_freq_est import L_GRR, L_OSUE, L_OUE, L_SOUE, L_SUE, dBitFlipPM

    if name == "l-grr":
        reports = [L_GRR.L_GRR_Client(int(v), k, eps_inf, eps_1) for v in values]
        return L_GRR.L_GRR_Aggregator_MI(np.array(reports), k, eps_inf, eps_1)
    if name == "dbitflip":
        reports = [dBitFlipPM.dBitFlipPM_Client(int(v), k, k, 1, eps_inf) for v in values]
        return dBitFlipPM.dBitFlipPM_Aggregator_MI(reports, k, 1, eps_inf)
    module = {"l-oue": L_OUE, "l-osue": L_OSUE, "l-sue": L_SUE, "l-soue": L_SOUE}[name]
    label = name.upper().replace("-", "_")
    reports = [getattr(module, f"{label}_Client")(int(v), k, eps_inf, eps_1) for v in values]
    return getattr(module, f"{label}_Aggregator_MI")(np.array(reports), eps_inf, eps_1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--values", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--eps-inf", type=float, default=2.0)
    parser.add_argument("--eps-1", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    n, k, tau = args.users, args.values, args.rounds
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    mle = registry.create("estimator", "mle")
    seeds = np.random.SeedSequence(args.seed).spawn(2)
    pmf = np.bincount(np.random.default_rng(seeds[0]).binomial(k - 1, 0.3, size=n), minlength=k)
    truth = pmf / n
    values = np.repeat(np.arange(k), pmf)
    print(f"{n:,} users, k = {k}, eps_inf = {args.eps_inf}, eps_1 = {args.eps_1}, {tau} rounds")
    print()
    print(
        "| protocol | ldpsim: simulate + mle, 1 round (s) | TV | ldpsim: simulate + mle, whole"
        f" {tau}-round sequences (s) | TV | multi-freq-ldpy: client + MI, 1 round (s) | TV |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in ("l-grr", "l-oue", "l-osue", "l-sue", "l-soue", "dbitflip"):
        if name == "dbitflip":
            params = {"eps": args.eps_inf, "d": 1}
        else:
            params = {"eps_inf": args.eps_inf, "eps_1": args.eps_1}
        if name == "l-grr":
            params["published"] = True  # the paper's p2, which multi-freq-ldpy's aggregators assume
        cells = []
        for rounds in (1, tau):
            mech = registry.create("mechanism", name, domain, rounds=rounds, **params)
            start = time.perf_counter()
            reports = mech.sample(values, np.random.default_rng(seeds[1]))
            theta = mle.estimate(Observations.from_reports(domain, [(mech, reports)])).distribution
            cells += [f"{time.perf_counter() - start:.2f}", f"{tv(theta, truth):.4f}"]
        try:
            peer(name, values[:: max(1, n // 50)], k, args.eps_inf, args.eps_1)  # compile its numba code, untimed
            start = time.perf_counter()
            estimate = peer(name, values, k, args.eps_inf, args.eps_1)
            cells += [f"{time.perf_counter() - start:.2f}", f"{tv(estimate, truth):.4f}"]
        except ImportError:
            cells += ["", ""]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    with threadpool_limits(limits=1, user_api="blas"):  # as ldpsim's runner does: contended BLAS threads cost more
        main()
