"""Bookkeeping of a sweep: wall time against the work it wraps (simulating and estimating), per executor and phase.

    python benchmarks/bench_sweep.py [--scenario scenarios/002-fig6a-mimo.toml ...] [--executors serial processes dask]
        [--repeat 3]

For each scenario and executor, runs the scenario ``--repeat`` times and prints, for the run with the
median ratio, the wall time, the work recorded in the results (the estimators' ``seconds`` plus
``simulation_seconds``, summed over runs) and their ratio ``wall / (work / workers)``: what
checkpoints, dispatch, thread limits and assembly cost on top. Issue targets: under 1.5 for serial
and processes, under 2.5 for Dask. The ratio and the wall time of every repetition are printed too (the
machine may be shared: the ratio is less sensitive to load than either time).

Phases, in seconds of wall time (work divided by the workers where tasks run side by side):

* ``sim`` and ``est``: simulation and estimation, as the results record them;
* ``setup``: loading the scenario, making the executor, the memory preflight and the results' layout;
* ``ckpt``: saving, loading and removing checkpoint batches (in the parent process);
* ``assembly``: the results dataset and its netCDF file;
* ``rest``: everything else: dispatch, and per-run bookkeeping in the workers (metrics, seeds,
  parameter resolution). With the serial executor it is per-run bookkeeping alone.

The phases are timed by wrapping ldpsim's functions from here; ldpsim is not instrumented.

Each repetition starts ``PAUSE`` seconds after the previous one ends, from a quiet process, as
``ldpsim run`` starts: forking a pool shuts OpenBLAS's idle threads down, and restoring the BLAS
limit after the run starts them again, spinning for about 0.1 s each; back to back, they slowed
the next repetition's setup by half (002-fig6a: 18 -> 37 ms).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ldpsim import run_scenario
from ldpsim.running import checkpoint, runner

DEFAULT = [
    "scenarios/002-fig5-binary-lip-vs-ldp.toml",
    "scenarios/002-fig6a-mimo.toml",
    "scenarios/002-fig8-local-priors.toml",
    "scenarios/quickstart.toml",
]

#: phase -> (module, attribute) of the functions whose time it is
PHASES: dict[str, list[tuple[Any, str]]] = {
    "setup": [(runner, "load_scenario"), (runner, "preflight"), (runner, "layout"), (runner, "make_executor")],
    "ckpt": [(checkpoint.Checkpoint, "save"), (checkpoint.Checkpoint, "load"), (checkpoint.Checkpoint, "remove")],
    "assembly": [(runner, "assemble"), (runner, "save_results")],
}


@contextmanager
def timed_phases() -> Iterator[dict[str, float]]:
    """Seconds spent in each phase's functions while the block runs (outermost calls only)."""
    spent: dict[str, float] = defaultdict(float)
    depth = [0]
    saved = []

    def wrap(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent[phase] += time.perf_counter() - start

        return timed

    for phase, targets in PHASES.items():
        for owner, name in targets:
            original = getattr(owner, name)
            saved.append((owner, name, original))
            setattr(owner, name, wrap(phase, original))
    try:
        yield spent
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


#: seconds between two repetitions (see the module's docstring)
PAUSE = 0.3


def measure(scenario: str, executor: str, workers: int) -> dict[str, float]:
    time.sleep(PAUSE)
    options = {} if executor == "serial" else {"workers": workers}
    with tempfile.TemporaryDirectory() as folder, timed_phases() as spent:  # with a checkpoint, as `ldpsim run`
        start = time.perf_counter()
        ds = run_scenario(scenario, executor=executor, output=Path(folder) / "r.nc", **options)
        wall = time.perf_counter() - start
    parallel = 1 if executor == "serial" else workers
    row = {
        "runs": float(ds["simulation_seconds"].size),
        "wall": wall,
        "work": float(ds["seconds"].sum() + ds["simulation_seconds"].sum()),
        "sim": float(ds["simulation_seconds"].sum()) / parallel,
        "est": float(ds["seconds"].sum()) / parallel,
        **{phase: spent[phase] for phase in PHASES},
    }
    row["rest"] = wall - sum(row[p] for p in ("sim", "est", *PHASES))
    row["ratio"] = wall / (row["work"] / parallel)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", nargs="+", default=DEFAULT)
    parser.add_argument("--executors", nargs="+", default=["serial", "processes", "dask"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        "| scenario | executor | runs | wall s | sim s | est s | setup s | ckpt s | assembly s | rest s"
        " | wall / (work / workers), median | all ratios | all walls s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for scenario in args.scenario:
        for executor in args.executors:
            rows = sorted(
                (measure(scenario, executor, args.workers) for _ in range(args.repeat)), key=lambda r: r["ratio"]
            )
            row = rows[len(rows) // 2]
            ratios = ", ".join(f"{r['ratio']:.2f}" for r in rows)
            walls = ", ".join(f"{r['wall']:.2f}" for r in rows)  # in the order of the ratios
            cells = " | ".join(f"{row[k]:.2f}" for k in ("wall", "sim", "est", "setup", "ckpt", "assembly", "rest"))
            print(
                f"| {Path(scenario).stem} | {executor} | {int(row['runs'])} | {cells} | "
                f"{statistics.median(r['ratio'] for r in rows):.2f} | {ratios} | {walls} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
