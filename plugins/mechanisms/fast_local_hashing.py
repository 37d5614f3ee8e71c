"""Fast local hashing (FLH, Cormode, Maddock & Maple, PVLDB 2021): local hashing with a fixed pool of hashes.

The collector fixes a pool of ``hashes`` functions h_j(x) = ((a_j x + b_j) mod P) mod g of the
Carter-Wegman family of OLH (P = 2^31 - 1), drawn once from ``pool_seed`` (so the pool is part
of the mechanism's parameters and every run sees the same one). A user draws j uniformly in
the pool and reports (j, y), y being g-ary randomized response on h_j(x): y = h_j(x) w.p.
p = e^eps / (e^eps + g - 1), else one of the other g - 1 buckets uniformly. A report is the
single output index z = j g + y, so outputs are finite (``hashes * g`` of them) and users are
simulated by counts::

    P(z = j g + y | x) = (p if h_j(x) = y else q) / hashes,   q = p e^-eps

Likelihood ratios are 1 or e^(+-eps): eps-LDP, tight.

The unbiased estimate. A report *supports* x if y = h_j(x); for a user holding x' this happens
with probability ``A[x, x'] = q + (p - q) c(x, x')``, c(x, x') the share of the pool's hashes on
which x and x' collide. Cormode et al. estimate with OLH's formula, which takes c(x, x') = 1/g:
exact only for a pool of fresh hashes, biased by c - 1/g = O(1/sqrt(hashes)) for a fixed one.
Here the support shares are unbiased through the pool's own collision matrix:
``theta_hat = A^-1 (C / n)``. A is positive definite unless the pool cannot tell the values
apart: when ``hashes (g - 1) + 1 < k`` (the rank of the support counts) or two values collide on
every hash; then no unbiased estimate exists, and GIBU still gives the MLE. Its variance for a fixed population follows from
the same matrices (:meth:`FastLocalHashing._estimate_variance`).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ldpsim import Mechanism, Param, ParameterError, Privacy, hookimpl, rank_one_plus_sparse, require_memory

if TYPE_CHECKING:  # scipy is imported where it is used: `ldpsim list` stays fast
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import LinearOperator

#: the Mersenne prime of the hash family (OLH's)
PRIME = (1 << 31) - 1
#: the most hash functions FLH's pool holds: sampling reads its hashes x k table, built whole, so 10^7 hashes
#: took seconds and 10^9 minutes before any memory check; 2^20 hashes already cost 8 MB per value
MAX_FLH_HASHES = 1 << 20


class FastLocalHashing(Mechanism):
    """FLH, fast local hashing (Cormode, Maddock & Maple 2021): OLH's g-ary RR on one of a fixed pool of hashes."""

    name = "flh"
    # e^-eps must stay a normal float: the likelihood operator's smaller factor is exactly e^-eps
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    g = Param("int", None, ge=2, doc="hash buckets (default round(e^eps + 1), halves up, as OLH)")
    hashes = Param("int", 1000, ge=1, doc="hash functions in the collector's fixed pool")
    pool_seed = Param("int", 0, ge=0, doc="seed the pool of hash functions is drawn from")

    def _validate(self) -> None:
        if self.hashes > MAX_FLH_HASHES:
            raise ParameterError(
                f"{self.hashes:,} hash functions, more than the {MAX_FLH_HASHES:,} FLH's pool may hold",
                field="hashes",
                hint=f"give hashes <= {MAX_FLH_HASHES:,}",
            )
        if self.g is None:
            if self.eps > math.log(PRIME - 2):
                raise ParameterError(
                    f"eps = {self.eps:g} asks for round(e^eps + 1) > {PRIME - 1} hash buckets",
                    field="eps",
                    hint="give g",
                )
            self.buckets = int(math.floor(math.exp(self.eps) + 1.5))
        elif self.g > PRIME - 1:
            raise ParameterError(f"must be < {PRIME}, got {self.g}", field="g", hint=f"choose g <= {PRIME - 1}")
        else:
            self.buckets = self.g
        if self.domain.size > PRIME:
            raise ParameterError(
                f"FLH hashes value indices modulo {PRIME}; the domain has {self.domain.size} values",
                field="domain",
                hint=f"use a domain of at most {PRIME} values",
            )

    # ----------------------------------------------------------- probabilities
    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def p(self) -> float:
        """P(y = h_j(x)) = e^eps / (e^eps + g - 1), without overflow for large eps."""
        return 1.0 / (1.0 + (self.buckets - 1) * math.exp(-self.eps))

    @property
    def q(self) -> float:
        """P(y = a given other bucket) = p e^-eps."""
        return self.p * math.exp(-self.eps)

    @property
    def _p_minus_q(self) -> float:
        return -math.expm1(-self.eps) * self.p

    @cached_property
    def table(self) -> np.ndarray:
        """(hashes, k) read-only h_j(x) for every hash of the pool and every value."""
        k = self.domain.size
        require_memory(
            8.0 * self.hashes * k, f"the {self.hashes} x {k} hash table of {self.name}", hint="use fewer hashes"
        )
        rng = np.random.default_rng(np.random.SeedSequence(self.pool_seed))
        a = rng.integers(1, PRIME, size=self.hashes, dtype=np.int64)
        b = rng.integers(0, PRIME, size=self.hashes, dtype=np.int64)
        # int64-exact: a x + b < 2^31 k <= 2^62 for k <= P
        out = (a[:, None] * np.arange(k, dtype=np.int64)[None, :] + b[:, None]) % PRIME % self.buckets
        out.setflags(write=False)
        return out

    # ------------------------------------------------------------- contract
    def _output_count(self) -> int:
        return self.hashes * self.buckets

    def _matrix(self) -> np.ndarray:
        k, g = self.domain.size, self.buckets
        m = np.full((k, self.hashes, g), self.q / self.hashes)
        x = np.arange(k)[:, None]
        m[x, np.arange(self.hashes)[None, :], self.table.T] = self.p / self.hashes
        return m.reshape(k, -1)

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, g = values.shape[0], self.buckets
        j = rng.integers(0, self.hashes, size=n, dtype=np.int64)
        h = self.table[j, values]
        keep = rng.random(n) < self.p
        other = (h + 1 + rng.integers(0, g - 1, size=n)) % g  # uniform over the g - 1 other buckets
        return (j * g + np.where(keep, h, other))[:, None]

    def _support(self, reports: np.ndarray) -> np.ndarray:
        """(D, k) boolean: report d supports x (its bucket is h_j(x))."""
        z = reports[:, 0]
        self.require_outputs(z, self.hashes * self.buckets)
        require_memory(
            float(z.size) * self.domain.size,
            f"the {z.size} x {self.domain.size} support of the reports of {self.name}",
            hint="use fewer values",
        )
        return self.table[z // self.buckets] == (z % self.buckets)[:, None]

    @property
    def _log_hit(self) -> float:
        return -math.log(self.hashes) - math.log1p((self.buckets - 1) * math.exp(-self.eps))

    def _log_likelihood(self, reports: np.ndarray) -> np.ndarray:
        hit = self._log_hit
        return np.where(self._support(reports), hit, hit - self.eps)

    def _support_matrix(self, reports: np.ndarray) -> csr_matrix:
        from scipy.sparse import csr_matrix

        return csr_matrix(self._support(reports).astype(float))

    def _structured_likelihood(self, reports: np.ndarray) -> tuple[np.ndarray, LinearOperator]:
        shift = np.full(reports.shape[0], self._log_hit)
        return shift, rank_one_plus_sparse(self._support_matrix(reports), math.exp(-self.eps))

    @cached_property
    def _one_hot(self) -> np.ndarray:
        """(k, hashes * g) float32 0/1: value x lands in bucket (j, h_j(x)); exact sums below 2^24."""
        k, g = self.domain.size, self.buckets
        require_memory(
            4.0 * k * self.hashes * g,
            f"the {k} x {self.hashes * g} one-hot hashes of {self.name}",
            hint="use fewer hashes",
        )
        out = np.zeros((k, self.hashes, g), dtype=np.float32)
        out[np.arange(k)[:, None], np.arange(self.hashes)[None, :], self.table.T] = 1.0
        return out.reshape(k, -1)

    @cached_property
    def _support_factor(self):  # scipy's Cholesky factor, or None
        """Cholesky factor of A = q + (p - q) C, C[x, x'] the share of hashes colliding x and x';
        None if A is singular (two values collide on every hash of the pool)."""
        from scipy.linalg import LinAlgError, cho_factor

        k = self.domain.size
        require_memory(3 * 8.0 * k * k, f"the {k} x {k} support matrix of {self.name}", hint="use fewer values")
        hot = self._one_hot
        collisions = (hot @ hot.T).astype(float) / self.hashes
        a = self.q + self._p_minus_q * collisions
        try:
            factor = cho_factor(a, lower=True, check_finite=False)
        except LinAlgError:
            return None
        diag = np.abs(np.diag(factor[0]))
        return factor if diag.min() > 1e-7 * diag.max() else None

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        z = reports[:, 0]
        self.require_outputs(z, self.hashes * self.buckets)
        factor = self._support_factor
        if factor is None:
            return None
        from scipy.linalg import cho_solve

        counts = np.asarray(counts, dtype=float)
        per_bucket = np.bincount(z, weights=counts, minlength=self.hashes * self.buckets).reshape(self.hashes, -1)
        share = per_bucket[np.arange(self.hashes)[:, None], self.table].sum(axis=0) / counts.sum()  # C_x / n
        return cho_solve(factor, share, check_finite=False)

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        """``n Var = diag(A^-1 D A^-1) - theta``, D = E[s s^T] averaged over the users.

        The support vector s of one report has ``E[s s^T][x1, x2] = P(y = h_j(x1) = h_j(x2))``;
        averaged over the population it is ``(1/hashes) B diag(w) B^T``, B the one-hot hashes
        and ``w[j, b] = q + (p - q) (share of users hashed to bucket b by h_j)``. The mean
        ``A theta`` contributes ``A diag(theta) A``, whence ``- theta`` after A^-1 on both sides.
        """
        factor = self._support_factor
        if factor is None:
            return None
        from scipy.linalg import cho_solve

        hot = self._one_hot.astype(float)
        require_memory(
            8.0 * hot.size,
            f"the {hot.shape[0]} x {hot.shape[1]} variance terms of {self.name}",
            hint="use fewer hashes",
        )
        w = self.q + self._p_minus_q * (theta @ hot)
        spread = cho_solve(factor, hot, check_finite=False)  # A^-1 B
        return np.einsum("xc,c,xc->x", spread, w, spread) / self.hashes - theta

    # No _likely_subset: as for OLH, a value's support set is almost never strictly inside another's.


@hookimpl
def register_mechanisms(register):
    register(FastLocalHashing)
