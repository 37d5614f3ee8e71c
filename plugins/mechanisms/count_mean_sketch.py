"""Apple's Hadamard count-mean sketch (HCMS; Apple's Differential Privacy Team, "Learning with privacy at scale", 2017).

The collector fixes a family of ``hashes`` functions h_j(x) = ((a_j x + b_j) mod P) mod m of the
Carter-Wegman family (P = 2^31 - 1), drawn once from ``family_seed``, into m = ``buckets``
buckets (a power of 2). A user holding x draws j uniformly among the hashes and l uniformly in
0..m-1, and reports (j, l, y): y the parity bit of the Hadamard coefficient
H[l, h_j(x)] = (-1)^popcount(l & h_j(x)), flipped w.p. 1 - p = 1 / (e^eps + 1). A report is the
single output index z = 2 (j m + l) + y (y = 0 codes the coefficient +1), so outputs are finite
(``2 hashes m`` of them) and users are simulated by counts from the matrix::

    P(z | x) = (p if y = parity(l & h_j(x)) else 1 - p) / (hashes m),   p = e^eps / (e^eps + 1)

Likelihood ratios are 1 or e^(+-eps): eps-LDP, tight.

The estimate. Apple's server adds c_eps (+-1) H[l, .] (c_eps = (e^eps + 1) / (e^eps - 1)) to row j
of its sketch, so that each report adds ``s_x = c_eps (+-1) H[l, h_j(x)]`` to the count of x; for a
user holding x' its mean is ``C[x, x']``, the share of the family's hashes on which x and x' collide.
The paper debiases with ``m / (m - 1) (s / n - 1 / m)``, exact only if C[x, x'] = 1/m for every
x != x' (fresh hashes); for a fixed family it is biased by O(1/sqrt(hashes)). Here, as in FLH, the
family's own collision system is solved, ``theta_hat = C^-1 s / n``. (With ideal collisions the paper's
estimate is unbiased too, but it subtracts the supports' expected total where C^-1 uses the observed
one, and varies more.) C = B B^T / hashes (B the one-hot hashes) is positive definite unless the
family cannot tell the values apart (``hashes (m - 1) + 1 < k``, or two values colliding on every
hash): then no unbiased estimate exists, and GIBU still gives the MLE. Since ``E[s s^T] = c_eps^2 C``
whatever the user's value, ``n Var[theta_hat_x] = c_eps^2 (C^-1)_xx - theta_x``.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ldpsim import Mechanism, Param, ParameterError, Privacy, hookimpl, require_memory

#: the Mersenne prime of the hash family (OLH's)
PRIME = (1 << 31) - 1


def parity(v: np.ndarray) -> np.ndarray:
    """popcount(v) mod 2 of non-negative int64s, elementwise (np.bitwise_count needs numpy 2)."""
    for shift in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> shift)
    return v & 1


def hadamard_transform(a: np.ndarray) -> np.ndarray:
    """``a @ H_m`` along the last axis (m a power of 2, H Sylvester's): one butterfly pass per bit of m."""
    size = a.shape[-1]
    lead = a.shape[:-1]
    out = np.asarray(a, dtype=float)
    h = 1
    while h < size:
        blocks = out.reshape(*lead, size // (2 * h), 2, h)
        out = np.stack([blocks[..., 0, :] + blocks[..., 1, :], blocks[..., 0, :] - blocks[..., 1, :]], axis=-2)
        h *= 2
    return out.reshape(a.shape)


class HadamardCountMeanSketch(Mechanism):
    """HCMS, Apple's Hadamard count-mean sketch: one randomized Hadamard coefficient of a hashed value."""

    name = "hcms"
    # 1 - p = 1 / (e^eps + 1) must stay a normal float
    eps = Param("float", gt=0, le=700, doc="privacy level: the mechanism is eps-LDP")
    hashes = Param("int", 16, ge=1, doc="k, hash functions in the collector's fixed family")
    buckets = Param("int", 128, ge=2, doc="m, buckets of each hash (the sketch's width): a power of 2")
    family_seed = Param("int", 0, ge=0, doc="seed the family of hash functions is drawn from")

    def _validate(self) -> None:
        if self.buckets & (self.buckets - 1) or self.buckets > 1 << 30:
            smaller = 1 << min(self.buckets.bit_length() - 1, 30)
            raise ParameterError(
                f"must be a power of 2 (the Hadamard order) of at most 2^30, got {self.buckets}",
                field="buckets",
                hint=f"choose buckets = {smaller} or {2 * smaller}" if smaller < 1 << 30 else "choose 2^30 or fewer",
            )
        if self.domain.size > PRIME:
            raise ParameterError(
                f"HCMS hashes value indices modulo {PRIME}; the domain has {self.domain.size} values",
                field="domain",
                hint=f"use a domain of at most {PRIME} values",
            )

    # ----------------------------------------------------------- probabilities
    @property
    def privacy(self) -> Privacy:
        return Privacy("ldp", self.eps)

    @property
    def p(self) -> float:
        """P(the true coefficient is reported) = e^eps / (e^eps + 1)."""
        return 1.0 / (1.0 + math.exp(-self.eps))

    @property
    def c_eps(self) -> float:
        """Apple's debiasing factor (e^eps + 1) / (e^eps - 1) = 1 / (2p - 1), without cancellation."""
        return 1.0 / math.tanh(self.eps / 2)

    @cached_property
    def table(self) -> np.ndarray:
        """(hashes, k) read-only h_j(x) for every hash of the family and every value."""
        k = self.domain.size
        require_memory(
            8.0 * self.hashes * k, f"the {self.hashes} x {k} hash table of {self.name}", hint="use fewer hashes"
        )
        rng = np.random.default_rng(np.random.SeedSequence(self.family_seed))
        a = rng.integers(1, PRIME, size=self.hashes, dtype=np.int64)
        b = rng.integers(0, PRIME, size=self.hashes, dtype=np.int64)
        # int64-exact: a x + b < 2^31 k <= 2^62 for k <= P
        out = (a[:, None] * np.arange(k, dtype=np.int64)[None, :] + b[:, None]) % PRIME % self.buckets
        out.setflags(write=False)
        return out

    # ------------------------------------------------------------- contract
    def _output_count(self) -> int:
        return 2 * self.hashes * self.buckets

    def _matrix(self) -> np.ndarray:
        k, m = self.domain.size, self.buckets
        require_memory(
            8.0 * k * self.hashes * m, f"the {k} x {self.hashes * m} coefficients of {self.name}", hint="fewer hashes"
        )
        # bit[x, j, l] = parity(l & h_j(x)): the reported bit y when nothing is flipped
        bit = parity(self.table.T[:, :, None] & np.arange(m, dtype=np.int64)[None, None, :])
        scale = 1.0 / (self.hashes * m)
        hit, miss = self.p * scale, scale / (1.0 + math.exp(self.eps))
        out = np.empty((k, self.hashes, m, 2))
        out[..., 0] = np.where(bit == 0, hit, miss)
        out[..., 1] = np.where(bit == 1, hit, miss)
        return out.reshape(k, -1)

    @cached_property
    def _collision_factor(self):  # noqa: ANN202  (scipy's Cholesky factor, or None)
        """Cholesky factor of C, C[x, x'] the share of hashes colliding x and x'; None if C is singular."""
        from scipy.linalg import LinAlgError, cho_factor

        k, m = self.domain.size, self.buckets
        require_memory(
            4.0 * k * self.hashes * m + 3 * 8.0 * k * k,
            f"the {k} x {k} collision matrix of {self.name}",
            hint="use fewer values or hashes",
        )
        hot = np.zeros((k, self.hashes, m), dtype=np.float32)  # exact 0/1 sums below 2^24
        hot[np.arange(k)[:, None], np.arange(self.hashes)[None, :], self.table.T] = 1.0
        hot = hot.reshape(k, -1)
        collisions = (hot @ hot.T).astype(float) / self.hashes
        try:
            factor = cho_factor(collisions, lower=True, check_finite=False)
        except LinAlgError:
            return None
        diag = np.abs(np.diag(factor[0]))
        return factor if diag.min() > 1e-7 * diag.max() else None

    def _unbiased_estimate(self, reports: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
        z = reports[:, 0]
        self.require_outputs(z, 2 * self.hashes * self.buckets)
        factor = self._collision_factor
        if factor is None:
            return None
        from scipy.linalg import cho_solve

        counts = np.asarray(counts, dtype=float)
        tally = np.bincount(z, weights=counts, minlength=2 * self.hashes * self.buckets).reshape(self.hashes, -1, 2)
        signed = tally[..., 0] - tally[..., 1]  # (hashes, m): sum of the reported +-1 at (j, l)
        sketch = hadamard_transform(signed)  # Apple's sketch before debiasing, row j over buckets
        share = sketch[np.arange(self.hashes)[:, None], self.table].sum(axis=0) * self.c_eps / counts.sum()
        return cho_solve(factor, share, check_finite=False)

    def _estimate_variance(self, theta: np.ndarray) -> np.ndarray | None:
        """``n Var = c_eps^2 (C^-1)_xx - theta_x``: E[s s^T] = c_eps^2 C for every user, E[s] = C e_x'."""
        factor = self._collision_factor
        if factor is None:
            return None
        from scipy.linalg import cho_solve

        inverse = cho_solve(factor, np.eye(self.domain.size), check_finite=False)
        return self.c_eps**2 * np.diag(inverse) - np.asarray(theta, dtype=float)

    # No _likely_subset: a value's likely reports are almost never strictly inside another's.


@hookimpl
def register_mechanisms(register):
    register(HadamardCountMeanSketch)
