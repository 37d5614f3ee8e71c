"""Every shipped scenario's default figure, checked by its text: what a reader of the paper sees.

Each scenario runs tiny (one repetition, few users, small domains where the domain does not change
the labels) and its default figure (the ``[plot]`` table, else the summary) is drawn at a column's
width in the paper style. Its text elements (axis labels, titles, legend entries) are held against
what the scenario declares: the sweep axes' ``label``/``units`` (else the fields' long names), the
metrics' long names and units, the estimators' labels; never a field path, "coverage" said once,
the fixed eps in a title.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import xarray as xr

import ldpsim
from ldpsim.base.errors import DataError
from ldpsim.output.plot_options import sweep_axes, with_units
from ldpsim.output.plot_panels import product_attributes
from ldpsim.output.plotting import figure, plot_options, pyplot
from ldpsim.results.labels import axis_long_name
from ldpsim.results.scores import score_names
from ldpsim.running.sweep import parse_axes

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.toml"))
#: further overrides that make a scenario cheap without changing what its figure names
CHEAP = {"frequency-oracles-k1024": {"domain": {"high": 15}}, "frequency-oracles-k128": {"domain": {"high": 15}}}
#: a field path on a figure: "cohorts.everyone.reports.0", "dataset.p"
FIELD_PATH = re.compile(r"\b(cohorts|dataset|estimators|metrics|domain)\.\w|\breports\.\d")


def texts(fig) -> dict[str, list[str]]:
    """The figure's text elements by role."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    figures = [fig, *getattr(fig, "subfigs", [])]
    legends = [leg for f in figures for leg in f.legends] + [ax.get_legend() for ax in axes if ax.get_legend()]
    return {
        "xlabel": [ax.get_xlabel() for ax in axes if ax.get_xlabel()],
        "ylabel": [ax.get_ylabel().replace("\n", " ") for ax in axes if ax.get_ylabel()],
        "title": [ax.get_title() for ax in axes if ax.get_title()],
        "suptitle": [f._suptitle.get_text().replace("\n", " ") for f in figures if f._suptitle is not None],
        "legend": [t.get_text() for leg in legends for t in leg.get_texts()],
        "legend_title": [leg.get_title().get_text() for leg in legends if leg.get_title().get_text()],
        "other": [t.get_text() for ax in axes for t in ax.texts],
    }


def tiny_results(path: Path) -> xr.Dataset:
    """The scenario run tiny: one repetition, 200 users, at most 256 integers, the first, middle and last
    value of each sweep axis (what the figure names stays: the axes, their labels' kind, the metrics)."""
    doc = tomllib.loads(path.read_text())
    doc["repetitions"] = 1
    if "users" in doc:
        doc["users"] = 200
    domain = doc["domain"]
    if domain.get("kind") == "integers" and domain["high"] - domain["low"] >= 256:  # 2^16 leaves: 2^8 do
        domain["high"] = domain["low"] + 255
    for axis in doc.get("sweep", {}).values():
        if len(axis["values"]) > 3:
            keep = [0, len(axis["values"]) // 2, len(axis["values"]) - 1]
            for key in ("values", "labels"):
                if key in axis:
                    axis[key] = [axis[key][i] for i in keep]
    if isinstance(doc["dataset"].get("path"), str):  # a mapping's paths are relative to the current folder
        doc["dataset"]["path"] = str(path.parent / doc["dataset"]["path"])
    for key, value in CHEAP.get(path.stem, {}).items():
        doc[key] = {**doc[key], **value}
    try:
        return ldpsim.run_scenario(doc)
    except DataError as exc:  # a scenario reading data outside the repository
        pytest.skip(f"{path.name}: {exc}")


def declared_axis_labels(doc: dict) -> dict[str, str]:
    """Each sweep axis's label as the scenario declares it (its ``label`` and ``units``, else the field's)."""
    labels = {}
    for axis in parse_axes(doc):
        text = axis.label or axis_long_name(axis)
        labels[axis.name] = f"{text} ({axis.units})" if axis.units else text
    return labels


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_the_default_figure_says_what_the_scenario_declares(path):
    doc = tomllib.loads(path.read_text())
    ds = tiny_results(path)
    options = plot_options(ds, {"style": "paper", "width": "column"})
    fig = figure(ds, **options)
    try:
        seen = texts(fig)
    finally:
        pyplot().close(fig)
    everything = [t for group in seen.values() for t in group]

    # never a field path, anywhere
    assert not [t for t in everything if FIELD_PATH.search(t)], everything

    # the sweep axes are named as declared: on the x axis of error figures, and stored with the results
    declared = declared_axis_labels(doc)
    for name, label in declared.items():  # in the results file too, for figures made from it later
        assert with_units(ds[name].attrs["long_name"], ds[name].attrs.get("units")) == label
    if "round" in ds.dims:  # a run that estimates after every round
        declared["round"] = ds["round"].attrs["long_name"]
    kind = options["kind"]
    value = [with_units("value", ds["value"].attrs.get("units"))] if "value" in ds.coords else []  # "value (years)"
    domain = [name for name, _ in product_attributes(ds) or []] + [*value, "x (km)", "column"]
    if kind in ("summary", "box", "line") and declared:
        x = options.get("sweep") or (sweep_axes(ds)[-1] if kind == "summary" else None)
        if x is not None:
            assert any(xl.startswith(declared[x]) for xl in seen["xlabel"]), (declared[x], seen["xlabel"])
        for xl in seen["xlabel"]:  # no other x label than a declared axis's or the domain's
            assert any(xl.startswith(label) for label in declared.values()) or xl in domain, xl

    # metric panels' y labels are the metrics' long names (and units)
    metrics = {}
    # a heavy-hitter scenario lists no metrics: its scores are the core's (ldpsim.results.found)
    for label in doc.get("metrics") or score_names(ds):
        attrs = ds[label].attrs
        units = attrs.get("units", "")
        metrics[label] = f"{attrs['long_name']} ({units})" if units not in ("", "1") else attrs["long_name"]
    allowed = {"row", "y (km)", *metrics.values()}
    assert all(y in allowed or y.startswith("probability") for y in seen["ylabel"]), (seen["ylabel"], allowed)
    if kind in ("summary", "box", "line"):
        assert set(seen["ylabel"]) & set(metrics.values())

    # legend entries: the estimators, the truth and noisy reports, or combinations of the hues' labels
    words = {"truth", "noisy", *map(str, ds["estimator"].values), *metrics}
    for name in declared:
        words |= {str(v) for v in ds[name].values}
    for entry in seen["legend"]:
        assert set(entry.split(" / ")) <= words, (entry, words)

    # "coverage" once among the titles
    titles = seen["title"] + seen["suptitle"]
    assert sum(t.lower().count("coverage") for t in titles) <= 1, titles

    # a fixed eps is in a title
    cohorts = doc.get("cohorts", {})
    eps = {str(r["eps"]) for c in cohorts.values() for r in c.get("reports", []) if "eps" in r}
    eps |= {str(p["eps"]) for p in doc.get("protocols", {}).values() if "eps" in p}
    fields = [
        f"cohorts.{c}.reports.{i}.eps" for c, spec in cohorts.items() for i in range(len(spec.get("reports", [])))
    ]
    fields += [f"protocols.{label}.eps" for label in doc.get("protocols", {})]
    swept = any(f == p or f.startswith(p + ".") for a in parse_axes(doc) for p in a.paths for f in fields)
    if len(eps) == 1 and not swept:
        fixed = f"ε = {float(next(iter(eps))):g}"
        assert any(fixed in t for t in titles), (fixed, titles)
