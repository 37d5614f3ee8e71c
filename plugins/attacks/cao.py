"""The poisoning attacks of Cao, Jia & Gong (USENIX Security 2021): MGA, RIA and RPA.

Fake users promote r target items T. The paper defines the attacks on k-RR, OUE and OLH; here they
are defined on every frequency oracle whose report format they can write:

* unary encodings (``rappor``, ``oue``, ``the``): reports are bit vectors, "x supported" = bit x set;
* local hashing (``olh``, ``blh``): reports (a, b, y), x supported iff ((a x + b) mod P) mod g = y;
* any other mechanism with finitely many outputs and one-column reports (k-RR among them): a report
  is a column z of the matrix M. Its weight for the targets is what one report adds to the targets'
  unbiased estimate: the mechanism's own if it has one, else the inverted matrix's,
  ``sum_{t in T} pinv(M^T)[t, z]`` (for k-RR: the same for every target, less for any other value, so
  MGA reports a uniformly chosen target, the paper's attack).

MGA (maximal gain attack): each fake user sends a report that maximises the targets' gain. Unary: the
targets' bits set, and ``l = round(p + (k - 1) q - r)`` other bits chosen uniformly (so the number of
set bits looks like an honest report's, as the paper does). Local hashing: each fake user draws
``hashes`` hash functions (the paper: 1,000), keeps the one under which the most targets share a
bucket, and reports that bucket. Matrix: a report of largest weight, uniformly among the ties.

RIA (random item attack): each fake user picks a target uniformly and reports it honestly through
the mechanism (any mechanism).

RPA (random perturbed-value attack): each fake user sends a uniformly random report of the encoded
space: a uniform output of the matrix, a uniform bit vector, or a uniform (a, b, y).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ldpsim import Attack, BitVectorMechanism, Mechanism, Param, hookimpl

#: the Mersenne prime of the local hashing family (a in 1..P-1, b in 0..P-1)
PRIME = (1 << 31) - 1
#: the unary encodings (bit x of a report supports x)
UNARY = ("rappor", "oue", "the")
#: the local hashing mechanisms with reports (a, b, y)
LOCAL_HASHING = ("olh", "blh")
#: the most cells (values x outputs) of a matrix the matrix path uses (pinv and uniform draws)
MAX_CELLS = 1 << 22
#: integers per temporary block of the samplers (32 MB of int64)
CHUNK = 1 << 22
#: relative tolerance of "a report of largest weight" (ties of the pseudo-inverse's floating point)
TIE_TOL = 1e-9


def _family(mech: Mechanism) -> str | None:
    """``"unary"``, ``"hashing"`` or ``"matrix"``: the report format an attack writes; None if none."""
    if mech.name in UNARY and isinstance(mech, BitVectorMechanism):
        return "unary"
    if mech.name in LOCAL_HASHING and mech.report_width == 3:
        return "hashing"
    if mech.report_width == 1:
        outputs = mech.output_count()
        if outputs is not None and outputs * mech.domain.size > MAX_CELLS:
            return None
        if mech.matrix is not None and mech.matrix.size <= MAX_CELLS:
            return "matrix"
    return None


def _number(mech: Mechanism, attr: str) -> float:
    """A mechanism family's parameter (unary p and q, local hashing's buckets), read by name."""
    return float(getattr(mech, attr))


def _uniform_counts(m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Counts of m uniform draws among n outcomes."""
    return rng.multinomial(m, np.full(n, 1.0 / n))


def _counted(items: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(items as one-column reports, counts) without the zero counts."""
    keep = counts > 0
    return items[keep][:, None].astype(np.int64), counts[keep].astype(np.int64)


def hash_buckets(a: np.ndarray, b: np.ndarray, x: np.ndarray, g: int) -> np.ndarray:
    """((a x + b) mod P) mod g, broadcast (int64-exact for x < P): the local hashing family.

    Parameters
    ----------
    a, b
        Hash parameters, a in 1..P-1 and b in 0..P-1.
    x
        Domain indices.
    g
        Buckets.

    Returns
    -------
    numpy.ndarray
        The buckets, broadcast over the inputs.
    """
    return ((a * x + b) % PRIME) % g


class CaoAttack(Attack):
    """Base of the three attacks: the report formats they write (see the module docstring)."""

    #: whether the attack writes reports of any mechanism (RIA) or only of the three families
    any_mechanism: ClassVar[bool] = False

    def _applies_to(self, mechanism: Mechanism) -> str | None:
        if self.any_mechanism or _family(mechanism) is not None:
            return None
        return (
            "it writes reports of unary encodings (rappor, oue, the), local hashing (olh, blh) and mechanisms with"
            " finitely many one-column outputs"
        )


class MGA(CaoAttack):
    """Maximal gain attack (Cao et al. 2021): each fake user sends the report that most raises the targets."""

    name = "mga"
    hashes = Param("int", 1000, ge=1, doc="hash functions each fake user tries on local hashing (the paper's 1000)")

    def _sample(self, mechanism: Mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        family = _family(mechanism)
        if family == "unary":
            assert isinstance(mechanism, BitVectorMechanism)
            return self._unary(mechanism, m, rng)
        if family == "hashing":
            return self._hashing(mechanism, m, rng)
        best = self.best_outputs(mechanism)
        return _counted(best, _uniform_counts(m, best.size, rng))

    def best_outputs(self, mechanism: Mechanism) -> np.ndarray:
        """The outputs of a matrix mechanism that most raise the targets' unbiased estimate (see the module docstring).

        Parameters
        ----------
        mechanism
            A mechanism with a matrix and one-column reports.

        Returns
        -------
        numpy.ndarray
            The output indices (columns) of largest weight, within a relative 1e-9 (ties).
        """
        if mechanism.capabilities.named_value_likelihood:  # reports name one value (k-RR): the targets, as the paper
            return self.target_items
        cache: dict[Mechanism, np.ndarray] = self.__dict__.setdefault("_best_outputs", {})  # a pinv per mechanism
        if mechanism not in cache:
            matrix = mechanism.matrix
            assert matrix is not None
            targets = self.target_items
            if mechanism.capabilities.unbiased_estimate:  # the mechanism's own estimate, of each output alone
                one = np.ones(1, dtype=np.int64)
                weight = np.array(
                    [
                        np.sum(np.asarray(mechanism.unbiased_estimate(np.array([[z]]), one))[targets])
                        for z in range(matrix.shape[1])
                    ]
                )
            else:
                weight = np.linalg.pinv(matrix.T)[targets].sum(axis=0)
            top = weight.max()
            cache[mechanism] = np.flatnonzero(weight >= top - TIE_TOL * max(abs(top), 1.0))
        return cache[mechanism]

    def _unary(self, mech: BitVectorMechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        k = mech.domain.size
        targets = self.target_items
        r = targets.size
        p, q = _number(mech, "p"), _number(mech, "q")
        extra = int(min(max(round(p + (k - 1) * q - r), 0), k - r))  # other bits set: the paper's l
        others = np.setdiff1d(np.arange(k), targets)
        parts = []
        step = max(1, CHUNK // max(k, 1))
        for start in range(0, m, step):
            n = min(step, m - start)
            bits = np.zeros((n, k), dtype=bool)
            bits[:, targets] = True
            if extra:  # l distinct non-target bits per user: the first l of a uniform random order
                order = np.argsort(rng.random((n, others.size)), axis=1)[:, :extra]
                bits[np.arange(n)[:, None], others[order]] = True
            parts.append(mech.pack_bits(bits))
        return self.aggregate(np.concatenate(parts))

    def _hashing(self, mech: Mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        g = int(_number(mech, "buckets"))
        targets = self.target_items
        s = self.hashes
        rows = []
        step = max(1, CHUNK // (s * max(targets.size, g)))
        for start in range(0, m, step):
            n = min(step, m - start)
            a = rng.integers(1, PRIME, size=(n, s), dtype=np.int64)
            b = rng.integers(0, PRIME, size=(n, s), dtype=np.int64)
            h = hash_buckets(a[:, :, None], b[:, :, None], targets[None, None, :], g)  # (n, s, r)
            cell = (np.arange(n * s, dtype=np.int64) * g).reshape(n, s, 1) + h
            hits = np.bincount(cell.ravel(), minlength=n * s * g).reshape(n, s, g)  # targets per bucket
            most = hits.max(axis=2)  # (n, s): the most targets one bucket of each hash holds
            pick = np.argmax(most, axis=1)  # each fake user's best hash (the first of the ties)
            users = np.arange(n)
            y = np.argmax(hits[users, pick], axis=1)
            rows.append(np.column_stack([a[users, pick], b[users, pick], y]))
        return self.aggregate(np.concatenate(rows))


class RIA(CaoAttack):
    """Random item attack (Cao et al. 2021): each fake user reports a uniformly chosen target honestly."""

    name = "ria"
    any_mechanism = True

    def _sample(self, mechanism: Mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        targets = self.target_items
        counts = np.zeros(mechanism.domain.size, dtype=np.int64)
        counts[targets] = _uniform_counts(m, targets.size, rng)
        return self.value_reports(mechanism, counts, rng)


class RPA(CaoAttack):
    """Random perturbed-value attack (Cao et al. 2021): each fake user sends a uniform report of the encoded space."""

    name = "rpa"

    def _sample(self, mechanism: Mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        family = _family(mechanism)
        if family == "unary":
            assert isinstance(mechanism, BitVectorMechanism)
            k = mechanism.domain.size
            step = max(1, CHUNK // max(k, 1))
            parts = [mechanism.pack_bits(rng.random((min(step, m - start), k)) < 0.5) for start in range(0, m, step)]
            return self.aggregate(np.concatenate(parts))
        if family == "hashing":
            g = int(_number(mechanism, "buckets"))
            a = rng.integers(1, PRIME, size=m, dtype=np.int64)
            b = rng.integers(0, PRIME, size=m, dtype=np.int64)
            return self.aggregate(np.column_stack([a, b, rng.integers(0, g, size=m)]))
        matrix = mechanism.matrix
        assert matrix is not None
        outputs = np.arange(matrix.shape[1])
        return _counted(outputs, _uniform_counts(m, outputs.size, rng))


@hookimpl
def register_attacks(register):
    register(MGA)
    register(RIA)
    register(RPA)
