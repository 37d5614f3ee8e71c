"""Every finite-output frequency oracle beside pure-ldp 1.2.0 and multi-freq-ldpy 0.2.5, on their own protocols.

    pip install -e '.[bench]'
    python benchmarks/bench_peers.py [--users 1000000] [--values 1024] [--eps 1] [--peer-users 10000]
        [--oracles krr,oue,olh,blh,flh,the,she,subset_selection,hadamard,cms,hcms] [--no-mle]

ldpsim simulates all --users users as its scenarios do (`sample_cohort`: one multinomial per value
where the mechanism has a report matrix, else `Mechanism.sample` per user; `Mechanism.sample` alone is
timed beside it), aggregates the distinct reports (`Observations.from_counts`) and runs `inv-p` (the literature's unbiased estimate
projected on the simplex) and `mle` (GIBU on the exact per-report likelihood, relative KKT 1e-6).
The peers' clients and servers handle one user per Python call, so they run on the first
--peer-users users only and their seconds are scaled linearly to --users (printed as such); their
TV is that of --peer-users users (pure-ldp: `estimate_all(..., normalization=2)`, the simplex
projection; multi-freq-ldpy: its `*_Aggregator_MI` as returned). ldpsim's TV is printed at both
sizes. The ratio is the faster peer's scaled client seconds over ldpsim's simulation seconds.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ldpsim
from ldpsim import Integers, Observations
from ldpsim.theory.sampling import counted, sample_cohort


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def tv(a: Any, b: Any) -> float:
    return 0.5 * float(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).sum())


def pure_ldp_pair(name: str, k: int, eps: float) -> tuple[Any, Any] | None:
    """A pure-ldp client and server for ldpsim's oracle `name` (0-based values), or None."""
    from pure_ldp.frequency_oracles import (
        apple_cms,
        direct_encoding,
        hadamard_response,
        histogram_encoding,
        local_hashing,
        unary_encoding,
    )

    ident = {"index_mapper": lambda x: x}
    if name == "krr":
        return direct_encoding.DEClient(eps, k, **ident), direct_encoding.DEServer(eps, k, **ident)
    if name == "oue":
        return (
            unary_encoding.UEClient(eps, k, use_oue=True, **ident),
            unary_encoding.UEServer(eps, k, use_oue=True, **ident),
        )
    if name in ("olh", "blh"):
        olh = name == "olh"
        return (
            local_hashing.LHClient(eps, k, g=2, use_olh=olh, **ident),
            local_hashing.LHServer(eps, k, g=2, use_olh=olh, **ident),
        )
    if name == "flh":  # ldpsim's default pool: 1000 hashes, OLH's g
        server = local_hashing.FastLHServer(eps, k, 1000, use_olh=True, **ident)
        return local_hashing.FastLHClient(eps, k, 1000, use_olh=True, **ident), server
    if name in ("the", "she"):
        server = histogram_encoding.HEServer(eps, k, use_the=name == "the", **ident)
        return histogram_encoding.HEClient(eps, k, **ident), server
    if name == "hadamard":
        server = hadamard_response.HadamardResponseServer(eps, k, **ident)
        return hadamard_response.HadamardResponseClient(eps, k, server.get_hash_funcs(), **ident), server
    if name in ("cms", "hcms"):  # ldpsim's defaults: 16 hashes of 128 buckets
        server = apple_cms.CMSServer(eps, 16, 128, is_hadamard=name == "hcms", index_mapper=lambda x: x)
        return apple_cms.CMSClient(eps, server.hash_funcs, 128, is_hadamard=name == "hcms"), server
    return None


def run_pure_ldp(name: str, values: np.ndarray, k: int, eps: float) -> tuple[float, float, np.ndarray] | None:
    try:
        pair = pure_ldp_pair(name, k, eps)
    except Exception as exc:  # a peer's own bug: say so and go on
        print(f"  (pure-ldp {name} fails: {type(exc).__name__}: {exc})")
        return None
    if pair is None:
        return None
    client, server = pair

    def aggregate() -> np.ndarray:
        for r in reports:
            server.aggregate(r)
        return np.asarray(server.estimate_all(range(k), suppress_warnings=True, normalization=2), dtype=float)

    try:
        t_client, reports = timed(lambda: [client.privatise(int(v)) for v in values])
        t_agg, est = timed(aggregate)
    except Exception as exc:  # a peer's own bug: say so and go on
        print(f"  (pure-ldp {name} fails: {type(exc).__name__}: {exc})")
        return None
    return t_client, t_agg, est / max(est.sum(), 1e-300)


def run_multi_freq(name: str, values: np.ndarray, k: int, eps: float) -> tuple[float, float, np.ndarray] | None:
    from multi_freq_ldpy.pure_frequency_oracles import GRR, HE, LH, SS, UE

    client: Callable[[int], Any]
    server: Callable[[Any], Any]
    if name == "krr":
        client, server = (lambda v: GRR.GRR_Client(v, k, eps)), (lambda r: GRR.GRR_Aggregator_MI(r, k, eps))
    elif name == "oue":
        client, server = (lambda v: UE.UE_Client(v, k, eps, True)), (lambda r: UE.UE_Aggregator_MI(r, eps, True))
    elif name in ("olh", "blh"):
        o = name == "olh"
        client, server = (lambda v: LH.LH_Client(v, k, eps, o)), (lambda r: LH.LH_Aggregator_MI(r, k, eps, o))
    elif name in ("the", "she"):
        th = name == "the"
        client, server = (lambda v: HE.HE_Client(v, k, eps)), (lambda r: HE.HE_Aggregator_MI(r, k, eps, th))
    elif name == "subset_selection":
        client, server = (lambda v: SS.SS_Client(v, k, eps)), (lambda r: SS.SS_Aggregator_MI(r, k, eps))
    else:
        return None
    try:
        t_client, reports = timed(lambda: [client(int(v)) for v in values])
        t_agg, est = timed(lambda: server(np.asarray(reports) if name in ("oue", "the", "she") else reports))
    except Exception as exc:  # a peer's own bug: say so and go on
        print(f"  (multi-freq-ldpy {name} fails: {type(exc).__name__}: {exc})")
        return None
    return t_client, t_agg, np.asarray(est, dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--values", type=int, default=1024)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--peer-users", type=int, default=10_000)
    parser.add_argument("--oracles", default="krr,oue,olh,blh,flh,the,she,subset_selection,hadamard,cms,hcms")
    parser.add_argument("--no-mle", action="store_true", help="skip ldpsim's mle at --users")
    args = parser.parse_args()
    n, m, k, eps = args.users, min(args.peer_users, args.users), args.values, args.eps
    registry = ldpsim.get_registry()
    domain = Integers(low=0, high=k - 1)
    dataset = registry.create("dataset", "zipf", domain, s=1.1)
    inv_p, mle = registry.create("estimator", "inv-p"), registry.create("estimator", "mle")
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}; "
        f"{n} users ({m} for the peers, seconds scaled by {n / m:g}), k = {k} (Zipf 1.1), eps = {eps}"
    )
    rng = np.random.default_rng(2017)
    values = dataset.sample(n, rng)
    value_counts = np.bincount(values, minlength=k)
    truth = value_counts / n
    truth_m = np.bincount(values[:m], minlength=k) / m
    header = "| oracle | who | client s | aggregate s | estimate s | TV | client ratio (peer / ldpsim) |"
    print(header + "\n| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.oracles.split(","):
        mech = registry.create("mechanism", name, domain, eps=eps)
        # The engine's simulation (count-level where the mechanism has a matrix) gives distinct reports
        # and their counts; `Mechanism.sample` (one report per user) is timed beside it.
        t_sim, (distinct, mult) = timed(lambda: sample_cohort([mech], value_counts, [rng]))
        t_agg, obs = timed(lambda: Observations.from_counts(domain, mech, distinct, mult))
        t_user, reports = timed(lambda: mech.sample(values, rng))
        path = "count-level" if counted([mech], n) else "per user"
        t_inv, inv = timed(lambda: inv_p.estimate(obs))
        small = Observations.from_reports(domain, [(mech, reports[:m])])
        tv_small = tv(inv_p.estimate(small).distribution, truth_m)
        peers = {}
        for who, run in (("pure-ldp", run_pure_ldp), ("multi-freq-ldpy", run_multi_freq)):
            if run(name, values[:20], k, eps) is None:  # compiles multi-freq-ldpy's numba kernels untimed
                continue
            got = run(name, values[:m], k, eps)
            if got is not None:
                peers[who] = got
        best = min((c for c, _, _ in peers.values()), default=math.nan) * n / m
        print(
            f"| `{name}` | ldpsim inv-p ({path}; `sample` {t_user:.3g} s) | {t_sim:.3g} | {t_agg:.3g} | {t_inv:.3g} | "
            f"{tv(inv.distribution, truth):.4f} ({tv_small:.4f} at {m}) | {best / t_sim:.3g} |"
        )
        if not args.no_mle:
            t_mle, est = timed(lambda: mle.estimate(obs))
            print(f"| `{name}` | ldpsim mle (KKT 1e-6) | | | {t_mle:.3g} | {tv(est.distribution, truth):.4f} | |")
        for who, (t_c, t_a, est_p) in peers.items():
            print(
                f"| `{name}` | {who} (scaled from {m}) | {t_c * n / m:.3g} | {t_a * n / m:.3g} | | "
                f"{tv(est_p, truth_m):.4f} at {m} | |"
            )


if __name__ == "__main__":
    main()
