"""ldpsim: simulate local privacy mechanisms and distribution estimators at scale.

The public API: everything a plugin or an analysis script needs is importable
from ``ldpsim`` directly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names, for type checkers; at run time __getattr__ imports each on first use
    from .base.errors import DataError, EstimationError, LdpsimError, ParameterError, PluginError, ScenarioError
    from .base.memory import MemoryLimitError, require_memory
    from .estimation.backend import Backend, resolve_backend, using_backend
    from .estimation.convolution import ConvolutionOperator
    from .estimation.engine import (
        DEFAULT_DELTA,
        DEFAULT_MAX_ITER,
        DEFAULT_TOL,
        EMResult,
        Likelihood,
        binomial_smoothing,
        check_start,
        gibu,
    )
    from .estimation.estimator import INTERVAL_OUTPUTS, Estimate, Estimator, IntervalEstimator, InversionEstimator
    from .estimation.held import HeldLikelihood, HeldObservations
    from .estimation.newton import newton_mle
    from .estimation.observations import BitTally, Observations, ReportGroup
    from .estimation.operators import (
        box_convolution_likelihood,
        constant_plus_bits,
        constant_plus_column,
        constant_plus_halfwords,
        constant_plus_intervals,
        convolution_likelihood,
        named_values_likelihood,
        rank_one_plus_sparse,
        with_exact_rows,
        with_min_entry,
    )
    from .estimation.simplex import project_simplex
    from .estimation.unbiased import count_estimate_variance, plan_matrix, unbiased_estimate
    from .estimation.uncertainty import (
        Uncertainty,
        bootstrap_uncertainty,
        linear_intervals,
        mle_uncertainty,
        unbiased_uncertainty,
    )
    from .model.attack import Attack
    from .model.bitvectors import WORD_BITS, BitVectorMechanism, bernoulli_words, set_bit_counts
    from .model.capabilities import Capabilities
    from .model.dataset import Dataset
    from .model.domains import Categorical, Domain, Grid, Integers, OnDomain, Product, make_domain, parse_domain
    from .model.heavy_hitters import FoundItems, HeavyHitterProtocol, OpenDataset, OpenSample
    from .model.mechanism import ROW_SUM_TOL, STRUCTURED_MIN_SIZE, Mechanism
    from .model.memoized import MAX_ROUNDS, MatrixChannel, MemoizedMechanism, PrivacyOverTime, output_domain
    from .model.memoized_unary import MemoizedUnary, UnaryChannel
    from .model.metric import Metric
    from .model.numeric import (
        BandMechanism,
        NumericMechanism,
        band_cells,
        band_matrix,
        band_rows,
        piecewise_bands,
        runs_mask,
    )
    from .model.open_domain import OpenDomain, hash_string
    from .model.params import Configurable, Param
    from .model.privacy import Privacy, geo_level, ldp_level, lip_level
    from .model.tuples import ProductChannel, Term, TupleMechanism
    from .model.variables import DOMAIN, POINT, ROUND, TASK, Variable
    from .plugin.executor import Executor, Held
    from .plugin.hookspecs import hookimpl
    from .plugin.registry import PluginWarning, Registry, get_registry, register, registered
    from .results.combine import merge_results
    from .results.found import TopKScore, top_k_score
    from .results.io import open_results
    from .results.marginals import marginals
    from .results.scores import scores
    from .results.summary import ScoreWarning
    from .running.plan import Plan, plan
    from .running.plan_shuffle import ShufflePlan, plan_shuffled
    from .running.runner import run_scenario
    from .running.scenario import load_scenario
    from .theory.audit import AuditReport, PathAudit, audit_mechanism, bayes_vulnerability
    from .theory.diagnostics import check_estimate, check_mechanism, mechanism_report, rr_parameters
    from .theory.shuffle import ShuffleGuarantee, VariationRatio, largest_eps0, shuffle_guarantee, variation_ratio

#: each public name and the module defining it, imported on first use (``import ldpsim`` stays light)
_LAZY: dict[str, str] = {
    "DataError": "base.errors",
    "EstimationError": "base.errors",
    "LdpsimError": "base.errors",
    "ParameterError": "base.errors",
    "PluginError": "base.errors",
    "ScenarioError": "base.errors",
    "Backend": "estimation.backend",
    "resolve_backend": "estimation.backend",
    "using_backend": "estimation.backend",
    "ConvolutionOperator": "estimation.convolution",
    "DEFAULT_DELTA": "estimation.engine",
    "DEFAULT_MAX_ITER": "estimation.engine",
    "DEFAULT_TOL": "estimation.engine",
    "EMResult": "estimation.engine",
    "Likelihood": "estimation.engine",
    "check_start": "estimation.engine",
    "gibu": "estimation.engine",
    "Estimate": "estimation.estimator",
    "HeldLikelihood": "estimation.held",
    "HeldObservations": "estimation.held",
    "Estimator": "estimation.estimator",
    "INTERVAL_OUTPUTS": "estimation.estimator",
    "IntervalEstimator": "estimation.estimator",
    "InversionEstimator": "estimation.estimator",
    "Observations": "estimation.observations",
    "ReportGroup": "estimation.observations",
    "BitTally": "estimation.observations",
    "constant_plus_column": "estimation.operators",
    "convolution_likelihood": "estimation.operators",
    "box_convolution_likelihood": "estimation.operators",
    "named_values_likelihood": "estimation.operators",
    "constant_plus_bits": "estimation.operators",
    "constant_plus_halfwords": "estimation.operators",
    "rank_one_plus_sparse": "estimation.operators",
    "with_exact_rows": "estimation.operators",
    "with_min_entry": "estimation.operators",
    "project_simplex": "estimation.simplex",
    "plan_matrix": "estimation.unbiased",
    "unbiased_estimate": "estimation.unbiased",
    "Uncertainty": "estimation.uncertainty",
    "bootstrap_uncertainty": "estimation.uncertainty",
    "linear_intervals": "estimation.uncertainty",
    "mle_uncertainty": "estimation.uncertainty",
    "unbiased_uncertainty": "estimation.uncertainty",
    "Attack": "model.attack",
    "BitVectorMechanism": "model.bitvectors",
    "set_bit_counts": "model.bitvectors",
    "bernoulli_words": "model.bitvectors",
    "WORD_BITS": "model.bitvectors",
    "Dataset": "model.dataset",
    "Categorical": "model.domains",
    "Domain": "model.domains",
    "Grid": "model.domains",
    "Integers": "model.domains",
    "OnDomain": "model.domains",
    "make_domain": "model.domains",
    "parse_domain": "model.domains",
    "FoundItems": "model.heavy_hitters",
    "TopKScore": "results.found",
    "top_k_score": "results.found",
    "HeavyHitterProtocol": "model.heavy_hitters",
    "OpenDataset": "model.heavy_hitters",
    "OpenSample": "model.heavy_hitters",
    "OpenDomain": "model.open_domain",
    "hash_string": "model.open_domain",
    "Capabilities": "model.capabilities",
    "Mechanism": "model.mechanism",
    "ROW_SUM_TOL": "model.mechanism",
    "STRUCTURED_MIN_SIZE": "model.mechanism",
    "Metric": "model.metric",
    "Configurable": "model.params",
    "Param": "model.params",
    "Privacy": "model.privacy",
    "geo_level": "model.privacy",
    "ldp_level": "model.privacy",
    "lip_level": "model.privacy",
    "DOMAIN": "model.variables",
    "POINT": "model.variables",
    "TASK": "model.variables",
    "Variable": "model.variables",
    "Executor": "plugin.executor",
    "Held": "plugin.executor",
    "hookimpl": "plugin.hookspecs",
    "PluginWarning": "plugin.registry",
    "Registry": "plugin.registry",
    "get_registry": "plugin.registry",
    "register": "plugin.registry",
    "registered": "plugin.registry",
    "merge_results": "results.combine",
    "open_results": "results.io",
    "scores": "results.scores",
    "ScoreWarning": "results.summary",
    "Plan": "running.plan",
    "plan": "running.plan",
    "run_scenario": "running.runner",
    "load_scenario": "running.scenario",
    "audit_mechanism": "theory.audit",
    "AuditReport": "theory.audit",
    "PathAudit": "theory.audit",
    "bayes_vulnerability": "theory.audit",
    "check_estimate": "theory.diagnostics",
    "check_mechanism": "theory.diagnostics",
    "mechanism_report": "theory.diagnostics",
    "rr_parameters": "theory.diagnostics",
    "ShuffleGuarantee": "theory.shuffle",
    "VariationRatio": "theory.shuffle",
    "largest_eps0": "theory.shuffle",
    "shuffle_guarantee": "theory.shuffle",
    "variation_ratio": "theory.shuffle",
    "ShufflePlan": "running.plan_shuffle",
    "plan_shuffled": "running.plan_shuffle",
    "ROUND": "model.variables",
    "MatrixChannel": "model.memoized",
    "MAX_ROUNDS": "model.memoized",
    "MemoizedMechanism": "model.memoized",
    "MemoizedUnary": "model.memoized_unary",
    "PrivacyOverTime": "model.memoized",
    "UnaryChannel": "model.memoized_unary",
    "output_domain": "model.memoized",
    "binomial_smoothing": "estimation.engine",
    "constant_plus_intervals": "estimation.operators",
    "NumericMechanism": "model.numeric",
    "band_cells": "model.numeric",
    "band_matrix": "model.numeric",
    "band_rows": "model.numeric",
    "piecewise_bands": "model.numeric",
    "runs_mask": "model.numeric",
    "newton_mle": "estimation.newton",
    "count_estimate_variance": "estimation.unbiased",
    "MemoryLimitError": "base.memory",
    "require_memory": "base.memory",
    "BandMechanism": "model.numeric",
    "Product": "model.domains",
    "ProductChannel": "model.tuples",
    "Term": "model.tuples",
    "TupleMechanism": "model.tuples",
    "marginals": "results.marginals",
}

__all__ = [
    "Attack",
    "DEFAULT_DELTA",
    "WORD_BITS",
    "BitVectorMechanism",
    "set_bit_counts",
    "bernoulli_words",
    "INTERVAL_OUTPUTS",
    "Uncertainty",
    "IntervalEstimator",
    "bootstrap_uncertainty",
    "linear_intervals",
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
    "FoundItems",
    "TopKScore",
    "top_k_score",
    "HeavyHitterProtocol",
    "OpenDataset",
    "OpenSample",
    "OpenDomain",
    "hash_string",
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
    "Held",
    "Grid",
    "Integers",
    "InversionEstimator",
    "LdpsimError",
    "Likelihood",
    "HeldLikelihood",
    "HeldObservations",
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
    "BitTally",
    "AuditReport",
    "PathAudit",
    "ScenarioError",
    "ScoreWarning",
    "audit_mechanism",
    "bayes_vulnerability",
    "box_convolution_likelihood",
    "check_estimate",
    "check_mechanism",
    "check_start",
    "constant_plus_column",
    "convolution_likelihood",
    "get_registry",
    "geo_level",
    "gibu",
    "hookimpl",
    "resolve_backend",
    "using_backend",
    "Backend",
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
    "constant_plus_bits",
    "constant_plus_halfwords",
    "rank_one_plus_sparse",
    "with_exact_rows",
    "with_min_entry",
    "rr_parameters",
    "ShuffleGuarantee",
    "VariationRatio",
    "largest_eps0",
    "shuffle_guarantee",
    "variation_ratio",
    "ShufflePlan",
    "plan_shuffled",
    "run_scenario",
    "unbiased_estimate",
    "merge_results",
    "open_results",
    "scores",
    "register",
    "registered",
    "__version__",
    "ROUND",
    "MatrixChannel",
    "MAX_ROUNDS",
    "MemoizedMechanism",
    "MemoizedUnary",
    "PrivacyOverTime",
    "UnaryChannel",
    "output_domain",
    "binomial_smoothing",
    "constant_plus_intervals",
    "NumericMechanism",
    "band_cells",
    "band_matrix",
    "band_rows",
    "piecewise_bands",
    "runs_mask",
    "newton_mle",
    "count_estimate_variance",
    "MemoryLimitError",
    "require_memory",
    "BandMechanism",
    "Product",
    "ProductChannel",
    "Term",
    "TupleMechanism",
    "marginals",
]


#: the layers, importable as attributes (``ldpsim.plugin.registry``) as with eager imports
_SUBPACKAGES = frozenset({"base", "model", "estimation", "plugin", "theory", "results", "running", "output", "testing"})


def __getattr__(name: str) -> Any:
    """Import a public name on first use: ``import ldpsim`` (and ``ldpsim --help``) loads none of the
    layers; ``from ldpsim import X`` loads only what X needs."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("ldpsim")
        except PackageNotFoundError:  # running from a source tree that is not installed
            value = "0+unknown"
    elif name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'ldpsim' has no attribute {name!r}")
    globals()[name] = value  # later lookups do not come back here
    return value


def __dir__() -> list[str]:
    # the public names only: not this module's own imports (Any, importlib, annotations) nor its tables
    return sorted({*__all__, "__version__"})
