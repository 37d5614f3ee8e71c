"""Tuple protocols (SPL, SMP, RS+FD) on several attributes, beside multi-freq-ldpy 0.2.5's clients and aggregators.

    pip install -e '.[bench]'
    python benchmarks/bench_tuples.py [--users 1000000] [--peer-users 100000] [--repeat 3] [--eps 1,4]
        [--sizes 10,20,30,50,100] [--mle-sizes 10,10,10,10,10] [--mle-users 1000000] [--mle-eps 5]
        [--only simulation,marginals,mle] [--profile] [--seed 2021] [--blas-threads 1] [--quick]

Users hold d-attribute tuples (default d = 5 attributes of 10, 20, 30, 50 and 100 values): half of them
draw every attribute from one shared Zipf(1.1) value (so the attributes are correlated), the other half
draw each attribute from its own Zipf(1.1) law. Three sections:

1. **Simulation.** ``mech.sample(values, rng)`` for --users users, then ``Observations.from_reports``
   (the distinct reports and their counts), for spl (krr parts, then oue parts), smp (krr), rsfd grr,
   oue-z and oue-r, at the first --eps. Best of --repeat.
2. **Marginals.** Per --eps and protocol, each repetition draws new reports with ldpsim, aggregates
   them, and estimates every attribute's distribution with ``mech.marginal_estimates`` (the papers'
   unbiased aggregators). The same reports, converted to multi-freq-ldpy's format (lists of values,
   (attribute, value) pairs, float 0/1 vectors; the conversion is not timed), go to its aggregator
   (``SPL_GRR_Aggregator_MI``, ``SPL_UE_Aggregator_MI``, ``SMP_GRR_Aggregator_MI``,
   ``RSpFD_GRR_Aggregator_MI``, ``RSpFD_UE_zero_Aggregator_MI``, ``RSpFD_UE_rnd_Aggregator_MI``).
   Its aggregators clip negative frequencies to 0 and renormalize; ldpsim's estimates are unbiased
   (they may leave the simplex), so their error is given as they are and after the same clip and
   renormalization, which must then equal multi-freq-ldpy's numbers on the same reports (the
   "max |difference|" column). Its clients (``SPL_GRR_Client``, ...: one Python call per user, numba
   inside) run on the first --peer-users users; their cost per user is scaled to --users and printed as
   extrapolated, and its aggregator's error on its own clients' reports is measured at --peer-users
   users, beside ldpsim's at the same users. Errors are the MSE of a marginal (mean over its values of
   the squared error against the users' true marginal), averaged over attributes and repetitions;
   times are the best of --repeat. multi-freq-ldpy draws from numpy's global state and numba's: both
   are seeded (``np.random.seed`` and the same call inside a numba function).
3. **Joint MLE.** --mle-users users on a product of --mle-sizes (default 10^5 cells), spl (krr parts)
   and rsfd grr at --mle-eps: ``mle`` (GIBU / Newton to a relative KKT violation of 1e-6) and ``ibu``
   (the paper's delta rule) through the estimator plugins, one run each on freshly aggregated
   observations (so each builds its own likelihood, timed with it). The likelihood's H is printed with
   its type (a LinearOperator: no (reports x cells) array), and the process's peak resident memory during
   the section beside what the dense likelihood would take. A run over 60 s (or --profile) is profiled
   with cProfile. RS+FD's channel identifies the marginals only: its joint MLE is one of many.

Everything runs with --blas-threads BLAS threads (default 1, as ldpsim's runner; 0 leaves numpy's default):
on the loaded 2-core machine two OpenBLAS threads made the joint MLE 3.4 times slower (77 s against 23 s,
a third of it in the threaded dot of ``np.linalg.norm`` inside SQUAREM).

``--quick`` runs a small version (10^5 users, 10^4 for the peers' clients, one repetition, eps = 1, a
10^4-cell joint MLE over 10^5 users): 10-15 s on the 2-core machine. A measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import platform
import pstats
import resource
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import ldpsim
from ldpsim import Observations

#: (label, ldpsim mechanism, its parameters, multi-freq-ldpy protocol)
PROTOCOLS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("spl (krr)", "spl", {}, "SPL_GRR"),
    ("spl (oue)", "spl", {"local": "oue"}, "SPL_UE"),
    ("smp (krr)", "smp", {}, "SMP_GRR"),
    ("rsfd grr", "rsfd", {"local": "grr"}, "RSpFD_GRR"),
    ("rsfd oue-z", "rsfd", {"local": "oue-z"}, "RSpFD_UE_zero"),
    ("rsfd oue-r", "rsfd", {"local": "oue-r"}, "RSpFD_UE_rnd"),
)

MLE_PROTOCOLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("spl (krr)", "spl", {}),
    ("rsfd grr", "rsfd", {"local": "grr"}),
)


# ----------------------------------------------------------------------------- helpers
def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def product_domain(sizes: Sequence[int]) -> ldpsim.Product:
    attributes = [{"name": f"a{j}", "kind": "integers", "low": 0, "high": k - 1} for j, k in enumerate(sizes)]
    return ldpsim.make_domain({"kind": "product", "attributes": attributes})


def zipf(k: int, s: float = 1.1) -> np.ndarray:
    w = 1.0 / np.arange(1, k + 1) ** s
    return w / w.sum()


def population(sizes: Sequence[int], n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, d) true values: half the users share one Zipf(1.1) latent value across attributes, half draw each alone."""
    top = max(sizes)
    shared = rng.random(n) < 0.5
    latent = rng.choice(top, size=n, p=zipf(top))
    cols = []
    for k in sizes:
        own = rng.choice(k, size=n, p=zipf(k))
        cols.append(np.where(shared, latent * k // top, own))
    return np.stack(cols, axis=1).astype(np.int64)


def true_marginals(columns: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    n = columns.shape[0]
    return [np.bincount(columns[:, j], minlength=k) / n for j, k in enumerate(sizes)]


def clip_normalize(v: np.ndarray) -> np.ndarray:
    """multi-freq-ldpy's post-processing: negative frequencies to 0, then divided by the sum."""
    c = np.clip(np.asarray(v, dtype=float), 0.0, None)
    total = c.sum()
    return c / total if total > 0 else c


def mse(estimates: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> float:
    """Mean over attributes of the marginal's MSE (mean over its values of the squared error)."""
    return float(np.mean([np.mean((np.asarray(e, dtype=float) - t) ** 2) for e, t in zip(estimates, truth)]))


def tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).sum())


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:.1f} s"


def fmt_ratio(peer: float, ours: float) -> str:
    if ours <= 0:
        return ""
    r = peer / ours
    return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    sys.stdout.flush()


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set (Linux: /proc/self/clear_refs); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_gb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


# ----------------------------------------------------------------------------- multi-freq-ldpy
_NUMBA_SEED: Callable[[int], None] | None = None


def seed_peer(seed: int) -> None:
    """Seed multi-freq-ldpy: numpy's global state (its Python code) and numba's (its jitted GRR/UE clients)."""
    global _NUMBA_SEED
    if _NUMBA_SEED is None:
        import numba

        @numba.njit
        def _seed(s):
            np.random.seed(s)

        _NUMBA_SEED = _seed
    np.random.seed(seed)
    _NUMBA_SEED(seed)


def peer_client(tag: str, sizes: list[int], eps: float) -> Callable[[list[int]], Any]:
    from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution

    d = len(sizes)
    if tag == "SPL_UE":
        return lambda x: SPL_solution.SPL_UE_Client(x, sizes, d, eps, True)
    module = {"SPL": SPL_solution, "SMP": SMP_solution, "RSpFD": RSpFD_solution}[tag.split("_")[0]]
    client = getattr(module, f"{tag}_Client")
    if tag.startswith("RSpFD_UE"):
        return lambda x: client(x, sizes, d, eps, True)
    return lambda x: client(x, sizes, d, eps)


def peer_aggregate(tag: str, reports: Any, sizes: list[int], eps: float) -> list[np.ndarray]:
    from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution

    d = len(sizes)
    if tag == "SPL_UE":
        out = SPL_solution.SPL_UE_Aggregator_MI(reports, d, eps, True)
    else:
        module = {"SPL": SPL_solution, "SMP": SMP_solution, "RSpFD": RSpFD_solution}[tag.split("_")[0]]
        aggregator = getattr(module, f"{tag}_Aggregator_MI")
        out = (
            aggregator(reports, sizes, d, eps, True)
            if tag.startswith("RSpFD_UE")
            else aggregator(reports, sizes, d, eps)
        )
    return [np.asarray(v, dtype=float) for v in out]


def to_peer(tag: str, mech: Any, reports: np.ndarray) -> list[Any]:
    """ldpsim's reports (one row per user) in multi-freq-ldpy's format for protocol ``tag``."""
    if tag in ("SPL_GRR", "RSpFD_GRR"):
        return reports.tolist()
    if tag == "SMP_GRR":
        return list(zip(reports[:, 0].tolist(), reports[:, 1].tolist()))
    # unary encodings: one float 0/1 vector per attribute and user, as its UE_Client returns
    bounds = np.cumsum([0] + [p.report_width for p in mech.parts])
    bits = [p.unpack_bits(reports[:, bounds[j] : bounds[j + 1]]).astype(float) for j, p in enumerate(mech.parts)]
    return list(zip(*[list(b) for b in bits]))


# ----------------------------------------------------------------------------- sections
def run_simulation(args: argparse.Namespace, registry: Any) -> None:
    sizes, n, eps = args.sizes, args.users, args.eps[0]
    domain = product_domain(sizes)
    rng = np.random.default_rng(args.seed)
    values = domain.join(list(population(sizes, n, rng).T))
    rows = []
    for label, name, params, _ in PROTOCOLS:
        mech = registry.create("mechanism", name, domain, eps=eps, **params)
        t_sample = t_agg = t_both = math.inf
        for _ in range(args.repeat):
            ts, reports = timed(lambda: mech.sample(values, rng))
            ta, obs = timed(lambda: Observations.from_reports(domain, [(mech, reports)]))
            t_sample, t_agg, t_both = min(t_sample, ts), min(t_agg, ta), min(t_both, ts + ta)
            reports = None  # frees them before the next draw
        rows.append(
            [
                label,
                str(mech.report_width),
                fmt_s(t_sample),
                fmt_s(t_agg),
                fmt_s(t_both),
                f"{obs.n_distinct:,}",
            ]
        )
    table(
        f"Simulation: {n:,} users, d = {len(sizes)} attributes of {sizes} values "
        f"({domain.size:,} cells), eps = {eps:g}, best of {args.repeat}",
        [
            "protocol",
            "report columns",
            "`sample`",
            "`Observations.from_reports`",
            "sample + aggregate",
            "distinct reports",
        ],
        rows,
    )


def run_marginals(args: argparse.Namespace, registry: Any) -> None:
    sizes, n, m = args.sizes, args.users, min(args.peer_users, args.users)
    domain = product_domain(sizes)
    columns = population(sizes, n, np.random.default_rng(args.seed))
    values = domain.join(list(columns.T))
    truth, truth_m = true_marginals(columns, sizes), true_marginals(columns[:m], sizes)
    tuples_m = columns[:m].tolist()
    for eps in args.eps:
        same_rows, client_rows = [], []
        for label, name, params, tag in PROTOCOLS:
            mech = registry.create("mechanism", name, domain, eps=eps, **params)
            client = peer_client(tag, sizes, eps)
            seed_peer(0)
            client(tuples_m[0])  # compiles multi-freq-ldpy's numba kernels, untimed
            warm = Observations.from_reports(domain, [(mech, mech.sample(values[:1000], np.random.default_rng(0)))])
            mech.marginal_estimates(warm.groups[0].reports, warm.groups[0].counts)  # ldpsim's first-call costs, untimed
            t = {k: math.inf for k in ("sample", "agg", "est", "peer_agg", "client", "sample_m")}
            err = {k: [] for k in ("raw", "clip", "peer", "peer_m", "clip_m")}
            diff = 0.0
            for rep in range(args.repeat):
                rng = np.random.default_rng([args.seed, rep, int(eps * 1000)])
                dt, reports = timed(lambda: mech.sample(values, rng))
                t["sample"] = min(t["sample"], dt)
                dt, obs = timed(lambda: Observations.from_reports(domain, [(mech, reports)]))
                t["agg"] = min(t["agg"], dt)
                group = obs.groups[0]
                dt, ours = timed(lambda: mech.marginal_estimates(group.reports, group.counts))
                t["est"] = min(t["est"], dt)
                clipped = [clip_normalize(v) for v in ours]
                err["raw"].append(mse(ours, truth))
                err["clip"].append(mse(clipped, truth))
                # the same reports through multi-freq-ldpy's aggregator
                converted = to_peer(tag, mech, reports)
                reports = None  # frees them before the conversion
                dt, theirs = timed(lambda: peer_aggregate(tag, converted, sizes, eps))
                converted = None
                t["peer_agg"] = min(t["peer_agg"], dt)
                err["peer"].append(mse(theirs, truth))
                diff = max(diff, max(float(np.max(np.abs(a - b))) for a, b in zip(clipped, theirs)))
                # its own clients on the first m users, and ldpsim on the same users
                seed_peer(args.seed + rep)
                dt, own = timed(lambda: [client(x) for x in tuples_m])
                t["client"] = min(t["client"], dt)
                err["peer_m"].append(mse(peer_aggregate(tag, own, sizes, eps), truth_m))
                own = None
                dt, small = timed(lambda: mech.sample(values[:m], rng))
                t["sample_m"] = min(t["sample_m"], dt)
                obs_m = Observations.from_reports(domain, [(mech, small)]).groups[0]
                err["clip_m"].append(
                    mse([clip_normalize(v) for v in mech.marginal_estimates(obs_m.reports, obs_m.counts)], truth_m)
                )
            e = {k: float(np.mean(v)) for k, v in err.items()}
            ours_total = t["agg"] + t["est"]
            same_rows.append(
                [
                    f"{label} / {tag}",
                    fmt_s(ours_total),
                    fmt_s(t["est"]),
                    fmt_s(t["peer_agg"]),
                    fmt_ratio(t["peer_agg"], ours_total),
                    fmt_ratio(t["peer_agg"], t["est"]),
                    f"{e['raw']:.3g}",
                    f"{e['clip']:.3g}",
                    f"{e['peer']:.3g}",
                    f"{diff:.1e}",
                ]
            )
            per_user = t["client"] / m
            client_rows.append(
                [
                    f"{label} / {tag}_Client",
                    f"{per_user * 1e6:.1f} us",
                    f"{per_user * n:.1f} s (extrapolated)",
                    fmt_s(t["sample"]),
                    fmt_ratio(per_user * n, t["sample"]),
                    f"{e['peer_m']:.3g}",
                    f"{e['clip_m']:.3g}",
                ]
            )
        table(
            f"Marginals, same {n:,} reports, eps = {eps:g}: ldpsim `marginal_estimates` and multi-freq-ldpy's "
            f"aggregators (times best of {args.repeat}, MSE mean of {args.repeat})",
            [
                "protocol (ldpsim / multi-freq-ldpy)",
                "ldpsim aggregate + estimate",
                "of which `marginal_estimates`",
                "multi-freq-ldpy aggregator",
                "ratio (aggregator / aggregate + estimate)",
                "ratio (aggregator / estimate)",
                "MSE ldpsim unbiased",
                "MSE ldpsim clip + normalize",
                "MSE multi-freq-ldpy",
                "max abs difference (clip + normalize vs multi-freq-ldpy)",
            ],
            same_rows,
        )
        table(
            f"Clients, eps = {eps:g}: multi-freq-ldpy's per-user clients on {m:,} users, scaled to {n:,}; "
            f"MSE of each library's own reports at {m:,} users",
            [
                "protocol (ldpsim / multi-freq-ldpy)",
                "its client per user",
                f"its clients for {n:,} users",
                f"ldpsim `sample`, {n:,} users (measured)",
                "ratio",
                f"MSE multi-freq-ldpy, {m:,} users",
                f"MSE ldpsim clip + normalize, {m:,} users",
            ],
            client_rows,
        )


def run_mle(args: argparse.Namespace, registry: Any) -> None:
    from scipy.sparse.linalg import LinearOperator

    from ldpsim.estimation import hessian_rows

    sizes, n, eps = args.mle_sizes, args.mle_users, args.mle_eps
    domain = product_domain(sizes)
    rng = np.random.default_rng([args.seed, 5])
    columns = population(sizes, n, rng)
    values = domain.join(list(columns.T))
    truth = np.bincount(values, minlength=domain.size) / n
    truth_marginals = true_marginals(columns, sizes)
    rows, notes, profiles = [], [], []
    reset = reset_peak_rss()
    for label, name, params in MLE_PROTOCOLS:
        mech = registry.create("mechanism", name, domain, eps=eps, **params)
        t_sample, reports = timed(lambda: mech.sample(values, rng))
        t_agg, obs = timed(lambda: Observations.from_reports(domain, [(mech, reports)]))
        t_lik, likelihood = timed(lambda: ldpsim.Likelihood(obs))
        H = likelihood.H
        dense_gb = 8.0 * H.shape[0] * H.shape[1] / 1e9
        path = (
            "SQUAREM (no dense likelihood, no Hessian: Newton's would cost too much)"
            if hessian_rows.dense_likelihood(likelihood) is None and hessian_rows.sampled_rows(likelihood) is None
            else "Newton (dense or sampled Hessian)"
        )
        notes.append(
            f"{label}: simulate {fmt_s(t_sample)}, aggregate {fmt_s(t_agg)}, {obs.n_distinct:,} distinct reports; "
            f"`ldpsim.Likelihood(obs).H` is {type(H).__module__}.{type(H).__name__} "
            f"(LinearOperator: {isinstance(H, LinearOperator)}, not numpy.ndarray: {not isinstance(H, np.ndarray)}), "
            f"shape {H.shape[0]:,} x {H.shape[1]:,} (dense: {dense_gb:.0f} GB), built in {fmt_s(t_lik)}; "
            f"`mle`'s solver path: {path}"
        )
        del likelihood
        for est_name, est_params, what in (
            ("mle", {}, "`mle` (KKT < 1e-6)"),
            ("ibu", {}, "`ibu` (paper rule, delta 0.01)"),
        ):
            estimator = registry.create("estimator", est_name, **est_params)
            fresh = Observations.from_reports(domain, [(mech, reports)])  # its own likelihood, built in the timing
            seconds, result = timed(lambda: estimator.estimate(fresh))
            theta = result.distribution
            marg = float(np.mean([tv(domain.marginal(theta, j), t) for j, t in enumerate(truth_marginals)]))
            rows.append(
                [
                    label,
                    what,
                    fmt_s(seconds),
                    str(result.iterations),
                    "yes" if result.converged else "no (max_iter)",
                    f"{result.kkt:.2g}",
                    f"{result.gap:.3g}",
                    f"{tv(theta, truth):.4f}",
                    f"{marg:.4f}",
                ]
            )
            if seconds > 60 or args.profile:
                again = Observations.from_reports(domain, [(mech, reports)])
                profiler = cProfile.Profile()
                profiler.runcall(estimator.estimate, again)
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
                profiles.append((f"{label}, {est_name}", out.getvalue()))
    peak = peak_rss_gb()
    table(
        f"Joint MLE over {domain.size:,} cells ({' x '.join(map(str, sizes))}), {n:,} users, eps = {eps:g}",
        [
            "protocol",
            "estimator",
            "time (incl. likelihood)",
            "iterations",
            "converged",
            "relative KKT",
            "gap (nats)",
            "TV to truth (joint)",
            "mean TV of the marginals",
        ],
        rows,
    )
    print()
    for note in notes:
        print(f"* {note}")
    print(
        f"* peak resident memory {'during this section' if reset else 'of the process'}: {peak:.2f} GB "
        f"(the dense likelihood alone would take the sizes above)"
    )
    for title, text in profiles:
        print(f"\ncProfile, {title} (top 15 by own time):\n")
        print("\n".join("    " + line for line in text.strip().splitlines()))


# ----------------------------------------------------------------------------- main
def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--peer-users", type=int, default=100_000, help="users for multi-freq-ldpy's clients")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--eps", type=floats, default=[1.0, 4.0], help="comma-separated; the first one simulates")
    parser.add_argument("--sizes", type=ints, default=[10, 20, 30, 50, 100])
    parser.add_argument("--mle-sizes", type=ints, default=[10, 10, 10, 10, 10])
    parser.add_argument("--mle-users", type=int, default=1_000_000)
    parser.add_argument("--mle-eps", type=float, default=5.0)
    parser.add_argument("--only", default="simulation,marginals,mle")
    parser.add_argument("--profile", action="store_true", help="profile every joint estimate (else those over 60 s)")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument(
        "--blas-threads", type=int, default=1, help="BLAS threads (1: as ldpsim's runner; 0: numpy's default)"
    )
    parser.add_argument("--quick", action="store_true", help="a small version (10-15 s)")
    args = parser.parse_args()
    if args.quick:
        args.users, args.peer_users, args.repeat, args.eps = 100_000, 10_000, 1, args.eps[:1]
        args.mle_sizes, args.mle_users = [10, 10, 10, 10], 100_000
    import multi_freq_ldpy  # noqa: F401  # fails here, not halfway, when the peer is missing

    print("    python " + " ".join(shlex.quote(a) for a in ["benchmarks/bench_tuples.py", *sys.argv[1:]]))
    print(
        f"\nldpsim {ldpsim.__version__}, multi-freq-ldpy {version('multi-freq-ldpy')}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, {platform.machine()}; seed {args.seed}"
    )
    registry = ldpsim.get_registry()
    start = time.perf_counter()
    sections = args.only.split(",")
    with threadpool_limits(args.blas_threads if args.blas_threads > 0 else None):
        blas = ", ".join(f"{i['internal_api']} {i['num_threads']} thread(s)" for i in threadpool_info())
        print(f"BLAS: {blas}; load average {os.getloadavg()[0]:.2f} at the start")
        if "simulation" in sections:
            run_simulation(args, registry)
        if "marginals" in sections:
            run_marginals(args, registry)
        if "mle" in sections:
            run_mle(args, registry)
    print(f"\nwhole run: {time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
