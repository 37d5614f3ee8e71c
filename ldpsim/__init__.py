"""ldpsim: simulate local privacy mechanisms and distribution estimators at scale.

The public API: everything a plugin or an analysis script needs is importable
from ``ldpsim`` directly.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from .base.errors import (
    DataError,
    EstimationError,
    LdpsimError,
    ParameterError,
    PluginError,
    ScenarioError,
)
from .base.memory import MemoryLimitError, require_memory
from .estimation.engine import DEFAULT_DELTA, DEFAULT_MAX_ITER, DEFAULT_TOL, EMResult, Likelihood, check_start, gibu
from .estimation.estimator import (
    INTERVAL_OUTPUTS,
    Estimate,
    Estimator,
    IntervalEstimator,
    InversionEstimator,
)
from .estimation.observations import Observations, ReportGroup
from .estimation.operators import (
    constant_plus_column,
    convolution_likelihood,
    named_values_likelihood,
    rank_one_plus_sparse,
)
from .estimation.simplex import project_simplex
from .estimation.unbiased import count_estimate_variance, plan_matrix, unbiased_estimate
from .estimation.uncertainty import Uncertainty, bootstrap_uncertainty, mle_uncertainty, unbiased_uncertainty
from .model.bitvectors import WORD_BITS, BitVectorMechanism
from .model.dataset import Dataset
from .model.domains import Categorical, Domain, Grid, Integers, OnDomain, make_domain, parse_domain
from .model.mechanism import ROW_SUM_TOL, STRUCTURED_MIN_SIZE, Capabilities, Mechanism
from .model.metric import Metric
from .model.params import Configurable, Param
from .model.privacy import Privacy, geo_level, ldp_level, lip_level
from .model.variables import DOMAIN, POINT, TASK, Variable
from .plugin.executor import Executor
from .plugin.hookspecs import hookimpl
from .plugin.registry import PluginWarning, Registry, get_registry
from .running.audit import audit_mechanism
from .theory.audit import AuditReport, PathAudit, bayes_vulnerability
from .theory.diagnostics import check_estimate, check_mechanism, mechanism_report, rr_parameters

if TYPE_CHECKING:
    from .estimation.convolution import ConvolutionOperator

try:
    __version__ = version("ldpsim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT_DELTA",
    "WORD_BITS",
    "BitVectorMechanism",
    "INTERVAL_OUTPUTS",
    "Uncertainty",
    "IntervalEstimator",
    "bootstrap_uncertainty",
    "mle_uncertainty",
    "unbiased_uncertainty",
    "DOMAIN",
    "POINT",
    "TASK",
    "Variable",
    "DEFAULT_MAX_ITER",
    "DEFAULT_TOL",
    "ROW_SUM_TOL",
    "STRUCTURED_MIN_SIZE",
    "Capabilities",
    "Categorical",
    "Configurable",
    "ConvolutionOperator",
    "DataError",
    "Dataset",
    "Domain",
    "EMResult",
    "Estimate",
    "EstimationError",
    "Estimator",
    "Executor",
    "Grid",
    "Integers",
    "InversionEstimator",
    "LdpsimError",
    "Likelihood",
    "Mechanism",
    "Metric",
    "Observations",
    "OnDomain",
    "Param",
    "ParameterError",
    "PluginError",
    "PluginWarning",
    "Privacy",
    "Registry",
    "ReportGroup",
    "AuditReport",
    "PathAudit",
    "ScenarioError",
    "audit_mechanism",
    "bayes_vulnerability",
    "check_estimate",
    "check_mechanism",
    "check_start",
    "constant_plus_column",
    "convolution_likelihood",
    "get_registry",
    "geo_level",
    "gibu",
    "hookimpl",
    "ldp_level",
    "lip_level",
    "load_scenario",
    "make_domain",
    "mechanism_report",
    "named_values_likelihood",
    "plan_matrix",
    "parse_domain",
    "Plan",
    "plan",
    "project_simplex",
    "rank_one_plus_sparse",
    "rr_parameters",
    "run_scenario",
    "unbiased_estimate",
    "count_estimate_variance",
    "MemoryLimitError",
    "require_memory",
    "__version__",
]


def __getattr__(name: str):
    # The scenario runner pulls in xarray, ConvolutionOperator scipy.sparse.linalg; plugins importing
    # ldpsim should not pay for them.
    if name == "ConvolutionOperator":
        from .estimation.convolution import ConvolutionOperator

        return ConvolutionOperator
    if name in ("run_scenario", "load_scenario"):
        from .running import runner, scenario

        return {"run_scenario": runner.run_scenario, "load_scenario": scenario.load_scenario}[name]
    if name in ("plan", "Plan"):
        from .running import plan

        return {"plan": plan.plan, "Plan": plan.Plan}[name]
    raise AttributeError(f"module 'ldpsim' has no attribute {name!r}")
