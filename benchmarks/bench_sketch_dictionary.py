"""Apple's sketches decoded over a dictionary, and the sequence-fragment puzzle: seconds and F1 (issue 29).

    python benchmarks/bench_sketch_dictionary.py dictionary --oracle cms --users 1000000     # eps 8, 65,536 x 1,024
    python benchmarks/bench_sketch_dictionary.py dictionary --oracle hcms --users 1000000    # eps 4, 1,024 x 32,768
    python benchmarks/bench_sketch_dictionary.py sfp --oracle cms --users 1000000 --eps 8

Users draw from a Zipf law (exponent 1.1 over 2^16 ranks scattered over 2^32 ids). ``dictionary``: the
server knows the 2^16 ids of the support and decodes the sketch over them (exact MLE over candidates +
"other" on a certified working set); ``sfp``: the server knows nothing, fragments of 8 bits with an 8-bit
word hash (2^16 keys per position, 4 positions). Sketch sizes are Apple's deployed ones. Wall and CPU
seconds are both printed: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small dense solves: threads only contend
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from ldpsim_plugins.datasets.open_domain import zipf
from ldpsim_plugins.estimators.sfp import sfp_heavy_hitters
from ldpsim_plugins.estimators.sketch_dictionary import dictionary_heavy_hitters, distinct_reports
from ldpsim_plugins.mechanisms.sfp import APPLE_SIZES, SFP
from ldpsim_plugins.mechanisms.sketch_channels import SketchHashes, cms_reports, hcms_reports

from ldpsim import OpenDomain, top_k_score

#: Apple's deployed eps per oracle
APPLE_EPS = {"cms": 8.0, "hcms": 4.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["dictionary", "sfp"])
    parser.add_argument("--oracle", choices=["cms", "hcms"], default="cms")
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--eps", type=float, default=None, help="default: Apple's (cms 8, hcms 4)")
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--work", type=int, default=256, help="working-set size of the dictionary decoder")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    eps = args.eps or APPLE_EPS[args.oracle]
    domain = OpenDomain(bits=32)
    data = zipf(domain, args.users, np.random.default_rng(0), exponent=1.1, support=1 << 16)
    rng = np.random.default_rng(args.seed)
    wall, cpu = time.perf_counter(), time.process_time()
    if args.mode == "dictionary":
        d, m = APPLE_SIZES[args.oracle]
        family = SketchHashes(d, m, seed=args.seed)
        draw = cms_reports if args.oracle == "cms" else hcms_reports
        reports, counts = distinct_reports(draw(data.values, family, eps, rng))
        sampled, sampled_cpu = time.perf_counter(), time.process_time()
        found = dictionary_heavy_hitters(
            args.oracle, data.items, eps, family, reports, counts, k=args.k, work=args.work
        )
        level = found.levels[0]
        detail = f"dictionary 2^16, d={d:,} m={m:,}"
    else:
        sfp = SFP(domain, eps, k=args.k, oracle=args.oracle, work=args.work, seed=args.seed)
        parts = sfp.sample(data.values, rng)
        sampled, sampled_cpu = time.perf_counter(), time.process_time()
        found = sfp_heavy_hitters(sfp, parts)
        level = found.levels[-1]
        detail = f"{sfp.positions} positions of 2^16 keys, {level.candidates.size:,} candidate words"
    done, done_cpu = time.perf_counter(), time.process_time()
    score = top_k_score(found.items, found.frequency, data.items, data.frequency, args.k)
    print(
        f"{args.mode} {args.oracle} eps={eps:g} n={args.users:,} k={args.k} ({detail}): "
        f"sample {sampled - wall:.1f} s ({sampled_cpu - cpu:.1f} s CPU), "
        f"decode {done - sampled:.1f} s ({done_cpu - sampled_cpu:.1f} s CPU); "
        f"F1 {score.f1:.3f}, frequency error {score.frequency_error:.2e}, other {level.other:.3f}"
    )


if __name__ == "__main__":
    main()
