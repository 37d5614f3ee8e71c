"""What an attacker cohort achieved: the frequency gain of its target items (Cao, Jia & Gong 2021).

In a scenario with an attacker cohort, a run's truth is the distribution of the honest users alone
(the attackers hold no value), and the estimators see every report, the fake ones included. The
gain of a target t is its estimate minus its honest frequency, ``f~_t - f_t``; the *overall* gain is
the sum over the targets, the paper's G. The paper defines G as the expected estimate after the
attack minus the expected estimate before it; for an unbiased estimator (the paper's) the latter is
f_t, so the mean of this metric over repetitions is the paper's G. For a biased estimator (a
projection, an MLE) it is the gain over the truth, which also counts the estimator's own bias: score
the same estimator without attackers (share 0) to separate the two.

The error on the honest users' distribution needs no metric of its own: every distance metric
(``tv``, ``mse``, ...) compares the estimate with the run's truth, the honest distribution.
"""

from __future__ import annotations

import numpy as np

from ldpsim import Domain, Metric, Param, ParameterError, hookimpl


class Gain(Metric):
    """Frequency gain of the attack's targets (Cao et al. 2021): sum_t (estimate_t - honest f_t), or one target's."""

    name = "gain"
    #: the targets come from the scenario's attacker cohorts
    from_run = ("targets",)
    targets = Param("vector", None, doc="the target items (domain indices); a scenario fills them from its attackers")
    item = Param("int", None, ge=0, doc="score one target's gain instead of the sum over all targets")

    def _validate(self) -> None:
        if self.targets is None:
            raise ParameterError(
                "metric 'gain' has no targets: the scenario has no attacker cohort",
                field="targets",
                hint="add a cohort with attack = {...}, or give targets = [...]",
            )
        if self.item is not None and self.item not in set(np.asarray(self.targets).astype(np.int64).tolist()):
            raise ParameterError(
                f"item {self.item} is not a target", field="item", hint="choose one of the targets, or leave item out"
            )

    def _check_domain(self, domain: Domain) -> None:
        items = np.asarray(self.targets)
        if items.size and (items.min() < 0 or items.max() >= domain.size):
            raise ParameterError(
                f"targets must be domain indices in 0..{domain.size - 1}",
                field="targets",
                hint="choose targets inside the domain",
            )

    def _compute(self, estimate: np.ndarray, truth: np.ndarray, domain: Domain) -> float:
        items = [self.item] if self.item is not None else np.asarray(self.targets).astype(np.int64)
        return float(np.sum(estimate[items] - truth[items]))


@hookimpl
def register_metrics(register):
    register(Gain)
