"""Synthetic datasets: users' values drawn iid from a known distribution."""

from __future__ import annotations

import numpy as np

from ldpsim import Dataset, Integers, Param, ParameterError, hookimpl


class FromPmf(Dataset):
    """Base of datasets whose users' values are drawn iid from :meth:`pmf`.

    A subclass implements :meth:`pmf`; the distribution, the sampler and the counts sampler (multinomial,
    in O(|X|) whatever the number of users) follow. Shared with the tuple datasets (``tuples.Copula``).
    """

    def pmf(self) -> np.ndarray:
        """The generating distribution over the domain."""
        raise NotImplementedError

    def distribution(self) -> np.ndarray:
        return self.pmf()

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(self.domain.size, size=n, p=self.pmf())

    def _sample_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # iid users: the counts per value are multinomial, drawn in O(|X|) whatever n is
        pmf = self.pmf()
        return rng.multinomial(n, pmf / pmf.sum())


class Binomial(FromPmf):
    """Binomial(k-1, p) on the k values of an integers domain, in order."""

    name = "binomial"
    domain_kinds = ("integers",)
    p = Param("float", 0.5, ge=0, le=1, doc="success probability")

    def pmf(self) -> np.ndarray:
        m = self.domain.size - 1
        i = np.arange(m + 1)
        from scipy.special import gammaln, xlogy  # imported where used: `ldpsim list` stays fast

        log_pmf = gammaln(m + 1) - gammaln(i + 1) - gammaln(m - i + 1) + xlogy(i, self.p) + xlogy(m - i, 1 - self.p)
        pmf = np.exp(log_pmf)
        return pmf / pmf.sum()

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.binomial(self.domain.size - 1, self.p, size=n)


class Uniform(FromPmf):
    """Uniform on the values low..high of an integers domain (the whole domain by default), zero elsewhere."""

    name = "uniform"
    low = Param("int", None, doc="smallest value with positive probability (integers domains)")
    high = Param("int", None, doc="largest value with positive probability (integers domains)")

    def _validate(self) -> None:
        if self.domain.name != "integers":
            for key in ("low", "high"):
                if getattr(self, key) is not None:
                    raise ParameterError(
                        f"only applies to integers domains, not {self.domain.name}",
                        field=key,
                        hint="remove it to use the whole domain",
                    )
            return
        values = Integers.of(self.domain).values
        low = values[0] if self.low is None else self.low
        high = values[-1] if self.high is None else self.high
        inside = (values >= low) & (values <= high)
        if not inside.any():
            raise ParameterError(
                f"the range {low}..{high} holds no value of the domain {values[0]}..{values[-1]}",
                field="low",
                hint="choose low <= high inside the domain",
            )
        self._support = inside

    def pmf(self) -> np.ndarray:
        support = getattr(self, "_support", np.ones(self.domain.size, dtype=bool))
        return support / support.sum()


class Zipf(FromPmf):
    """Zipf: the i-th value of the domain (i = 1, 2, ...) has probability proportional to i^-s."""

    name = "zipf"
    s = Param("float", 1.0, ge=0, doc="exponent (0 gives the uniform distribution)")

    def pmf(self) -> np.ndarray:
        w = np.arange(1, self.domain.size + 1, dtype=float) ** -self.s
        return w / w.sum()


class Pmf(FromPmf):
    """Values drawn from an explicit distribution over the domain."""

    name = "pmf"
    p = Param("distribution", doc="probability of each value of the domain, in order")

    def _validate(self) -> None:
        if self.p.size != self.domain.size:
            raise ParameterError(
                f"has {self.p.size} entries, the domain has {self.domain.size}", field="p", hint="give one per value"
            )

    def pmf(self) -> np.ndarray:
        return np.asarray(self.p)


@hookimpl
def register_datasets(register):
    register(Pmf)
    register(Binomial)
    register(Uniform)
    register(Zipf)
