"""Deployed sizes (issue 31): closed-form k-RR inversion, and per-bit counts of 10^9 users drawn without reports.

    python benchmarks/bench_deployed.py [--parts krr,oue,cms] [--values 1024] [--users 1000000] [--eps 1]
        [--repeat 5] [--peer-python /tmp/peers/bin/python] [--big-users 1000000000] [--hashes 65536]

krr: times, on one population of --users k-RR users (drawn by counts, as a run draws them):

* ``inv-p`` as ldpsim estimates now: ``Estimator.estimate`` on the aggregated reports, its unbiased
  estimate ``(q - c sum q) / a`` in O(k) (:meth:`ldpsim.Mechanism.diagonal_plus_constant`);
* the dense path it replaces: ``np.linalg.lstsq`` on the k x k matrix, then the same simplex projection
  (what ``inv-p`` did before, reproduced here);
* the same from per-user reports (``Observations.from_reports`` on the --users reports, then ``inv-p``),
  which is what a peer's aggregator is given;
* multi-freq-ldpy's ``GRR_Aggregator_MI`` on the per-user reports, and pure-ldp's ``DEServer``
  (``aggregate_all`` then ``estimate_all``) when --peer-python names an interpreter that has it
  (``python -m venv /tmp/peers && /tmp/peers/bin/pip install pure-ldp scikit-learn``), run there on the
  same reports, saved to a temporary file.

oue: a run of --big-users OUE users at k = --values with ``inv-p`` alone (``ldpsim.run_scenario``, one
task): its cohort is drawn as per-bit counts (``Mechanism.sample_bit_counts``: two binomials per bit),
never as reports; the seconds of the whole run, and of the draw and the estimate alone.

cms: Apple's count-mean sketch (eps 8, --hashes hashes x 1,024 buckets; Apple's 65,536) on --values
values with --big-users users: the hash table, the per-(hash, bucket) counts drawn without reports (each
value's users split over the hashes, by a multinomial or user by user, whichever costs less, then two
binomials per bucket), the family's collision matrix and its Cholesky factor (once per mechanism,
cached), and the estimate ``C^-1 s / n`` from the counts; wall and CPU seconds of each, and the load
average (the machine is shared: the CPU seconds are the robust ones).

The best of --repeat calls each (the big parts: one), with one BLAS thread (a run's setting). A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import best

import ldpsim
from ldpsim import BitTally, Integers, Observations, project_simplex
from ldpsim.base.threads import one_blas_thread
from ldpsim.theory.sampling import sample_cohort

PURE_LDP = """
import sys, time, json
import numpy as np
from pure_ldp.frequency_oracles.direct_encoding import DEServer
reports = np.load(sys.argv[1]); k = int(sys.argv[2]); eps = float(sys.argv[3]); repeat = int(sys.argv[4])
times = []
for _ in range(repeat):
    start = time.perf_counter()
    server = DEServer(eps, k, index_mapper=lambda x: x)
    server.aggregate_all(reports)
    est = server.estimate_all(range(k))
    times.append(time.perf_counter() - start)
print(json.dumps(min(times)))
"""


def krr_inversion(k: int, users: int, eps: float, repeat: int, peer_python: str | None) -> None:
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", "krr", domain, eps=eps)
    counts = np.random.default_rng(1).multinomial(users, np.random.default_rng(2).dirichlet(np.ones(k)))
    reports, mult = sample_cohort((mech,), counts, [np.random.default_rng(3)])
    obs = Observations.from_counts(domain, mech, reports, mult)
    inv_p = ldpsim.get_registry().create("estimator", "inv-p")
    matrix = mech.matrix  # built once, as a run's setup builds it

    def dense() -> np.ndarray:
        q = np.zeros(k)
        np.add.at(q, reports[:, 0], mult / users)
        v, *_ = np.linalg.lstsq(matrix.T, q, rcond=None)
        return project_simplex(v)

    per_user = np.repeat(reports[:, 0], mult)
    np.random.default_rng(4).shuffle(per_user)

    with one_blas_thread():
        t_new, est = best(lambda: inv_p.estimate(Observations.from_counts(domain, mech, reports, mult)), repeat)
        t_dense, old = best(dense, repeat)
        t_users, _ = best(
            lambda: inv_p.estimate(Observations.from_reports(domain, [(mech, per_user[:, None])])), repeat
        )
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI

        t_mf, _ = best(lambda: GRR_Aggregator_MI(per_user, k, eps), max(1, repeat // 3))
    diff = float(np.abs(est.distribution - old).max())
    print(f"k-RR inv-p, k = {k}, n = {users:,}, eps = {eps}, {len(obs.groups[0].counts)} distinct reports")
    print(f"  ldpsim inv-p (closed form), aggregated reports: {t_new * 1e3:8.2f} ms")
    print(f"  dense lstsq + projection (the path it replaces): {t_dense * 1e3:8.2f} ms  ({t_dense / t_new:.0f}x)")
    print(f"  ldpsim from {users:,} per-user reports (aggregate + inv-p): {t_users * 1e3:8.2f} ms")
    print(f"  multi-freq-ldpy GRR_Aggregator_MI on the per-user reports: {t_mf * 1e3:8.2f} ms")
    print(f"  max |closed form - dense| = {diff:.2e}")
    if peer_python:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "reports.npy"
            np.save(path, per_user)
            args = [peer_python, "-c", PURE_LDP, str(path), str(k), str(eps), str(max(1, repeat // 3))]
            out = subprocess.run(args, capture_output=True, text=True, check=False)
            if out.returncode == 0:
                print(f"  pure-ldp DEServer aggregate_all + estimate_all: {json.loads(out.stdout) * 1e3:8.2f} ms")
            else:
                print(f"  pure-ldp: not run ({out.stderr.strip().splitlines()[-1] if out.stderr else 'failed'})")


def _scenario(users: int, k: int) -> dict:
    return {
        "name": "deployed-oue",
        "seed": 1,
        "users": users,
        "domain": {"kind": "integers", "low": 0, "high": k - 1},
        "dataset": {"name": "zipf", "s": 1.1},
        "cohorts": {"all": {"reports": [{"mechanism": "oue", "eps": 1.0}]}},
        "estimators": ["inv-p"],
        "metrics": ["tv"],
    }


def oue_billion(k: int, users: int) -> None:
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", "oue", domain, eps=1.0)
    counts = np.random.default_rng(1).multinomial(users, np.random.default_rng(2).dirichlet(np.ones(k)))
    inv_p = ldpsim.get_registry().create("estimator", "inv-p")
    with one_blas_thread():
        t_draw, tally = best(lambda: mech.sample_bit_counts(counts, np.random.default_rng(3)), 3)
        obs = Observations(domain, [BitTally((mech,), tally, users)])
        t_est, est = best(lambda: inv_p.estimate(Observations(domain, [BitTally((mech,), tally, users)])), 3)
    start = time.perf_counter()
    result = ldpsim.run_scenario(_scenario(users, k))
    t_run = time.perf_counter() - start
    print(f"OUE, k = {k}, n = {users:,}, inv-p on per-bit counts ({obs!r})")
    print(f"  draw the per-bit counts: {t_draw * 1e3:8.2f} ms; inv-p on them: {t_est * 1e3:8.2f} ms")
    print(f"  TV of that estimate: {0.5 * np.abs(est.distribution - counts / users).sum():.2e}")
    print(
        f"  ldpsim.run_scenario (one task, from loading to results): {t_run:6.2f} s,"
        f" distinct reports {int(result['distinct_reports'].values.max())}, TV {float(result['tv'].values.max()):.2e}"
    )


def _timed(fn):
    """(wall s, CPU s of this process, result) of one call: on a shared machine the CPU time is the robust one."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def cms_billion(k: int, users: int, hashes: int = 65536) -> None:
    domain = Integers(low=0, high=k - 1)
    mech = ldpsim.get_registry().create("mechanism", "cms", domain, eps=8.0, hashes=hashes, buckets=1024)
    counts = np.random.default_rng(1).multinomial(users, np.random.default_rng(2).dirichlet(np.ones(k)))
    load = os.getloadavg()[0]
    with one_blas_thread():
        steps = {"hash table": _timed(lambda: mech.table)}
        steps["per-(hash, bucket) counts drawn"] = _timed(
            lambda: mech.sample_bit_counts(counts, np.random.default_rng(3))
        )
        tally = steps["per-(hash, bucket) counts drawn"][2]
        first = _timed(lambda: mech.bit_count_estimate(tally, users))  # builds and factors the collision matrix
        steps["estimate C^-1 s / n"] = _timed(lambda: mech.bit_count_estimate(tally, users))  # with it cached
        steps["collision matrix, Cholesky (once per mechanism)"] = (
            first[0] - steps["estimate C^-1 s / n"][0],
            first[1] - steps["estimate C^-1 s / n"][1],
            None,
        )
    est = steps["estimate C^-1 s / n"][2]
    print(f"CMS (Apple: eps 8, {hashes:,} hashes x 1,024 buckets), k = {k}, n = {users:,}")
    for name, (wall, cpu, _) in steps.items():
        print(f"  {name}: {wall:6.2f} s wall, {cpu:6.2f} s CPU")
    wall = sum(v[0] for v in steps.values())
    cpu = sum(v[1] for v in steps.values())
    print(
        f"  total {wall:6.2f} s wall, {cpu:6.2f} s CPU; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(f"  max |estimate - truth| = {np.abs(est - counts / users).max():.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--values", type=int, default=1024)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peer-python", default=None)
    parser.add_argument("--big-users", type=int, default=10**9)
    parser.add_argument("--parts", default="krr,oue,cms")
    parser.add_argument("--hashes", type=int, default=65536, help="CMS: hashes of the family (Apple's 65,536)")
    args = parser.parse_args()
    parts = args.parts.split(",")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    if "krr" in parts:
        krr_inversion(args.values, args.users, args.eps, args.repeat, args.peer_python)
    if "oue" in parts:
        oue_billion(args.values, args.big_users)
    if "cms" in parts:
        cms_billion(args.values, args.big_users, args.hashes)


if __name__ == "__main__":
    main()
