"""Peak memory of a cohort's per-user reports while they are drawn and grouped (issue 31: at most 1.5x packed).

    python benchmarks/bench_grouping_memory.py --users 1000000          # OUE, k = 1024
    /usr/bin/time -v python benchmarks/bench_grouping_memory.py --users 10000000

Draws the users' OUE reports (k = 1024, eps = 1, uniform values) the way a run draws a cohort
(``ldpsim.theory.sampling.sample_cohort``: chunks of ``CHUNK_INTS`` integers, each grouped, then the parts
merged in place) under tracemalloc, and prints the peak against the reports' int64 bytes and against
their packed bits (k / 8 bytes a report), with the process's CPU seconds. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import ldpsim
from ldpsim import Integers
from ldpsim.theory.sampling import per_user_bytes, sample_cohort


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=float, default=1e6)
    parser.add_argument("--k", type=int, default=1024)
    args = parser.parse_args()
    users, k = int(args.users), args.k
    mech = ldpsim.get_registry().create("mechanism", "oue", Integers(low=0, high=k - 1), eps=1.0)
    counts = np.random.default_rng(1).multinomial(users, np.full(k, 1 / k))
    words = mech.report_width
    tracemalloc.start()
    tic = time.process_time()
    reports, got = sample_cohort([mech], counts, [np.random.default_rng(2)])
    seconds = time.process_time() - tic
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert int(got.sum()) == users
    int64 = users * words * 8
    packed = users * k / 8
    print(f"OUE k={k}, {users:,} users ({reports.shape[0]:,} distinct reports of {words} int64 words)")
    print(f"peak {peak / 1e6:,.0f} MB = {peak / users:.0f} B/user: {peak / int64:.2f}x the int64 reports,")
    print(
        f"  {peak / packed:.2f}x their packed bits ({k // 8} B/user); preflight {per_user_bytes([mech], users) / users:.0f} B/user"
    )
    print(f"{seconds:.1f} s CPU")


if __name__ == "__main__":
    main()
