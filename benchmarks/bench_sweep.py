"""Bookkeeping of a sweep: wall time against the work it wraps (simulating and estimating), per executor.

    python benchmarks/bench_sweep.py [--scenario scenarios/002-fig6a-mimo.toml ...] [--executors serial processes dask]

For each scenario and executor, runs the scenario once and prints the wall time, the work recorded in
the results (the estimators' ``seconds`` plus ``simulation_seconds``, summed over runs) and their ratio:
what checkpoints, dispatch, thread limits and assembly cost on top. Issue targets: under 1.5 for serial
and processes (the work is divided by the workers there), under 2.5 for Dask.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ldpsim import run_scenario

DEFAULT = ["scenarios/002-fig6a-mimo.toml", "scenarios/002-fig5-binary-lip-vs-ldp.toml", "scenarios/quickstart.toml"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", nargs="+", default=DEFAULT)
    parser.add_argument("--executors", nargs="+", default=["serial", "processes", "dask"])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print("| scenario | executor | runs | wall s | work s | wall / (work / workers) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for scenario in args.scenario:
        for executor in args.executors:
            options = {} if executor == "serial" else {"workers": args.workers}
            with tempfile.TemporaryDirectory() as folder:  # with a checkpoint, as `ldpsim run` does
                start = time.perf_counter()
                ds = run_scenario(scenario, executor=executor, output=Path(folder) / "r.nc", **options)
                wall = time.perf_counter() - start
            work = float(ds["seconds"].sum() + ds["simulation_seconds"].sum())
            runs = int(ds["simulation_seconds"].size)
            parallel = 1 if executor == "serial" else args.workers
            print(
                f"| {Path(scenario).stem} | {executor} | {runs} | {wall:.1f} | {work:.1f} | {wall / (work / parallel):.2f} |"
            )


if __name__ == "__main__":
    main()
