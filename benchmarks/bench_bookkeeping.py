"""Bookkeeping around small runs: the one-BLAS-thread limit entered once per run against once per task.

    python benchmarks/bench_bookkeeping.py [--scenario scenarios/002-fig6a-mimo.toml] [--repeat 2]

Runs the scenario serially (its estimation per run takes well under a millisecond) with the limit
entered once for the whole run, as ldpsim does, and with it entered around every task, as it did,
alternating the two so that a busy machine slows both alike; prints each time and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import ldpsim.running.runner as runner
from ldpsim.running.scenario import load_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scenarios/002-fig6a-mimo.toml")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    once = runner.one_blas_thread
    times: dict[str, list[float]] = {"once per run": [], "once per task": []}
    for _ in range(args.repeat):
        for mode in times:
            runner.one_blas_thread = once if mode == "once per run" else contextlib.nullcontext  # type: ignore[assignment]
            scenario = load_scenario(args.scenario)
            start = time.perf_counter()
            runner.execute(scenario, executor="serial")
            times[mode].append(time.perf_counter() - start)
    runner.one_blas_thread = once
    runs = len(runner.tasks(load_scenario(args.scenario)))
    best = {mode: min(values) for mode, values in times.items()}
    print(f"| {args.scenario} ({runs} runs, serial) | seconds (best of {args.repeat}) |")
    print("| --- | --- |")
    for mode, value in best.items():
        print(f"| limit entered {mode} | {value:.1f} |")
    print(f"| ratio | {best['once per task'] / best['once per run']:.2f}x |")


if __name__ == "__main__":
    main()
