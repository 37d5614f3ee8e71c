"""Passes and seconds to the exact MLE (relative KKT violation < 1e-6): SQUAREM before, Newton after.

    python benchmarks/bench_mle.py                     # every case but the 256 x 256 grid
    python benchmarks/bench_mle.py --only geometric    # or: krr, mixed, oue, grid32, grid64, grid256
    python benchmarks/bench_mle.py --no-cg --only oue1024 --only olh1024    # frequency oracles at k = 1024:
        # oue1024, the1024, subset_selection1024, olh1024, blh1024, cms1024 (minutes each: SQUAREM's run)
    python benchmarks/bench_mle.py --no-cg --solver newton --only grid128m    # or grid256m: n = 10^6, the
        # active set's cases (SQUAREM's run takes minutes on the first and does not certify the second)

Each case simulates its reports once (seeded) and runs `mle` twice on the same observations:
``solver = "em"`` (GIBU accelerated by SQUAREM: what `mle` ran before) and ``solver = "newton"``
(the interior-point Newton solver, with its Hessian from every row or a sample of rows where the
float64 one is too costly, and SQUAREM where even that is), then ``newton_mle(..., hessian="cg")`` (Newton systems solved by conjugate gradients
through the structured operator, each CG step one pass). "passes" are the estimate's ``iterations``: passes over the likelihood (for Newton also
Hessian formations and line-search trials, each counted as one). Time is wall time of the
estimate, likelihood construction included. Run with one BLAS thread (OPENBLAS_NUM_THREADS=1),
as ldpsim's runs do. A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpsim
from ldpsim import Grid, Integers, Observations
from ldpsim.theory.sampling import sample_cohort


def _mech(name, domain, **params):
    return ldpsim.get_registry().create("mechanism", name, domain, **params)


def krr(rng) -> Observations:
    k, n = 1000, 10**6
    domain = Integers(low=0, high=k - 1)
    mech = _mech("krr", domain, eps=1.0)
    p = 1 / np.arange(1, k + 1) ** 1.1
    reports, counts = sample_cohort([mech], rng.multinomial(n, p / p.sum()), [rng])
    return Observations.from_counts(domain, mech, reports, counts)


def geometric(rng) -> Observations:
    k, n = 500, 10**5
    domain = Integers(low=0, high=k - 1)
    mech = _mech("geometric", domain, eps=0.05)
    reports, counts = sample_cohort([mech], np.bincount(rng.binomial(k - 1, 0.3, n), minlength=k), [rng])
    return Observations.from_counts(domain, mech, reports, counts)


def mixed(rng) -> Observations:
    """k = 100, 10^5 users in three cohorts: k-RR, geometric, and k-RR + geometric reports per user."""
    k, n = 100, 10**5
    domain = Integers(low=0, high=k - 1)
    a, b, c = _mech("krr", domain, eps=1.0), _mech("geometric", domain, eps=0.5), _mech("krr", domain, eps=0.5)
    values = rng.binomial(k - 1, 0.4, n)
    data = []
    for plan, part in zip(([a], [b], [c, b]), np.array_split(values, 3)):
        reports, counts = sample_cohort(plan, np.bincount(part, minlength=k), [rng] * len(plan))
        data.append((plan, np.repeat(reports, counts, axis=0)))
    return Observations.from_reports(domain, data)


def oue(rng) -> Observations:
    k, n = 100, 10**5
    domain = Integers(low=0, high=k - 1)
    mech = _mech("oue", domain, eps=1.0)
    p = 1 / np.arange(1, k + 1) ** 1.1
    reports, counts = sample_cohort([mech], rng.multinomial(n, p / p.sum()), [rng])
    return Observations.from_counts(domain, mech, reports, counts)


def grid(side: int, eps: float, n: int = 10**5):
    def build(rng) -> Observations:
        domain = Grid(rows=side, cols=side, cell=1.0)
        yy, xx = np.divmod(np.arange(domain.size), side)
        p = np.zeros(domain.size)
        for cy, cx, s, w in ((0.3, 0.3, 0.05, 0.5), (0.7, 0.6, 0.1, 0.35), (0.5, 0.85, 0.03, 0.15)):
            p += w * np.exp(-(((yy / side - cy) ** 2 + (xx / side - cx) ** 2) / (2 * s**2)))
        mech = _mech("planar-geometric", domain, eps=eps)
        reports, counts = sample_cohort([mech], rng.multinomial(n, p / p.sum()), [rng])
        return Observations.from_counts(domain, mech, reports, counts)

    return build


def oracle(name: str, k: int = 1024, n: int = 10**6, **params):
    """A frequency oracle whose reports are nearly all distinct: the sampled Hessian's case."""

    def build(rng) -> Observations:
        domain = Integers(low=0, high=k - 1)
        mech = _mech(name, domain, eps=1.0, **params)
        p = 1 / np.arange(1, k + 1) ** 1.1
        values = rng.choice(k, n, p=p / p.sum())
        return Observations.from_reports(domain, [(mech, mech.sample(values, rng))])

    return build


CASES = {
    "krr": ("k-RR, k = 1000, eps = 1, n = 10^6 (Zipf 1.1)", krr),
    "geometric": ("truncated geometric, 500 values, eps = 0.05, n = 10^5", geometric),
    "mixed": ("mixed population, k = 100, n = 10^5 (k-RR / geometric / both)", mixed),
    "oue": ("OUE, k = 100, eps = 1, n = 10^5 (Zipf 1.1)", oue),
    "grid32": ("planar geometric 32 x 32, eps = 0.25, n = 10^5", grid(32, 0.25)),
    "grid64": ("planar geometric 64 x 64, eps = 0.25, n = 10^5", grid(64, 0.25)),
    "grid256": ("planar geometric 256 x 256, eps = 0.25, n = 10^5", grid(256, 0.25)),
    # the active set's cases (issue 16): its MLE's support is what decides the cost
    "grid128m": ("planar geometric 128 x 128, eps = 0.25, n = 10^6", grid(128, 0.25, 10**6)),
    "grid256m": ("planar geometric 256 x 256, eps = 0.25, n = 10^6", grid(256, 0.25, 10**6)),
    **{
        f"{name}1024": (f"{label}, k = 1024, eps = 1, n = 10^6 (Zipf 1.1)", oracle(name))
        for name, label in (
            ("oue", "OUE"),
            ("the", "THE"),
            ("subset_selection", "subset selection"),
            ("olh", "OLH"),
            ("blh", "BLH"),
            ("cms", "CMS (m = 128, 16 hashes)"),
        )
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES), action="append")
    parser.add_argument("--no-cg", action="store_true", help="skip the opt-in hessian = cg run")
    parser.add_argument(
        "--solver",
        choices=("em", "newton"),
        action="append",
        help="run only these (default both; em takes minutes "
        "on grid128m and never certifies grid256m in reasonable time)",
    )
    args = parser.parse_args()
    names = args.only or [name for name in CASES if not name.startswith("grid256") and not name.endswith(("1024", "m"))]
    solvers = args.solver or ["em", "newton"]
    registry = ldpsim.get_registry()
    print(f"ldpsim {ldpsim.__version__}; relative KKT tolerance 1e-6\n")
    print("| case | distinct reports | solver | passes | seconds | KKT | L - L(em) | zeros |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    warm_up = grid(8, 1.0, 1_000)(np.random.default_rng(0))  # imports and first-call costs, untimed
    for solver in ("em", "newton"):
        registry.create("estimator", "mle", solver=solver).estimate(warm_up)
    ldpsim.newton_mle(ldpsim.Likelihood.of(warm_up), hessian="cg")
    for name in names:
        label, build = CASES[name]
        obs = build(np.random.default_rng(16))
        before = first = None
        for solver in solvers:
            fresh = Observations(obs.domain, obs.groups)  # no likelihood cached by the other run
            est = registry.create("estimator", "mle", solver=solver, tol=1e-6)
            start = time.perf_counter()
            res = est.estimate(fresh)
            seconds = time.perf_counter() - start
            diff = "" if before is None else f"{res.loglik - before.loglik:+.3g}"
            zeros = int(np.sum(res.distribution == 0))
            print(
                f"| {label if before is None else ''} | {obs.n_distinct:,} | {solver} | {res.iterations:,} | "
                f"{seconds:.2f} | {res.kkt:.1e} | {diff} | {zeros} |",
                flush=True,
            )
            before = res
            if first is None:
                first = res
        if args.no_cg:
            continue
        # the opt-in matrix-free variant: Newton systems by conjugate gradients through the operator
        fresh = Observations(obs.domain, obs.groups)
        likelihood = ldpsim.Likelihood.of(fresh, fresh.likely_subset())
        start = time.perf_counter()
        res = ldpsim.newton_mle(likelihood, tol=1e-6, hessian="cg")
        seconds = time.perf_counter() - start
        print(
            f"| | {obs.n_distinct:,} | newton, hessian = cg | {res.iterations:,} | {seconds:.2f} | {res.kkt:.1e} | "
            f"{res.loglik - first.loglik:+.3g} | {int(np.sum(likelihood.expand(res.theta) == 0))} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
