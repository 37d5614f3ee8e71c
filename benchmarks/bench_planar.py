"""Build times of the planar mechanisms' matrices on the Gowalla San Francisco grid of 001 Sec. IX-B.

    python benchmarks/bench_planar.py

16 x 24 (rows x cols) cells of 0.5 km, eps from 0.2 to 6 per km (001 Fig. 10's range). No peer library has
planar geo-indistinguishable mechanisms, so there is nothing to compare with: the point is that
a sweep over eps costs milliseconds per point. A measurement, not a test.
"""

from __future__ import annotations

import time

import ldpsim
from ldpsim import Grid


def main() -> None:
    grid = Grid(rows=24, cols=16, cell=0.5)
    registry = ldpsim.get_registry()
    print(f"ldpsim {ldpsim.__version__}: {grid.rows} x {grid.cols} grid, cell {grid.cell} km; best of 3")
    for name in ("planar-geometric", "planar-laplace", "exponential"):
        times = []
        for eps in (0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
            best = min(_build(registry, name, grid, eps) for _ in range(3))
            times.append(best)
            print(f"  {name:17s} eps = {eps:3.1f}: {best * 1000:7.2f} ms")
        print(f"  {name:17s} all 8: {sum(times) * 1000:7.1f} ms")


def _build(registry, name, grid, eps) -> float:
    start = time.perf_counter()
    registry.create("mechanism", name, grid, eps=eps).matrix  # noqa: B018  (building it is what is timed)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
