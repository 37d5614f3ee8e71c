"""Defences against poisoning as estimators: normalisation, and the MLE with a contamination component.

``cao-norm`` is the normalisation countermeasure of Cao, Jia & Gong (2021) as a baseline: the unbiased
estimate shifted by its minimum and rescaled to sum to 1, ``(f - min f) / sum (f - min f)``.

``contamination-mle`` fits the reports as a mixture of the honest channel and an attack component,
``P(z) = (1 - beta) sum_x P(z | x) theta_x + beta g_T(z)``, by EM on the channel augmented with one
column ``g_T`` (beta known, or estimated with theta). An unrestricted ``g`` would make the model
unidentifiable (any report distribution is then explained by the attack alone), so ``g`` is restricted
to the family of attacks that promote a set T of items: a fake report *supports* every item of T (its
likelihood is the high one for each of them: bit set, item hashed to the reported bucket) and is
otherwise drawn from the mechanism's null report law (bits set with probability q, buckets uniform):

    g_T(z) = [T within supp(z)] N(z) / rho^|T|,   N(z) = lo(z) (1 - rho) / (1 - s)

with ``s`` the probability that a report supports its user's value, ``rho`` that it supports another
value, and ``lo(z)`` the report's low likelihood level. This is MGA's report law (up to MGA's fixed
number of other bits and its search over hash functions). T is given (``suspects``) or found as a
frequent itemset: the ``r`` items whose reports co-occur most in excess of independence, grown greedily
from the most co-occurring pair (the detection of Cao et al., a frequent-itemset test). On k-RR a report
supports a single item, so a point mass on a target is a mixture of honest rows whenever every other item
has frequency above beta / ((1 - beta)(e^eps - 1)): no estimator can tell it from honest users, and this
one refuses k-RR. The likelihood ratio of the fit against the honest model (beta = 0) is given as
``poisoning_lr``: large when the reports hold an attack on T (a detection statistic; T is chosen from
the same reports, so calibrate its threshold on runs without attackers).
"""

from __future__ import annotations

import math

import numpy as np

from ldpsim import (
    DEFAULT_DELTA,
    TASK,
    Estimate,
    EstimationError,
    Estimator,
    InversionEstimator,
    Mechanism,
    Observations,
    Param,
    ParameterError,
    Variable,
    hookimpl,
)

#: the unary encodings: a report supports the values whose bit is set
UNARY = ("rappor", "oue", "the")
#: local hashing: a report (a, b, y) supports the values hashed to y
LOCAL_HASHING = ("olh", "blh")
#: and after at most this many iterations (EM stops earlier, by GIBU's rule: when an iteration raises the
#: log-likelihood by less than DEFAULT_DELTA nats)
EM_MAX_ITER = 5000
#: the most report-value pairs of the dense likelihood the estimator forms (256 MB of float64)
MAX_PAIRS = 1 << 25


def cao_norm(v: np.ndarray) -> np.ndarray:
    """``(v - min v) / sum(v - min v)``: Cao et al.'s normalisation (uniform if all entries are equal).

    Parameters
    ----------
    v
        An unbiased frequency estimate.

    Returns
    -------
    numpy.ndarray
        A distribution.
    """
    shifted = np.asarray(v, dtype=float) - float(np.min(v))
    total = shifted.sum()
    return shifted / total if total > 0 else np.full(shifted.size, 1.0 / shifted.size)


class CaoNorm(InversionEstimator):
    """Normalisation defence (Cao et al. 2021): the unbiased estimate minus its minimum, rescaled to sum to 1."""

    name = "cao-norm"

    def _postprocess(self, unbiased: np.ndarray) -> np.ndarray:
        return cao_norm(unbiased)


def _number(mech: Mechanism, attr: str) -> float:
    """A mechanism family's parameter (unary p and q, local hashing's p and buckets), read by name."""
    return float(getattr(mech, attr))


def support_rates(mech: Mechanism) -> tuple[float, float, float] | None:
    """``(s, rho, gap)`` of a mechanism whose reports support items, else None.

    Parameters
    ----------
    mech
        A mechanism.

    Returns
    -------
    tuple of float or None
        ``s``: P(a report supports its user's value); ``rho``: P(it supports a given other value);
        ``gap``: log P(z | supported) - log P(z | not supported), the same for every report.
    """
    if mech.name in UNARY:
        p, q = _number(mech, "p"), _number(mech, "q")
        return p, q, math.log(p / q) - math.log((1 - p) / (1 - q))
    if mech.name in LOCAL_HASHING:
        g = int(_number(mech, "buckets"))
        p = _number(mech, "p")
        return p, 1.0 / g, math.log(p) - math.log((1 - p) / (g - 1))
    return None


def frequent_itemset(supports: np.ndarray, counts: np.ndarray, r: int) -> np.ndarray:
    """The ``r`` items whose supports co-occur most in excess of independence, grown greedily.

    Parameters
    ----------
    supports
        (D, k) bool: which items each distinct report supports.
    counts
        (D,) how many users sent each report.
    r
        Items to return (at most k).

    Returns
    -------
    numpy.ndarray
        Sorted item indices.
    """
    w = counts.astype(float)
    n = w.sum()
    s = supports.astype(float)
    together = (s * w[:, None]).T @ s / n  # P(both supported)
    alone = np.diag(together).copy()
    excess = together - np.outer(alone, alone)
    np.fill_diagonal(excess, -np.inf)
    k = supports.shape[1]
    if r == 1 or k == 1:
        return np.array([int(np.argmax(alone))])
    i, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
    chosen = [int(i), int(j)]
    while len(chosen) < min(r, k):
        score = excess[:, chosen].sum(axis=1)
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
    return np.sort(np.asarray(chosen))


def mixture_em(
    like: np.ndarray, counts: np.ndarray, beta: float | None, *, with_atom: bool = True
) -> tuple[np.ndarray, float, float, int]:
    """EM for ``P(z_d) = sum_x like[d, x] theta'_x`` with the last column the attack's.

    Parameters
    ----------
    like
        (D, k + 1) likelihoods of each distinct report under each value and under the attack, each row
        scaled by a positive constant of its own (the EM and the likelihood ratio do not change).
    counts
        (D,) users per report.
    beta
        The attack's share, fixed; None: estimated.
    with_atom
        False: the honest model alone (beta = 0).

    Returns
    -------
    tuple
        The honest distribution theta, beta, the log-likelihood (up to the rows' scales), and the iterations.
    """
    k = like.shape[1] - 1
    n = counts.sum()
    b = 0.0 if not with_atom else (0.5 if beta is None else beta)
    mix = np.append(np.full(k, (1.0 - b) / k), b)
    post = like @ mix
    loglik = float(counts @ np.log(post))
    done = 0
    while done < EM_MAX_ITER:
        done += 1
        mix = mix * (like.T @ (counts / post)) / n
        if beta is not None or not with_atom:  # the attack's share stays fixed
            mix[:k] *= (1.0 - b) / mix[:k].sum()
            mix[k] = b
        post = like @ mix
        before, loglik = loglik, float(counts @ np.log(post))
        if abs(loglik - before) < DEFAULT_DELTA:
            break
    return mix[:k] / mix[:k].sum(), float(mix[k]), loglik, done


class ContaminationMLE(Estimator):
    """MLE of a mixture of honest reports and an attack promoting a set of items (detected or given)."""

    name = "contamination-mle"
    beta = Param("float", None, ge=0, lt=1, doc="the fake users' share if known (default: estimated with theta)")
    r = Param("int", 10, ge=1, doc="size of the detected target set (the defender's guess of the attack's r)")
    suspects = Param("vector", None, doc="the suspected targets, as domain indices (default: r detected)")
    outputs = (
        Variable("contamination", ("estimator", TASK), "fitted share of fake users (beta)", optional=True),
        Variable(
            "poisoning_lr", ("estimator", TASK), "likelihood ratio statistic of the attack vs beta = 0", optional=True
        ),
    )

    def check_setup(self, domain, plans) -> None:
        _mechanism(plans)
        if self.suspects is not None:
            items = np.asarray(self.suspects)
            if items.size == 0 or items.min() < 0 or items.max() >= domain.size:
                raise ParameterError(
                    f"must be domain indices in 0..{domain.size - 1}", field="suspects", hint="e.g. suspects = [3, 7]"
                )

    def _estimate(self, observations: Observations) -> Estimate:
        mech = _mechanism([group.plan for group in observations.groups])
        rates = support_rates(mech)
        assert rates is not None
        s, rho, gap = rates
        group = observations.groups[0]
        k = observations.domain.size
        if group.reports.shape[0] * k > MAX_PAIRS:
            raise EstimationError(
                f"{group.reports.shape[0]:,} distinct reports x {k} values is more than the {MAX_PAIRS:,} likelihood"
                " entries contamination-mle forms",
                hint="use fewer users or values",
            )
        logl = mech.log_likelihood(group.reports)  # (D, k)
        counts = np.asarray(group.counts, dtype=float)
        top = logl.max(axis=1, keepdims=True)
        # a report's likelihood takes two levels, gap apart: it supports the values at the high one (a report at
        # one level for all values is read as supporting none: it gets no attack likelihood; all bits set is rare)
        supports = logl > logl.min(axis=1, keepdims=True) + gap / 2
        targets = (
            np.sort(np.asarray(self.suspects).astype(np.int64))
            if self.suspects is not None
            else frequent_itemset(supports, counts, min(self.r, k))
        )
        # the low likelihood level of each report, from any value (here value 0), relative to the row's top
        low = logl[:, 0] - gap * supports[:, 0] - top[:, 0]
        atom = supports[:, targets].all(axis=1) * np.exp(
            low + math.log1p(-rho) - math.log1p(-s) - targets.size * math.log(rho)
        )
        like = np.column_stack([np.exp(logl - top), atom])
        honest, share, fitted, iterations = mixture_em(like, counts, self.beta)
        _, _, null, _ = mixture_em(like, counts, None, with_atom=False)
        extras = {"contamination": share, "poisoning_lr": max(2.0 * (fitted - null), 0.0)}
        return Estimate(honest, iterations=iterations, rule="delta", extras=extras)


def _mechanism(plans) -> Mechanism:
    """The one mechanism every user reports through once, if reports of it support items; refused otherwise."""
    plans = list(dict.fromkeys(plans))
    mech = plans[0][0] if len(plans) == 1 and len(plans[0]) == 1 else None
    if mech is None or support_rates(mech) is None:
        raise EstimationError(
            "contamination-mle needs every user to send one report through one unary encoding (rappor, oue, the)"
            " or local hashing (olh, blh)",
            hint="on k-RR an attack on targets looks like honest users holding them (see docs/guide/poisoning.md)",
        )
    return mech


@hookimpl
def register_estimators(register):
    register(CaoNorm)
    register(ContaminationMLE)
