"""Scale: exact MLEs beside multi-freq-ldpy's IBU, huge simulated populations, a 256 x 256 planar grid.

    pip install -e '.[bench]'
    python benchmarks/bench_scale.py                 # everything (a few minutes on 2 cores)
    python benchmarks/bench_scale.py --only oracles  # or: simulation, planar

Frequency oracles (GRR = k-RR, OUE and RAPPOR = SUE, eps = 1, Zipf(1.1) users): for each (k, n)
the same reports feed every estimator. The reference is the exact MLE: for k-RR the closed form
(``krr-mle``), for OUE and RAPPOR ldpsim's ``mle`` on whole reports certified to a relative KKT
violation of 1e-9. Every estimator builds its likelihood itself (timed with it). Each row gives the
time, the iterations, the log-likelihood still missing to the exact MLE (nats, on the whole-report
likelihood), TV to the users' true histogram and TV to the exact MLE.
multi-freq-ldpy runs its defaults (plain EM on a dense k x k matrix, at most 10,000 iterations,
tol 1e-12 on the max-abs change); it does not report its iteration count. Its OUE aggregator is
given the per-user bit matrix it expects (int32; int8 overflows in its column sums).

A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

import ldpsim
from ldpsim import Grid, Integers, Observations
from ldpsim.base.memory import MemoryLimitError
from ldpsim.theory.sampling import sample_cohort

#: k * n above which OUE's plain-EM row is skipped (its passes over ~n distinct bit vectors take minutes)
SLOW_PASSES = 10**8


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def tv(a, b) -> float:
    return 0.5 * float(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).sum())


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def unpack_bits(reports: np.ndarray, counts: np.ndarray, k: int) -> np.ndarray:
    """ldpsim's packed unary reports (62 bits per int64 word), one row per user, as 0/1 int32."""
    rows = np.repeat(np.arange(len(counts)), counts)
    out = np.empty((rows.size, k), dtype=np.int32)
    j = np.arange(k)
    step = max(1, (1 << 24) // k)
    for s in range(0, rows.size, step):
        r = reports[rows[s : s + step]]
        out[s : s + step] = (r[:, j // 62] >> (j % 62)) & 1
    return out


def oracles(eps: float, sizes: list[tuple[int, int]]) -> None:
    registry = ldpsim.get_registry()
    try:
        from multi_freq_ldpy.pure_frequency_oracles import GRR as mf_grr
        from multi_freq_ldpy.pure_frequency_oracles import UE as mf_ue
    except ImportError:
        mf_grr = mf_ue = None
        print("(multi-freq-ldpy is not installed: peer rows skipped; pip install -e '.[bench]')")
    else:  # compile its numba kernels before anything is timed
        mf_grr.GRR_Aggregator_IBU(np.array([0, 1, 2]), 3, eps, nb_iter=2)
        mf_ue.UE_Aggregator_IBU(np.eye(3, dtype=np.int32), 3, eps, optimal=True, nb_iter=2)
    for k, n in sizes:
        domain = Integers(low=0, high=k - 1)
        dataset = registry.create("dataset", "zipf", domain, s=1.1)
        rng = np.random.default_rng([k, n])
        # RAPPOR (basic one-time: symmetric unary encoding) is multi-freq-ldpy's UE with optimal=False
        for name, peer_label in (("krr", "GRR"), ("oue", "OUE"), ("rappor", "SUE (RAPPOR)")):
            mech = registry.create("mechanism", name, domain, eps=eps)

            def simulate():
                values = dataset.sample_counts(n, rng)
                reports, counts = sample_cohort([mech], values, [rng])
                return values, Observations.from_counts(domain, mech, reports, counts)

            t_sim, (values, obs) = timed(simulate)
            truth = values / n
            likelihood = ldpsim.Likelihood.of(obs)
            if name == "krr":
                t_ref, ref = timed(lambda: registry.create("estimator", "krr-mle").estimate(obs))
                ref_label = f"exact MLE, closed form (krr-mle) | {t_ref:.3f} s"
            else:
                exact = registry.create("estimator", "mle", tol=1e-9)
                t_ref, ref = timed(lambda: exact.estimate(obs))
                ref_label = f"exact MLE reference (mle, KKT < {exact.tol:g}) | {t_ref:.3f} s"
            best = ref.loglik
            rows = []

            def row(label, seconds, iterations, theta, loglik=None):
                # an estimate without a certificate (inv-p at scale: certify = "auto") has loglik nan
                loglik = likelihood.loglik(theta) if loglik is None or math.isnan(loglik) else loglik
                rows.append(
                    [
                        label,
                        f"{seconds:.3f} s",
                        iterations,
                        f"{max(best - loglik, 0.0):.3g}",
                        f"{tv(theta, truth):.4f}",
                        f"{tv(theta, ref.distribution):.2g}",
                    ]
                )

            rows.append(
                [
                    f"simulate {n:,} users (count-level)" if name == "krr" else f"simulate {n:,} users (bit-packed)",
                    f"{t_sim:.3f} s",
                    "",
                    "",
                    "",
                    "",
                ]
            )
            label, secs = ref_label.split(" | ")
            row(label, t_ref, str(ref.iterations) if ref.iterations else "", ref.distribution, ref.loglik)
            variants = [
                ("ldpsim IBU, paper rule (delta 0.01 nats)", {}),
                (
                    "ldpsim exact MLE (SQUAREM, KKT < 1e-6)",
                    {"stop": "kkt", "accelerate": "squarem", "max_iter": 100_000},
                ),
                ("ldpsim exact MLE (mle: interior-point Newton, KKT < 1e-6)", {"stop": "kkt"}),
                ("ldpsim INV-P", None),
            ]
            if name != "krr" and k * n > SLOW_PASSES:
                # each EM pass visits ~n distinct reports with ~k/(1+e^eps) set bits: plain EM's ~10^3 passes
                # would take many minutes, SQUAREM's ~200 more than a minute
                variants = variants[2:]
                rows.append(["ldpsim IBU, paper rule, plain EM, and SQUAREM", "not run", "", "", "", "(minutes here)"])
            for est_label, params in variants:
                if params is None:
                    est = registry.create("estimator", "inv-p")
                elif "mle" in est_label:
                    est = registry.create("estimator", "mle", tol=1e-6)
                else:
                    est = registry.create("estimator", "ibu", **params)
                t, res = timed(
                    lambda est=est: est.estimate(Observations(obs.domain, obs.groups))
                )  # no cached likelihood
                row(est_label, t, str(res.iterations) if params is not None else "", res.distribution, res.loglik)
                if params is not None and params.get("stop") == "kkt":
                    row(
                        est_label.replace("exact MLE", "exact MLE incl. simulation"),
                        t + t_sim,
                        str(res.iterations),
                        res.distribution,
                        res.loglik,
                    )
            if mf_grr is not None:
                if name == "krr":
                    per_user = np.repeat(obs.groups[0].reports[:, 0], obs.groups[0].counts)
                    t, peer = timed(lambda: mf_grr.GRR_Aggregator_IBU(per_user, k, eps))
                else:
                    group = obs.groups[0]
                    bits = unpack_bits(group.reports, group.counts, k)
                    optimal = name == "oue"
                    t, peer = timed(lambda: mf_ue.UE_Aggregator_IBU(bits, k, eps, optimal=optimal))
                    del bits
                peer = np.clip(np.asarray(peer, dtype=float), 0, None)
                peer /= peer.sum()
                row(f"multi-freq-ldpy {peer_label} IBU (defaults)", t, "<= 10,000", peer)
            table(
                f"{peer_label}, k = {k}, n = {n:,}, eps = {eps}",
                ["estimator", "time", "iterations", "L(MLE) - L (nats)", "TV to truth", "TV to exact MLE"],
                rows,
            )


def simulation() -> None:
    registry = ldpsim.get_registry()
    rows = []
    k = 1000
    domain = Integers(low=0, high=k - 1)
    dataset = registry.create("dataset", "zipf", domain, s=1.1)
    krr = registry.create("mechanism", "krr", domain, eps=1.0)
    for n in (10**6, 10**8):
        rng = np.random.default_rng(n)
        t, (reports, counts) = timed(lambda n=n, rng=rng: sample_cohort([krr], dataset.sample_counts(n, rng), [rng]))
        rows.append([f"{n:,} users, one k-RR report, k = {k}", f"{t:.3f} s", f"{len(counts):,} distinct reports"])
    for k3 in (100, 1000):
        domain3 = Integers(low=0, high=k3 - 1)
        mech = registry.create("mechanism", "krr", domain3, eps=1.0)
        n = 10**6
        rng = np.random.default_rng(k3)
        values = registry.create("dataset", "zipf", domain3, s=1.1).sample_counts(n, rng)
        t_sim, (reports, counts) = timed(lambda: sample_cohort([mech] * 3, values, [rng] * 3))
        obs = Observations.from_counts(domain3, [mech] * 3, reports, counts)
        for label, params in (
            ("paper rule", {}),
            ("exact MLE, SQUAREM + KKT", {"stop": "kkt", "accelerate": "squarem", "max_iter": 100_000}),
        ):
            try:
                t_est, est = timed(lambda params=params: registry.create("estimator", "ibu", **params).estimate(obs))
            except MemoryLimitError as exc:
                rows.append([f"{n:,} users x 3 k-RR reports, k = {k3}: GIBU", "refused", str(exc)])
                break
            rows.append(
                [
                    f"{n:,} users x 3 k-RR reports, k = {k3}: simulate + GIBU ({label})",
                    f"{t_sim + t_est:.2f} s",
                    f"simulate {t_sim:.2f} s, {len(counts):,} distinct tuples; GIBU {t_est:.2f} s, {est.iterations} iterations, gap {est.gap:.2g} nats",
                ]
            )
    table("Simulation", ["population", "time", "details"], rows)


def planar(side: int = 256, n: int = 10**6, eps: float = 1.0) -> None:
    registry = ldpsim.get_registry()
    domain = Grid(rows=side, cols=side, cell=1.0)
    yy, xx = np.divmod(np.arange(domain.size), side)
    p = np.zeros(domain.size)
    for cy, cx, s, w in ((0.3, 0.3, 0.05, 0.5), (0.7, 0.6, 0.1, 0.35), (0.5, 0.85, 0.03, 0.15)):  # three "cities"
        p += w * np.exp(-(((yy / side - cy) ** 2 + (xx / side - cx) ** 2) / (2 * s**2)))
    p /= p.sum()
    rng = np.random.default_rng(side)
    mech = registry.create("mechanism", "planar-geometric", domain, eps=eps)
    counts = rng.multinomial(n, p)
    t_sim, (reports, report_counts) = timed(lambda: sample_cohort([mech], counts, [rng]))
    obs = Observations.from_counts(domain, mech, reports, report_counts)
    truth = counts / n
    dense_gb = 8 * domain.size**2 / 1e9
    rows = [[f"simulate {n:,} users", f"{t_sim:.2f} s", f"{len(report_counts):,} distinct reports"]]
    for label, params in (
        ("GIBU, paper rule (delta 0.01), plain EM", {}),
        ("GIBU, paper rule (delta 0.01), SQUAREM", {"accelerate": "squarem"}),
        ("INV-P", None),
    ):
        est = registry.create("estimator", "inv-p") if params is None else registry.create("estimator", "ibu", **params)
        try:
            t, res = timed(lambda est=est: est.estimate(obs))
        except MemoryLimitError as exc:
            rows.append([label, "refused", str(exc)])
            continue
        detail = f"TV to truth {tv(res.distribution, truth):.3f}"
        if params is not None:
            detail += f", {res.iterations} iterations, gap {res.gap:.3g} nats"
        rows.append([label, f"{t:.1f} s", detail])
    table(
        f"Planar geometric on a {side} x {side} grid ({domain.size:,} cells; a dense matrix would need {dense_gb:.0f} GB), eps = {eps}, {n:,} users",
        ["step", "time", "details"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("oracles", "simulation", "planar"))
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--small", action="store_true", help="only the small sizes (a quick look)")
    parser.add_argument("--large", action="store_true", help="only the large sizes")
    parser.add_argument("--planar-eps", type=float, default=1.0, help="eps per cell of the planar benchmark")
    args = parser.parse_args()
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}, {platform.machine()}"
    )
    if args.only in (None, "oracles"):
        sizes = [(100, 10**5)] * (not args.large) + [(1000, 10**6)] * (not args.small)
        oracles(args.eps, sizes)
    if args.only in (None, "simulation"):
        simulation()
    if args.only in (None, "planar"):
        planar(64 if args.small else 256, eps=args.planar_eps)


if __name__ == "__main__":
    main()
