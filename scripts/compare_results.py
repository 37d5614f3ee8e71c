"""Compare the results of every scenario between two checkouts, variable by variable, bit for bit.

Run the scenarios with each checkout (same seeds: the scenario files fix them), then compare::

    python scripts/compare_results.py run scenarios OLD_DIR        # in the old checkout's environment
    python scripts/compare_results.py run scenarios NEW_DIR        # in the new one's
    python scripts/compare_results.py compare OLD_DIR NEW_DIR

``run`` takes ``--glob`` (a subset of the scenarios) and ``--set KEY=VALUE`` (passed to every run, e.g.
``--set repetitions=2`` for a quicker check). Files written before each metric's score had its own
variable (one ``error(metric, ...)``) are compared in today's layout (``tv``, ``emd``, ...).

Variables and coordinates present in both files must be identical (NaN equal to NaN), except
``seconds`` (a timing). Attributes that record when, where and with which code a file was made
are not compared; the others must match. A variable found in only one file is listed, not a failure
(a new declared variable, such as ``kkt``). Exit status 1 if anything differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import xarray as xr

#: timings, not results
SKIP_VARIABLES = {"seconds", "simulation_seconds"}
#: when, where and with which code the file was made
SKIP_ATTRS = {
    "created",
    "wall_seconds",
    "ldpsim_version",
    "code_sha256",
    "distributions",
    "scenario_source",
    "scenario_dir",
    "scenario_sha256",
    "python",
    "numpy",
    "scipy",
    "xarray",
    "versions",
    "plugins",
}


def run(scenarios: Path, out: Path, pattern: str = "*.toml", overrides: list[str] | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(scenarios.glob(pattern)):
        target = out / f"{path.stem}.nc"
        cmd = ["ldpsim", "run", str(path), "-o", str(target), "-q", "-e", "serial"]
        cmd += [arg for o in overrides or [] for arg in ("--set", o)]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


def same(a: xr.DataArray, b: xr.DataArray) -> bool:
    if a.dims != b.dims or a.shape != b.shape:
        return False
    x, y = a.values, b.values
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def compare(old: Path, new: Path) -> int:
    from ldpsim.results.scores import from_error_layout  # only here: `run` may drive an older ldpsim

    bad = 0
    for path in sorted(old.glob("*.nc")):
        other = new / path.name
        if not other.exists():
            print(f"{path.name}: missing in {new}")
            bad += 1
            continue
        with xr.open_dataset(path) as raw_a, xr.open_dataset(other) as raw_b:
            a, b = from_error_layout(raw_a), from_error_layout(raw_b)
            problems = []
            for name in sorted(set(a.variables) & set(b.variables) - SKIP_VARIABLES):
                if not same(a[name], b[name]):
                    problems.append(f"variable {name} differs")
            only = sorted(set(a.variables) ^ set(b.variables))
            for key in sorted((set(a.attrs) & set(b.attrs)) - SKIP_ATTRS):
                if str(a.attrs[key]) != str(b.attrs[key]):
                    problems.append(f"attribute {key} differs")
            note = f" (only in one file: {', '.join(only)})" if only else ""
            compared = len(set(a.variables) & set(b.variables) - SKIP_VARIABLES)
            if problems:
                bad += 1
                print(f"{path.name}: DIFFERENT: {'; '.join(problems)}{note}")
            else:
                print(f"{path.name}: identical ({compared} variables and coordinates){note}")
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run every scenario of a folder into a folder of results")
    r.add_argument("scenarios", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--glob", default="*.toml", help="the scenarios to run (default all)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override passed to every run")
    c = sub.add_parser("compare", help="compare two folders of results")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.scenarios, args.out, args.glob, args.set)
    else:
        sys.exit(compare(args.old, args.new))


if __name__ == "__main__":
    main()
