"""Count-mean sketch at scale (CMS, k = 1024, n = 10^6, eps = 1): the likelihood operator before and after.

    python benchmarks/bench_cms_scale.py [--users 1000000] [--values 1024] [--buckets 128] [--mle]

"before" rebuilds the previous operator, kept here as written: the reports' set bits as a
float64 CSR matrix spread into their hash's block, times the (hash, bucket) x value incidence
matrix. "after" is what ``Likelihood.of`` uses now (the packed reports read by per-byte tables,
grouped by hash). Nearly every report is distinct, so the operator spans ~n rows. ``--mle`` runs
the exact MLE (KKT 1e-6) on the current operator. A measurement, not a test; best of --repeat.
"""

from __future__ import annotations

import argparse
import math
import platform

import numpy as np
from timing import best  # benchmarks/timing.py: scripts run from benchmarks/

import ldpsim
from ldpsim import Integers, Observations, rank_one_plus_sparse


def old_operator(mech, reports):
    """The previous operator: a float64 CSR of the set bits times the hash incidence matrix."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import aslinearoperator

    j, bits = mech._checked(reports)
    k, m = mech.domain.size, mech.buckets
    rows, cols = np.nonzero(bits)
    spread = csr_matrix((np.ones(rows.size), (rows, j[rows] * m + cols)), shape=(j.size, mech.hashes * m))
    hashed = csr_matrix(
        (
            np.ones(mech.hashes * k),
            ((np.arange(mech.hashes)[:, None] * m + mech.table).ravel(), np.tile(np.arange(k), mech.hashes)),
        ),
        shape=(mech.hashes * m, k),
    )
    return rank_one_plus_sparse(aslinearoperator(spread) @ aslinearoperator(hashed), math.exp(-mech.eps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--values", type=int, default=1024)
    parser.add_argument("--buckets", type=int, default=128)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--mle", action="store_true", help="also run the exact MLE")
    args = parser.parse_args()
    n, k, rep = args.users, args.values, args.repeat
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    values = registry.create("dataset", "zipf", domain, s=1.1).sample(n, np.random.default_rng(0))
    truth = np.bincount(values, minlength=k) / n
    mech = registry.create("mechanism", "cms", domain, eps=args.eps, buckets=args.buckets)
    reports = mech.sample(values, np.random.default_rng(1))
    obs = Observations.from_reports(domain, [(mech, reports)])
    distinct = obs.groups[0].reports
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}; CMS "
        f"(m = {args.buckets}, {mech.hashes} hashes), {n} users ({distinct.shape[0]} distinct reports), "
        f"{k} values (Zipf 1.1), eps = {args.eps}, best of {rep}"
    )
    rows: list[tuple[str, str, str]] = []
    t_old, op_old = best(lambda: old_operator(mech, distinct), 1)
    t_new, (_, op_new) = best(lambda: mech.structured_likelihood(distinct), rep)
    rows.append(("likelihood operator built (s)", f"{t_old:.2f}", f"{t_new:.2f}"))
    theta, w = np.full(k, 1.0 / k), np.ones(distinct.shape[0])
    t_old, _ = best(lambda: (op_old @ theta, op_old.T @ w), rep)
    t_new, _ = best(lambda: (op_new @ theta, op_new.T @ w), rep)
    rows.append(("one pass, H theta + H^T w (s)", f"{t_old:.3f}", f"{t_new:.3f}"))
    if args.mle:
        t_mle, est = best(lambda: registry.create("estimator", "mle").estimate(obs), 1)
        rows.append(("mle, KKT 1e-6, all included (s)", "", f"{t_mle:.1f}"))
        rows.append(("mle iterations / KKT", "", f"{est.iterations} / {est.kkt:.1e}"))
        rows.append(("TV mle", "", f"{0.5 * np.abs(est.distribution - truth).sum():.4f}"))
    print(f"\n  {'':40s} {'before':>10s} {'after':>10s}")
    for label, before, after in rows:
        print(f"  {label:40s} {before:>10s} {after:>10s}")


if __name__ == "__main__":
    main()
