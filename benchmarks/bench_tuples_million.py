"""One GIBU pass over a 10^6-cell product domain (6 attributes of 10 values, 10^6 users, SPL eps 6).

    python benchmarks/bench_tuples_million.py

Prints the simulation, the likelihood's build, the time of one pass (mean of 5) and the peak memory:
what a joint MLE at this size costs per iteration, without forming a dense matrix.
"""

import time, numpy as np, ldpsim
from threadpoolctl import threadpool_limits

dom = ldpsim.make_domain(
    {"kind": "product", "attributes": [{"name": f"a{j}", "kind": "integers", "low": 0, "high": 9} for j in range(6)]}
)
mech = ldpsim.get_registry().create("mechanism", "spl", dom, eps=6.0)
rng = np.random.default_rng(1)
z = rng.zipf(1.3, size=(10**6, 6)) % 10
vals = dom.join([z[:, j] for j in range(6)])
with threadpool_limits(1):
    t = time.perf_counter()
    rep = mech.sample(vals, rng)
    obs = ldpsim.Observations.from_reports(dom, [(mech, rep)])
    t1 = time.perf_counter()
    L = ldpsim.Likelihood(obs)
    t2 = time.perf_counter()
    th = np.full(dom.size, 1 / dom.size)
    for i in range(5):
        th, _ = L.em_step(th)
    t3 = time.perf_counter()
    print(
        f"cells {dom.size:,} distinct {obs.n_distinct:,} simulate+aggregate {t1 - t:.2f}s likelihood {t2 - t1:.3f}s pass {(t3 - t2) / 5 * 1000:.0f} ms; H {type(L.H).__name__}"
    )
    import resource

    print("peak RSS GB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)
