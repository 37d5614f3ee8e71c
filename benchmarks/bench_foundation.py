"""Simulation plus IBU for 10^6 users on 100 values, beside the peer libraries.

    pip install -e '.[bench]'          # adds pure-ldp and multi-freq-ldpy
    python benchmarks/bench_foundation.py [--users 1000000] [--repeat 3]

Prints, per step, the best-of-``repeat`` wall time of ldpsim and of each peer
and their ratio. Peers that are not installed are skipped. The IBU rows run a
fixed number of iterations on the same reports, so they compare the cost per
iteration and double as a check that the independent implementations agree.
This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
from timing import best  # benchmarks/timing.py: scripts run from benchmarks/

import ldpsim
from ldpsim import Integers, Likelihood, Observations, gibu


def row(task, ours, peers=()):
    print(f"{task:50s} {ours:9.3f} s")
    for seconds, name in peers:
        print(
            f"{'':8s}{name:42s} {seconds:9.3f} s   {seconds / ours:7.1f}x slower"
            if seconds >= ours
            else f"{'':8s}{name:42s} {seconds:9.3f} s   {ours / seconds:7.1f}x faster"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=1000, help="IBU iterations for the fixed-work comparison")
    args = parser.parse_args()
    n, k = args.users, 100
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    rng = np.random.default_rng(0)
    values = registry.create("dataset", "binomial", domain, p=0.5).sample(n, rng)
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}, {n} users, {k} values"
    )
    print(f"{'step (ldpsim, then the peers doing the same work)':50s} {'time':>11s}")

    for name, eps in (("krr", 1.0), ("geometric", 0.1)):
        mech = registry.create("mechanism", name, domain, eps=eps)
        t_sim, reports = best(lambda: mech.sample(values, np.random.default_rng(1)), args.repeat)
        inv_n = registry.create("estimator", "inv-n")
        t_agg, obs = best(lambda: Observations.from_reports(domain, [(mech, reports)]), args.repeat)
        t_inv, _ = best(lambda: inv_n.estimate(Observations.from_reports(domain, [(mech, reports)])), args.repeat)
        t_ibu, result = best(lambda: gibu(Likelihood(obs)), args.repeat)
        t_fixed, fixed = best(lambda: gibu(Likelihood(obs), delta=1e-300, max_iter=args.iterations), args.repeat)
        peers = {}
        if name == "krr":
            peers = run_peers(values, reports[:, 0], k, eps, args)
        row(f"{name} eps={eps}: simulate {n} reports", t_sim, peers.get("simulate", ()))
        row(f"{name} eps={eps}: aggregate and estimate by inversion", t_inv, peers.get("aggregate", ()))
        row(f"{name} eps={eps}: IBU to default delta ({result.iterations} it.)", t_ibu)
        row(f"{name} eps={eps}: IBU, {args.iterations} iterations", t_fixed, peers.get("ibu", ()))
        row(f"{name} eps={eps}: simulate + aggregate + IBU to delta", t_sim + t_agg + t_ibu)
        if peers.get("ibu_theta") is not None:
            diff = np.abs(peers["ibu_theta"] - fixed.theta).max()
            print(
                f"{'':8s}multi-freq-ldpy's IBU after {args.iterations} iterations differs from ldpsim's by at most {diff:.1e}"
            )


def run_peers(values, reports, k, eps, args):
    """k-RR in the peers: per-user clients, their aggregation and IBU."""
    out = {"simulate": [], "aggregate": [], "ibu": [], "ibu_theta": None}
    data = values.tolist()
    try:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU, GRR_Aggregator_MI, GRR_Client

        GRR_Client(0, k, eps)  # compile before timing
        GRR_Aggregator_IBU(reports[:10].tolist(), k, eps, nb_iter=2, tol=1e-300)
        t_sim, _ = best(lambda: [GRR_Client(x, k, eps) for x in data], 1)
        rep_list = reports.tolist()
        t_agg, _ = best(lambda: GRR_Aggregator_MI(rep_list, k, eps), 1)
        t_ibu, theta = best(
            lambda: GRR_Aggregator_IBU(rep_list, k, eps, nb_iter=args.iterations, tol=1e-300), args.repeat
        )
        out["simulate"].append((t_sim, "multi-freq-ldpy GRR_Client, per user"))
        out["aggregate"].append((t_agg, "multi-freq-ldpy GRR_Aggregator_MI"))
        out["ibu"].append((t_ibu, "multi-freq-ldpy GRR_Aggregator_IBU (numba)"))
        from multi_freq_ldpy.estimators.Histogram_estimator import IBU

        a = np.full((k, k), 1 / (np.exp(eps) + k - 1))
        np.fill_diagonal(a, np.exp(eps) / (np.exp(eps) + k - 1))
        q = np.bincount(reports, minlength=k) / len(reports)
        t_kernel, _ = best(lambda: IBU(k, a, q, args.iterations, 1e-300, "max_abs"), args.repeat)
        out["ibu"].append((t_kernel, "  its IBU kernel alone (no counting)"))
        out["ibu_theta"] = np.asarray(theta)
    except ImportError:
        print("(multi-freq-ldpy is not installed: skipped)")
    try:
        from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer

        client = DEClient(eps, k, index_mapper=lambda x: x)
        server = DEServer(eps, k, index_mapper=lambda x: x)
        t_sim, priv = best(lambda: [client.privatise(x) for x in data], 1)

        def aggregate():
            server.update_params(eps, k)
            for r in priv:
                server.aggregate(r)
            return [server.estimate(i, suppress_warnings=True) for i in range(k)]

        t_agg, _ = best(aggregate, 1)
        out["simulate"].append((t_sim, "pure-ldp DEClient.privatise, per user"))
        out["aggregate"].append((t_agg, "pure-ldp DEServer.aggregate + estimate"))
    except ImportError:
        print("(pure-ldp is not installed: skipped)")
    return out


if __name__ == "__main__":
    main()
