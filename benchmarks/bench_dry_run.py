"""``ldpsim run --dry-run``'s estimates against the run they estimate, for every shipped scenario.

    python benchmarks/bench_dry_run.py [--only NAME ...] [--repetitions N] [--max-seconds 60] [--lgrr]

For each ``scenarios/*.toml`` (or those named with ``--only``), runs ``ldpsim run S --dry-run`` and then
``ldpsim run S`` for real (with ``--set repetitions=N`` for both if given, else the scenario's own), each in a
child process, and prints the estimate against the actual: the time (the range the dry run prints, against
the run's own "N runs in X s" and the command's wall time) and the peak resident memory (the dry run's
range against ``ru_maxrss`` of the child, which Linux takes over the child and the workers it waited for).
A scenario whose estimate (the middle of its range) exceeds ``--max-seconds`` is not run for real, except
``frequency-oracles-k16`` and ``lgrr-million`` (the issue's cases). ``--lgrr`` adds L-GRR at 10^6 users (longitudinal.toml's first
protocol alone, one run), the issue's memory case.

``ratio`` is actual / estimate (the middle of the range, geometric); the targets are within 2x for time and
1.5x for memory. The load average is printed with each row: the development machine is shared, and a run's
wall time follows the load. The dry run's own wall time is printed too (it should be a few percent of the run,
or a few seconds).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: run for real whatever their estimate: the issue's time case and its memory case
ALWAYS = ("frequency-oracles-k16", "lgrr-million")
UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0, "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
LGRR = """\
name = "lgrr-million"
seed = 10
users = 1_000_000
repetitions = 1
rounds = "every"
metrics = ["tv"]
[domain]
kind = "integers"
low = 0
high = 31
[dataset]
name = "binomial"
p = 0.3
[cohorts.everyone]
share = 1
reports = [{ mechanism = "l-grr", eps_inf = 2.0, eps_1 = 1.0, rounds = 10 }]
[estimators.mle]
[estimators.ibu-each]
name = "ibu"
rounds = "each"
[estimators.inv-each]
name = "inv-p"
rounds = "each"
"""


def span(text: str) -> tuple[float, float]:
    """'8-26 s', '1.2 min to 3.4 min', '12 s', '333.7-499.3 MB' -> (low, high) in seconds or bytes."""
    text = text.strip()
    if " to " in text:
        a, b = text.split(" to ")
        return span(a)[0], span(b)[0]
    number, unit = text.rsplit(" ", 1)
    low, _, high = number.partition("-")
    return float(low) * UNITS[unit], float(high or low) * UNITS[unit]


def child(args: list[str], cwd: Path) -> tuple[str, float, float]:
    """Run ``ldpsim ARGS`` in a child process: (its output, wall seconds, peak resident bytes)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ldpsim.output.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode:
        raise RuntimeError(f"ldpsim {' '.join(args)} exited {proc.returncode}:\n{output[-2000:]}")
    return output, wall, usage.ru_maxrss * 1024.0


def mid(low: float, high: float) -> float:
    return math.sqrt(low * high) if low > 0 else (low + high) / 2


def fmt_t(x: float) -> str:
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (file stems)")
    parser.add_argument("--repetitions", type=int, default=None, help="--set repetitions=N for both runs")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="skip real runs estimated longer")
    parser.add_argument("--lgrr", action="store_true", help="add l-grr at 10^6 users")
    opts = parser.parse_args()

    paths = sorted((ROOT / "scenarios").glob("*.toml"))
    if opts.only:
        paths = [p for p in paths if p.stem in opts.only]
    with tempfile.TemporaryDirectory(prefix="bench-dry-run-") as folder:
        bench(paths, Path(folder), opts)


def bench(paths: list[Path], work: Path, opts: argparse.Namespace) -> None:
    """One row per scenario: its dry run, then (unless estimated too long) its run, both from ``work``."""
    if opts.lgrr:
        (work / "lgrr-million.toml").write_text(LGRR)
        paths.append(work / "lgrr-million.toml")
    print(
        "| scenario | runs | dry run | estimated time | run's time | wall | ratio | estimated peak | peak RSS | ratio | load |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        sets = ["--set", f"repetitions={opts.repetitions}"] if opts.repetitions else []
        load = os.getloadavg()[0]
        output, dry_wall, _ = child(["run", str(path), "--dry-run", *sets], work)
        runs = re.search(r"^runs: (\d+)", output, re.M)
        est_t = span(re.search(r"^time: about (.+?) with the", output, re.M).group(1))  # type: ignore[union-attr]
        found_m = re.search(r"^memory: about (.+?) at peak", output, re.M)
        est_m = span(found_m.group(1)) if found_m else None
        if mid(*est_t) > opts.max_seconds and path.stem not in ALWAYS:
            print(
                f"| {path.stem} | {runs.group(1) if runs else '?'} | {dry_wall:.1f} s"
                f" | {fmt_t(est_t[0])}-{fmt_t(est_t[1])} s | skipped (estimated > {opts.max_seconds:.0f} s) | | | | | | {load:.1f} |",
                flush=True,
            )
            continue
        output, wall, peak = child(["run", str(path), "-o", str(work / f"{path.stem}.nc"), "-q", *sets], work)
        took = float(re.search(r"runs? in ([0-9.]+) s", output).group(1))  # type: ignore[union-attr]
        (work / f"{path.stem}.nc").unlink(missing_ok=True)
        t_ratio = took / mid(*est_t)
        mem = "n/a | n/a" if est_m is None else f"{est_m[0] / 1e6:.0f}-{est_m[1] / 1e6:.0f} MB | {peak / 1e6:.0f} MB"
        m_ratio = "n/a" if est_m is None else f"{peak / mid(*est_m):.2f}"
        print(
            f"| {path.stem} | {runs.group(1) if runs else '?'} | {dry_wall:.1f} s | {fmt_t(est_t[0])}-{fmt_t(est_t[1])} s"
            f" | {fmt_t(took)} s | {fmt_t(wall)} s | {t_ratio:.2f} | {mem} | {m_ratio} | {load:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
