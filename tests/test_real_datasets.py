"""Real datasets: UCI Adult ages and Gowalla check-ins, shipped and read from their raw formats."""

from __future__ import annotations

import gzip
import io
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import make, shared_data
from hypothesis import given
from hypothesis import strategies as st
from ldpsim_plugins.datasets.gowalla import SF, Box, OutsideBoxWarning
from ldpsim_plugins.datasets.reading import progress
from rich.console import Console
from scipy import stats
from typer.testing import CliRunner

import ldpsim
from ldpsim import DataError, Grid, Integers, ParameterError
from ldpsim.output.cli import app

DATA = Path(__file__).parent / "data"
AGES = Integers(low=17, high=90)
SF_GRID = Grid(rows=16, cols=24, cell=0.5)


def adult(domain=AGES, **params):
    return make("dataset", "adult-ages", domain, **params)


def gowalla(domain=SF_GRID, **params):
    return make("dataset", "gowalla", domain, **params)


# ------------------------------------------------------------------ adult-ages
def test_shipped_adult_ages_are_the_48842_persons():
    ds = adult()
    assert ds.size == 48_842
    assert (ds.distribution() * AGES.values).sum() == pytest.approx(38.6436, abs=5e-5)
    assert ds.counts[0] > 0 and ds.counts[-1] > 0 and (ds.counts > 0).sum() == 74  # ages 17 and 90 occur
    assert "48,842 persons of UCI Adult" in ds.description and "CC BY 4.0" in ds.description


def test_reading_the_shared_adult_ages_gives_the_shipped_counts():
    np.testing.assert_array_equal(adult(path=str(shared_data("adult_ages.csv"))).counts, adult().counts)


def test_raw_uci_files_skip_the_cross_validator_line_and_blank_lines(tmp_path):
    test = adult(Integers(low=0, high=99), path=str(DATA / "adult_sample.test"))
    assert test.size == 3 and test.counts[[25, 28, 38]].tolist() == [1, 1, 1]
    # a folder holding adult.data and adult.test reads both; gzipped files are read as well
    shutil.copy(DATA / "adult_sample.test", tmp_path / "adult.test")
    with gzip.open(tmp_path / "adult.data.gz", "wb") as fh:
        fh.write((DATA / "adult_sample.data").read_bytes())
    both = adult(Integers(low=0, high=99), path=str(tmp_path))
    assert both.size == 6 and np.flatnonzero(both.counts).tolist() == [25, 28, 38, 39, 50] and both.counts[38] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "age,sex\n30,F\nthirty,M\n",
            r"path: '.*' line 3: 'thirty' in column 'age' is not an integer; fix or remove that row",
        ),
        ("age,sex\n30,F\n\n,M\n", r"path: '.*' line 4 has no value in column 'age'; fill or remove that row"),
        ("age,sex\n30.5,F\n", r"line 2: '30.5' in column 'age' is not an integer"),
        (
            "years,sex\n30,F\n",
            r"path: '.*' has no column 'age' \(columns: years, sex\) and is not a raw UCI adult file",
        ),
        ("39, State-gov\n?, Private\n", r"line 2: '\?' in column 'age' is not an integer"),
        ("", r"'.*' is empty; give a file with a header row"),
    ],
)
def test_bad_ages_name_the_line_and_the_fix(tmp_path, text, message):
    bad = tmp_path / "ages.csv"
    bad.write_text(text)
    with pytest.raises(DataError, match=message) as info:
        adult(Integers(low=0, high=99), path=str(bad))
    assert "\n" not in str(info.value)


def test_adult_needs_a_domain_holding_the_ages():
    with pytest.raises(
        ParameterError,
        match=r'domain: .* does not hold the ages 17..90; use \[domain\] kind = "integers", low = 17, high = 90',
    ):
        adult(Integers(low=18, high=99))
    with pytest.raises(ParameterError, match=r"domain: dataset 'adult-ages' does not work on a grid domain"):
        adult(SF_GRID)
    with pytest.raises(DataError, match=r"path: file '.*nowhere.csv' not found"):
        adult(path="nowhere.csv")


def test_without_replacement_users_are_the_population(rng):
    ds = adult()
    everyone = ds.sample(ds.size, rng)
    np.testing.assert_array_equal(np.bincount(everyone, minlength=AGES.size), ds.counts)
    np.testing.assert_array_equal(ds.sample_counts(ds.size, rng), ds.counts)
    with pytest.raises(DataError, match=r"users: asks for 48843 users but the population has 48842 records"):
        ds.sample(ds.size + 1, rng)
    assert adult(replace=True).sample(ds.size + 1, rng).shape == (ds.size + 1,)
    drawn = adult(replace=True).sample_counts(10**6, rng)  # with replacement: iid from the ages' distribution
    keep = ds.counts >= 20
    expected = 10**6 * ds.distribution()[keep]
    assert stats.chisquare(drawn[keep], expected * drawn[keep].sum() / expected.sum()).pvalue > 1e-4


@given(n=st.integers(1, 48_842), seed=st.integers(0, 2**32))
def test_a_sample_without_replacement_never_takes_more_than_there_are(n, seed):
    ds = _ADULT
    drawn = np.bincount(ds.sample(n, np.random.default_rng(seed)), minlength=AGES.size)
    assert drawn.sum() == n and np.all(drawn <= ds.counts)
    counted = ds.sample_counts(n, np.random.default_rng(seed))
    assert counted.sum() == n and np.all(counted <= ds.counts)


_ADULT = make("dataset", "adult-ages", AGES)


def test_a_scenario_on_adult_uses_everyone_and_the_ages_as_prior():
    scenario = {
        "seed": 3,
        "domain": {"kind": "integers", "low": 17, "high": 90},
        "dataset": {"name": "adult-ages"},
        "estimators": ["ibu"],
        "metrics": ["tv"],
        "cohorts": {"all": {"share": 1, "reports": [{"mechanism": "krr", "eps": 2.0}]}},
    }
    ds = ldpsim.run_scenario(scenario)
    assert int(ds["users"]) == 48_842  # users defaults to the population
    np.testing.assert_allclose(ds["truth"].isel(rep=0).values, _ADULT.distribution(), atol=1e-15)


# ------------------------------------------------------------------ gowalla: geometry
def test_the_sf_box_is_8_by_12_km_in_16_by_24_cells():
    height, width = SF.size_km
    assert height == pytest.approx(7.984, abs=1e-3) and width == pytest.approx(11.991, abs=1e-3)
    assert SF.shape(0.5) == (16, 24)
    # the corners: south-west is the first cell, north-east (inclusive) the last
    corners = SF.cells(np.array([SF.lat_min, SF.lat_max]), np.array([SF.lon_min, SF.lon_max]), 0.5)
    assert corners.tolist() == [0, 16 * 24 - 1]


def test_a_box_of_exactly_k_cells_has_k_rows():
    north, east = SF.km_per_degree
    box = Box(10.0, 10.0 + 3.0 / north, 20.0, 20.0 + 5.0 / Box(10.0, 10.0 + 3.0 / north, 0, 1).km_per_degree[1])
    assert box.shape(1.0) == (3, 5)


@given(
    lat=st.floats(-80, 79),
    lon=st.floats(-179, 178),
    height=st.floats(0.01, 1.0),
    width=st.floats(0.01, 1.0),
    cell=st.floats(0.05, 5.0),
    u=st.floats(0, 1),
    v=st.floats(0, 1),
)
def test_every_point_of_a_box_falls_in_the_cell_around_it(lat, lon, height, width, cell, u, v):
    box = Box(lat, lat + height, lon, lon + width)
    rows, cols = box.shape(cell)
    p_lat, p_lon = lat + u * height, lon + v * width
    (index,) = box.cells(np.array([p_lat]), np.array([p_lon]), cell)
    r, c = divmod(int(index), cols)
    assert 0 <= r < rows and 0 <= c < cols
    north, east = box.km_per_degree
    y, x = (p_lat - lat) * north, (p_lon - lon) * east  # km from the south-west corner
    tol = 1e-9 * (1 + y + x)
    assert r * cell - tol <= y <= (r + 1) * cell + tol and c * cell - tol <= x <= (c + 1) * cell + tol


# ------------------------------------------------------------------ gowalla: data
def test_shipped_sf_counts():
    ds = gowalla()
    assert ds.size == 123_094 and (ds.counts > 0).sum() == 334
    assert "123,094" in ds.description and "123,273" in ds.description
    assert "123,094" in type(ds).__doc__ and "123,273" in type(ds).__doc__


def test_reading_the_shared_sf_file_gives_the_shipped_counts():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every row of the shared file is inside the box: no warning
        read = gowalla(path=str(shared_data("gowalla_sf.csv")))
    np.testing.assert_array_equal(read.counts, gowalla().counts)
    assert read.outside == 0


def test_raw_snap_rows_are_gridded_and_those_outside_are_reported(tmp_path):
    with pytest.warns(OutsideBoxWarning, match=r"2 of 6 check-ins in 'gowalla_snap_sample.txt' lie outside the box"):
        ds = gowalla(path=str(DATA / "gowalla_snap_sample.txt"))
    cells = {divmod(int(i), 24): int(n) for i, n in enumerate(ds.counts) if n}
    assert cells == {(0, 0): 1, (1, 0): 1, (0, 1): 1, (15, 23): 1}
    assert ds.outside == 2 and "2 rows outside the box left out" in ds.description
    gz = tmp_path / "checkins.txt.gz"
    with gzip.open(gz, "wb") as fh:
        fh.write((DATA / "gowalla_snap_sample.txt").read_bytes())
    with pytest.warns(OutsideBoxWarning):
        np.testing.assert_array_equal(gowalla(path=str(gz)).counts, ds.counts)


def test_csv_with_named_columns_and_an_explicit_box(tmp_path):
    csv = tmp_path / "points.csv"
    csv.write_text("y,x\n0.1,0.1\n0.1,0.8\n0.85,0.85\n0.9,0.9\n")
    box = {"lat_min": 0, "lat_max": 0.9, "lon_min": 0, "lon_max": 0.9}  # 100 km by 100 km
    ds = gowalla(Grid(rows=2, cols=2, cell=55), path=str(csv), lat_column="y", lon_column="x", cell_km=55, **box)
    assert ds.counts.tolist() == [1, 1, 0, 2]  # the second row and column reach past the box's edges


@pytest.mark.parametrize(
    ("text", "params", "error", "message"),
    [
        (
            "lat,lon\n37.75,-122.45\n",
            {"lat_min": 10, "lat_max": 10.1, "lon_min": 10, "lon_max": 10.1},
            DataError,
            r"path: none of the 1 check-ins of '.*' lies in the box lat 10.0..10.1, lon 10.0..10.1; check the box bounds",
        ),
        (
            "latitude,lon\n37.75,-122.45\n",
            {},
            DataError,
            r"lat_column: '.*' has no column 'lat' \(columns: latitude, lon\); use one of the header names",
        ),
        (
            "lat,lon\n37.75,-122.45\n37.75,-122.45\n123.4,-122.45\n",
            {},
            DataError,
            r"path: '.*' line 4: latitude 123.4 is outside \[-90, 90\]; fix that row, or check that lat_column and lon_column",
        ),
        ("lat,lon\n37.75,-122.45\n37.75,\n", {}, DataError, r"path: '.*' line 3 has no value in column 'lon'"),
        ("lat,lon\n37.75,-122.45\nnorth,-122.45\n", {}, DataError, r"line 3: 'north' in column 'lat' is not a number"),
    ],
)
def test_bad_check_in_files_name_the_row_or_field_and_the_fix(tmp_path, text, params, error, message):
    bad = tmp_path / "checkins.csv"
    bad.write_text(text)
    domain = Grid(rows=23, cols=22, cell=0.5) if params else SF_GRID
    with pytest.raises(error, match=message) as info:
        gowalla(domain, path=str(bad), **params)
    assert "\n" not in str(info.value)


def test_snap_latitude_outside_the_globe_names_the_line(tmp_path):
    bad = tmp_path / "snap.txt"
    bad.write_text("0\t2010-10-19T23:55:27Z\t37.75\t-122.45\t1\n\n0\t2010-10-19T23:55:27Z\t-95\t-122.45\t1\n")
    with pytest.raises(
        DataError, match=r"line 3: latitude -95 is outside \[-90, 90\]; fix that row, or check that the file is SNAP"
    ):
        gowalla(path=str(bad))


@pytest.mark.parametrize(
    ("domain", "params", "message"),
    [
        (
            SF_GRID,
            {"cell_km": 9},
            r"cell_km: a cell of 9 km is larger than the box \(7.98 km by 12 km\); choose cell_km <= 7.98",
        ),
        (
            Grid(rows=24, cols=16, cell=0.5),
            {},
            r'domain: the 24 x 16 grid .* use \[domain\] kind = "grid", rows = 16, cols = 24, cell = 0.5$',
        ),
        (Grid(rows=16, cols=24, cell=1.0), {}, r"rows = 16, cols = 24, cell = 0.5$"),
        (
            Grid(rows=8, cols=12, cell=1.0),
            {"cell_km": 1.0},
            r"path: ldpsim ships only the SF box at 0.5 km cells; give path =",
        ),
        (SF_GRID, {"lat_min": 37.7228}, r"lat_max: a box needs all four bounds; add lat_max, lon_min, lon_max"),
        (
            SF_GRID,
            {"lat_min": 38, "lat_max": 37, "lon_min": 0, "lon_max": 1},
            r"lat_max: lat_min \(38\) must be below lat_max \(37\)",
        ),
        (SF_GRID, {"lat_min": -91}, r"lat_min: must be >= -90"),
        (SF_GRID, {"box": "paris"}, r"box: unknown value 'paris'"),
        (Integers(low=0, high=9), {}, r"domain: dataset 'gowalla' does not work on an integers domain"),
    ],
)
def test_bad_boxes_and_grids_say_what_to_use(domain, params, message):
    with pytest.raises(ParameterError, match=message):
        gowalla(domain, **params)


def test_the_cli_gives_one_line_for_a_grid_that_does_not_match(tmp_path):
    scenario = tmp_path / "sf.toml"
    scenario.write_text(
        'users = 100\nestimators = ["ibu"]\nmetrics = ["emd"]\n[domain]\nkind = "grid"\nrows = 24\ncols = 16\ncell = 0.5\n'
        '[dataset]\nname = "gowalla"\n[cohorts.all]\nshare = 1\nreports = [{ mechanism = "krr", eps = 1.0 }]\n'
    )
    result = CliRunner().invoke(app, ["run", str(scenario), "-o", str(tmp_path / "out.nc")])
    assert result.exit_code == 2 and not (tmp_path / "out.nc").exists()
    assert result.stderr.strip().splitlines() == [
        f"error: {scenario}: dataset.domain: the 24 x 16 grid of 0.5 km cells is not the box's grid (16 x 24 cells of 0.5 km); "
        'use [domain] kind = "grid", rows = 16, cols = 24, cell = 0.5'
    ]


def test_emd_on_the_sf_grid_is_in_km():
    emd = make("metric", "emd")
    sw, ne = np.zeros(SF_GRID.size), np.zeros(SF_GRID.size)
    sw[0], ne[-1] = 1.0, 1.0
    assert emd(sw, ne, SF_GRID) == pytest.approx(math.hypot(15 * 0.5, 23 * 0.5))


# ------------------------------------------------------------------ progress
def test_the_progress_bar_shows_only_after_its_delay(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 1000)
    for after, shown in ((3600.0, False), (0.0, True)):
        screen = io.StringIO()
        console = Console(file=screen, force_terminal=True, width=80)
        with path.open("rb") as raw, progress(path, raw, after=after, console=console) as advance:
            raw.read()
            advance()
        assert ("reading big.txt" in screen.getvalue()) is shown
    quiet = io.StringIO()  # not a terminal: never
    with path.open("rb") as raw, progress(path, raw, after=0.0, console=Console(file=quiet)) as advance:
        advance()
    assert quiet.getvalue() == ""
