"""One GIBU pass over a 10^6-cell product domain (6 attributes of 10 values, 10^6 users, SPL eps 6).

    python benchmarks/bench_tuples_million.py

Prints the simulation, the likelihood's build, the time of one pass (mean of 5) and the peak memory:
what a joint MLE at this size costs per iteration, without forming a dense matrix.
"""

from __future__ import annotations

import resource
import time

import numpy as np
from threadpoolctl import threadpool_limits

import ldpsim


def main() -> None:
    attributes = [{"name": f"a{j}", "kind": "integers", "low": 0, "high": 9} for j in range(6)]
    dom = ldpsim.make_domain({"kind": "product", "attributes": attributes})
    mech = ldpsim.get_registry().create("mechanism", "spl", dom, eps=6.0)
    rng = np.random.default_rng(1)
    cells = rng.zipf(1.3, size=(10**6, 6)) % 10
    values = dom.join([cells[:, j] for j in range(6)])
    with threadpool_limits(1):  # as ldpsim's runner
        start = time.perf_counter()
        obs = ldpsim.Observations.from_reports(dom, [(mech, mech.sample(values, rng))])
        simulated = time.perf_counter()
        likelihood = ldpsim.Likelihood(obs)
        built = time.perf_counter()
        theta = np.full(dom.size, 1 / dom.size)
        for _ in range(5):
            theta, _loglik = likelihood.em_step(theta)
        passed = time.perf_counter()
    print(
        f"cells {dom.size:,}, distinct reports {obs.n_distinct:,}: simulate + aggregate {simulated - start:.2f} s,"
        f" likelihood {built - simulated:.3f} s, one pass {(passed - built) / 5 * 1000:.0f} ms;"
        f" H is {type(likelihood.H).__name__}; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"
    )


if __name__ == "__main__":
    main()
