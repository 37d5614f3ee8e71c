"""Numeric mechanisms at scale: count-level simulation and GIBU on the exact cell likelihood.

    python benchmarks/bench_numeric.py [--values 1024] [--users 1000000] [--eps 1]

For each of piecewise and square_wave: building the (k, ~2k) cell matrix, drawing the report
counts of n users (one multinomial over the cells), and `mle` (SQUAREM to a KKT violation of
1e-6, on the band operator above 512 values), `ibu` and `ibu` with EMS, with their TV to a
binomial(k - 1, 0.3) truth. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import binom

import ldpsim
from ldpsim import Integers, Observations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=1024)
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--eps", type=float, default=1.0)
    args = parser.parse_args()
    k, registry = args.values, ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    theta = binom.pmf(np.arange(k), k - 1, 0.3)
    print("| mechanism | cells | matrix s | simulation s | estimator | s | iterations | KKT | TV |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in ("piecewise", "square_wave"):
        mech = registry.create("mechanism", name, domain, eps=args.eps)
        started = time.perf_counter()
        matrix = mech.matrix
        built = time.perf_counter() - started
        started = time.perf_counter()
        counts = np.random.default_rng(0).multinomial(args.users, theta @ matrix)
        obs = Observations.from_counts(domain, mech, np.arange(mech.output_size), counts)
        simulated = time.perf_counter() - started
        for label, estimator in (
            ("mle", registry.create("estimator", "mle")),
            ("ibu", registry.create("estimator", "ibu")),
            ("ibu, ems", registry.create("estimator", "ibu", smoothing="ems")),
        ):
            est = estimator.estimate(obs)
            tv = 0.5 * np.abs(est.distribution - theta).sum()
            print(
                f"| {name} | {mech.output_size} | {built:.2f} | {simulated:.2f} | {label} | {est.seconds:.2f} |"
                f" {est.iterations} | {est.kkt:.1g} | {tv:.3f} |"
            )


if __name__ == "__main__":
    main()
