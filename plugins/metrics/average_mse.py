"""002's utility measure, the average MSE E/N of one run, from an estimated histogram.

002 (Sec. V) plots sqrt(E/N), E the mean squared error of the aggregate S over N users: a
linear aggregate S = sum_i f(X_i) (survey, summation, weighted summation) or the histogram
S_k = #{i : X_i = k} with E = E||S - S_hat||^2 (Sec. III, eq. after "second order norm").
With S = N sum_x f(x) theta_x, one run's (S - S_hat)^2 / N is N (f . (estimate - truth))^2,
and N ||estimate - truth||^2 for the histogram. Its mean over repetitions estimates E/N;
the paper's number is the square root of that mean (a square root per run would average to
a smaller, biased value). A metric sees distributions, not counts: N is the run's number of
users, which a scenario fills in (``from_run``); give ``users`` only when calling the metric directly.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, cast

import numpy as np

from ldpsim import Domain, Metric, Param, ParameterError, hookimpl


class AverageMSE(Metric):
    """002's E/N of one run: N (f . (estimate - truth))^2, or N ||estimate - truth||^2 for a histogram."""

    name = "avg-mse"
    from_run = ("users",)
    users = Param("int", None, ge=1, doc="N, the number of users; a scenario takes it from the run (its users)")
    aggregate = Param(
        "str",
        "sum",
        choices=("sum", "histogram"),
        doc="sum: S = sum_i f(X_i) with f = weights (default the values); histogram: the counts of every value",
    )
    weights = Param("vector", None, doc="f(x) per domain value for aggregate = sum (default: the values, integers)")

    def _check_domain(self, domain: Domain) -> None:
        if self.users is None:
            raise ParameterError("is not set", field="users", hint="give users = N (a scenario gives the run's)")
        if self.aggregate != "sum":
            return
        if self.weights is None and domain.name != "integers":
            raise ParameterError(
                f"needs numeric values, the domain is {domain.name}",
                field="weights",
                hint='give weights (one f(x) per domain value) or aggregate = "histogram"',
            )
        if self.weights is not None and self.weights.size != domain.size:
            raise ParameterError(
                f"has {self.weights.size} entries, the domain has {domain.size} values",
                field="weights",
                hint="give one weight per domain value, in domain order",
            )

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        assert self.users is not None  # check_domain refused a metric without users
        diff = estimate - truth
        if self.aggregate == "histogram":
            return self.users * float(diff @ diff)
        f = _numeric_values(domain) if self.weights is None else np.asarray(self.weights, float)
        error = float(f @ diff)
        return self.users * error * error


@lru_cache(maxsize=16)
def _numeric_values(domain: Domain) -> np.ndarray:
    """The domain's values as floats, read-only; made once per domain (equal domains have equal values):
    the metric scores every estimate of every run of a sweep on one domain."""
    values = np.asarray(domain.coords()["value"], float)
    values.setflags(write=False)
    return values


#: the largest LP (variables: sums of positive probability x candidate posterior means) cip-mse solves
MAX_CIP_VARIABLES = 2_000_000
#: sums with a smaller probability are left out of the LP (their share of E/N is negligible)
CIP_TAIL = 1e-12


class CentralizedIP(Metric):
    """002's optimal centralized information privacy E_CIP/N for the binary sum (Sec. IV-D), by linear programming.

    The curve 002 Fig. 8 compares the local models with: a trusted curator holds every X_i, releases
    Y = M(S) for S = sum_i X_i and estimates S_hat = E[S | Y]; M must keep every user's posterior
    within e^+-eps of their prior (Definition 4). The score ignores the estimate: it is the optimal
    E[(S - S_hat)^2] / N for ``users`` users whose priors P(X_i = 1) are ``priors``, users split
    equally among them (as equal cohort shares split them). Its square root is 002's sqrt(E/N).
    """

    name = "cip-mse"
    from_run = ("users",)
    scores = None  # it ignores the estimate: the optimum it gives is the same for every estimator
    eps = Param("float", gt=0, doc="the CIP level of Definition 4 (sweep it with the local models' eps)")
    users = Param("int", None, ge=1, doc="N, the number of users; a scenario takes it from the run (its users)")
    priors = Param("vector", ge=0, le=1, doc="P(X_i = 1) of each group of users (002 Fig. 8: local priors)")
    grid = Param(
        "int",
        100,
        ge=2,
        doc="candidate posterior means besides the sums themselves: the LP's optimum is an upper bound on E_CIP "
        "that decreases to it as the grid grows",
    )

    def _check_domain(self, domain: Domain) -> None:
        if self.users is None:
            raise ParameterError("is not set", field="users", hint="give users = N (a scenario gives the run's)")
        if domain.name != "integers" or domain.size != 2 or list(domain.coords()["value"]) != [0, 1]:
            raise ParameterError(
                "is the binary sum of 002 Sec. IV-D: it needs the domain {0, 1}",
                field="name",
                hint="use an integers domain with low = 0 and high = 1",
            )

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        return optimal_cip_mse(self.eps, self.users, tuple(float(p) for p in self.priors), self.grid)


@lru_cache(maxsize=256)
def optimal_cip_mse(eps: float, users: int, priors: tuple[float, ...], grid: int) -> float:
    """min E[(S - E[S|Y])^2] / N over mechanisms Y = M(S) that are eps-CIP (002 Definition 4, Prop. 5).

    E[(S - S_hat)^2] = E[S^2] - E[S_hat^2], so the optimum maximizes E[S_hat^2]. Outputs with equal
    posterior means can be merged without breaking the constraints (they are convex in the joint
    law), so a mechanism is a joint law J[s, k] of S and an output k whose posterior mean is g_k:
    sum_k J[s, k] = P(S = s), sum_s (s - g_k) J[s, k] = 0, and for every group j of users
    lo_j <= P(X_i = 1 | k) = sum_s a_j(s) J[s, k] / P(k) <= hi_j with a_j(s) = P(X_i = 1 | S = s)
    and [lo_j, hi_j] = [P_j e^-eps, P_j e^eps] intersected with 1 - (1 - P_j) [e^eps, e^-eps]
    (Definition 4 for X_i = 1 and X_i = 0). Each is linear in J and so is E[S_hat^2] =
    sum_k g_k^2 P(k): a linear program (scipy's HiGHS) over the means g: every sum s (so
    releasing S itself is a candidate) and ``grid`` evenly spaced values between the extreme sums.
    """
    from scipy import sparse
    from scipy.optimize import linprog
    from scipy.stats import binom

    p1 = np.asarray(priors, dtype=float)
    sizes = np.full(p1.size, users // p1.size)
    sizes[: users % p1.size] += 1

    def law(counts: np.ndarray) -> np.ndarray:  # P(S = s): the Poisson binomial of the groups
        out = np.ones(1)
        for n, p in zip(counts, p1):
            out = np.convolve(out, binom.pmf(np.arange(n + 1), n, p))
        return out

    total = law(sizes)
    keep = np.flatnonzero(total > CIP_TAIL)
    prob = total[keep] / total[keep].sum()
    means = np.union1d(keep.astype(float), np.linspace(keep[0], keep[-1], grid))
    n_s, n_k = keep.size, means.size
    if n_s * n_k > MAX_CIP_VARIABLES:
        raise ParameterError(
            f"{users} users make an LP of {n_s * n_k} variables, more than {MAX_CIP_VARIABLES}",
            field="users",
            hint="use fewer users (E_CIP / N falls like 1/N) or a smaller grid",
        )
    rows = []
    for j in np.flatnonzero(sizes):
        others = sizes.copy()
        others[j] -= 1
        a = np.zeros(total.size)  # P(X_i = 1 | S = s) = P_j P(S_-i = s - 1) / P(S = s)
        a[1:] = p1[j] * law(others) / np.where(total[1:] > 0, total[1:], 1.0)
        lo = max(p1[j] * math.exp(-eps), 1 - (1 - p1[j]) * math.exp(eps))
        hi = min(p1[j] * math.exp(eps), 1 - (1 - p1[j]) * math.exp(-eps))
        # variable s * n_k + k; row k of each block: sum_s coef[s] J[s, k] <= 0
        rows.append(sparse.kron(np.atleast_2d(lo - a[keep]), sparse.eye(n_k)))
        rows.append(sparse.kron(np.atleast_2d(a[keep] - hi), sparse.eye(n_k)))
    # scipy-stubs types a stack of mixed sparse formats as their base class; it is a coo_matrix
    a_eq = cast(
        "sparse.coo_matrix[Any]",
        sparse.vstack(
            [
                sparse.kron(sparse.eye(n_s), np.ones((1, n_k))),
                sparse.hstack([sparse.diags(s - means) for s in keep.astype(float)]),
            ]
        ),
    ).tocsr()
    a_ub = sparse.vstack(rows).tocsr()
    # HiGHS takes sparse constraint matrices, which scipy-stubs' linprog does not declare
    result = linprog(  # type: ignore[call-overload]
        -np.tile(means**2, n_s),
        A_ub=a_ub,
        b_ub=np.zeros(a_ub.shape[0]),
        A_eq=a_eq,
        b_eq=np.concatenate([prob, np.zeros(n_k)]),
        bounds=(0, None),
        method="highs",
    )
    if result.status != 0:
        raise ParameterError(f"the CIP linear program failed: {result.message}", field="eps")
    return max(float(prob @ keep.astype(float) ** 2) + float(result.fun), 0.0) / users


@hookimpl
def register_metrics(register):
    register(AverageMSE)
    register(CentralizedIP)
