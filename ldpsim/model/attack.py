"""The attack contract: what fake users send to a frequency oracle (data poisoning).

An attacker controls ``m`` fake users of a population whose honest users report through one
mechanism; the collector cannot tell them apart, so the fake reports are aggregated and estimated
exactly like honest reports of that mechanism. An attack promotes a set of *target* items
(Cao, Jia & Gong, USENIX Security 2021): a plugin subclass of :class:`Attack` implements

``_applies_to(mechanism)``
    None if the attack is defined for the mechanism, else the reason it is not (one line). The
    public :meth:`Attack.applies_to` calls it; a scenario pairing an attack with a mechanism it does
    not apply to is refused before the run.
``_sample(mechanism, m, rng)``
    The reports of ``m`` fake users in the mechanism's report format (rows of
    ``mechanism.report_width`` integers), aggregated: distinct rows and their counts, drawn with
    ``rng`` only, vectorised (no loop over users). :meth:`Attack.sample` checks the shapes and
    that the counts sum to ``m``.

The targets are given (``targets``, domain indices) or drawn once from ``target_seed`` (``r`` of them,
uniformly without replacement), so every run of a scenario attacks the same items and the metrics
(:attr:`Attack.targets`) know them. :meth:`Attack.value_reports` draws the honest reports of fake users
holding given value counts, at count level where the mechanism allows (what the random-item attack
sends).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..base.arguments import require_generator
from ..base.errors import ContractError, ParameterError
from ..base.memory import MemoryLimitError
from .domains import OnDomain
from .mechanism import Mechanism
from .params import Param

#: the most cells (values x outputs) of a matrix a count-level draw of fake reports uses
MAX_ATTACK_CELLS = 1 << 24


class Attack(OnDomain):
    """Base class of poisoning attacks: the reports fake users send to promote target items.

    Subclasses set ``name``, a one-line docstring, and implement ``_applies_to`` and ``_sample``
    (see :mod:`ldpsim.model.attack`).
    """

    kind: ClassVar[str] = "attack"
    targets = Param("vector", None, doc="the target items, as domain indices (default: r drawn from target_seed)")
    r = Param("int", None, ge=1, doc="how many targets to draw uniformly when targets is not given")
    target_seed = Param("int", 0, ge=0, doc="seed of the drawn targets (the same items in every run)")

    def _validate(self) -> None:
        k = self.domain.size
        if self.targets is None:
            if self.r is None:
                raise ParameterError(
                    f"{self._label()} needs its targets", field="targets", hint="give targets = [...] or r = <count>"
                )
            if self.r > k:
                raise ParameterError(
                    f"must be at most the domain's {k} values, got {self.r}", field="r", hint="choose fewer targets"
                )
            return
        items = np.asarray(self.targets, dtype=float)
        if self.r is not None and self.r != items.size:
            raise ParameterError(
                f"is {self.r} but {items.size} targets are given", field="r", hint="give targets or r, not both"
            )
        if items.ndim != 1 or not items.size or np.any(items != np.round(items)):
            raise ParameterError("must be a non-empty list of domain indices", field="targets", hint="e.g. [0, 5, 7]")
        if items.min() < 0 or items.max() >= k or np.unique(items).size != items.size:
            raise ParameterError(
                f"must be distinct domain indices in 0..{k - 1}, got {items.astype(np.int64).tolist()}",
                field="targets",
                hint=f"choose targets inside the domain of {k} values",
            )

    @property
    def target_items(self) -> np.ndarray:
        """The targets as sorted int64 domain indices (given, or drawn from ``target_seed``)."""
        if self.targets is not None:
            return np.sort(np.asarray(self.targets).astype(np.int64))
        assert self.r is not None  # _validate
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.target_seed)))
        return np.sort(rng.choice(self.domain.size, size=self.r, replace=False)).astype(np.int64)

    # ------------------------------------------------------------------ hooks
    def _applies_to(self, mechanism: Mechanism) -> str | None:
        """None if the attack is defined for ``mechanism``, else why not."""
        raise NotImplementedError(f"{type(self).__name__} must implement _applies_to")

    def _sample(self, mechanism: Mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(reports, counts)``: distinct (D, report_width) rows and their positive counts, summing to m."""
        raise NotImplementedError(f"{type(self).__name__} must implement _sample")

    # ----------------------------------------------------------- public API
    def applies_to(self, mechanism: Mechanism) -> str | None:
        """Whether the attack is defined for ``mechanism``.

        Parameters
        ----------
        mechanism
            The mechanism of the honest users the fake ones pose as.

        Returns
        -------
        str or None
            None if it applies; else one line saying why not (for the error a scenario gets).
        """
        if mechanism.domain != self.domain:
            return f"the attack is built for {self.domain!r}, the mechanism for {mechanism.domain!r}"
        if mechanism.rounds != 1:
            return f"{mechanism.name} reports {mechanism.rounds} rounds at once; attacks target one-round oracles"
        return self._applies_to(mechanism)

    def sample(self, mechanism: Mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The aggregated reports of ``m`` fake users posing as users of ``mechanism``.

        Parameters
        ----------
        mechanism
            The honest users' mechanism (one the attack :meth:`applies_to`).
        m
            Number of fake users (>= 0).
        rng
            The generator of every draw.

        Returns
        -------
        tuple of numpy.ndarray
            Distinct int64 reports ``(D, mechanism.report_width)`` and their int64 counts ``(D,)``,
            all positive, summing to ``m``.
        """
        why = self.applies_to(mechanism)
        if why is not None:
            raise ParameterError(f"attack '{self.name}' does not apply to {mechanism.name}: {why}", field="attack")
        require_generator(rng)
        if m == 0:
            return np.zeros((0, mechanism.report_width), dtype=np.int64), np.zeros(0, dtype=np.int64)
        reports, counts = self._sample(mechanism, int(m), rng)
        reports = np.asarray(reports, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        if reports.ndim != 2 or reports.shape != (counts.shape[0], mechanism.report_width):
            raise ContractError(
                f"{self!r}._sample returned reports of shape {reports.shape} and counts of shape {counts.shape},"
                f" expected (D, {mechanism.report_width}) and (D,)"
            )
        if (counts <= 0).any() or int(counts.sum()) != m:
            raise ContractError(f"{self!r}._sample returned counts that are not positive or do not sum to {m}")
        return reports, counts

    # ------------------------------------------------------------- helpers
    @staticmethod
    def aggregate(reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct rows of an (m, w) integer array and how often each occurs (what :meth:`sample` returns)."""
        reports = np.asarray(reports, dtype=np.int64)
        rows, counts = np.unique(reports, axis=0, return_counts=True)
        return rows.astype(np.int64), counts.astype(np.int64)

    @staticmethod
    def value_reports(
        mechanism: Mechanism, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Honest reports of users holding value x ``counts[x]`` times, aggregated.

        Count level (the mechanism's own count sampler, or one multinomial per held value through
        a small matrix) where the mechanism allows, else one report per user through its sampler.

        Parameters
        ----------
        mechanism
            A one-round mechanism.
        counts
            ``(|X|,)`` non-negative integers: users per value.
        rng
            The generator of every draw.

        Returns
        -------
        tuple of numpy.ndarray
            Distinct reports and their counts, as :meth:`sample` returns them.
        """
        counts = np.asarray(counts, dtype=np.int64)
        if mechanism.report_width == 1:
            total = mechanism.sample_counts(counts, rng)
            if total is None:
                outputs = mechanism.output_count()
                matrix = None
                if outputs is None or outputs * mechanism.domain.size <= MAX_ATTACK_CELLS:
                    try:
                        matrix = mechanism.matrix
                    except MemoryLimitError:
                        matrix = None
                if matrix is not None and matrix.size > MAX_ATTACK_CELLS:
                    matrix = None
                if matrix is not None:
                    rows = np.flatnonzero(counts)
                    p = matrix[rows] / matrix[rows].sum(axis=1, keepdims=True)
                    total = rng.multinomial(counts[rows], p).sum(axis=0)
            if total is not None:
                z = np.flatnonzero(total)
                return z[:, None].astype(np.int64), np.asarray(total[z], dtype=np.int64)
        values = np.repeat(np.arange(counts.size), counts)
        return Attack.aggregate(mechanism.sample(values, rng))
