"""The unary encodings' samplers side by side: `Mechanism.sample` and the engine's `sample_cohort`.

    python benchmarks/bench_unary_samplers.py [--users 1000000] [--values 1024] [--eps 1] [--seeds 3]

Zipf(1.1) values; for `oue` and `rappor` and each sampler ("uniforms", "bytes", "words"), the
smallest and largest seconds over the seeds. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpsim
from ldpsim import Integers
from ldpsim.theory.sampling import sample_cohort


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--values", type=int, default=1024)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    registry = ldpsim.get_registry()
    k, n = args.values, args.users
    domain = Integers(low=0, high=k - 1)
    weights = 1 / np.arange(1, k + 1) ** 1.1
    weights /= weights.sum()
    print("| oracle | sampler | `Mechanism.sample` | engine (`sample_cohort`, per user) |")
    print("| --- | --- | --- | --- |")
    for name in ("oue", "rappor"):
        for sampler in ("uniforms", "bytes", "words"):
            mech = registry.create("mechanism", name, domain, eps=args.eps, sampler=sampler)
            sample, engine = [], []
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                values = rng.choice(k, n, p=weights)
                start = time.perf_counter()
                mech.sample(values, rng)
                sample.append(time.perf_counter() - start)
                counts = np.bincount(values, minlength=k)
                start = time.perf_counter()
                sample_cohort([mech], counts, [rng])
                engine.append(time.perf_counter() - start)
            print(
                f"| `{name}` | {sampler} | {min(sample):.2f}-{max(sample):.2f} | {min(engine):.2f}-{max(engine):.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
