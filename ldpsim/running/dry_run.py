"""What a run would take, found without running it: ``ldpsim run --dry-run``.

The memory figures are the sizes the preflight checks (:func:`ldpsim.running.simulation.simulation_bytes`,
:func:`ldpsim.estimation.unbiased.inversion_bytes`), so the dry run and the refusal agree. The time
is measured, not modelled: one run of the first sweep point, timed, times the number of runs. It
is a rough figure: sweep points differ (a sweep over users or eps changes the cost), and the first
run in a process pays one-off costs (building likelihoods, imports).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ..base.memory import available_memory
from ..estimation.observations import round_channels
from ..estimation.unbiased import inversion_bytes
from .build import Builder
from .runner import preflight
from .scenario import Scenario
from .simulation import simulation_bytes
from .tasks import run_task, tasks


@dataclass(frozen=True)
class DryRun:
    """The size of a run.

    Attributes
    ----------
    points, repetitions, runs
        Sweep points, repetitions per point, and runs (their product).
    run_bytes
        The largest memory one run allocates for its simulation and matrix inversions, over the points.
    results_bytes
        The results' distributions (truth and each estimate, per run and value) held until they are written.
    available_bytes
        Memory available on this machine now.
    seconds_per_run
        The measured time of one run of the first point (None if not measured).
    """

    points: int
    repetitions: int
    runs: int
    run_bytes: float
    results_bytes: float
    available_bytes: int
    seconds_per_run: float | None

    def seconds(self, workers: int = 1) -> float | None:
        """The estimated time of the whole run on ``workers`` processes side by side."""
        if self.seconds_per_run is None:
            return None
        return self.seconds_per_run * math.ceil(self.runs / max(1, workers))


def dry_run(scenario: Scenario, *, calibrate: bool = True) -> DryRun:
    """Size a loaded scenario's run: runs, memory, and (with ``calibrate``) time from one timed run.

    The preflight's refusals apply first: a scenario that would not fit raises the same
    :class:`ldpsim.LdpsimError` as the run. Nothing is written.
    """
    preflight(scenario)
    builder = scenario.builder or Builder(scenario.base_dir)
    points = 0
    run_bytes = 0.0
    size = 0
    estimators = 0
    for point in scenario.points():
        points += 1
        setup = builder.setup(point)
        nbytes = float(simulation_bytes(setup))
        inverting = {est.rounds for est in setup.estimators.values() if est.inverts_matrices}
        plans = [c.plan for c in setup.cohorts] if "all" in inverting else []
        if "each" in inverting:  # round by round: each round's one-report channel
            plans += [(channel,) for c in setup.cohorts for channel in round_channels(c.plan)]
        nbytes += max((inversion_bytes(plan) or 0.0 for plan in plans), default=0.0)
        run_bytes = max(run_bytes, nbytes)
        size, estimators = setup.domain.size, len(setup.estimators)
    runs = points * scenario.repetitions
    seconds = None
    if calibrate:
        first = tasks(scenario)[0]
        started = time.perf_counter()
        run_task(first, scenario.builder)
        seconds = time.perf_counter() - started
    return DryRun(
        points=points,
        repetitions=scenario.repetitions,
        runs=runs,
        run_bytes=run_bytes,
        results_bytes=8.0 * runs * size * (estimators * max(scenario.rounds, 1) + 1),
        available_bytes=available_memory(),
        seconds_per_run=seconds,
    )
