"""Estimates over time at scale: one population reporting k-RR in every round, estimated after each round.

Times, for ``--users`` users on k values reporting ``--rounds`` times through k-RR (eps 1,
Zipf(1.1) values): the simulation (one report stream per round, users grouped by value), the
observations after every round t (``Observations.prefix``: columns sliced, equal rows merged),
GIBU (``mle``) on each prefix, and per-round inversion (``inv-p`` with ``rounds = "each"``).

    python benchmarks/bench_rounds.py --users 1000000 --k 100 --rounds 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpsim
from ldpsim.running.scenario import load_scenario
from ldpsim.running.tasks import simulate, tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    doc = {
        "seed": 1,
        "users": args.users,
        "rounds": "every",
        "estimators": {"mle": {}, "inv-each": {"name": "inv-p", "rounds": "each"}},
        "metrics": ["tv"],
        "domain": {"kind": "integers", "low": 0, "high": args.k - 1},
        "dataset": {"name": "zipf", "s": 1.1},
        "cohorts": {"all": {"reports": [{"mechanism": "krr", "eps": 1.0, "repeat": args.rounds}]}},
    }
    scenario = load_scenario(doc)
    setup = scenario.builder.setup(next(iter(scenario.points())))  # type: ignore[union-attr]
    started = time.perf_counter()
    _, truth, observations = simulate(tasks(scenario)[0], scenario.builder)
    print(f"simulate {args.users} users x {args.rounds} rounds: {time.perf_counter() - started:.2f} s")
    cut = est = inv = 0.0
    for t in range(1, args.rounds + 1):
        started = time.perf_counter()
        prefix = observations.prefix(t)
        cut += time.perf_counter() - started
        started = time.perf_counter()
        gibu = setup.estimators["mle"].estimate(prefix)
        est += time.perf_counter() - started
        started = time.perf_counter()
        each = setup.estimators["inv-each"].estimate(prefix)
        inv += time.perf_counter() - started
        tv = 0.5 * np.abs(gibu.distribution - truth).sum()
        tv_each = 0.5 * np.abs(each.distribution - truth).sum()
        print(f"round {t:2d}: {prefix.n_distinct:8d} distinct, TV mle {tv:.4f}, per-round inv-p {tv_each:.4f}")
    print(f"prefixes {cut:.2f} s, mle after every round {est:.2f} s, per-round inv-p {inv:.2f} s")
    print(f"ldpsim {ldpsim.__version__}")


if __name__ == "__main__":
    main()
