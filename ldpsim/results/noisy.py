"""The noisy distribution: the empirical distribution of the reports, read as values of the domain.

It is what the collector sees before any estimation (001 Fig. 9's "noisy" map, 004 Fig. 1), and only
means something when each report names a value of the domain: every user made one report, with a
mechanism whose outputs are values of the domain. An output is matched to the domain value with the
same label, so square mechanisms (k-RR, truncated geometric, Laplace, exponential, LIP, planar without a
window) map output j to value j, and a planar mechanism with an output ``window`` (always inside the
grid) maps each window cell to its own cell of the grid; cells outside the window get no reports.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..estimation.observations import Observations
from ..model.mechanism import Mechanism

#: largest domain for which the output labels are worth forming the mechanism's |X| x |Z| matrix
#: (mechanisms such as k-RR sample and estimate without it; 2048 values make a 34 MB matrix)
NOISY_MAX_VALUES = 2048

#: what the results' ``noisy`` variable holds, and when it is NaN
NOISY_DESCRIPTION = (
    "empirical distribution of the reports, each counted at the domain value its output names; "
    "NaN where some user made several reports or used a mechanism whose outputs are not domain values "
    f"(bit vectors, hashes, unbounded integers) or whose matrix was not formed on a domain of more than "
    f"{NOISY_MAX_VALUES} values; a planar mechanism's window cells count at their own grid cell"
)


#: :func:`output_values` of the mechanism instances seen, by ``id`` (with a weak reference that tells a live
#: instance from a later one at the same address; an entry goes when its instance does)
_INDEX: dict[int, tuple[weakref.ref[Mechanism], np.ndarray | None]] = {}


def output_values(mech: Mechanism) -> np.ndarray | None:
    """The domain index each output of ``mech`` names, or None if some output is not a domain value.

    Found once per mechanism instance: every run of a sweep point reports through the same
    instance, and matching its output labels to the domain's labels was a tenth of a
    sub-millisecond run's bookkeeping. The answer is not kept while it depends on whether the
    matrix was formed yet (a large domain).
    """
    entry = _INDEX.get(id(mech))
    if entry is not None and entry[0]() is mech:
        return entry[1]
    index = _output_values(mech)
    if mech.report_width != 1 or "matrix" in vars(mech) or mech.domain.size <= NOISY_MAX_VALUES:
        if index is not None:
            index.setflags(write=False)  # shared by every run of the mechanism
        key = id(mech)

        def forget(_: object) -> None:
            _INDEX.pop(key, None)

        try:
            _INDEX[key] = (weakref.ref(mech, forget), index)
        except TypeError:  # an instance that cannot be weakly referenced: found every time
            pass
    return index


def _output_values(mech: Mechanism) -> np.ndarray | None:
    if mech.report_width != 1:
        return None
    if "matrix" not in vars(mech) and mech.domain.size > NOISY_MAX_VALUES:
        return None  # the labels would cost a matrix the run does not otherwise need
    labels = mech.output_labels()
    if labels is None:
        return None
    if len(labels) != mech.domain.size and labels == [str(j) for j in range(len(labels))]:
        return None  # the default labels of a non-square matrix: output numbers, not values
    lookup = {label: i for i, label in enumerate(mech.domain.labels())}
    index = np.array([lookup.get(label, -1) for label in labels], dtype=np.int64)
    return None if index.size == 0 or np.any(index < 0) else index


def noisy_distribution(observations: Observations) -> np.ndarray | None:
    """The (|X|,) distribution of the reports over the domain, or None where it is not defined."""
    size = observations.domain.size
    total: np.ndarray | None = None
    for group in observations.groups:
        if len(group.plan) != 1:
            return None
        index = output_values(group.plan[0])
        if index is None:
            return None
        counted = np.bincount(index[group.reports[:, 0]], weights=group.counts, minlength=size)
        # the first group's counts as they are: adding them to zeros changes no bit (counts are positive)
        total = counted if total is None else total + counted
    n = observations.n
    return total / n if n and total is not None else None
