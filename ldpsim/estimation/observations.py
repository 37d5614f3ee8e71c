"""Aggregated observations.

Users who apply the same report plan (the tuple of mechanisms a user applies,
one per report) and send the same report tuple are indistinguishable to the
collector, so observations keep, per plan, the distinct report tuples and their
counts. Memory and estimation cost follow the number of distinct reports, not
the number of users.

A plan covers ``sum(m.rounds for m in plan)`` rounds of collection, in plan
order (a mechanism of today's plans is one round; a memoized protocol's report
covers several). Observations restricted to the first t rounds
(:meth:`Observations.prefix`) or to round t alone (:meth:`Observations.round_alone`)
are read off the same reports, column slices re-aggregated, so estimates over
time come from the same simulated users.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from ..model.domains import Domain
from ..model.mechanism import Mechanism

Plan = tuple[Mechanism, ...]
T = TypeVar("T")


def as_plan(plan: Mechanism | Sequence[Mechanism]) -> Plan:
    """A plan from one mechanism or a sequence of them."""
    plan = (plan,) if isinstance(plan, Mechanism) else tuple(plan)
    if not plan or not all(isinstance(m, Mechanism) for m in plan):
        raise TypeError("a report plan is a non-empty sequence of Mechanism instances")
    return plan


def plan_width(plan: Sequence[Mechanism]) -> int:
    return sum(m.report_width for m in plan)


def plan_rounds(plan: Sequence[Mechanism]) -> int:
    """How many rounds of collection a plan covers."""
    return sum(m.rounds for m in plan)


def round_channels(plan: Sequence[Mechanism]) -> list[Mechanism]:
    """The one-report channel of each round a plan covers, in order (what per-round estimates use)."""
    return [mech.round_channel(t) for mech in plan for t in range(mech.rounds)]


def unique_rows(reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an (n, w) integer array, and how often each occurs."""
    if reports.shape[0] == 0:
        return reports.reshape(0, reports.shape[1]), np.zeros(0, dtype=np.int64)
    lo = reports.min(axis=0)
    spans = reports.max(axis=0) - lo + 1
    if float(np.log2(spans).sum()) >= 62:
        runs = _sorted_runs(reports, lo, spans)
        if runs is None:
            return np.unique(reports, axis=0, return_counts=True)
        rows, starts, order = runs
        return rows, np.diff(np.append(starts, order.size)).astype(np.int64)
    # Pack each row into one integer: counting integers is far faster than sorting rows.
    keys = (
        np.ravel_multi_index(tuple((reports - lo).T), tuple(spans)) if reports.shape[1] > 1 else reports[:, 0] - lo[0]
    )
    if float(np.prod(spans.astype(float))) <= max(4 * reports.shape[0], 1 << 16):
        counts = np.bincount(keys, minlength=int(np.prod(spans)))
        uniq = np.flatnonzero(counts)
        counts = counts[uniq]
    else:
        uniq, counts = np.unique(keys, return_counts=True)
    rows = np.column_stack(np.unravel_index(uniq, tuple(spans))) + lo
    return rows.astype(np.int64), counts.astype(np.int64)


def _key_columns(spans: np.ndarray) -> list[list[int]] | None:
    """Consecutive columns whose spans multiply below 2^62, each group packed into one int64 key that sorts
    like its columns (lexicographic order, as np.unique(axis=0) gives, without its slow sort of row
    records). None if a single column spans 2^62 or more."""
    groups: list[list[int]] = [[]]
    bits = 0.0
    for j, span in enumerate(spans):
        width = float(np.log2(span))
        if width >= 62:
            return None
        if groups[-1] and bits + width >= 62:
            groups.append([])
            bits = 0.0
        groups[-1].append(j)
        bits += width
    return groups


def _row_key(reports: np.ndarray, lo: np.ndarray, spans: np.ndarray, cols: list[int]) -> np.ndarray:
    """The int64 key of columns ``cols`` of each row: mixed-radix digits, most significant first."""
    key = reports[:, cols[0]] - lo[cols[0]]
    for j in cols[1:]:
        key = key * int(spans[j]) + (reports[:, j] - lo[j])
    return key


def _lexsort(
    reports: np.ndarray, lo: np.ndarray, spans: np.ndarray, groups: list[list[int]]
) -> tuple[np.ndarray, np.ndarray | None]:
    """The lexicographic order of the rows (ties kept in their original order, as ``np.lexsort`` of the
    rows' keys gives it), by a sort on the first key alone and a lexsort of only the rows that tie on it;
    and whether each sorted row shares its first key with the next (None after a plain lexsort).

    Wide rows of random bits (unary encodings, subset selection) are nearly distinct on their first
    word: one 1-D sort instead of a lexsort over every word, 10-20x faster, and the other keys are
    formed for the tied rows only. Rows with many ties on the first key (a quarter or more) get the
    plain lexsort.
    """
    first = _row_key(reports, lo, spans, groups[0])
    order = np.argsort(first, kind="stable")
    first = first[order]
    tie = first[1:] == first[:-1]  # tie[i]: sorted rows i and i + 1 share the first key
    if len(groups) == 1 or not tie.any():
        return order, tie
    if 4 * int(tie.sum()) > order.size:
        keys = [_row_key(reports, lo, spans, cols) for cols in groups[::-1]]
        return np.lexsort(keys), None  # lexsort's last key is the primary one
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] = tie
    tied[:-1] |= tie
    where = np.flatnonzero(tied)  # runs of equal first keys, each contiguous in the sorted order
    run = np.cumsum(~np.append(False, tie)[where])  # which run each tied row is in
    sub = order[where]
    rows = reports[sub]
    # primary: the run, then the other keys in order; stable, so rows equal on every key keep their order
    keys = [_row_key(rows, lo, spans, cols) for cols in groups[:0:-1]]
    order[where] = sub[np.lexsort([*keys, run])]
    return order, tie  # reordering within runs of equal first keys leaves `tie` as it was


def _sorted_runs(
    reports: np.ndarray, lo: np.ndarray, spans: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(distinct rows in lexicographic order, start of each one's run in the sorted order, the order),
    or None if a column spans 2^62 or more. Neighbours compared by blocks and only the distinct rows
    gathered: no sorted copy of every row beside them."""
    groups = _key_columns(spans)
    if groups is None:
        return None
    order, tie = _lexsort(reports, lo, spans, groups)
    starts = _run_starts(reports, tie, len(groups) > 1, order)
    rows = np.asarray(reports[order if starts.size == order.size else order[starts]], dtype=np.int64)
    return rows, starts, order


def sum_equal_rows(reports: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``reports`` and the summed ``counts`` of each."""
    if reports.shape[0] and reports.ndim == 2 and reports.shape[1]:
        lo = reports.min(axis=0)
        runs = _sorted_runs(reports, lo, reports.max(axis=0) - lo + 1)
        if runs is not None:
            rows, starts, order = runs
            summed = np.add.reduceat(np.asarray(counts)[order], starts)
            return rows, summed.astype(np.int64 if np.asarray(counts).dtype.kind in "iub" else float)
    uniq, inverse = np.unique(reports, axis=0, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=counts, minlength=len(uniq))
    return uniq, summed.astype(np.int64 if np.asarray(counts).dtype.kind in "iub" else float)


def sum_equal_parts(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sum_equal_rows` of the parts' rows and counts concatenated (the same rows, counts and order),
    grouped in place: peak memory about 1.4x the rows', where a concatenated copy and its sorted copy took 3x.

    ``parts`` is consumed: each part is appended to one buffer grown in place (``realloc``) and dropped
    from the list, so the parts and the buffer never both hold every row; the buffer is sorted in place
    (its rows permuted a quarter of the columns at a time), equal rows are compacted forward, and the
    buffer shrinks to the distinct rows. Rows whose columns together cannot be keyed (a column spanning
    2^62 or more) take :func:`sum_equal_rows` on the concatenation.

    Parameters
    ----------
    parts
        (rows, counts) pairs of integer rows of one width, and their counts; emptied.

    Returns
    -------
    rows, counts
        The distinct rows in lexicographic order and the summed counts of each (int64 for integer counts).
    """
    if not parts:
        raise ValueError("no parts to merge")
    width = parts[0][0].shape[1]
    filled = [r for r, _ in parts if r.shape[0]]
    lo = np.min([r.min(axis=0) for r in filled], axis=0) if width and filled else np.zeros(0, dtype=np.int64)
    hi = np.max([r.max(axis=0) for r in filled], axis=0) if width and filled else np.zeros(0, dtype=np.int64)
    del filled
    groups = _key_columns(hi - lo + 1) if lo.size else None
    if groups is None:  # nothing to key (no rows or no columns), or a column too wide for an int64 key
        rows, counts = np.concatenate([r for r, _ in parts]), np.concatenate([c for _, c in parts])
        parts.clear()
        return sum_equal_rows(rows, counts)
    integral = all(np.asarray(c).dtype.kind in "iub" for _, c in parts)
    reports = np.empty((0, width), dtype=np.int64)
    weights = np.empty(0, dtype=np.result_type(*[np.asarray(c).dtype for _, c in parts]))
    while parts:
        rows, counts = parts.pop(0)
        start = reports.shape[0]
        reports.resize((start + rows.shape[0], width), refcheck=False)  # in place where the allocator can
        weights.resize(start + rows.shape[0], refcheck=False)
        reports[start:], weights[start:] = rows, counts
        del rows, counts
    order, tie = _lexsort(reports, lo, hi - lo + 1, groups)
    step = max(1, width // 4)  # a quarter of the columns at a time: 2 bytes a row per word, not a copy
    for left in range(0, width, step):
        reports[:, left : left + step] = reports[order, left : left + step]
    starts = _run_starts(reports, tie, len(groups) > 1)
    summed = np.add.reduceat(weights[order], starts)
    del weights, order
    if starts.size < reports.shape[0]:
        block = max(1, (1 << 20) // max(width, 1))
        for first in range(0, starts.size, block):  # starts[i] >= i: rows read are never ones written before
            last = min(starts.size, first + block)
            reports[first:last] = reports[starts[first:last]]
        reports.resize((starts.size, width), refcheck=False)
    return reports, summed.astype(np.int64 if integral else float)


def _run_starts(
    reports: np.ndarray, tie: np.ndarray | None, several_keys: bool, order: np.ndarray | None = None
) -> np.ndarray:
    """Where each run of equal rows starts in the rows sorted lexicographically (``reports[order]``, or
    ``reports`` already sorted when ``order`` is None; ``tie`` as :func:`_lexsort` gives it), comparing
    neighbours by blocks: no copy of the rows."""
    n, width = reports.shape
    change = np.ones(n, dtype=bool)
    block = max(1, (1 << 20) // max(width, 1))

    def rows(index: np.ndarray) -> np.ndarray:
        return reports[index if order is None else order[index]]

    if tie is None:
        for first in range(1, n, block):
            here = np.arange(first, min(n, first + block))
            change[here] = (rows(here) != rows(here - 1)).any(axis=1)
    else:
        change[1:] = ~tie
        if several_keys:  # rows differ where their first keys do; whole rows compared where those are equal
            pairs = np.flatnonzero(tie)
            for first in range(0, pairs.size, block):
                here = pairs[first : first + block]
                change[here + 1] = (rows(here + 1) != rows(here)).any(axis=1)
    return np.flatnonzero(change)


def merge_rows(reports: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sum_equal_rows`, the same rows in the same (lexicographic) order, faster on many rows:
    each row packed into one integer when the columns' spans allow, so one 1-D sort replaces a sort of rows."""
    if reports.shape[0] == 0 or reports.shape[1] == 0:
        return sum_equal_rows(reports, counts)
    lo = reports.min(axis=0)
    spans = reports.max(axis=0) - lo + 1
    if float(np.log2(spans.astype(float)).sum()) >= 62:
        return sum_equal_rows(reports, counts)
    keys = np.ravel_multi_index(tuple((reports - lo).T), tuple(int(v) for v in spans))
    uniq, inverse = np.unique(keys, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=counts, minlength=len(uniq))
    summed = summed.astype(np.int64 if np.asarray(counts).dtype.kind in "iub" else float)  # expected counts: real
    rows = np.column_stack(np.unravel_index(uniq, tuple(int(v) for v in spans))) + lo
    return rows.astype(np.int64), summed


@dataclass(frozen=True, eq=False)
class ReportGroup:
    """Distinct report tuples of the users who applied one plan, with counts.

    Counts are int64 for drawn reports, or float64 for expected ones (the infinite-data
    limit, ``observe = "expected"``): the likelihood and every estimator only weigh
    reports by their counts, so real-valued counts need nothing else.
    """

    plan: Plan
    reports: np.ndarray  # (D, plan width) int64, distinct rows
    counts: np.ndarray  # (D,) int64 or float64, all > 0
    #: the prior the collector knows for these users (002's local priors: their cohort's own
    #: dataset), or None; groups with different priors are kept apart even under one plan
    prior: np.ndarray | None = None

    @property
    def n(self) -> float:
        """Number of users (an int for drawn counts, a float for expected ones)."""
        total = self.counts.sum()
        return int(total) if self.counts.dtype.kind in "iu" else float(total)

    def columns(self) -> Iterable[tuple[Mechanism, np.ndarray]]:
        """Each mechanism of the plan with its slice of the report columns."""
        start = 0
        for mech in self.plan:
            yield mech, self.reports[:, start : start + mech.report_width]
            start += mech.report_width

    def canonical(self) -> ReportGroup:
        """The same group with exchangeable reports sorted, and equal tuples merged.

        Reports a user made with equal single-column mechanisms can be permuted
        without changing P(report tuple | x), a product over the reports: (a, b)
        and (b, a) become one row with the summed count.
        """
        positions: dict[Mechanism, list[int]] = {}
        col = 0
        for mech in self.plan:
            if mech.report_width == 1:
                positions.setdefault(mech, []).append(col)
            col += mech.report_width
        runs = [cols for cols in positions.values() if len(cols) > 1]
        if not runs:
            return self
        reports = self.reports.copy()
        for cols in runs:
            reports[:, cols] = np.sort(reports[:, cols], axis=1)
        return ReportGroup(self.plan, *sum_equal_rows(reports, self.counts), prior=self.prior)

    @property
    def rounds(self) -> int:
        """How many rounds the plan covers."""
        return plan_rounds(self.plan)

    def prefix(self, t: int) -> ReportGroup:
        """The group as it stood after its first ``t`` rounds (all of them if ``t >= rounds``).

        The plan is cut after round t (a report spanning several rounds becomes its
        mechanism's ``prefix``), the reports keep the columns of those rounds, and tuples
        that became equal are merged.
        """
        if t >= self.rounds:
            return self
        plan: list[Mechanism] = []
        left = t
        for mech in self.plan:
            if left <= 0:
                break
            plan.append(mech if left >= mech.rounds else mech.prefix(left))
            left -= mech.rounds
        width = plan_width(plan)
        if t < 1 or plan[-1].report_width > self.plan[len(plan) - 1].report_width:
            raise ValueError(f"cannot cut plan {self.plan} after {t} rounds")
        return ReportGroup(tuple(plan), *merge_rows(self.reports[:, :width], self.counts))

    def round_alone(self, t: int) -> ReportGroup:
        """Round ``t`` (1-based) alone: its reports through the round's one-report channel.

        What a collector who estimates round by round sees (the peers' per-round baselines):
        the round's columns, re-aggregated, with the plan ``(channel,)``.
        """
        if not 1 <= t <= self.rounds:
            raise ValueError(f"plan {self.plan} has rounds 1..{self.rounds}, not {t}")
        start, left = 0, t - 1
        for mech in self.plan:
            if left < mech.rounds:
                cols = mech.round_columns(left)
                channel = mech.round_channel(left)
                reports = self.reports[:, start + cols.start : start + cols.stop]
                if reports.shape[1] != channel.report_width:
                    raise ValueError(
                        f"{mech!r}: round {left} has {reports.shape[1]} columns, its channel"
                        f" {channel!r} reports {channel.report_width}"
                    )
                return ReportGroup((channel,), *merge_rows(reports, self.counts))
            start += mech.report_width
            left -= mech.rounds
        raise AssertionError("unreachable: t was checked against the plan's rounds")

    def log_likelihood(self) -> np.ndarray:
        """``(D, |X|)`` log P(report tuple | x): the sum over the plan's reports."""
        total: np.ndarray | None = None
        for mech, cols in self.columns():
            part = mech.log_likelihood(cols)
            total = part if total is None else total + part
        assert total is not None, "a plan has at least one report"
        return total


@dataclass(frozen=True, eq=False)
class BitTally:
    """The per-bit counts of the users of a one-report plan, without their reports (issue 31).

    What the mechanism's unbiased estimate reads (:meth:`ldpsim.Mechanism.bit_counts`): for a
    unary encoding how many users set each bit, for a sketch each (hash, bucket)'s and each hash's.
    Drawn at count level (:meth:`ldpsim.Mechanism.sample_bit_counts`), so 10^9 users cost what 10^3 do;
    only estimators that read nothing else accept them (:meth:`ldpsim.Estimator.takes_bit_counts`).
    """

    plan: Plan  # one mechanism that declares sample_bit_counts
    tally: np.ndarray  # int64 per-bit counts, in the mechanism's layout
    n: int  # number of users
    prior: np.ndarray | None = None

    @property
    def rounds(self) -> int:
        """How many rounds the plan covers."""
        return plan_rounds(self.plan)


class Observations:
    """All reports of a population, aggregated per plan (and per-bit counts of plans drawn as such: ``tallies``)."""

    def __init__(self, domain: Domain, groups: Iterable[ReportGroup | BitTally]):
        self.domain = domain
        merged: dict[tuple[Plan, bytes | None], list[ReportGroup]] = {}
        tallies: dict[tuple[Plan, bytes | None], BitTally] = {}
        for group in groups:
            for mech in group.plan:
                if mech.domain != domain:
                    raise ValueError(f"{mech!r} works on {mech.domain!r}, not on the observations' {domain!r}")
            if isinstance(group, BitTally):
                where = (group.plan, None if group.prior is None else np.asarray(group.prior, dtype=float).tobytes())
                if group.n:
                    old = tallies.get(where)
                    tallies[where] = (
                        group
                        if old is None
                        else BitTally(group.plan, old.tally + group.tally, old.n + group.n, group.prior)
                    )
                continue
            if group.reports.shape[0]:
                key = None if group.prior is None else np.asarray(group.prior, dtype=float).tobytes()
                merged.setdefault((group.plan, key), []).append(group)
        self.groups: tuple[ReportGroup, ...] = tuple(_merge(parts) for parts in merged.values())
        #: per-bit counts of the plans drawn without reports (empty unless a run drew them; see :class:`BitTally`)
        self.tallies: tuple[BitTally, ...] = tuple(tallies.values())
        self._derived: dict[Hashable, Any] = {}

    @classmethod
    def from_reports(
        cls, domain: Domain, data: Iterable[tuple[Mechanism | Sequence[Mechanism], np.ndarray]]
    ) -> Observations:
        """Aggregate raw reports: ``data`` yields (plan, (n, width) reports) pairs."""
        groups = []
        for plan, reports in data:
            plan = as_plan(plan)
            reports = np.asarray(reports, dtype=np.int64)
            if reports.ndim == 1:
                reports = reports[:, None]
            if reports.ndim != 2 or reports.shape[1] != plan_width(plan):
                raise ValueError(f"reports for plan {plan} must have {plan_width(plan)} columns")
            if reports.shape[0]:
                uniq, counts = unique_rows(reports)
                groups.append(ReportGroup(plan, uniq, counts.astype(np.int64)))
        return cls(domain, groups)

    @classmethod
    def from_counts(
        cls,
        domain: Domain,
        plan: Mechanism | Sequence[Mechanism],
        reports: np.ndarray,
        counts: np.ndarray,
    ) -> Observations:
        """Observations of one plan given as distinct report tuples and counts."""
        plan = as_plan(plan)
        reports = np.asarray(reports, dtype=np.int64)
        if reports.ndim == 1:
            reports = reports[:, None]
        counts = np.asarray(counts)
        counts = counts.astype(np.int64 if counts.dtype.kind in "iub" else float)  # real counts: expected ones
        if reports.shape != (counts.shape[0], plan_width(plan)) or not np.all(counts >= 0):
            raise ValueError("need one non-negative count per report tuple")
        keep = counts > 0
        return cls(domain, [ReportGroup(plan, *sum_equal_rows(reports[keep], counts[keep]))])

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, computed once per observations and ``key``.

        For objects that depend on the observations alone and are costly to
        build (their likelihood, which every estimator of a task uses): held
        here, they are shared while the observations live and dropped with them.
        """
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    @property
    def rounds(self) -> int:
        """The most rounds a plan of these observations covers (0 without reports)."""
        return max([g.rounds for g in self.groups] + [b.rounds for b in self.tallies], default=0)

    def prefix(self, t: int) -> Observations:
        """The observations after the first ``t`` rounds (``1 <= t``).

        Every group keeps its first ``t`` rounds (a plan with fewer keeps all of
        them: its users stopped reporting). ``t >= rounds`` gives these observations.
        """
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
            raise ValueError(f"a prefix has at least one round, got {t!r}")
        if t >= self.rounds:
            return self
        return Observations(self.domain, [*(g.prefix(t) for g in self.groups), *self.tallies])  # a tally: one round

    def round_alone(self, t: int) -> Observations:
        """Round ``t`` (1-based) alone: each plan that covers it through the round's channel.

        Users whose plan ends before round t do not appear. Cached: the estimators of
        a run that estimate round by round share it (and what is derived from it).
        """
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= t <= self.rounds:
            raise ValueError(f"these observations have rounds 1..{self.rounds}, not {t!r}")
        return self.derived(
            ("round_alone", int(t)),
            lambda: Observations(
                self.domain,
                [*(g.round_alone(t) for g in self.groups if g.rounds >= t), *(b for b in self.tallies if t == 1)],
            ),
        )

    def last_round(self) -> Observations:
        """The last round alone (:meth:`round_alone` of :attr:`rounds`)."""
        return self.round_alone(self.rounds)

    @cached_property
    def n(self) -> float:
        """Number of users (a float when some counts are expected ones); found once (the groups do not change),
        as the simulation, the estimators, their certificates and the noisy distribution each read it."""
        return sum(g.n for g in self.groups) + sum(b.n for b in self.tallies)

    @property
    def n_distinct(self) -> int:
        """Number of distinct (plan, report tuple) pairs (per-bit counts hold no report: they count none)."""
        return sum(len(g.counts) for g in self.groups)

    @property
    def counts(self) -> np.ndarray:
        return np.concatenate([g.counts for g in self.groups]) if self.groups else np.zeros(0, np.int64)

    def __sizeof__(self) -> int:
        """Bytes of the reports and counts (what a Dask worker holding these observations accounts for)."""
        arrays = [a for g in self.groups for a in (g.reports, g.counts)] + [b.tally for b in self.tallies]
        return object.__sizeof__(self) + sum(int(np.asarray(a).nbytes) for a in arrays)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without what was derived from them (their likelihood refers back to them by a weak
        reference, which does not pickle): a copy in another process derives its own."""
        state = dict(self.__dict__)
        state["_derived"] = {}
        return state

    def held_likelihood(self, support: np.ndarray | None = None) -> Any:
        """None: these observations hold their reports (observations held elsewhere give the likelihood of
        their parts' passes, see :class:`~ldpsim.estimation.held.HeldObservations`)."""
        return None

    def likely_subset(self) -> np.ndarray | None:
        """A likely subset of the domain (004 Sec. 8), when the reports all come from one
        mechanism that knows one; any MLE is zero outside it. None otherwise."""
        if len(self.groups) != 1 or len(self.groups[0].plan) != 1:
            return None
        return self.groups[0].plan[0].likely_subset(self.groups[0].reports)

    def log_likelihood(self) -> np.ndarray:
        """``(n_distinct, |X|)`` log P(report tuple | x), groups stacked in order."""
        if not self.groups:
            return np.zeros((0, self.domain.size))
        return np.concatenate([g.log_likelihood() for g in self.groups])

    def __repr__(self) -> str:
        tallied = f", tallied plans={len(self.tallies)}" if self.tallies else ""
        return f"Observations(n={self.n}, distinct={self.n_distinct}, plans={len(self.groups)}{tallied})"


def _merge(parts: list[ReportGroup]) -> ReportGroup:
    if len(parts) == 1:
        return parts[0]
    return ReportGroup(parts[0].plan, *sum_equal_parts([(p.reports, p.counts) for p in parts]), prior=parts[0].prior)
