"""One run's reports held in its shards on a local Dask cluster, the exact MLE as map-reduce passes (issue 31).

Per-user OUE at k = 1024 (eps 1, binomial(0.4) values), ``shards = "auto"`` and ``passes = "shards"``: each
worker draws its shards and keeps them (``Executor.hold``: futures left on the workers); every likelihood pass
of `mle` (SQUAREM to KKT 1e-6: Newton needs the rows, which stay on the workers) maps over the shards there
and sums their (L, gradient) here. Against it, ``--merged``: the same run merged in this process, `mle` by
Newton with a sampled Hessian (the default). Peak memory: each process's VmHWM.

    python benchmarks/bench_held_shards.py --users 10000000 --workers 2 --merged
    python benchmarks/bench_held_shards.py --users 1000000 --shards 2 --workers 2 --merged
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from ldpsim_plugins.executors.dask_cluster import Dask

from ldpsim.estimation.held import HeldObservations
from ldpsim.running.build import Builder
from ldpsim.running.runner import tasks
from ldpsim.running.scenario import load_scenario
from ldpsim.running.shard_runs import ShardTask, hold_shard
from ldpsim.running.shards import shard_count, simulate_sharded, split_run


def scenario(users: int, shards: int | str, k: int, passes: str) -> dict:
    return {
        "name": "bench-held-shards",
        "seed": 31,
        "users": users,
        "shards": shards,
        "passes": passes,
        "domain": {"kind": "integers", "low": 0, "high": k - 1},
        "dataset": {"name": "binomial", "p": 0.4},
        "cohorts": {"oue": {"share": 1, "reports": [{"mechanism": "oue", "eps": 1.0}]}},
        "estimators": ["mle"],
        "metrics": ["tv"],
    }


def peak_bytes(*_: object) -> int:
    """This process's resident high-water mark (VmHWM)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=10**7)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--shards", default="auto", help='an integer, or "auto"')
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--merged", action="store_true", help="also the run merged here, `mle` by Newton")
    args = parser.parse_args()
    shards = args.shards if args.shards == "auto" else int(args.shards)
    loaded = load_scenario(scenario(args.users, shards, args.k, "shards"))
    (task,) = tasks(loaded)
    setup = Builder(loaded.base_dir).setup(task.point)
    estimator = setup.estimators["mle"]
    truth, shares = split_run(setup, task.seed, task.key)
    print(f"OUE k={args.k} users={args.users:,} shards={shard_count(setup)}, passes on the shards", flush=True)
    started = time.perf_counter()
    with Dask(workers=args.workers).hold(hold_shard, [ShardTask(task, s, p) for s, p in enumerate(shares)]) as held:
        drawn = time.perf_counter()
        observations = HeldObservations.over(setup.domain, held)
        est = estimator.estimate(observations)
        estimated = time.perf_counter()
        workers = held.map(peak_bytes, None)
    tv = 0.5 * float(np.abs(est.distribution - truth).sum())
    print(
        f"held, dask {args.workers} workers: cluster + draw {drawn - started:.1f} s, mle {estimated - drawn:.1f} s"
        f" ({est.iterations} passes, KKT {est.kkt:.2e}, L {est.loglik:.6f}, TV {tv:.4f}); worker peaks "
        + ", ".join(f"{p / 1e9:.2f} GB" for p in workers)
        + f"; this process {peak_bytes() / 1e9:.2f} GB",
        flush=True,
    )
    if not args.merged:
        return
    merged_setup = Builder(loaded.base_dir).setup(
        load_scenario(scenario(args.users, shards, args.k, "merged")).points().__next__()
    )
    started = time.perf_counter()
    _, merged = simulate_sharded(merged_setup, task.seed, task.key)
    drawn = time.perf_counter()
    other = merged_setup.estimators["mle"].estimate(merged)
    done = time.perf_counter()
    print(
        f"merged here: draw {drawn - started:.1f} s, mle {done - drawn:.1f} s ({other.iterations} passes, KKT"
        f" {other.kkt:.2e}, L {other.loglik:.6f}); this process {peak_bytes() / 1e9:.2f} GB;"
        f" L(held) - L(merged) = {est.loglik - other.loglik:+.3e} (certificates: n log(1 + 1e-6) ="
        f" {args.users * np.log1p(1e-6):.2f}); max |estimate difference| {np.abs(est.distribution - other.distribution).max():.2e}",
        flush=True,
    )


if __name__ == "__main__":
    main()
