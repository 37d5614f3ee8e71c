"""Memoized (longitudinal) mechanisms: a permanent randomized response reused by every round.

Deployed telemetry (RAPPOR, the longitudinal protocols of Arcolezi et al.) never lets a user
report the same value several times independently: averaging independent reports reveals the
value. A user draws a *permanent* response ``z ~ A1(. | x)`` once and every round ``t`` reports an
*instantaneous* randomization ``y_t ~ A2_t(. | z)`` of it. One report of a memoized mechanism is the
whole sequence ``y_1 .. y_tau`` (``report_width = tau * w``, round ``t`` in the columns
:meth:`MemoizedMechanism.round_columns`), and its likelihood is exact::

    P(y_1 .. y_tau | x) = sum_z A1(z | x) prod_t A2_t(y_t | z)

computed in log space (rescaled per report), so GIBU on whole sequences is the MLE of what a
deployment collects.

* :class:`MemoizedMechanism` composes any permanent stage with finitely many outputs (one report
  column) and instantaneous stages whose domain is those outputs (a cohort may switch the
  instantaneous mechanism between rounds). Its dense likelihood works for any such stages; when every
  instantaneous stage names a value with one probability and every other value with another (k-RR,
  its ``named_value_likelihood``), the likelihood depends on the sequence only through how often
  each value was reported, and the structured likelihood is a constant per report plus one entry per
  reported value.
* :class:`~ldpsim.model.memoized_unary.MemoizedUnary` (in its own module) is unary encoding in both
  stages (L-SUE/basic RAPPOR, L-OUE, L-OSUE, L-SOUE): bits are independent given x, so the likelihood
  factorizes over bits through each bit's per-round pattern of ones.

Privacy over time (:class:`PrivacyOverTime`): eps_1 (one report), eps_tau (all the mechanism's
rounds) and eps_inf (the permanent stage: what infinitely many rounds reveal at most); eps_tau is
computed by enumerating the report sequences when there are few, by a closed form otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ..base.errors import ParameterError
from .domains import Domain, Integers
from .mechanism import Mechanism
from .privacy import Privacy, ldp_level

#: at most this many report sequences are enumerated for exact privacy levels
MAX_ENUMERATED = 1 << 16
#: floats per temporary block of the dense likelihood and of bit sampling (32 MB)
CHUNK_FLOATS = 1 << 22
#: the most rounds one memoized mechanism covers: its stages are built one per round before anything runs and
#: one report holds every round's columns, so 10^9 rounds would hang or exhaust memory at construction. The
#: same bound as the reports a plan may hold per user; longitudinal studies run tens to hundreds of rounds.
MAX_ROUNDS = 10_000


def check_rounds(rounds: int, field: str = "rounds") -> None:
    """Refuse more than :data:`MAX_ROUNDS` rounds (before any stage is built).

    Parameters
    ----------
    rounds
        The number of rounds asked for.
    field
        The parameter that gives it, for the message.

    Raises
    ------
    ParameterError
        Naming the count and the limit.
    """
    if rounds > MAX_ROUNDS:
        raise ParameterError(
            f"{rounds:,} rounds, more than the {MAX_ROUNDS:,} a memoized mechanism may cover",
            field=field,
            hint=f"give at most {MAX_ROUNDS:,} rounds (one report holds every round)",
        )


@dataclass(frozen=True)
class PrivacyOverTime:
    """The LDP levels of a memoized mechanism over its rounds.

    Attributes
    ----------
    eps_1
        Level of one report (the first round's channel A1 A2_1).
    eps_tau
        Level of the whole sequence of ``rounds`` reports of one value (NaN if unknown).
    eps_inf
        Level of the permanent stage: the memoization bound, reached as the rounds grow.
    rounds
        tau, the number of rounds of ``eps_tau``.
    method
        How ``eps_tau`` was computed: ``"enumeration"`` of every report sequence, or ``"closed form"``.
    """

    eps_1: float
    eps_tau: float
    eps_inf: float
    rounds: int
    method: str

    def __str__(self) -> str:
        return (
            f"eps_1 = {self.eps_1:.6g} (one report), eps_{self.rounds} = {self.eps_tau:.6g}"
            f" ({self.rounds} reports, {self.method}), eps_inf = {self.eps_inf:.6g} (memoization bound)"
        )


class MatrixChannel(Mechanism):
    """One report through a given row-stochastic matrix (the per-round channel A1 A2_t of a memoized protocol).

    Parameters
    ----------
    domain
        The users' domain (one row per value).
    matrix
        The ``(|X|, outputs)`` row-stochastic matrix.
    label
        How the channel prints.
    """

    name = "channel"

    def __init__(self, domain: Domain, matrix: np.ndarray, label: str = "channel"):
        self._given = np.asarray(matrix, dtype=float)
        self._label_text = label
        super().__init__(domain)

    @property
    def privacy(self) -> Privacy:
        """The LDP level the given matrix has."""
        with np.errstate(divide="ignore"):
            return Privacy("ldp", ldp_level(np.log(self._given).T))

    def _matrix(self) -> np.ndarray:
        return self._given

    def _output_count(self) -> int:
        return int(self._given.shape[1])

    def _key(self) -> tuple:
        return (*super()._key(), self._given.shape, self._given.tobytes())

    def __repr__(self) -> str:
        return self._label_text


class MemoizedMechanism(Mechanism):
    """A permanent stage A1 reused by instantaneous stages A2_1..A2_tau; one report is the whole sequence.

    A subclass implements :meth:`_stages` (built from its parameters), or is made by
    :meth:`compose` from mechanism instances. The permanent stage has finitely many outputs and
    one report column; instantaneous stage t is a mechanism on the domain of those outputs
    (indices ``0..|Z|-1``), all of the same report width.
    """

    #: the claim is eps_inf, which holds for every number of rounds; eps_tau may be smaller
    tight_privacy: ClassVar[bool] = False
    #: the dense likelihood costs ``|Z|`` per value and report: the structured one is never slower
    structured_min_size = 0

    permanent_stage: Mechanism
    instantaneous_stages: tuple[Mechanism, ...]

    # ---------------------------------------------------------------- hooks
    def _stages(self) -> tuple[Mechanism, Sequence[Mechanism]]:
        """(permanent stage, instantaneous stage of each round), from the parameters."""
        raise NotImplementedError(f"{type(self).__name__} must implement _stages")

    def _validate(self) -> None:
        super()._validate()
        self._check_declared_rounds()
        permanent, instantaneous = self._stages()
        self.permanent_stage, self.instantaneous_stages = permanent, tuple(instantaneous)
        check_rounds(len(self.instantaneous_stages), field="instantaneous")
        if not self.instantaneous_stages:
            raise ParameterError(
                "needs at least one round", field="rounds", hint="give rounds >= 1 (one instantaneous stage per round)"
            )
        outputs = permanent.output_size if permanent.report_width == 1 else None
        if outputs is None:
            raise ParameterError(
                f"the permanent stage {permanent!r} must have finitely many outputs in one report column",
                field="permanent",
                hint="use a mechanism with a matrix (k-RR, a matrix mechanism) as the permanent stage",
            )
        widths = {stage.report_width for stage in self.instantaneous_stages}
        for t, stage in enumerate(self.instantaneous_stages):
            if stage.domain.size != outputs:
                raise ParameterError(
                    f"round {t + 1}'s instantaneous stage {stage!r} takes {stage.domain.size} inputs,"
                    f" but the permanent stage has {outputs} outputs",
                    field="instantaneous",
                    hint="build each instantaneous stage on the domain of the permanent stage's outputs",
                )
        if len(widths) != 1:
            raise ParameterError(
                f"the instantaneous stages have report widths {sorted(widths)}",
                field="instantaneous",
                hint="use instantaneous stages whose reports have the same number of columns",
            )
        self.report_width = len(self.instantaneous_stages) * widths.pop()

    def _check_declared_rounds(self) -> None:
        """Refuse a ``rounds`` parameter above :data:`MAX_ROUNDS` before the stages are built, one per round."""
        declared = getattr(self, "rounds", None) if "rounds" in self.parameters() else None
        if isinstance(declared, (int, np.integer)):
            check_rounds(int(declared))

    @classmethod
    def compose(cls, permanent: Mechanism, instantaneous: Sequence[Mechanism]) -> MemoizedMechanism:
        """The memoized composition of mechanism instances (rounds = ``len(instantaneous)``).

        Parameters
        ----------
        permanent
            A1, on the users' domain, with finitely many outputs in one report column.
        instantaneous
            A2_t for each round t, each on a domain of A1's outputs.

        Returns
        -------
        MemoizedMechanism
            The composition, on ``permanent.domain``.
        """
        return Composition(permanent.domain, permanent, instantaneous)

    # -------------------------------------------------------- rounds interface
    @property
    def rounds(self) -> int:
        """tau: how many rounds one report covers."""
        return len(self.instantaneous_stages)

    @property
    def round_width(self) -> int:
        """Report columns per round."""
        return self.report_width // self.rounds

    def round_columns(self, t: int) -> slice:
        """The report columns of round ``t``.

        Parameters
        ----------
        t
            The round, 0-based (0 .. rounds - 1).

        Returns
        -------
        slice
            Its columns in a report of this mechanism.
        """
        self._check_round(t, 0, self.rounds - 1)
        return slice(t * self.round_width, (t + 1) * self.round_width)

    def prefix(self, t: int) -> Mechanism:
        """The mechanism of the first ``t`` rounds, for estimates after round t.

        Parameters
        ----------
        t
            How many rounds, 1 .. rounds.

        Returns
        -------
        Mechanism
            Its reports are this mechanism's first ``t`` rounds' columns (``self`` for all rounds).
        """
        self._check_round(t, 1, self.rounds)
        if t == self.rounds:
            return self
        return self._prefix(t)

    def _prefix(self, t: int) -> Mechanism:
        """The first ``t`` rounds (1 <= t < rounds); default: the same class with ``rounds = t`` if it has
        that parameter and no per-round ones, else the composition of the first ``t`` stages."""
        if "rounds" in self.parameters():
            return type(self)(self.domain, **{**self.get_params(), "rounds": t})
        return Composition(self.domain, self.permanent_stage, self.instantaneous_stages[:t])

    def round_channel(self, t: int) -> Mechanism:
        """The one-report channel of round ``t`` alone, for per-round baselines.

        Parameters
        ----------
        t
            The round, 0-based.

        Returns
        -------
        Mechanism
            The composite A1 A2_t (rows summing to 1) reading the columns :meth:`round_columns` gives.
        """
        self._check_round(t, 0, self.rounds - 1)
        stage = self.instantaneous_stages[t]
        if stage.matrix is None or stage.report_width != 1:
            raise NotImplementedError(f"{self!r}: round {t + 1}'s stage has no matrix of one report column")
        a1 = self._permanent_matrix()
        return MatrixChannel(self.domain, a1 @ stage.matrix, f"{self.name} round {t + 1} channel")

    def _check_round(self, t: int, low: int, high: int) -> None:
        if not (isinstance(t, (int, np.integer)) and low <= t <= high):
            raise ValueError(f"{self!r}: round must be an integer in {low}..{high}, got {t!r}")

    def _permanent_matrix(self) -> np.ndarray:
        """A1, the permanent stage's matrix (``_validate`` made sure it has one)."""
        a1 = self.permanent_stage.matrix
        if a1 is None:
            raise NotImplementedError(f"{type(self.permanent_stage).__name__} has no matrix")
        return a1

    # ------------------------------------------------------------- privacy
    @property
    def privacy(self) -> Privacy:
        """eps_inf, the permanent stage's level: what any number of rounds keeps."""
        return Privacy("ldp", self.permanent_level())

    def permanent_level(self) -> float:
        """The permanent stage's LDP level: no number of rounds reveals more."""
        with np.errstate(divide="ignore"):
            return ldp_level(np.log(self._permanent_matrix()).T)

    def one_report_level(self) -> float:
        """The LDP level of one report (round 1's channel)."""
        return self.round_channel(0).privacy.eps

    def round_outputs(self) -> list[int] | None:
        """The number of reports each round can give, one report column each (None if not finite)."""
        sizes = []
        for stage in self.instantaneous_stages:
            if stage.output_size is None or stage.report_width != 1:
                return None
            sizes.append(int(stage.output_size))
        return sizes

    def sequence_count(self) -> int | None:
        """The number of distinct report sequences (None if a round's outputs are not finite)."""
        sizes = self.round_outputs()
        return None if sizes is None else math.prod(sizes)

    def eps_tau_enumerated(self) -> float | None:
        """eps_tau from the likelihood of every report sequence; None if there are more than :data:`MAX_ENUMERATED`."""
        count = self.sequence_count()
        if count is None or count > MAX_ENUMERATED:
            return None
        sizes = self.round_outputs()
        assert sizes is not None
        sequences = np.indices(sizes).reshape(len(sizes), -1).T
        return ldp_level(self.log_likelihood(sequences))

    def eps_tau_closed(self) -> float | None:
        """eps_tau in closed form, when the stages have one (None otherwise).

        k-RR in both stages: ``P(y | x) = Q [q1 S + (p1 - q1) u(x)]`` with ``u(z) = prod_{t: y_t = z} r_t``
        (``r_t = p2_t / q2_t``) and ``S = sum_z u(z)``. The ratio for x against x' grows with u(x), falls
        with u(x') and with the other values' u, so it is largest when every round reports x:
        ``e^eps_tau = (p1 U + q1 (k-1)) / (q1 U + p1 + q1 (k-2))``, ``U = prod_t r_t``.
        """
        first = self.permanent_stage.named_value_likelihood()
        named = [stage.named_value_likelihood() for stage in self.instantaneous_stages]
        k = self.domain.size
        if first is None or any(pair is None for pair in named) or self.permanent_stage.output_size != k or k < 2:
            return None
        gains = [pair[0] - pair[1] for pair in named if pair is not None]
        lp, lq = first
        if lp < lq or min(gains) < 0:
            return None
        log_u = float(sum(gains))
        top = np.logaddexp(lp + log_u, lq + math.log(k - 1))
        rest = math.log(math.exp(lp) + (k - 2) * math.exp(lq))
        return float(top - np.logaddexp(lq + log_u, rest))

    @property
    def privacy_over_time(self) -> PrivacyOverTime:
        """eps_1, eps_tau and eps_inf: eps_tau by enumeration where the sequences are few, else closed form."""
        eps_tau, method = self.eps_tau_enumerated(), "enumeration"
        if eps_tau is None:
            eps_tau, method = self.eps_tau_closed(), "closed form"
        if eps_tau is None:
            eps_tau, method = math.nan, "unknown: too many sequences and no closed form"
        return PrivacyOverTime(self.one_report_level(), float(eps_tau), self.permanent_level(), self.rounds, method)

    # ------------------------------------------------------------ contract
    @cached_property
    def _stage_groups(self) -> tuple[tuple[Mechanism, tuple[int, ...]], ...]:
        """Each distinct instantaneous stage with the rounds that use it, in order of first use."""
        groups: dict[Mechanism, list[int]] = {}
        for t, stage in enumerate(self.instantaneous_stages):
            groups.setdefault(stage, []).append(t)
        return tuple((stage, tuple(rounds)) for stage, rounds in groups.items())

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # One permanent response per user, then one vectorized draw per distinct stage for all its rounds.
        n, w = values.shape[0], self.round_width
        z = self.permanent_stage.sample(values, rng)[:, 0]
        out = np.empty((n, self.rounds, w), dtype=np.int64)
        for stage, rounds in self._stage_groups:
            drawn = stage.sample(np.tile(z, len(rounds)), rng).reshape(len(rounds), n, w)
            out[:, list(rounds)] = drawn.transpose(1, 0, 2)
        return out.reshape(n, self.report_width)

    def _by_round(self, reports: np.ndarray, rounds: Sequence[int]) -> np.ndarray:
        """The columns of ``rounds`` stacked round after round: (len(rounds) * D, round_width)."""
        d, w = reports.shape[0], self.round_width
        blocks = reports.reshape(d, self.rounds, w)[:, list(rounds)]
        return blocks.transpose(1, 0, 2).reshape(len(rounds) * d, w)

    def _instantaneous_log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        """(D, |Z|) sum_t log A2_t(y_t | z)."""
        d = reports.shape[0]
        total = np.zeros((d, self.instantaneous_stages[0].domain.size))
        for stage, rounds in self._stage_groups:
            part = stage.log_likelihood(self._by_round(reports, rounds))
            total += part.reshape(len(rounds), d, -1).sum(axis=0)
        return total

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        # log sum_z A1(z|x) exp(L[d, z]) = m_d + log (exp(L - m) @ A1^T): a product, not a (D, |Z|, |X|) array.
        a1_t = self._permanent_matrix().T
        k, outputs = self.domain.size, a1_t.shape[0]
        out = np.empty((reports.shape[0], k))
        step = max(1, CHUNK_FLOATS // (outputs + k))
        for start in range(0, reports.shape[0], step):
            rows = slice(start, start + step)
            logs = self._instantaneous_log_likelihood(reports[rows])
            top = logs.max(axis=1, keepdims=True)
            top[~np.isfinite(top)] = 0.0  # an impossible sequence: -inf for every x
            with np.errstate(divide="ignore"):
                out[rows] = top + np.log(np.exp(logs - top) @ a1_t)
        return out

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, Any] | None:
        """k-RR instantaneous stages: ``P(y | x) = e^Q [1 + sum_z A1(z | x) (u(z) - 1)]``, u(z) the product of
        the rounds' gains ``p2_t / q2_t`` where z was reported (1 elsewhere), Q the sum of ``log q2_t``: one
        constant per report plus an entry per reported value, rescaled by the report's largest u."""
        named = [stage.named_value_likelihood() for stage in self.instantaneous_stages]
        outputs = self.instantaneous_stages[0].domain.size
        if any(pair is None for pair in named) or self.round_width != 1:
            return None
        from scipy.sparse import csr_matrix
        from scipy.sparse.linalg import LinearOperator

        self.require_outputs(reports.ravel(), outputs)  # every stage is on the permanent stage's outputs
        hit, miss = np.array(named, dtype=float).T
        d, tau = reports.shape
        # Per report, the reported values sorted, and each distinct one's summed gain: CSR built directly.
        gain = hit - miss
        same = bool(np.all(gain == gain[0]))  # one stage for every round: a value's gain is its count times the gain
        if same:  # a plain sort: 4-5x faster than argsort + take_along_axis on 10^6 x 10
            values = np.sort(reports, axis=1)
        else:
            order = np.argsort(reports, axis=1, kind="stable")
            values = np.take_along_axis(reports, order, axis=1)
        first = np.ones((d, tau), dtype=bool)
        first[:, 1:] = values[:, 1:] != values[:, :-1]
        starts = np.flatnonzero(first)
        if same:
            data = np.diff(starts, append=d * tau).astype(float) * gain[0]
        else:
            data = np.add.reduceat(gain[order].ravel(), starts)
        indptr = np.concatenate([[0], np.cumsum(first.sum(axis=1))])
        gains = csr_matrix((data, values.ravel()[starts], indptr), shape=(d, outputs))
        best = np.maximum(np.maximum.reduceat(data, indptr[:-1]), 0.0)  # every report names >= 1 value
        constant = np.exp(-best)
        per_row = np.diff(indptr)
        gains.data = np.exp(data - np.repeat(best, per_row)) - np.repeat(constant, per_row)
        gains_t = gains.T.tocsr()
        shift = float(miss.sum()) + best
        to_outputs, to_values = self._permanent_products()
        k = self.domain.size

        def matvec(theta: np.ndarray) -> np.ndarray:
            theta = np.ravel(theta)
            return constant * theta.sum() + gains @ to_outputs(theta)

        def rmatvec(w: np.ndarray) -> np.ndarray:
            w = np.ravel(w)
            # einsum, not ``constant @ w``: a BLAS dot of 10^6 entries costs 100x more with threads contended
            return float(np.einsum("i,i->", constant, w)) + to_values(gains_t @ w)

        return shift, LinearOperator((d, k), matvec=matvec, rmatvec=rmatvec, dtype=float)

    def _likely_subset(self, reports: np.ndarray) -> np.ndarray | None:
        # 004 Prop. 8.4 over whole sequences. With a k-RR permanent stage (p1 > q1) and k-RR instantaneous stages
        # (p2_t > q2_t), P(y | x) = e^Q [1 + q1 S(y) + (p1 - q1)(u_y(x) - 1)], u_y(x) the product of the gains
        # p2_t / q2_t of the rounds that reported x: u_y(x) = 1 if y never reports x, > 1 if it does. A value that
        # no round of any report names is beaten by a named one on every report, strictly where that one is named.
        k = self.domain.size
        perm = self.permanent_stage
        pair = perm.named_value_likelihood()
        named = [stage.named_value_likelihood() for stage in self.instantaneous_stages]
        if (
            self.round_width != 1
            or pair is None
            or pair[0] <= pair[1]
            or perm.output_size != k
            or any(stage.domain.size != k for stage in self.instantaneous_stages)
            or any(p is None or p[0] <= p[1] for p in named)
        ):
            return None
        self.require_outputs(reports.ravel(), k)
        mask = np.zeros(k, dtype=bool)
        mask[reports.ravel()] = True
        return mask

    def _permanent_products(self) -> tuple[Any, Any]:
        """``theta -> A1^T theta`` and ``v -> A1 v``, in O(k) for a k-RR permanent stage."""
        pair = self.permanent_stage.named_value_likelihood()
        k = self.domain.size
        if pair is not None and self.permanent_stage.output_size == k:
            hit, miss = math.exp(pair[0]), math.exp(pair[1])
            return (lambda v: miss * v.sum() + (hit - miss) * v), (lambda v: miss * v.sum() + (hit - miss) * v)
        a1 = self._permanent_matrix()
        return (lambda v: a1.T @ v), (lambda v: a1 @ v)


class Composition(MemoizedMechanism):
    """The memoized composition of given permanent and instantaneous mechanisms (see MemoizedMechanism.compose)."""

    name = "memoized-composition"

    def __init__(self, domain: Domain, permanent: Mechanism, instantaneous: Sequence[Mechanism]):
        if permanent.domain != domain:
            raise ParameterError(
                f"the permanent stage works on {permanent.domain!r}, not {domain!r}",
                field="permanent",
                hint="build the permanent stage on the users' domain",
            )
        self._given = (permanent, tuple(instantaneous))
        super().__init__(domain)

    def _stages(self) -> tuple[Mechanism, Sequence[Mechanism]]:
        return self._given

    def _key(self) -> tuple:
        permanent, instantaneous = self._given
        return (*super()._key(), permanent._key(), tuple(stage._key() for stage in instantaneous))

    def __repr__(self) -> str:
        permanent, instantaneous = self._given
        return f"memoized({permanent!r} -> {', '.join(repr(s) for s in instantaneous)})"


def output_domain(mechanism: Mechanism) -> Domain:
    """The domain of a mechanism's outputs (its own domain if it is square), for an instantaneous stage."""
    outputs = mechanism.output_size
    if outputs is None:
        raise ParameterError(
            f"the permanent stage {mechanism!r} has no finite outputs",
            field="permanent",
            hint="use a mechanism with a matrix as the permanent stage",
        )
    return mechanism.domain if outputs == mechanism.domain.size else Integers(low=0, high=max(outputs - 1, 1))
