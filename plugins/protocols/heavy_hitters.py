"""PEM, TreeHist and Apple's SFP as protocols of heavy-hitter scenarios: the users' sampler and the server's search in one.

The parametrisations and the samplers are :mod:`ldpsim_plugins.mechanisms.heavy_hitters`'s and
:mod:`ldpsim_plugins.mechanisms.sfp`'s; the search (the exact MLE of each level over its candidates
plus "everything else", then pruning) is :mod:`ldpsim_plugins.estimators.heavy_hitters`'s and
:mod:`ldpsim_plugins.estimators.sfp`'s. A scenario names a protocol with its parameters::

    [protocols.pem]
    name = "pem"
    eps = 4
    rule = "ucb"            # keep the candidates whose upper confidence bound reaches threshold
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ldpsim import FoundItems, HeavyHitterProtocol, OpenDomain, Param, hookimpl

from ..estimators.heavy_hitters import RULES, pem_heavy_hitters, treehist_heavy_hitters
from ..estimators.sfp import sfp_heavy_hitters
from ..mechanisms.heavy_hitters import PEM, TreeHist
from ..mechanisms.sfp import APPLE_SIZES, SFP

RULE_DOC = (
    "pruning: topk (the papers': the k largest estimates) or ucb (every candidate whose upper bound reaches threshold)"
)


class Searched(HeavyHitterProtocol):
    """What PEM, TreeHist and SFP share: the pruning rule, the confidence of its bounds, and the search
    (``search``: the library's ``*_heavy_hitters`` function for the protocol)."""

    search: ClassVar[Callable[..., FoundItems]]

    rule = Param("str", "topk", choices=RULES, doc=RULE_DOC)
    threshold = Param("float", 0.01, gt=0, lt=1, doc="the frequency an upper bound must reach under rule = ucb")
    level = Param("float", 0.95, gt=0, lt=1, doc="two-sided confidence level of the upper bounds")

    def check_domain(self, domain: OpenDomain) -> None:
        self.protocol(domain)

    def protocol(self, domain: OpenDomain) -> Any:
        """The parametrised protocol on ``domain`` (validating the parameters against it)."""
        raise NotImplementedError

    def collect(self, domain: OpenDomain, values: np.ndarray, rng: np.random.Generator) -> Any:
        return self.protocol(domain).sample(values, rng)

    def find(self, domain: OpenDomain, reports: Any) -> FoundItems:
        return self.search(self.protocol(domain), reports, rule=self.rule, threshold=self.threshold, level=self.level)


class PEMProtocol(Searched):
    """PEM (Wang et al. TDSC 2019): groups of users report prefixes step bits longer than the last through OLH"""

    name = "pem"
    search = staticmethod(pem_heavy_hitters)
    step = Param("int", 2, ge=1, doc="bits each level adds (the paper's eta); must divide bits - start_bits")
    start_bits = Param("int", None, doc="bits before the first level (default ceil(log2 k))")
    hash_pool = Param(
        "int", 4096, ge=1, doc="OLH seeds users draw from (the server hashes each candidate once per seed)"
    )

    def protocol(self, domain: OpenDomain) -> PEM:
        return PEM(domain, self.eps, self.k, self.step, self.start_bits, self.hash_pool)


class TreeHistProtocol(Searched):
    """TreeHist (Bassily et al. NeurIPS 2017): a prefix tree over Hadamard response, eps/2 per prefix and word"""

    name = "treehist"
    search = staticmethod(treehist_heavy_hitters)
    step = Param("int", 1, ge=1, doc="bits per level (1: the paper's binary tree); must divide bits")

    def protocol(self, domain: OpenDomain) -> TreeHist:
        return TreeHist(domain, self.eps, self.k, self.step)


class SFPProtocol(Searched):
    """Apple's sequence-fragment puzzle (2017): a fragment keyed by a word hash and the whole word, CMS or HCMS"""

    name = "sfp"
    search = staticmethod(sfp_heavy_hitters)
    fragment_bits = Param("int", 8, ge=1, doc="bits per fragment; must divide bits")
    hash_bits = Param("int", 8, ge=1, le=32, doc="bits of the whole-word hash that keys each fragment (Apple's: 8)")
    oracle = Param("str", "cms", choices=tuple(APPLE_SIZES), doc="the sketch: cms or hcms (Apple's deployed sizes)")
    hashes = Param("int", None, doc="the sketches' hash functions d (default: Apple's for the oracle)")
    buckets = Param("int", None, doc="the sketches' buckets m (default: Apple's for the oracle)")

    def protocol(self, domain: OpenDomain) -> SFP:
        return SFP(
            domain,
            self.eps,
            self.k,
            fragment_bits=self.fragment_bits,
            hash_bits=self.hash_bits,
            oracle=self.oracle,
            hashes=self.hashes,
            buckets=self.buckets,
        )


@hookimpl
def register_protocols(register: Callable[[type], None]) -> None:
    register(PEMProtocol)
    register(TreeHistProtocol)
    register(SFPProtocol)
