"""Unary encoding (OUE) and local hashing (OLH): speed and accuracy beside the peer libraries.

    pip install -e '.[bench]'
    python benchmarks/bench_frequency_oracles.py [--users 100000] [--values 100] [--eps 1] [--repeat 3]
        [--oracles oue,olh]

For each repetition the same reports feed every estimator, so accuracy differences come from the
estimators alone: ldpsim's GIBU on whole reports (the MLE), ldpsim's INV-P on the per-bit / support
unbiased estimate, and multi-freq-ldpy's IBU on per-bit counts with a k x k matrix (its
UE_Aggregator_IBU / LH_Aggregator_IBU). Peer clients simulate one user per Python call; they are
timed on at most --client-users users and the time is scaled to --users (printed as such).
``--oracles`` names any of ldpsim's frequency oracles (peer rows exist for oue and olh only).
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import ldpsim
from ldpsim import Integers, Observations


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def tv(a, b):
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def unpack_bits(reports: np.ndarray, k: int) -> np.ndarray:
    """ldpsim's packed unary reports (62 bits per int64 word) as an (n, k) 0/1 array."""
    j = np.arange(k)
    return ((reports[:, j // 62] >> (j % 62)) & 1).astype(np.int64)  # int8 would overflow in the peer's sum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--values", type=int, default=100)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--client-users", type=int, default=10_000)
    parser.add_argument("--oracles", default="oue,olh", help="comma-separated ldpsim mechanism names")
    args = parser.parse_args()
    n, k, eps = args.users, args.values, args.eps
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    dataset = registry.create("dataset", "zipf", domain, s=1.1)
    ibu, inv_p = registry.create("estimator", "ibu"), registry.create("estimator", "inv-p")
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}; "
        f"{n} users, {k} values (Zipf 1.1), eps = {eps}, {args.repeat} repetitions"
    )
    try:
        from multi_freq_ldpy.pure_frequency_oracles import LH as mf_lh
        from multi_freq_ldpy.pure_frequency_oracles import UE as mf_ue
    except ImportError:
        mf_ue = mf_lh = None
        print("(multi-freq-ldpy is not installed: peer rows skipped)")
    else:  # compile its numba kernels before anything is timed
        mf_ue.UE_Aggregator_IBU(np.eye(k, dtype=np.int64)[:3], k, eps, optimal=True, nb_iter=2)
        mf_ue.UE_Client(0, k, eps, optimal=True)
        try:
            mf_lh.LH_Client(0, k, eps, optimal=True)
        except Exception:  # its failure is reported where it is timed
            pass

    for name in args.oracles.split(","):
        mech = registry.create("mechanism", name, domain, eps=eps)
        rows: dict[str, list[float]] = {}

        def add(label, value):
            rows.setdefault(label, []).append(value)

        for rep in range(args.repeat):
            rng = np.random.default_rng(rep)
            values = dataset.sample(n, rng)
            truth = np.bincount(values, minlength=k) / n
            t_sim, reports = timed(lambda: mech.sample(values, rng))
            t_agg, obs = timed(lambda: Observations.from_reports(domain, [(mech, reports)]))
            t_ibu, est = timed(lambda: ibu.estimate(obs))
            t_inv, inv = timed(lambda: inv_p.estimate(obs))
            add("ldpsim: simulate (s)", t_sim)
            add("ldpsim: aggregate (s)", t_agg)
            add("ldpsim: GIBU on whole reports (s)", t_ibu)
            add("ldpsim: GIBU iterations to the default delta", est.iterations)
            add("ldpsim: INV-P (s)", t_inv)
            add("TV ldpsim GIBU on whole reports", tv(est.distribution, truth))
            add("TV ldpsim INV-P", tv(inv.distribution, truth))
            if mf_ue is not None and name in ("oue", "olh"):
                m = min(n, args.client_users)
                peer = None
                if name == "oue":
                    t_client, _ = timed(lambda: [mf_ue.UE_Client(int(v), k, eps, optimal=True) for v in values[:m]])
                    bits = unpack_bits(reports, k)
                    t_peer, peer = timed(lambda: mf_ue.UE_Aggregator_IBU(bits, k, eps, optimal=True))
                else:
                    try:
                        t_client, _ = timed(lambda: [mf_lh.LH_Client(int(v), k, eps, optimal=True) for v in values[:m]])
                    except Exception as exc:  # a peer's own bug: say so and go on
                        if rep == 0:
                            print(f"(multi-freq-ldpy LH_Client fails here: {type(exc).__name__}: {exc})")
                        t_client = None
                if t_client is not None:
                    add(f"multi-freq-ldpy: simulate (s, timed on {m} users, scaled)", t_client * n / m)
                if peer is not None:
                    add("multi-freq-ldpy: IBU on per-bit counts (s)", t_peer)
                    add("TV multi-freq-ldpy per-bit IBU", tv(peer, truth))
        print(f"\n{name}:")
        for label, vals in rows.items():
            mean = np.mean(vals)
            spread = f" ± {np.std(vals, ddof=1):.2g}" if len(vals) > 1 else ""
            print(f"  {label:62s} {mean:10.4g}{spread}")


if __name__ == "__main__":
    main()
