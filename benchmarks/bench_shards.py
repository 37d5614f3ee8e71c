"""One run's users sharded over a local Dask cluster (issue 31): time, each worker's peak memory, and the
per-bit counts against the same shards drawn serially in this process.

Per-user OUE at k = 1024 (every report drawn one user at a time, grouped into distinct reports), ``shards``
from the scenario (``"auto"`` by default: :data:`ldpsim.running.shards.SHARD_BYTES` of grouping per shard).
Each worker draws a shard (:func:`ldpsim.running.shards.draw_shard`) and reduces it to its per-bit counts
(``Mechanism.bit_counts``, the reference count); the client sums them in shard order. The serial run draws
the same shards here, one after the other. A worker's peak is its VmHWM (resident high-water mark).

    python benchmarks/bench_shards.py --users 10000000 --workers 2 --unsharded   # and the unsharded run's counts
    python benchmarks/bench_shards.py --users 100000000 --workers 2 --first 2   # two of 10^8's 23 shards

``--held`` estimates the run instead, with ``passes = "shards"``: each worker draws its shards and keeps them
(``Executor.hold``: futures left on the workers); every product of `mle` (Newton to KKT 1e-6: f, the gradient,
each shard's sampled Hessian) maps over the shards there and sums here. ``--merged`` adds the same run merged in
this process, `mle` by Newton with a sampled Hessian of the whole run's rows (the default).

    python benchmarks/bench_shards.py --held --users 10000000 --workers 2 --merged
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

import numpy as np
from timing import peak_bytes  # benchmarks/timing.py: scripts run from benchmarks/

from ldpsim.running.build import Builder
from ldpsim.running.scenario import load_scenario
from ldpsim.running.shards import draw_shard, shard_count, split_run

_setups: dict[str, Any] = {}


def scenario(users: int, shards: int | str, k: int, passes: str = "merged") -> dict:
    return {
        "name": "bench-shards",
        "seed": 31,
        "users": users,
        "shards": shards,
        "passes": passes,
        "domain": {"kind": "integers", "low": 0, "high": k - 1},
        "dataset": {"name": "binomial", "p": 0.4},
        "cohorts": {"oue": {"share": 1, "reports": [{"mechanism": "oue", "eps": 1.0}]}},
        "estimators": ["mle"],  # a whole-report estimator: the reports are drawn per user, not as bit counts
        "metrics": ["tv"],
    }


def setup_of(doc: dict) -> Any:
    key = json.dumps(doc, sort_keys=True)
    if key not in _setups:
        loaded = load_scenario(doc)
        _setups[key] = Builder(loaded.base_dir).setup(next(iter(loaded.points())))
    return _setups[key]


def shard_bits(doc: dict, index: int, shares: tuple) -> tuple[int, np.ndarray, int, int, float, float]:
    """Shard ``index``'s per-bit counts, with the worker's pid, its peak memory so far, and the seconds
    the shard's draw and its per-bit count took there."""
    import os

    setup = setup_of(doc)
    started = time.perf_counter()
    (group,) = draw_shard(setup, doc["seed"], (0,), shares)
    drawn = time.perf_counter()
    bits = setup.cohorts[0].plan[0].bit_counts(group.reports, group.counts)
    return index, bits, os.getpid(), peak_bytes(), drawn - started, time.perf_counter() - drawn


def held(args: argparse.Namespace, shards: int | str) -> None:
    """``--held``: the run estimated from shards held on the workers, and with ``--merged`` merged here."""
    from ldpsim_plugins.executors.dask_cluster import Dask

    from ldpsim.estimation.held import HeldObservations
    from ldpsim.running.runner import tasks
    from ldpsim.running.shard_runs import ShardTask, hold_shard
    from ldpsim.running.shards import simulate_sharded

    loaded = load_scenario(scenario(args.users, shards, args.k, "shards"))
    (task,) = tasks(loaded)
    setup = Builder(loaded.base_dir).setup(task.point)
    estimator = setup.estimators["mle"]
    truth, shares = split_run(setup, task.seed, task.key)
    print(f"OUE k={args.k} users={args.users:,} shards={shard_count(setup)}, passes on the shards", flush=True)
    started = time.perf_counter()
    with Dask(workers=args.workers).hold(hold_shard, [ShardTask(task, s, p) for s, p in enumerate(shares)]) as held:
        drawn = time.perf_counter()
        observations = HeldObservations(setup.domain, held)
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
        next(iter(load_scenario(scenario(args.users, shards, args.k, "merged")).points()))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=10**7)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--shards", default="auto", help='an integer, or "auto"')
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-serial", action="store_true", help="skip the serial run (no identity check)")
    parser.add_argument("--held", action="store_true", help='estimate the run with passes = "shards" instead')
    parser.add_argument("--merged", action="store_true", help="with --held: also the run merged here, `mle` by Newton")
    parser.add_argument(
        "--unsharded", action="store_true", help="draw the run unsharded here too (it must fit) and compare"
    )
    parser.add_argument("--spawn", action="store_true", help="spawned workers (dask's default) instead of forked")
    parser.add_argument(
        "--first",
        type=int,
        default=None,
        help="draw only the run's first N shards (a shard's peak at a size too long to run whole)",
    )
    args = parser.parse_args()
    shards = args.shards if args.shards == "auto" else int(args.shards)
    if args.held:
        held(args, shards)
        return
    doc = scenario(args.users, shards, args.k)
    setup = setup_of(doc)
    count = shard_count(setup)
    started = time.perf_counter()
    truth, parts = split_run(setup, doc["seed"], (0,))
    split = time.perf_counter() - started
    drawn = count if args.first is None else min(args.first, count)
    parts = parts[:drawn]
    print(
        f"OUE k={args.k} users={args.users:,} shards={count}, {drawn} drawn (split drawn in {split:.2f} s)", flush=True
    )

    import dask
    from distributed import Client, LocalCluster

    # as ldpsim's dask executor starts a local cluster: forked workers. Spawned ones take the nanny's
    # MALLOC_TRIM_THRESHOLD_, which turns off glibc's dynamic mmap threshold: every large array is mapped
    # and zeroed afresh, and a shard's draw took 1.5x as long (2.5x with two workers side by side)
    method = "spawn" if args.spawn else "fork"
    with dask.config.set({"distributed.worker.multiprocessing-method": method}):
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,  # measured, not enforced: the target is a peak under 6 GB
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    with Client(cluster) as client:
        started = time.perf_counter()
        futures = client.map(shard_bits, [doc] * drawn, range(drawn), parts, pure=False)
        found = client.gather(futures)
        dask_seconds = time.perf_counter() - started
    cluster.close()
    by_index = {index: bits for index, bits, *_ in found}
    dask_bits = np.sum([by_index[s] for s in range(drawn)], axis=0)  # shard order
    peaks: dict[int, int] = {}
    for _, _, pid, peak, _, _ in found:
        peaks[pid] = max(peaks.get(pid, 0), peak)
    print(
        f"dask, {args.workers} workers: {dask_seconds:.1f} s; worker peaks (VmHWM) "
        + ", ".join(f"{p / 1e9:.2f} GB" for p in sorted(peaks.values()))
        + f"; per shard in a worker: draw {np.mean([f[4] for f in found]):.1f} s, count {np.mean([f[5] for f in found]):.1f} s",
        flush=True,
    )
    if args.no_serial:
        return
    started = time.perf_counter()
    here = [shard_bits(doc, s, part) for s, part in enumerate(parts)]
    serial_seconds = time.perf_counter() - started
    serial_bits = np.sum([f[1] for f in here], axis=0)
    same = bool(np.array_equal(serial_bits, dask_bits))
    print(
        f"serial, this process: {serial_seconds:.1f} s (per shard: draw {np.mean([f[4] for f in here]):.1f} s,"
        f" count {np.mean([f[5] for f in here]):.1f} s); peak {peak_bytes() / 1e9:.2f} GB; "
        f"per-bit counts identical to dask's: {same} (total {int(dask_bits.sum()):,} set bits)",
        flush=True,
    )
    if not same:
        raise SystemExit("per-bit counts differ between the dask and the serial runs")
    if args.unsharded:
        from ldpsim.running.simulation import cohort_values, draw_cohort

        started = time.perf_counter()
        shares, _, _ = cohort_values(setup, doc["seed"], (0,))
        whole = draw_cohort(setup, doc["seed"], (0,), 0, shares[0])  # the unsharded run's draw, all chunks here
        bits = setup.cohorts[0].plan[0].bit_counts(whole.reports, whole.counts)
        same = bool(np.array_equal(bits, dask_bits))
        print(
            f"unsharded, this process: {time.perf_counter() - started:.1f} s; peak {peak_bytes() / 1e9:.2f} GB;"
            f" per-bit counts identical to the shards': {same}",
            flush=True,
        )
        if not same:
            raise SystemExit("per-bit counts differ between the sharded and the unsharded runs")


if __name__ == "__main__":
    main()
