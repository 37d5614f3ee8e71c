"""The numerical shuffle bounds at scale: the central eps of N eps0-LDP reports, and its time.

    python benchmarks/bench_shuffle.py            # N = 10^6 and 10^8, eps0 in 0.5, 1, 4, 8, delta = 1e-8

Each row is the best of ``--repeat`` calls of ``ldpsim.shuffle_guarantee`` (the whole search: window
of the binomial, Brent's method over log eps). The issue's target: N = 10^8 in under 15 s.
"""

from __future__ import annotations

import argparse

from timing import best

from ldpsim import shuffle_guarantee


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[10**6, 10**8])
    parser.add_argument("--eps0", type=float, nargs="+", default=[0.5, 1.0, 4.0, 8.0])
    parser.add_argument("--delta", type=float, default=1e-8)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print("| N | eps0 | bound | central eps | time |")
    print("| --- | --- | --- | --- | --- |")
    for n in args.users:
        for eps0 in args.eps0:
            for bound in ("clones", "variation-ratio"):
                seconds, g = best(lambda: shuffle_guarantee(eps0, n, args.delta, bound), args.repeat)
                print(f"| {n:.0e} | {eps0:g} | {bound} | {g.eps:.5g} | {seconds:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
