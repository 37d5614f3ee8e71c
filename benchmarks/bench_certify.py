"""Matrix inversion at scale: `inv-p` with and without the likelihood pass that certifies it.

    pip install -e '.[bench]'
    python benchmarks/bench_certify.py            # k = 1000, n = 10^6, eps = 1, OUE and OLH

`estimate()` can fill in the log-likelihood, KKT violation and gap of an estimate whose estimator
gives none from one pass over the whole-report likelihood; building that likelihood for 10^6
distinct bit vectors costs far more than the inversion. `certify = "auto"` (the default) makes
that pass only for estimators that maximize the likelihood, and not above `CERTIFY_MAX_PAIRS`
(distinct reports x values), so `inv-p` skips it; `certify = "always"` makes it. multi-freq-ldpy's `UE_Aggregator_MI` inverts the same OUE reports (unpacked to its
0/1 layout, not timed). Best of `--repeat`. A measurement, not a test.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from timing import best  # benchmarks/timing.py: scripts run from benchmarks/

import ldpsim
from ldpsim import Integers, Observations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=args.k - 1)
    rng = np.random.default_rng(np.random.SeedSequence(2017))
    values = np.minimum(rng.zipf(1.1, args.users) - 1, args.k - 1)
    truth = np.bincount(values, minlength=args.k) / args.users
    print(f"ldpsim {ldpsim.__version__}: k = {args.k}, n = {args.users:,}, eps = {args.eps}, best of {args.repeat}")
    print("| mechanism | estimator | seconds | TV to the truth | gap |")
    print("| --- | --- | --- | --- | --- |")
    for name in ("oue", "olh"):
        mech = registry.create("mechanism", name, domain, eps=args.eps)
        reports = mech.sample(values, rng)
        for certify in ("auto", "always"):
            inv = registry.create("estimator", "inv-p", certify=certify)

            def run(inv: Any = inv, mech: Any = mech, reports: np.ndarray = reports) -> Any:
                return inv.estimate(Observations.from_reports(domain, [(mech, reports)]))

            repeat = args.repeat if certify == "auto" else 1
            seconds, est = best(run, repeat)
            tv = 0.5 * np.abs(est.distribution - truth).sum()
            print(
                f"| {name} | ldpsim inv-p, certify = {certify} (aggregation included) | {seconds:.2f} | {tv:.4f} | {est.gap:.3g} |"
            )
        if name == "oue":
            try:
                from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI
            except ImportError:
                print("| oue | multi-freq-ldpy: not installed (pip install -e '.[bench]') | | | |")
                continue
            bits = np.concatenate([mech.unpack_bits(reports[i : i + 50_000]) for i in range(0, args.users, 50_000)])
            seconds, est = best(lambda bits=bits: UE_Aggregator_MI(bits.astype(np.int8), args.eps, True), args.repeat)
            est = np.asarray(est, dtype=float)
            tv = 0.5 * np.abs(est - truth).sum()
            print(f"| oue | multi-freq-ldpy UE_Aggregator_MI (its own post-processing) | {seconds:.2f} | {tv:.4f} | |")


if __name__ == "__main__":
    main()
