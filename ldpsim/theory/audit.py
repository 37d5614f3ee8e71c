"""Auditing a privacy claim from a mechanism's draws: a statistical lower bound on the eps it gives.

A mechanism's analysis (its matrix, likelihood and declared eps) and its
sampler are separate code: the analysis can be right while the sampler draws
from another distribution, which is less private than declared. The audit
tests the sampler as an adversary would, in the manner of the LDP auditing
literature (Arcolezi & Gambs, PoPETs 2024): for two inputs x, x' and an output
event S, an eps-LDP mechanism has ``P(S | x) <= e^eps P(S | x')``; with N
draws from each input, a Clopper-Pearson lower bound on ``P(S | x)`` and an
upper bound on ``P(S | x')`` give a lower bound on eps that holds with the
stated confidence.

The event. By Neyman-Pearson the most telling events for a pair are the sets
``S_t = {y : log P(y|x) - log P(y|x') >= t}``. ldpsim knows the likelihoods,
so membership of a report is computed from the columns x and x' of
``mech.log_likelihood`` (of the distinct reports drawn): it works for any
mechanism with a likelihood, bit vectors and hashes included. The ratio is
rounded to ``RATIO_DECIMALS`` decimals first, so reports whose ratios differ by
rounding error fall in the same event.

Choosing the pair and the event. The pair (x, x') and threshold t are chosen
to maximise the bound on a *selection* sample (N draws from every value); the
bound is then computed on a fresh *evaluation* sample (N draws from x and from
x' only). Choosing on the draws that give the bound would bias it upwards (the
maximum of many noisy bounds exceeds the true level more often than any one
of them); on fresh draws the chosen test is a single fixed test, so no
correction is needed for the pairs and thresholds tried. (The selection ranks
candidates by a Wilson approximation and takes exact bounds for the best few;
a domain of more than ``MAX_VALUES`` values is audited on pairs among that
many, spread over it. Neither affects validity, only power.) An audit whose work (the draws, each
distinct report's likelihood over the domain, the Bayes vulnerability) would exceed ``WORK_BUDGET``
is refused before anything is drawn, naming the draws that fit.

Confidence. Each audited path gets ``alpha = 1 - confidence`` divided by the
number of paths (a union bound), split between the two one-sided
Clopper-Pearson bounds. So with probability at least ``confidence`` no
reported bound exceeds the true level of the code it audits: a bound above the
declared eps is evidence, at that confidence, that the code is less private
than declared.

Geo-indistinguishability claims eps per unit of distance: a pair at distance
d is tested against ``eps d``, and the bound reported is the pair's bound
divided by d. LIP claims hold under a prior, for the average user rather than
every pair of inputs, so no pair of draws can refute them: they are not
audited, and :func:`bayes_vulnerability` measures what an attacker gains
instead.

The two code paths. Reports come from a mechanism's sampler (:func:`sampler_draws`, what a
deployment runs) and from the simulation's count path (:func:`count_draws`, the report counts
:func:`ldpsim.theory.sampling.sample_cohort` draws without a report per user); :func:`audit_mechanism`
audits both where the simulation uses both, :func:`audit_paths` any given paths. The statistics
are :mod:`ldpsim.theory.audit_stats`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..base.errors import ParameterError
from ..base.memory import MemoryLimitError
from ..estimation.observations import unique_rows
from ..model.domains import Domain
from ..model.mechanism import Mechanism
from ..model.privacy import Privacy
from .audit_stats import draws_needed, ratio_bound, reachable, wilson_ratio_bound
from .sampling import count_matrix, counted, sample_cohort

#: decimals of log P(y|x) - log P(y|x') kept when deciding the event a report falls in
RATIO_DECIMALS = 9
#: integers per temporary block (draws, log-likelihood rows): 32 MB of int64 or float64
CHUNK = 1 << 22
#: the default fraction of the declared eps the draws must be able to show (else the audit is refused)
MIN_REACH = 0.5
#: values whose pairs are audited by default, spread over a larger domain (the selection draws N from each)
MAX_VALUES = 64
#: candidate events whose exact Clopper-Pearson bound is computed in the selection (the rest are ranked roughly)
EXACT_CANDIDATES = 512
#: blocks of at least this many distinct reports are reduced one likelihood column at a time
PER_COLUMN_ROWS = 4096
#: reports sampled for the Bayes vulnerability of a mechanism without a usable matrix
VULNERABILITY_SAMPLES = 100_000
#: the most work an audit may take, in steps (an integer drawn, a likelihood entry, a ratio sorted: see
#: ``_work``): one core does a few 10^7 a second, so this is minutes; beyond it an audit would look hung,
#: and is refused before anything is drawn, naming the draws that fit
WORK_BUDGET = 1e10

#: ``draw(mech, value, n, rng)``: ``n`` draws of reports for one true value, as chunks of
#: (distinct reports, counts)
Draw = Callable[[Mechanism, int, int, np.random.Generator], Iterable[tuple[np.ndarray, np.ndarray]]]


@dataclass(frozen=True)
class AuditPath:
    """One code path that produces reports, to be audited."""

    name: str
    how: str
    draw: Draw


@dataclass(frozen=True)
class PathAudit:
    """What one path's evaluation draws show.

    ``bound`` is the lower bound on eps (per unit distance for a geo claim),
    clipped at 0; the test behind it is the event ``log P(y|x) - log P(y|x') >=
    threshold`` for the domain indices ``pair = (x, x')``, which ``hits[0]`` of
    the ``draws`` reports of x and ``hits[1]`` of those of x' fell in.
    """

    path: str
    how: str
    bound: float
    pair: tuple[int, int]
    threshold: float
    hits: tuple[int, int]
    draws: int
    seconds: float


@dataclass(frozen=True)
class AuditReport:
    """An audit's outcome: the declared guarantee, the bound each path shows, and the Bayes vulnerability.

    ``skipped`` says why nothing was audited (a LIP claim, no guarantee, an
    infinite eps); then ``paths`` is empty. ``vulnerability`` is the Bayes
    vulnerability of one report under ``prior`` (uniform unless given, or the
    prior of a LIP claim), ``prior_vulnerability`` the adversary's chance
    without a report (the largest prior probability).
    """

    mechanism: str
    privacy: Privacy
    labels: tuple[str, ...]
    draws: int
    confidence: float
    paths: tuple[PathAudit, ...]
    vulnerability: float
    prior_vulnerability: float
    prior_name: str
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def declared(self) -> float:
        """The eps audited against (per unit distance for a geo claim)."""
        return self.privacy.eps

    @property
    def bound(self) -> float:
        """The largest bound over the paths (nan if nothing was audited)."""
        return max((p.bound for p in self.paths), default=math.nan)

    @property
    def exceeded(self) -> bool:
        """Whether a path shows, at the stated confidence, a level above the declared eps."""
        return any(p.bound > self.declared for p in self.paths)

    def worst(self) -> PathAudit | None:
        """The path with the largest bound."""
        return max(self.paths, key=lambda p: p.bound, default=None)

    def lines(self) -> list[str]:
        """The report as printable lines."""
        unit = " per unit distance" if self.privacy.notion == "geo" else ""
        out = [f"{self.mechanism}: claims {self.privacy}"]
        if self.skipped:
            out.append(f"not audited: {self.skipped}")
        for p in self.paths:
            x, y = (self.labels[i] for i in p.pair)
            out.append(
                f"{p.path:<8} eps >= {p.bound:.4g}{unit}  pair ({x}, {y}), event log P(y|{x})/P(y|{y}) >= "
                f"{p.threshold:.4g}: {p.hits[0]} vs {p.hits[1]} of {p.draws} draws  [{p.seconds:.2f} s; {p.how}]"
            )
        out.extend(self.notes)
        out.append(
            f"Bayes vulnerability ({self.prior_name} prior): {self.vulnerability:.4g} with one report,"
            f" {self.prior_vulnerability:.4g} without"
        )
        if self.paths:
            verdict = "EXCEEDS" if self.exceeded else "is within"
            out.append(
                f"the empirical lower bound {self.bound:.4g} {verdict} the declared eps = {self.declared:g}{unit}"
                f" ({self.confidence:.0%} confidence, {self.draws} draws per value)"
            )
        return out


# ------------------------------------------------------------------------------------------- draws
def sampler_draws(
    mech: Mechanism, value: int, n: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``n`` reports of ``value`` from :meth:`Mechanism.sample`, one vectorized call per block of draws.

    Reports are counted when they pack into one integer (finite, small outputs);
    hashed and long bit-vector reports are nearly all distinct, and sorting rows
    to find that out would cost more than it saves.
    """
    step = max(1, CHUNK // mech.report_width)
    for start in range(0, n, step):
        yield _distinct(mech.sample(np.full(min(step, n - start), value, dtype=np.int64), rng))


def count_draws(
    mech: Mechanism, value: int, n: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``n`` reports of ``value`` as the simulation draws a cohort of ``n`` users who all hold it."""
    counts = np.zeros(mech.domain.size, dtype=np.int64)
    counts[value] = n
    yield sample_cohort([mech], counts, [rng])


SAMPLER = AuditPath("sampler", "Mechanism.sample, per user", sampler_draws)
COUNTS = AuditPath(
    "counts",
    "the simulation's report counts (the mechanism's count sampler, or multinomial rows of the matrix)",
    count_draws,
)


def _distinct(reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct reports and counts when they pack into one integer, else the reports with counts 1."""
    spans = reports.max(axis=0) - reports.min(axis=0) + 1 if reports.size else np.ones(reports.shape[1])
    if float(np.log2(spans).sum()) < 62:
        return unique_rows(reports)
    return reports, np.ones(reports.shape[0], dtype=np.int64)


def _log_ratios(
    mech: Mechanism, reports: np.ndarray, value: int, columns: np.ndarray
) -> Iterator[tuple[slice, np.ndarray]]:
    """(rows, r) with ``r[d, j] = log P(y_d|value) - log P(y_d|columns[j])``, rounded; in bounded blocks of rows."""
    step = max(1, CHUNK // mech.domain.size)
    for start in range(0, reports.shape[0], step):
        rows = slice(start, min(start + step, reports.shape[0]))
        ll = mech.log_likelihood(reports[rows])
        with np.errstate(invalid="ignore"):
            r = ll[:, [value]] - ll[:, columns]
        r[np.isnan(r)] = 0.0  # impossible under both: no evidence either way
        with np.errstate(over="ignore"):
            rounded = np.round(r, RATIO_DECIMALS)
        overflow = np.isinf(rounded) & np.isfinite(r)  # ratios beyond 1e299 (an eps of 1e308): kept unrounded
        rounded[overflow] = r[overflow]
        yield rows, rounded


#: (key, ratio, count) columns: a histogram of log-likelihood ratios per key (a value, or a pair of values)
Histogram = tuple[np.ndarray, np.ndarray, np.ndarray]


def _group(keys: np.ndarray, ratios: np.ndarray, weights: np.ndarray) -> Histogram:
    """Distinct (key, ratio) rows, sorted by key then decreasing ratio, with their weights summed."""
    order = np.lexsort((-ratios, keys))
    keys, ratios, weights = keys[order], ratios[order], weights[order]
    new = np.ones(keys.shape[0], dtype=bool)
    new[1:] = (keys[1:] != keys[:-1]) | (ratios[1:] != ratios[:-1])
    starts = np.flatnonzero(new)
    return keys[starts], ratios[starts], np.add.reduceat(weights, starts, axis=0) if starts.size else weights[:0]


def _merge(parts: Sequence[Histogram]) -> Histogram:
    keys, ratios, weights = (np.concatenate(column) for column in zip(*parts))
    return _group(keys, ratios, weights)


def _ratio_histogram(
    mech: Mechanism, value: int, values: np.ndarray, chunks: Iterable[tuple[np.ndarray, np.ndarray]]
) -> Histogram:
    """(u, ratio, count): how many draws of ``value`` have ``log P(y|value) - log P(y|u) = ratio``, for the
    other audited ``values`` u."""
    others = values[values != value]
    parts: list[Histogram] = [(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))]
    for reports, report_counts in chunks:
        for rows, r in _log_ratios(mech, reports, value, others):
            weights = report_counts[rows]
            if r.shape[0] < PER_COLUMN_ROWS:  # few distinct reports (a finite mechanism): one sort for all
                keys = np.broadcast_to(others, r.shape).ravel()
                parts.append((keys, r.ravel(), np.repeat(weights, others.size)))
                continue
            for j, u in enumerate(others):  # many reports with few distinct ratios each: a sort per column is faster
                distinct, inverse = np.unique(r[:, j], return_inverse=True)
                counts = np.bincount(inverse, weights=weights, minlength=distinct.size).astype(np.int64)
                parts.append((np.full(distinct.size, u), distinct, counts))
        parts = [_merge(parts)]  # as large as the distinct ratios, not the draws
    return parts[0]


def _select(
    mech: Mechanism,
    values: np.ndarray,
    histograms: Sequence[Histogram],
    draws: int,
    alpha: float,
    scale: np.ndarray | None,
) -> tuple[tuple[int, int], float]:
    """The pair (x, x') and threshold with the largest bound on the selection draws."""
    k = mech.domain.size
    pair_keys, pair_ratios, weights = [], [], []
    for v, (u, r, c) in zip(values, histograms):
        # draws of v count for the pair (v, u) as x, with ratio r, and for the pair (u, v) as x', with ratio -r
        pair_keys += [v * k + u, u * k + v]
        pair_ratios += [r, -r]
        weights += [np.column_stack([c, np.zeros_like(c)]), np.column_stack([np.zeros_like(c), c])]
    keys, ratios, w = _group(np.concatenate(pair_keys), np.concatenate(pair_ratios), np.concatenate(weights))
    # hits of S_t = {ratio >= t}: cumulative sums within each pair, ratios decreasing
    cum = np.cumsum(w, axis=0)
    first = np.ones(keys.shape[0], dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(keys.shape[0]), 0))
    hits = cum - cum[start] + w[start]
    scales = np.ones(keys.shape[0]) if scale is None else scale[keys // k, keys % k]
    # the beta quantile costs microseconds: rank all candidates by the Wilson approximation, then take exact
    # Clopper-Pearson bounds for the best few (any rule on the selection draws keeps the bound valid)
    if keys.shape[0] > EXACT_CANDIDATES:
        rough = wilson_ratio_bound(hits[:, 0], hits[:, 1], draws, alpha) / scales
        keep = np.argpartition(-rough, EXACT_CANDIDATES)[:EXACT_CANDIDATES]
        keep.sort()
        keys, ratios, hits, scales = keys[keep], ratios[keep], hits[keep], scales[keep]
    bounds = ratio_bound(hits[:, 0], hits[:, 1], draws, alpha) / scales
    best = int(np.argmax(bounds))
    return (int(keys[best] // k), int(keys[best] % k)), float(ratios[best])


def _hits(mech: Mechanism, x: int, y: int, threshold: float, chunks: Iterable[tuple[np.ndarray, np.ndarray]]) -> int:
    """Draws (given as chunks of distinct reports and counts) in the event log P(.|x) - log P(.|y) >= threshold."""
    total = 0
    for reports, counts in chunks:
        for rows, r in _log_ratios(mech, reports, x, np.array([y])):
            total += int(counts[rows][r[:, 0] >= threshold].sum())
    return total


def _audit_path(
    mech: Mechanism,
    path: AuditPath,
    values: np.ndarray,
    draws: int,
    alpha: float,
    scale: np.ndarray | None,
    seed: np.random.SeedSequence,
) -> PathAudit:
    """Choose the test on selection draws of every audited value, then bound on fresh draws of its two values.

    ``scale`` holds the distances a geo claim divides by (None for LDP)."""
    started = time.perf_counter()
    histograms = [
        _ratio_histogram(mech, int(v), values, path.draw(mech, int(v), draws, np.random.default_rng(s)))
        for v, s in zip(values, seed.spawn(values.size))
    ]
    (x, y), threshold = _select(mech, values, histograms, draws, alpha, scale)
    rx, ry = (np.random.default_rng(s) for s in seed.spawn(2))
    hits_x = _hits(mech, x, y, threshold, path.draw(mech, x, draws, rx))
    hits_y = _hits(mech, x, y, threshold, path.draw(mech, y, draws, ry))
    bound = float(ratio_bound(np.array([hits_x]), np.array([hits_y]), draws, alpha)[0])
    if scale is not None:
        bound /= float(scale[x, y])
    return PathAudit(
        path=path.name,
        how=path.how,
        bound=max(0.0, bound),
        pair=(x, y),
        threshold=threshold,
        hits=(hits_x, hits_y),
        draws=draws,
        seconds=time.perf_counter() - started,
    )


def audit_paths(
    mech: Mechanism,
    paths: Sequence[AuditPath],
    *,
    draws: int = 10**6,
    seed: int = 0,
    confidence: float = 0.95,
    prior: np.ndarray | None = None,
    min_reach: float = MIN_REACH,
    values: Sequence[int] | None = None,
    notes: Sequence[str] = (),
) -> AuditReport:
    """Audit ``mech``'s privacy claim on the reports each of ``paths`` draws.

    Parameters
    ----------
    mech
        The mechanism; its likelihood decides the events, its claim is what is audited.
    paths
        The code paths whose draws are audited (see :func:`sampler_draws`).
    draws
        N: draws per value for choosing the test, and again for each of its two values.
    seed
        Seeds a :class:`numpy.random.SeedSequence`: its first child draws for the
        vulnerability (if sampled), child i + 1 for path i.
    confidence
        With at least this probability (over the draws) no path's bound exceeds
        the true level of the code it audits (union bound over the paths).
    prior
        For the Bayes vulnerability; default the prior of a LIP claim, else uniform.
    min_reach
        Refuse (``ParameterError``) when even a mechanism exactly at the declared
        eps could not show this fraction of it with ``draws`` draws; 0 never refuses.
    values
        The domain indices whose pairs are tested (default all, or ``MAX_VALUES``
        spread evenly over a larger domain, ends included: the selection costs
        draws per value and work per pair).
    notes
        Lines added to the report.

    Returns
    -------
    AuditReport
        The bounds per path; ``report.exceeded`` is the verdict.
    """
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ParameterError(f"must be a positive integer, got {draws!r}", field="draws", hint="e.g. 1000000")
    if not 0 < confidence < 1:
        raise ParameterError(f"must be between 0 and 1, got {confidence!r}", field="confidence", hint="e.g. 0.95")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:  # SeedSequence's entropy
        raise ParameterError(f"must be an integer >= 0, got {seed!r}", field="seed", hint="e.g. 0")
    draws = int(draws)
    claim = mech.privacy
    k = mech.domain.size
    prior_name = "uniform" if prior is None else "given"
    if prior is None and claim.notion == "lip" and claim.prior is not None:
        prior, prior_name = np.asarray(claim.prior, dtype=float), "the LIP claim's"
    pi = _prior(prior, k)
    skipped = _not_auditable(claim, k)
    chosen = _audited_values(values, k)
    if chosen.size < k:
        notes = [*notes, f"pairs among {chosen.size} of the {k} values, spread evenly over the domain"]
    alpha = (1 - confidence) / (2 * max(1, len(paths)))  # per one-sided bound: two per path

    def least() -> int:  # the fewest informative draws, for the hint of a refusal
        return draws_needed(claim, mech.domain, alpha, min_reach * claim.eps) or draws

    _require_budget(mech, 0 if skipped else len(paths), chosen.size, draws, None if skipped else least)
    if skipped is None:
        _require_informative(claim, mech.domain, draws, alpha, confidence, min_reach)
    vuln_seed, *path_seeds = np.random.SeedSequence(seed).spawn(1 + len(paths))
    audited: tuple[PathAudit, ...] = ()
    if skipped is None:
        scale = mech.domain.distances if claim.notion == "geo" else None
        audited = tuple(_audit_path(mech, p, chosen, draws, alpha, scale, s) for p, s in zip(paths, path_seeds))
    return AuditReport(
        mechanism=repr(mech),
        privacy=claim,
        labels=tuple(mech.domain.labels()),
        draws=draws,
        confidence=confidence,
        paths=audited,
        vulnerability=bayes_vulnerability(mech, pi, seed=vuln_seed),
        prior_vulnerability=float(pi.max()),
        prior_name=prior_name,
        skipped=skipped,
        notes=tuple(notes),
    )


def audit_mechanism(
    mech: Mechanism,
    *,
    draws: int = 10**6,
    seed: int = 0,
    confidence: float = 0.95,
    prior: np.ndarray | None = None,
    min_reach: float = MIN_REACH,
    values: Sequence[int] | None = None,
) -> AuditReport:
    """A statistical lower bound on the eps ``mech`` gives, from its sampler and from the simulation's count path.

    See the module docstring for the method. The count path is audited
    when the simulation uses it for this mechanism (one report with a usable
    matrix); otherwise the simulation calls the sampler, which the first path
    covers.

    Parameters
    ----------
    mech
        The mechanism whose claim (``mech.privacy``) is audited: eps-LDP, or
        geo-indistinguishability per unit distance; LIP claims are reported as
        not auditable.
    draws
        N: draws per value to choose the pair and event, and again for each value of the chosen pair.
    seed
        Seed of all draws.
    confidence
        With at least this probability no reported bound exceeds the true level
        of the code it audits (over both paths).
    prior
        For the Bayes vulnerability (default: a LIP claim's prior, else uniform).
    min_reach
        Refuse (``ParameterError`` naming the draws needed) when ``draws`` could
        not show this fraction of the declared eps even for a mechanism exactly
        at it; 0 never refuses.
    values
        The domain indices whose pairs are tested (default all, or 64 spread over a larger domain).

    Returns
    -------
    AuditReport
        ``report.exceeded`` is True when the code is, at that confidence, less private than declared.
    """
    paths = [SAMPLER]
    notes = []
    if counted([mech], int(draws) if isinstance(draws, int | np.integer) else 0):
        paths.append(COUNTS)
    else:
        notes.append("counts: not a separate path here, the simulation samples this mechanism per user")
    return audit_paths(
        mech,
        paths,
        draws=draws,
        seed=seed,
        confidence=confidence,
        prior=prior,
        min_reach=min_reach,
        values=values,
        notes=notes,
    )


def _require_informative(
    claim: Privacy, domain: Domain, draws: int, alpha: float, confidence: float, min_reach: float
) -> None:
    """ParameterError naming the draws needed when even a mechanism exactly at the claim could not show
    ``min_reach`` of it."""
    reach = reachable(claim, domain, draws, alpha)
    if reach >= min_reach * claim.eps:
        return
    needed = draws_needed(claim, domain, alpha, min_reach * claim.eps)
    unit = " per unit distance" if claim.notion == "geo" else ""
    raise ParameterError(
        f"{draws} draws per value can show at most eps >= {reach:.3g}{unit} at {confidence:.0%} confidence, even from a"
        f" mechanism exactly at the declared eps = {claim.eps:g}: below {min_reach:g} x eps, the audit would not be"
        " informative",
        field="draws",
        hint=f"use at least {needed} draws" if needed else _beyond_draws(claim.eps),
    )


def _beyond_draws(eps: float) -> str:
    """Why no number of draws up to 10^15 is informative: eps too small to show, too large, or beyond floats."""
    if eps < 1:
        return f"no feasible number of draws shows so small an eps: audit a larger one than {eps:g}"
    if math.exp(-eps) == 0.0:
        return (
            f"no number of draws can show eps = {eps:g}: e^-eps underflows to 0, so the mechanism is deterministic"
            " in floating point (every report is the true value); audit a smaller eps"
        )
    return "no feasible number of draws reaches it: eps is too large"


def _work(mech: Mechanism, paths: int, values: int, draws: int, outputs: int | None) -> float:
    """Steps of an audit (see ``WORK_BUDGET``): per path, ``draws`` reports of each audited value and of
    the chosen two, each distinct report's likelihood over the domain and its ratios to the audited
    values; then the Bayes vulnerability (its matrix, or a likelihood row per sampled report)."""
    k = mech.domain.size
    chunks = -(-draws // max(1, CHUNK // mech.report_width))
    rows = draws if outputs is None else min(draws, chunks * outputs)  # distinct reports: at most outputs a chunk
    per_value = draws * mech.report_width + rows * (k + values)
    return paths * (values + 2) * per_value + k * float(outputs or VULNERABILITY_SAMPLES)


def _require_budget(mech: Mechanism, paths: int, values: int, draws: int, least: Callable[[], int] | None) -> None:
    """ParameterError naming the work and the draws that fit when an audit would exceed ``WORK_BUDGET``;
    ``least()`` is the fewest informative draws (None: any number, the draws do not matter)."""
    outputs = mech.output_count()
    if outputs is None:
        m = count_matrix(mech)  # bounded in size; the count path builds it anyway
        outputs = None if m is None else int(m.shape[1])
    work = _work(mech, paths, values, draws, outputs)
    if work <= WORK_BUDGET:
        return
    lo, hi = 0, draws  # the most draws that fit: work grows with draws
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _work(mech, paths, values, mid, outputs) <= WORK_BUDGET else (lo, mid)
    k = mech.domain.size
    fewer = f"audit a smaller domain (each report's likelihood spans all {k:,} values)"
    needed = None if least is None else least()
    if needed is not None and lo >= needed:
        field, hint = "draws", f"use at most {lo:,} draws, or {fewer}"
    elif needed is not None:
        field, hint = "domain", f"{fewer}, or a larger eps (an informative audit of this one needs {needed:,} draws)"
    else:  # nothing drawn for pairs (a claim not audited): the Bayes vulnerability alone is too much
        field, hint = "domain", fewer
    raise ParameterError(
        f"{draws:,} draws per value on {k:,} values would take about {work:.1e} steps, more than the"
        f" {WORK_BUDGET:.0e} (minutes) an audit may take",
        field=field,
        hint=hint,
    )


def _audited_values(values: Sequence[int] | None, k: int) -> np.ndarray:
    if values is None:
        return np.arange(k) if k <= MAX_VALUES else np.unique(np.linspace(0, k - 1, MAX_VALUES).round().astype(int))
    chosen = np.unique(np.asarray(values, dtype=np.int64))
    if chosen.size < 2 or chosen.min() < 0 or chosen.max() >= k:
        raise ParameterError(
            f"needs at least two domain indices in 0..{k - 1}, got {list(values)}", field="values", hint="or omit it"
        )
    return chosen


def _not_auditable(claim: Privacy, k: int) -> str | None:
    if claim.notion == "lip":
        return (
            "a LIP guarantee holds under a prior, not for every pair of inputs, so no pair of draws can refute it;"
            " compare the Bayes vulnerability with e^eps times the prior's"
        )
    if claim.notion not in ("ldp", "geo"):
        return f"it claims no guarantee that draws can refute ({claim})"
    if math.isinf(claim.eps):
        return "it claims eps = inf, which no draws can refute"
    if k < 2:
        return "a domain of one value has no pair of inputs to tell apart"
    return None


# ------------------------------------------------------------------------------------- vulnerability
def _prior(prior: np.ndarray | None, k: int) -> np.ndarray:
    if prior is None:
        return np.full(k, 1.0 / k)
    pi = np.asarray(prior, dtype=float)
    if pi.shape != (k,) or np.any(pi < 0) or not math.isclose(float(pi.sum()), 1.0, abs_tol=1e-9):
        raise ParameterError(
            f"needs {k} non-negative numbers summing to 1", field="prior", hint="give one probability per value"
        )
    return pi


def bayes_vulnerability(
    mech: Mechanism,
    prior: np.ndarray | None = None,
    *,
    samples: int = VULNERABILITY_SAMPLES,
    seed: int | np.random.SeedSequence = 0,
) -> float:
    """The adversary's probability of guessing the true value from one report: ``sum_y max_x pi_x P(y|x)``.

    This is Bayes vulnerability (Smith, FoSSaCS 2009): an attacker who knows the
    prior and the mechanism guesses the value of largest posterior. Compared with
    ``max_x pi_x`` (the guess without a report) it says what one report gives
    away under the users' actual distribution, which worst-case eps does not:
    an eps-LDP or eps-LIP mechanism multiplies it by at most e^eps. It is a
    property of a mechanism and a prior, not of an estimate, so it is not a
    metric plugin (those see an estimate and the truth).

    Parameters
    ----------
    mech
        The mechanism.
    prior
        The distribution of the true values (default uniform).
    samples, seed
        Without a usable matrix (bit vectors, hashes) the sum over outputs is a
        Monte Carlo mean of the largest posterior over ``samples`` reports drawn
        from the prior (standard error at most ``0.5 / sqrt(samples)``), seeded by
        ``seed``; with a matrix the value is exact.

    Returns
    -------
    float
        The vulnerability, in ``[max(prior), 1]``.
    """
    from scipy.special import logsumexp  # here, not at import: `import ldpsim` stays fast

    k = mech.domain.size
    pi = _prior(prior, k)
    try:
        m = mech.matrix
    except MemoryLimitError:
        m = None
    if m is not None:
        return float((pi[:, None] * m).max(axis=0).sum())
    rng = np.random.default_rng(seed)
    values = rng.choice(k, size=samples, p=pi)
    reports, counts = _distinct(mech.sample(values, rng))
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    total = 0.0
    step = max(1, CHUNK // k)
    for start in range(0, reports.shape[0], step):
        rows = slice(start, start + step)
        joint = log_pi[None, :] + mech.log_likelihood(reports[rows])
        total += float((counts[rows] * np.exp(joint.max(axis=1) - logsumexp(joint, axis=1))).sum())
    return total / samples
