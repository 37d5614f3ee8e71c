"""Audit every built-in mechanism: the eps lower bound its draws show beside the eps it declares.

    python benchmarks/audit_all.py [--draws 1000000] [--seed 0] [--confidence 0.95]

Each mechanism runs with the parameters below (10 values, or a 4 x 4 grid) through
:func:`ldpsim.audit_mechanism`: its sampler, and the simulation's count path where the
simulation uses one. The Bayes vulnerability is under a uniform prior, or the LIP
mechanisms' own. Prints a markdown table; exits 1 if a bound exceeds its claim.
A measurement, not a test (tests/test_audit.py is the test).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

import ldpsim
from ldpsim import Categorical, Grid, Integers

TEN = Integers(low=0, high=9)
GRID = Grid(rows=4, cols=4)
#: mechanism -> (domain, parameters); every built-in must have one
CASES = {
    "krr": (TEN, {"eps": 1.0}),
    "rappor": (TEN, {"eps": 1.0}),
    "oue": (TEN, {"eps": 1.0}),
    "olh": (TEN, {"eps": 1.0}),
    "matrix": (Categorical(values=["a", "b", "c"]), {"rows": [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]]}),
    "geometric": (TEN, {"eps": 0.5}),
    "laplace": (TEN, {"eps": 0.5}),
    "exponential": (TEN, {"eps": 0.5}),
    "planar-geometric": (GRID, {"eps": 1.0}),
    "planar-laplace": (GRID, {"eps": 1.0}),
    "lip": (TEN, {"eps": 1.0, "prior": "zipf", "strict": False}),
    "lip-binary": (Integers(low=0, high=1), {"eps": 1.0, "prior": [0.4, 0.6]}),
    "duchi": (TEN, {"eps": 1.0}),
    "piecewise": (TEN, {"eps": 1.0}),
    "hybrid": (TEN, {"eps": 1.0}),
    "square_wave": (TEN, {"eps": 1.0}),
    # the frequency oracles of issue 11
    "adp": (TEN, {"eps": 1.0}),
    "the": (TEN, {"eps": 1.0}),
    "she": (TEN, {"eps": 1.0}),
    "blh": (TEN, {"eps": 1.0}),
    "flh": (TEN, {"eps": 1.0}),
    "subset_selection": (TEN, {"eps": 1.0}),
    "hadamard": (TEN, {"eps": 1.0}),
    "cms": (TEN, {"eps": 1.0}),
    "hcms": (TEN, {"eps": 1.0}),
    "dbitflip": (TEN, {"eps": 1.0}),
    # longitudinal protocols: one round (a user's report), the permanent stage's eps_inf above eps_1
    "l-grr": (TEN, {"eps_inf": 2.0, "eps_1": 1.0}),
    "l-sue": (TEN, {"eps_inf": 2.0, "eps_1": 1.0}),
    "l-oue": (TEN, {"eps_inf": 2.0, "eps_1": 1.0}),
    "l-osue": (TEN, {"eps_inf": 2.0, "eps_1": 1.0}),
    "l-soue": (TEN, {"eps_inf": 2.0, "eps_1": 1.0}),
    "loloha": (TEN, {"eps_inf": 2.0, "eps_1": 1.0}),
    "memoized": (TEN, {"eps_permanent": 2.0, "eps_instantaneous": 1.0}),
    "rappor-deployed": (TEN, {}),
}


def describe(domain: ldpsim.Domain, params: dict) -> str:
    shown = {k: ("Zipf 1.1" if k == "prior" and v == "zipf" else v) for k, v in params.items() if k != "rows"}
    size = f"{domain.rows}x{domain.cols} grid" if isinstance(domain, Grid) else f"{domain.size} values"
    return ", ".join([size] + [f"{k}={v}" for k, v in shown.items()])


def matrix_level(mech: ldpsim.Mechanism) -> str:
    """The exact level of the mechanism's matrix, in its claim's notion (what a perfect audit would show)."""
    notion = mech.privacy.notion
    if mech.matrix is None or notion not in ("ldp", "geo"):
        return "-"
    with np.errstate(divide="ignore"):
        log_p = np.log(mech.matrix).T
    level = ldpsim.ldp_level(log_p) if notion == "ldp" else ldpsim.geo_level(log_p, mech.domain.distances)
    return f"{level:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=10**6, help="draws per value (N)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args()
    registry = ldpsim.get_registry()
    missing = set(registry.names("mechanism")) - set(CASES)
    if missing:
        sys.exit(f"no case for the built-in mechanisms {sorted(missing)}: add them to CASES")
    print(
        f"ldpsim {ldpsim.__version__}, numpy {np.__version__}, Python {platform.python_version()}; "
        f"N = {args.draws} draws per value, {args.confidence:.0%} confidence, seed {args.seed}\n"
    )
    print(
        "| mechanism | parameters | declared | matrix's level | lower bound: sampler | counts | Bayes vulnerability | s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    exceeded = []
    for name, (domain, params) in CASES.items():
        if params.get("prior") == "zipf":
            weights = 1.0 / np.arange(1, domain.size + 1) ** 1.1
            params = {**params, "prior": (weights / weights.sum()).tolist()}
        mech = registry.create("mechanism", name, domain, **params)
        started = time.perf_counter()
        report = ldpsim.audit_mechanism(mech, draws=args.draws, seed=args.seed, confidence=args.confidence)
        seconds = time.perf_counter() - started
        bounds = {p.path: f"{p.bound:.3f}" for p in report.paths}
        unit = "/unit" if report.privacy.notion == "geo" else ""
        if report.skipped:
            bounds = {"sampler": "not audited (LIP)" if report.privacy.notion == "lip" else "not audited"}
        if report.exceeded:
            exceeded.append(name)
        print(
            f"| {name} | {describe(domain, CASES[name][1])} | {report.privacy.eps:.3g}{unit} {report.privacy.notion} |"
            f" {matrix_level(mech)} | {bounds.get('sampler', '-')} | {bounds.get('counts', '-')} | {report.vulnerability:.3f}"
            f" ({report.prior_vulnerability:.3f} without) | {seconds:.1f} |"
        )
    if exceeded:
        sys.exit(f"the draws of {', '.join(exceeded)} show more than they declare")


if __name__ == "__main__":
    main()
