"""The plugin bases of runs over open domains: heavy-hitter protocols and the datasets they read.

A :class:`~ldpsim.model.mechanism.Mechanism` is a channel on a listed domain, and an estimator a vector
over that domain. A heavy-hitter protocol is neither: its users report about *prefixes* (or fragments,
or sketches) of values of an :class:`~ldpsim.model.open_domain.OpenDomain`, and its server searches
them for the frequent values, returning a list whose length it decides. So a protocol is one plugin
that does both halves (:class:`HeavyHitterProtocol`: ``collect`` on the users' side, ``find`` on the
server's), and an :class:`OpenDataset` draws the users' values without listing the domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .open_domain import OpenDomain
from .params import Configurable, Param
from .privacy import Privacy


@dataclass
class FoundItems:
    """What a heavy-hitter search found, most frequent first.

    Attributes
    ----------
    items : numpy.ndarray
        The found values (uint64 ids of the open domain).
    frequency : numpy.ndarray
        Their estimated frequencies (shares of all users).
    upper : numpy.ndarray
        Upper confidence bounds of the frequencies (NaN where the rule did not compute them).
    levels : list
        The protocol's per-level estimates, for inspection (not stored in results).
    """

    items: np.ndarray
    frequency: np.ndarray
    upper: np.ndarray
    levels: list[Any] = field(default_factory=list)


@dataclass
class OpenSample:
    """Users' values over an open domain: one uint64 id per user, and the strings behind ids, if any."""

    values: np.ndarray
    names: dict[int, str] | None = None


class HeavyHitterProtocol(Configurable):
    """Base of heavy-hitter protocols: the users' reports about an open domain and the server's search.

    A subclass declares ``name``, its parameters (``eps`` and ``k`` are declared here), and implements
    :meth:`collect` and :meth:`find`; :meth:`check_domain` refuses a domain its parameters do not fit
    (a step that does not divide the bits) before any user is drawn.
    """

    kind: ClassVar[str] = "protocol"
    eps = Param("float", gt=0, doc="each user's privacy level: every report is eps-LDP")
    k = Param("int", 64, ge=1, doc="the items kept per level by the top-k rule, and found at most")

    def privacy(self) -> Privacy:
        """The guarantee of one user's reports: pure eps-LDP (the protocols split eps within a user)."""
        return Privacy("ldp", float(self.eps))

    def check_domain(self, domain: OpenDomain) -> None:
        """Raise a one-line :class:`ldpsim.ParameterError` if the parameters do not fit ``domain``."""

    def collect(self, domain: OpenDomain, values: np.ndarray, rng: np.random.Generator) -> Any:
        """The users' reports (aggregated wherever the protocol allows), in the protocol's own form.

        Parameters
        ----------
        domain : OpenDomain
            The users' domain.
        values : numpy.ndarray
            One uint64 value per user.
        rng : numpy.random.Generator
            All of the reports' randomness.

        Returns
        -------
        Any
            Whatever :meth:`find` reads.
        """
        raise NotImplementedError

    def find(self, domain: OpenDomain, reports: Any) -> FoundItems:
        """The frequent items the server finds in ``reports`` (:meth:`collect`'s output).

        Parameters
        ----------
        domain : OpenDomain
            The users' domain.
        reports : Any
            The reports.

        Returns
        -------
        FoundItems
            At most ``k`` items, most frequent first.
        """
        raise NotImplementedError


class OpenDataset(Configurable):
    """Base of datasets over open domains: they draw users' values without listing the domain."""

    kind: ClassVar[str] = "open_dataset"

    def draw(self, domain: OpenDomain, users: int | None, rng: np.random.Generator) -> OpenSample:
        """The users' values.

        Parameters
        ----------
        domain : OpenDomain
            The domain the values belong to.
        users : int or None
            How many users (None: the dataset's own count, for one backed by a file).
        rng : numpy.random.Generator
            The randomness of the draw (a file's rows are taken as they are).

        Returns
        -------
        OpenSample
            One value per user.
        """
        raise NotImplementedError
