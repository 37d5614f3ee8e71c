"""Heavy-hitter scenarios: protocols as plugins, runs over open domains, their results and their bad input."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

import ldpsim
from ldpsim.output.cli import app
from ldpsim.results.found import top_k_score
from ldpsim.results.io import is_results_file, open_results
from ldpsim.testing import check_open_dataset, check_protocol

runner = CliRunner()


def scenario(**changes) -> dict:
    """A small heavy-hitter scenario: 16-bit ids, a Zipf law over 6 of them, two protocols at eps 6."""
    doc = {
        "kind": "heavy-hitters",
        "name": "tiny-hh",
        "seed": 11,
        "users": 20_000,
        "repetitions": 2,
        "top": 3,
        "domain": {"kind": "open", "bits": 16},
        "dataset": {"name": "open-zipf", "exponent": 1.0, "support": 6},
        "protocols": {
            "pem": {"name": "pem", "eps": 6.0, "k": 4},
            "treehist": {"name": "treehist", "eps": 6.0, "k": 4, "step": 2},
        },
        "sweep": {"eps": {"path": ["protocols.pem.eps", "protocols.treehist.eps"], "values": [4.0, 6.0]}},
    }
    doc.update(changes)
    return doc


@pytest.fixture(scope="module")
def tiny() -> xr.Dataset:
    return ldpsim.run_scenario(scenario())


def test_protocols_and_open_datasets_are_plugins_of_their_own_kinds():
    registry = ldpsim.get_registry()
    assert {"pem", "treehist", "sfp"} <= set(registry.names("protocol"))
    assert {"open-zipf", "open-csv"} <= set(registry.names("open_dataset"))
    assert issubclass(registry.get("protocol", "pem").cls, ldpsim.HeavyHitterProtocol)


@pytest.mark.parametrize(
    "name, params",
    [("pem", {}), ("treehist", {}), ("sfp", {"hashes": 64, "buckets": 256})],
    ids=["pem", "treehist", "sfp"],
)
def test_built_in_protocols_keep_the_contract(name, params):
    check_protocol(ldpsim.get_registry().create("protocol", name, eps=2.0, k=8, **params))


def test_built_in_open_datasets_keep_the_contract(tmp_path):
    check_open_dataset(ldpsim.get_registry().create("open_dataset", "open-zipf", support=500))
    csv = tmp_path / "w.csv"
    csv.write_text("w\nx\ny\nx\n")
    check_open_dataset(ldpsim.get_registry().create("open_dataset", "open-csv", path=csv, column="w"), users=None)


class Forgetful(ldpsim.HeavyHitterProtocol):
    """Finds the right item with a made-up frequency order: the check must catch it"""

    name = "forgetful"

    def collect(self, domain, values, rng):
        return values

    def find(self, domain, reports):
        items, counts = np.unique(reports, return_counts=True)
        order = np.argsort(counts)[::-1][: self.k]
        freq = counts[order] / reports.size
        return ldpsim.FoundItems(items[order], freq[::-1], np.full(order.size, np.nan))


def test_the_protocol_check_catches_a_broken_protocol():
    with pytest.raises(AssertionError, match="most frequent down"):
        check_protocol(Forgetful(eps=1.0, k=4))


def test_results_hold_found_items_on_a_rank_dimension_with_their_count(tiny):
    assert tiny.sizes["estimator"] == 2 and tiny.sizes["eps"] == 2 and tiny.sizes["rep"] == 2
    assert list(tiny["estimator"].values) == ["pem", "treehist"]
    found = tiny["found"]
    assert int(found.max()) <= 4 and tiny.sizes["rank"] == int(found.max())  # as long as the longest list
    assert bool((tiny["frequency"].isnull() == (tiny["rank"] >= found)).all())  # NaN exactly past each list
    # an easy problem (6 values, eps >= 4, 20,000 users): the true top 3 found by both, most frequent first
    assert float(tiny["f1"].min()) == 1.0
    assert (np.diff(tiny["frequency"].isel(rank=slice(0, 3)), axis=-1) <= 0).all()


def test_scores_are_the_top_k_of_the_stored_items_against_the_stored_truth(tiny):
    for label in ("pem", "treehist"):
        run = tiny.sel(estimator=label).isel(eps=0, rep=1)
        n = int(run["found"])
        got = top_k_score(
            run["item"].values[:n], run["frequency"].values[:n], run["top_item"].values, run["top_frequency"].values, 3
        )
        assert got.f1 == pytest.approx(float(run["f1"]))
        assert got.frequency_error == pytest.approx(float(run["frequency_error"]))
        # each found item's true frequency is its share among the run's users (the truth's top holds them all here)
        truth = dict(zip(run["top_item"].values.tolist(), run["top_frequency"].values.tolist()))
        for item, share in zip(run["item"].values[:n].tolist(), run["item_truth"].values[:n].tolist()):
            assert share == pytest.approx(truth.get(item, share))


def test_a_protocol_s_reports_do_not_depend_on_the_other_protocols(tiny):
    """Stream 1 + j is protocol j's: dropping the second protocol leaves the first's results as they were."""
    doc = scenario()
    del doc["protocols"]["treehist"]
    doc["sweep"]["eps"]["path"] = ["protocols.pem.eps"]
    alone = ldpsim.run_scenario(doc)
    pem = tiny.sel(estimator=["pem"])
    for name in ("item", "frequency", "f1", "top_item", "top_frequency"):
        np.testing.assert_array_equal(
            alone[name].values, pem[name].values if "estimator" in pem[name].dims else pem[name]
        )


def test_runs_on_worker_processes_equal_the_serial_ones(tiny):
    parallel = ldpsim.run_scenario(scenario(), executor="processes", workers=2)
    for name in ("item", "frequency", "upper", "f1", "top_item", "users"):
        np.testing.assert_array_equal(parallel[name].values, tiny[name].values)


def test_same_seed_same_results_and_another_seed_other_reports(tiny):
    again = ldpsim.run_scenario(scenario())
    np.testing.assert_array_equal(again["frequency"].values, tiny["frequency"].values)
    other = ldpsim.run_scenario(scenario(seed=12))
    assert not np.array_equal(other["frequency"].values, tiny["frequency"].values)


def test_results_round_trip_through_netcdf_with_provenance(tmp_path):
    path = tmp_path / "hh.nc"
    ds = ldpsim.run_scenario(scenario(repetitions=1), output=path)
    assert is_results_file(path)
    back = open_results(path)
    np.testing.assert_array_equal(back["item"].values, ds["item"].values)
    assert back["item"].dtype == np.uint64
    assert back.attrs["kind"] == "heavy-hitters" and back.attrs["seed"] == 11
    assert "protocol:pem" in back.attrs["plugins"] and "open_dataset:open-zipf" in back.attrs["plugins"]


def test_strings_from_a_csv_column_keep_their_names(tmp_path):
    csv = tmp_path / "words.csv"
    csv.write_text("word,n\napple,900\nbanana,500\ncherry,300\ndate,20\nfig,10\n")
    doc = scenario(users=None, repetitions=1, top=3, sweep={})
    doc["dataset"] = {"name": "open-csv", "path": str(csv), "column": "word", "counts": "n"}
    doc["protocols"] = {"pem": {"name": "pem", "eps": 8.0, "k": 4}}
    ds = ldpsim.run_scenario(doc)
    assert list(ds["top_name"].isel(rep=0).values) == ["apple", "banana", "cherry"]
    n = int(ds["found"].isel(estimator=0, rep=0))
    names = list(ds["item_name"].isel(estimator=0, rep=0).values[:n])
    assert names[:3] == ["apple", "banana", "cherry"]
    assert int(ds["users"]) == 1730
    with pytest.raises(ldpsim.LdpsimError, match="output"):  # the results may not overwrite the data they read
        ldpsim.run_scenario(doc, output=csv)
    assert csv.read_text().startswith("word,n")


BAD = [
    ({"domain": {"kind": "integers", "bits": 16}}, "domain.kind"),
    ({"protocols": {"pem": {"name": "pem", "eps": 6.0, "step": 3}}}, "protocols.pem.step"),
    ({"protocols": {"x": {"name": "pems", "eps": 6.0}}}, "pem"),
    ({"protocols": {"pem": {"name": "pem", "eps": -1.0}}}, "protocols.pem.eps"),
    ({"users": None}, "users"),
    ({"cohorts": {}}, "unknown field 'cohorts'"),
    ({"domain": {"kind": "open", "bits": 65}}, "domain.bits"),
]


@pytest.mark.parametrize("change, named", BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_one_line_naming_the_field(change, named):
    doc = scenario(sweep={})
    doc.update(change)
    with pytest.raises(ldpsim.LdpsimError) as info:
        ldpsim.run_scenario(doc)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_cli_bad_scenario_exits_2_with_one_line_and_writes_nothing(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        'kind = "heavy-hitters"\nusers = 100\n[domain]\nkind = "open"\nbits = 32\n[dataset]\nname = "open-zipf"\n'
        '[protocols.pem]\nname = "pem"\neps = 2.0\nstep = 4\n'
    )
    out = tmp_path / "out.nc"
    done = runner.invoke(app, ["run", str(path), "-o", str(out)])
    assert done.exit_code == 2
    assert "protocols.pem.step" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
    checked = runner.invoke(app, ["run", "--dry-run", str(path)])
    assert checked.exit_code == 2 and "heavy-hitter" in checked.stderr and "Traceback" not in checked.stderr
