"""Unary encodings at scale (OUE, k = 1000, n = 10^6): before and after side by side in one run, beside multi-freq-ldpy.

    pip install -e '.[bench]'
    python benchmarks/bench_unary_scale.py [--users 1000000] [--values 1000] [--eps 1] [--mle] [--repeat 2]

"before" rows rerun the previous code paths, kept here as written: the sampler drawing one float
per user and value (then ``pack_bits``), and the likelihood as a float64 CSR matrix of the set
bits (``bit_matrix`` + ``rank_one_plus_sparse``). "after" rows are what ``mech.sample`` and
``Likelihood.of`` do now. One pass is ``H @ theta`` plus ``H.T @ w``; its floor is the bytes of
the layout it reads (twice: the packed reports and their transposed copy) at the read bandwidth
of a large numpy array measured in the same run. multi-freq-ldpy's client runs one user per
Python call: timed on --client-users users and scaled. ``--mle`` adds the exact MLE (KKT 1e-6),
which takes minutes. A measurement, not a test; best of --repeat.
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
from timing import best  # benchmarks/timing.py: scripts run from benchmarks/

import ldpsim
from ldpsim import Integers, Likelihood, Observations, rank_one_plus_sparse


def old_sample(mech, values, rng):
    """The previous sampler: one uniform per user and value."""
    k, p, q = mech.domain.size, mech.p, mech.q
    out = np.empty((values.shape[0], mech.report_width), dtype=np.int64)
    step = mech.chunk_rows()
    for start in range(0, values.shape[0], step):
        x = values[start : start + step]
        u = rng.random((x.shape[0], k))
        bits = u < q
        rows = np.arange(x.shape[0])
        bits[rows, x] = u[rows, x] < p
        out[start : start + x.shape[0]] = mech.pack_bits(bits)
    return out


def old_operator(mech, reports):
    bits = mech.bit_matrix(reports)
    lo, lz = mech._log_ratios
    return rank_one_plus_sparse(bits, float(np.exp(lz - lo))), bits


def read_bandwidth(repeat):
    """Bytes per second of a sum over a 1 GB int64 array (the memory-bandwidth floor)."""
    big = np.ones(1 << 27, dtype=np.int64)
    t, _ = best(lambda: big.sum(), repeat)
    return big.nbytes / t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--values", type=int, default=1000)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--client-users", type=int, default=10_000)
    parser.add_argument("--mle", action="store_true", help="also run the exact MLE (minutes)")
    args = parser.parse_args()
    n, k, eps, rep = args.users, args.values, args.eps, args.repeat
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    values = registry.create("dataset", "zipf", domain, s=1.1).sample(n, np.random.default_rng(0))
    truth = np.bincount(values, minlength=k) / n
    mech = registry.create("mechanism", "oue", domain, eps=eps)
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}; "
        f"OUE, {n} users, {k} values (Zipf 1.1), eps = {eps}, best of {rep}"
    )
    rows: list[tuple[str, str, str]] = []
    t_old, old_reports = best(lambda: old_sample(mech, values, np.random.default_rng(1)), rep)
    t_new, reports = best(lambda: mech.sample(values, np.random.default_rng(1)), rep)
    rows.append(("simulate (s)", f"{t_old:.2f}", f"{t_new:.2f}"))
    del old_reports
    obs = Observations.from_reports(domain, [(mech, reports)])
    distinct = obs.groups[0].reports
    t_old, (op_old, bits) = best(lambda: old_operator(mech, distinct), 1)
    t_new, lik = best(lambda: Likelihood.of(obs), rep)
    rows.append(("whole-report likelihood built (s)", f"{t_old:.2f}", f"{t_new:.2f}"))
    theta = np.full(k, 1.0 / k)
    w = np.ones(distinct.shape[0])
    t_old, _ = best(lambda: (op_old @ theta, op_old.T @ w), rep)
    t_new, _ = best(lambda: (lik.H @ theta, lik.H.T @ w), rep)
    rows.append(("one pass, H theta + H^T w (s)", f"{t_old:.3f}", f"{t_new:.3f}"))
    bandwidth = read_bandwidth(rep)
    old_bytes = bits.nnz * (8 + 4) + bits.indptr.nbytes
    new_bytes = 2 * distinct.shape[0] * (-(-k // 8))
    del bits
    rows.append(("bytes read per pass (MB)", f"{old_bytes / 1e6:.0f}", f"{new_bytes / 1e6:.0f}"))
    rows.append(
        (
            f"pass floor at {bandwidth / 1e9:.1f} GB/s (s)",
            f"{old_bytes / bandwidth:.3f}",
            f"{new_bytes / bandwidth:.3f}",
        )
    )
    inv_p = registry.create("estimator", "inv-p")
    t_inv, est = best(lambda: inv_p.estimate(obs), rep)
    rows.append(("inv-p (s)", "", f"{t_inv:.2f}"))
    rows.append(("TV inv-p", "", f"{0.5 * np.abs(est.distribution - truth).sum():.4f}"))
    if args.mle:
        mle = registry.create("estimator", "mle")
        t_mle, est = best(lambda: mle.estimate(obs), 1)
        rows.append(("mle, KKT 1e-6 (s)", "", f"{t_mle:.1f}"))
        rows.append(("mle passes", "", f"{est.iterations}"))
        rows.append(("TV mle", "", f"{0.5 * np.abs(est.distribution - truth).sum():.4f}"))
    try:
        from multi_freq_ldpy.pure_frequency_oracles import UE as mf_ue
    except ImportError:
        print("(multi-freq-ldpy is not installed: peer rows skipped)")
    else:
        m = min(n, args.client_users)
        mf_ue.UE_Client(0, k, eps, optimal=True)
        t_client, _ = best(lambda: [mf_ue.UE_Client(int(v), k, eps, optimal=True) for v in values[:m]], 1)
        j = np.arange(k)
        dense_bits = ((reports[:, j // 62] >> (j % 62)) & 1).astype(np.int64)
        t_mi, peer = best(lambda: mf_ue.UE_Aggregator_MI(dense_bits, eps, optimal=True), rep)
        rows.append((f"multi-freq-ldpy: simulate (s, {m} users scaled)", "", f"{t_client * n / m:.1f}"))
        rows.append(("multi-freq-ldpy: matrix inversion (s)", "", f"{t_mi:.2f}"))
        rows.append(("TV multi-freq-ldpy MI", "", f"{0.5 * np.abs(np.asarray(peer) - truth).sum():.4f}"))
    print(f"\n  {'':52s} {'before':>10s} {'after':>10s}")
    for label, before, after in rows:
        print(f"  {label:52s} {before:>10s} {after:>10s}")


if __name__ == "__main__":
    main()
