"""Bad input on the product-domain surfaces: one line naming the field and the fix, exit code 2, nothing written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ldpsim.output.cli import app

runner = CliRunner()

GOOD_ATTRIBUTES = """attributes = [
  { name = "sex", kind = "categorical", values = ["F", "M"] },
  { name = "age", kind = "integers", low = 0, high = 3 },
]"""


def scenario(
    attributes: str = GOOD_ATTRIBUTES, report: str = '{ mechanism = "spl", eps = 1.0 }', estimators: str = '"mle"'
) -> str:
    return f"""name = "bad"
seed = 1
users = 1000
repetitions = 1
estimators = [{estimators}]
metrics = ["tv"]

[domain]
kind = "product"
{attributes}

[dataset]
name = "uniform"

[cohorts.everyone]
share = 1
reports = [{report}]
"""


CASES = {
    "a name used twice": (
        scenario(
            'attributes = [{ name = "a", kind = "integers", low = 0, high = 2 }, { name = "a", kind = "integers", low = 0, high = 2 }]'
        ),
        ("domain.attributes.1.name", "used twice", "its own name"),
    ),
    "one attribute": (
        scenario('attributes = [{ name = "a", kind = "integers", low = 0, high = 2 }]'),
        ("domain.attributes", "at least two attributes"),
    ),
    "a product too large": (
        scenario(
            "attributes = ["
            + ", ".join(f'{{ name = "a{j}", kind = "integers", low = 0, high = 999 }}' for j in range(3))
            + "]"
        ),
        ("1,000,000,000", "marginals only"),
    ),
    "a mechanism not for the attribute": (
        scenario(report='{ mechanism = "spl", eps = 1.0, local = "geometric" }'),
        ("attribute 'sex'", "categorical"),
    ),
    "per_attribute of the wrong length": (
        scenario(report='{ mechanism = "spl", eps = 1.0, per_attribute = [{ mechanism = "krr" }] }'),
        ("per_attribute", "one table per attribute"),
    ),
    "a tuple protocol on one attribute": (
        scenario(
            attributes="",
        ).replace('kind = "product"', 'kind = "integers"\nlow = 0\nhigh = 3'),
        ("spl", "product"),
    ),
    "marginals without a tuple protocol": (
        scenario(report='{ mechanism = "krr", eps = 1.0 }', estimators='"marginals"'),
        ("marginals", "tuple-protocol"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_tuple_scenarios_exit_2_in_one_line(case, tmp_path):
    text, expected = CASES[case]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = tmp_path / "out.nc"
    result = runner.invoke(app, ["run", str(path), "-o", str(out), "--executor", "serial"])
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in result.output, message
    for part in expected:
        assert part in message, message
    assert not out.exists() and not list(tmp_path.glob("out.nc*"))


def test_check_mechanism_refuses_a_bad_product_domain():
    result = runner.invoke(
        app, ["check", "mechanism", "spl", "--domain", "product:a=integers:0..2;a=integers:0..1", "-p", "eps=1"]
    )
    assert result.exit_code == 2 and "used twice" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_figures_of_a_product_show_each_attributes_marginal(tmp_path):
    """summary and bar draw a panel per attribute (the marginals); a heatmap is refused in one line."""
    import ldpsim
    from ldpsim.results.io import save_results

    ds = ldpsim.run_scenario(
        {
            "seed": 1,
            "users": 2000,
            "repetitions": 2,
            "domain": {
                "kind": "product",
                "attributes": [
                    {"name": "sex", "kind": "categorical", "values": ["F", "M"]},
                    {"name": "cell", "kind": "grid", "rows": 2, "cols": 2},
                ],
            },
            "dataset": {"name": "zipf"},
            "cohorts": {"all": {"reports": [{"mechanism": "spl", "eps": 2.0}]}},
            "estimators": ["ibu", "marginals"],
            "metrics": ["tv", "marginal-tv"],
        }
    )
    path = tmp_path / "r.nc"
    save_results(ds, path)
    for kind in ("summary", "bar"):
        out = tmp_path / f"{kind}.png"
        result = runner.invoke(app, ["plot", str(path), "-o", str(out), "--kind", kind])
        assert result.exit_code == 0 and out.stat().st_size > 10_000, result.output
    from ldpsim.output.plotting import bar_figure

    fig = bar_figure(ds)
    axes = [ax for ax in fig.axes if ax.get_xlabel()]
    assert [ax.get_xlabel() for ax in axes] == ["sex", "cell"]
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["(0,0)", "(0,1)", "(1,0)", "(1,1)"]
    result = runner.invoke(app, ["plot", str(path), "-o", str(tmp_path / "h.png"), "--kind", "heatmap"])
    assert result.exit_code == 2 and "product" in result.stderr and not (tmp_path / "h.png").exists()
