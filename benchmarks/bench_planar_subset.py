"""Planar likely subsets (004 Sec. 8.3): the exact MLE on a large grid, on the reports' box against the whole grid.

    python benchmarks/bench_planar_subset.py                       # 256 x 256, data in a 24 x 24 region
    python benchmarks/bench_planar_subset.py --rows 512 --cols 512 --skip-whole
    python benchmarks/bench_planar_subset.py --rows 512 --cols 512 --mechanism planar-laplace --build

Users sit in a small region of a large grid (a city on a country-sized map). `mle` with its
default `likely = true` estimates on the planar likely subset, a convolution over the reports'
box; `likely = false` on every cell. Both are certified (KKT 1e-6): the script prints their
log-likelihoods, the TV distance between the two estimates and the seconds of each. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpsim
from ldpsim import Grid, Observations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=256)
    parser.add_argument("--region", type=int, default=24, help="side of the square the users live in")
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--mechanism", default="planar-geometric")
    parser.add_argument("--skip-whole", action="store_true", help="do not estimate on the whole grid")
    parser.add_argument(
        "--build",
        action="store_true",
        help="also time building the subset's likelihood: the box alone (subset_likelihood) against the "
        "grid's operator restricted to the box (its kernel built for the whole grid), on fresh mechanisms",
    )
    args = parser.parse_args()

    registry = ldpsim.get_registry()
    grid = Grid(rows=args.rows, cols=args.cols)
    mech = registry.create("mechanism", args.mechanism, grid, eps=args.eps)
    rng = np.random.default_rng(np.random.SeedSequence(8))
    r0, c0 = args.rows // 3, args.cols // 2
    # a Zipf-like population over the region's cells
    cells = (r0 + np.arange(args.region))[:, None] * args.cols + (c0 + np.arange(args.region))[None, :]
    weights = 1.0 / np.arange(1, cells.size + 1) ** 0.8
    values = rng.choice(cells.ravel(), size=args.users, p=weights / weights.sum())
    t = time.perf_counter()
    reports = mech.sample(values, rng)
    observations = Observations.from_reports(grid, [(mech, reports)])
    simulate = time.perf_counter() - t
    mask = observations.likely_subset()
    print(
        f"ldpsim {ldpsim.__version__}: {args.mechanism}, eps = {args.eps}, {args.rows} x {args.cols} grid, "
        f"{args.users:,} users in a {args.region} x {args.region} region; {observations.n_distinct:,} distinct "
        f"reports; simulation {simulate:.2f} s"
    )
    print(f"likely subset: {int(mask.sum()):,} of {mask.size:,} cells ({mask.mean():.2%})")
    if args.build:
        for label, build in (
            ("box alone (subset_likelihood)", lambda m: m.subset_likelihood(reports, mask)),
            ("grid operator, restricted", lambda m: m.structured_likelihood(reports)[1].restricted(mask)),
        ):
            fresh = registry.create("mechanism", args.mechanism, grid, eps=args.eps)
            t = time.perf_counter()
            _, op = build(fresh)
            print(
                f"  likelihood on the subset, {label:32s}: {time.perf_counter() - t:8.2f} s, kernel {op.kernel.shape}"
            )
    results = {}
    for likely in (True, False):
        if not likely and args.skip_whole:
            continue
        estimator = registry.create("estimator", "mle", likely=likely)
        t = time.perf_counter()
        est = estimator.estimate(Observations.from_reports(grid, [(mech, reports)]))
        seconds = time.perf_counter() - t
        results[likely] = est
        where = "likely subset" if likely else "whole grid"
        print(
            f"  mle on the {where:13s}: {seconds:8.2f} s, {est.iterations} iterations, L = {est.loglik:.6f}, "
            f"KKT {est.kkt:.1e}, mass outside the subset {est.distribution[~mask].sum():.1e}"
        )
    if len(results) == 2:
        tv = 0.5 * np.abs(results[True].distribution - results[False].distribution).sum()
        print(f"  TV between the two MLEs: {tv:.2e}; L difference {results[True].loglik - results[False].loglik:+.2e}")


if __name__ == "__main__":
    main()
