"""The figure of a plan: the curve the planner searched, the target and the answer."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from .plot_style import pyplot, wrap_title

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plan_figure(ds: xr.Dataset) -> Figure:
    """The error against the searched axis (log scale), with +-2 Monte-Carlo standard errors and the monotone fit.

    ``ds`` is :meth:`ldpsim.running.plan.Plan.to_dataset`'s dataset.
    """
    plt = pyplot()
    axis = str(next(iter(ds["error"].dims)))
    x = np.asarray(ds[axis].values, dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), constrained_layout=True)
    ax.errorbar(x, ds["error"].values, yerr=2 * ds["error_se"].values, fmt="o", ms=4, label="evaluated (± 2 se)")
    ax.plot(x, ds["smoothed"].values, "-", label="monotone fit")
    attrs = ds.attrs
    if "target" in attrs:
        ax.axhline(float(attrs["target"]), color="grey", ls="--", lw=1, label="target")
    if attrs.get("question") == axis:
        ax.axvline(float(attrs["answer"]), color="black", ls=":", lw=1, label=f"answer {float(attrs['answer']):.4g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(axis)
    ax.set_ylabel(str(ds["error"].attrs.get("long_name", "error")))
    ax.set_title(wrap_title(plan_title(ds), 6.0, 12.0))  # a long setting must not run past the figure's edges
    ax.legend(fontsize="small")
    return fig


def plan_title(ds: xr.Dataset) -> str:
    """The plan's method, mechanism and estimator, then its fixed settings: eps, users, the domain.

    E.g. "simulation: krr, inv-p | ε = 1, domain integers 0..99".
    """
    attrs = ds.attrs
    head = f"{attrs.get('method', '')}: {attrs.get('setting_mechanism', '')}, {attrs.get('setting_estimator', '')}"
    fixed = []
    if "eps" in attrs:
        fixed.append(f"ε = {float(attrs['eps']):g}")
    if "users" in attrs:
        fixed.append(f"n = {int(attrs['users']):,}")
    domain = domain_text(str(attrs.get("setting_domain", "")))
    if domain:
        fixed.append(f"domain {domain}")
    return " | ".join([head, ", ".join(fixed)] if fixed else [head])


def domain_text(spec: str) -> str:
    """A domain's spec (as the plan stores it, a dict's text) in words: "integers 0..99", "grid 16 × 24"."""
    try:
        domain = ast.literal_eval(spec)
    except (ValueError, SyntaxError):
        return spec
    if not isinstance(domain, dict):
        return spec
    kind = domain.get("kind", "")
    if kind == "integers":
        return f"integers {domain.get('low')}..{domain.get('high')}"
    if kind == "grid":
        unit = f" {domain['unit']}" if domain.get("unit") else ""
        return f"grid {domain.get('rows')} × {domain.get('cols')} of {domain.get('cell', 1)}{unit} cells"
    if kind == "categorical":
        return f"{len(domain.get('labels', []))} categories"
    return str(kind)
