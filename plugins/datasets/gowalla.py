"""Gowalla check-ins (SNAP) counted on a grid of square cells over a latitude/longitude box."""

from __future__ import annotations

import math
import multiprocessing
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsim import DataError, Grid, Param, ParameterError, hookimpl

from .counted import Counted, read_shipped
from .reading import Table, numbers

#: mean Earth radius (IUGG), km
EARTH_RADIUS_KM = 6371.0088
PAPER_SF_CHECKINS = 123_273  # 001 Sec. IX-B
SHIPPED = "gowalla_sf_0.5km_counts.csv"
SHIPPED_CELL_KM = 0.5
SNAP_LAT, SNAP_LON = 2, 3  # SNAP columns: user, time, latitude, longitude, location id


class OutsideBoxWarning(UserWarning):
    """Rows of a check-in file outside the box were counted and left out."""


@dataclass(frozen=True)
class Box:
    """A latitude/longitude box, bounds inclusive, and its grid of square cells.

    Degrees become km by the equirectangular projection at the box's
    mid-latitude (y north, x east, from the south-west corner), exact to
    about 0.1 % over a city. Cells are whole squares anchored at the south-west
    corner; rows and columns are the fewest that cover the box, so the last
    row and column may reach past its north and east edges.
    """

    lat_min: float
    lat_max: float
    lon_min: float
    lon_max: float

    @property
    def km_per_degree(self) -> tuple[float, float]:
        """(north, east) km per degree of latitude and of longitude."""
        north = EARTH_RADIUS_KM * math.pi / 180
        return north, north * math.cos(math.radians((self.lat_min + self.lat_max) / 2))

    @property
    def size_km(self) -> tuple[float, float]:
        """(height, width) in km."""
        north, east = self.km_per_degree
        return (self.lat_max - self.lat_min) * north, (self.lon_max - self.lon_min) * east

    def shape(self, cell_km: float) -> tuple[int, int]:
        # a tolerance so that a box of exactly k cells does not get a sliver row
        return tuple(max(1, math.ceil(extent / cell_km - 1e-9)) for extent in self.size_km)  # type: ignore[return-value]

    def inside(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        return (lat >= self.lat_min) & (lat <= self.lat_max) & (lon >= self.lon_min) & (lon <= self.lon_max)

    def cells(self, lat: np.ndarray, lon: np.ndarray, cell_km: float) -> np.ndarray:
        """Row-major cell index (row south to north, column west to east) of points inside the box."""
        rows, cols = self.shape(cell_km)
        north, east = self.km_per_degree
        r = np.minimum(((lat - self.lat_min) * north / cell_km).astype(np.int64), rows - 1)
        c = np.minimum(((lon - self.lon_min) * east / cell_km).astype(np.int64), cols - 1)
        return r * cols + c

    def describe(self) -> str:
        return f"lat {self.lat_min}..{self.lat_max}, lon {self.lon_min}..{self.lon_max}"


SF = Box(37.7228, 37.7946, -122.5153, -122.3789)  # 001 Sec. IX-B, San Francisco


class Gowalla(Counted):
    """Gowalla check-ins (SNAP; Cho, Myers & Leskovec, KDD 2011) counted per cell of a grid over a lat/lon box

    Built in: 001 Sec. IX-B's San Francisco box (lat 37.7228..37.7946, lon
    -122.5153..-122.3789) in 16 x 24 cells of 0.5 km, from 123,094 check-ins,
    179 (0.15 %) fewer than the paper's 123,273 (see the shipped file's
    header). ``path`` grids any box from the raw SNAP file
    (``loc-gowalla_totalCheckins.txt[.gz]``: user, time, lat, lon, location id,
    tab-separated, no header) or a CSV with latitude/longitude columns; check-ins
    outside the box are counted and reported.
    """

    name = "gowalla"
    domain_kinds = ("grid",)
    box = Param("str", None, choices=("sf",), doc='a named box: "sf" (the default when no bounds are given)')
    lat_min = Param("float", None, ge=-90, le=90, doc="southern bound (degrees), with lat_max, lon_min, lon_max")
    lat_max = Param("float", None, ge=-90, le=90, doc="northern bound (degrees)")
    lon_min = Param("float", None, ge=-180, le=180, doc="western bound (degrees)")
    lon_max = Param("float", None, ge=-180, le=180, doc="eastern bound (degrees)")
    cell_km = Param("float", SHIPPED_CELL_KM, gt=0, doc="side of a square cell in km (the grid domain's cell)")
    margin = Param(
        "int",
        0,
        ge=0,
        le=100_000,
        doc="cells of map added on every side of the box, with no check-ins: a map far larger than the data "
        "(004 Sec. 8.3's planar likely subsets); the grid is then (rows + 2 margin) x (cols + 2 margin)",
    )
    path = Param(
        "path",
        None,
        doc="raw SNAP check-ins (.txt or .txt.gz) or a CSV with lat/lon columns; default: the shipped SF counts",
    )
    lat_column = Param("str", "lat", doc="latitude column of a CSV file")
    lon_column = Param("str", "lon", doc="longitude column of a CSV file")

    @property
    def _grid(self) -> Grid:
        """The domain, typed as the grid ``domain_kinds`` makes it."""
        return Grid.of(self.domain)

    def _validate(self) -> None:
        self.area = self._box()
        height, width = self.area.size_km
        if self.cell_km > min(height, width):
            raise ParameterError(
                f"a cell of {self.cell_km:g} km is larger than the box ({height:.3g} km by {width:.3g} km)",
                field="cell_km",
                hint=f"choose cell_km <= {min(height, width):.3g} or a larger box",
            )
        rows, cols = (n + 2 * self.margin for n in self.area.shape(self.cell_km))
        grid = self._grid
        if (grid.rows, grid.cols) != (rows, cols) or not math.isclose(grid.cell, self.cell_km, rel_tol=1e-9):
            raise ParameterError(
                f"the {grid.rows} x {grid.cols} grid of {grid.cell:g} km cells is not the box's grid ({rows} x {cols} cells of {self.cell_km:g} km)",
                field="domain",
                hint=f'use [domain] kind = "grid", rows = {rows}, cols = {cols}, cell = {self.cell_km:g}',
            )
        if self.path is None and (self.area != SF or self.cell_km != SHIPPED_CELL_KM):
            raise ParameterError(
                f"ldpsim ships only the SF box at {SHIPPED_CELL_KM:g} km cells",
                field="path",
                hint="give path = the SNAP check-ins file (loc-gowalla_totalCheckins.txt.gz) to grid another box or size",
            )
        self.outside = 0  # rows of the file outside the box (set when the file is read)
        _ = self.counts  # read and check the data now, not in the middle of a run

    def _box(self) -> Box:
        bounds = {k: getattr(self, k) for k in ("lat_min", "lat_max", "lon_min", "lon_max")}
        given = [k for k, v in bounds.items() if v is not None]
        if not given:
            return SF
        if self.box is not None:
            raise ParameterError("is given together with bounds", field="box", hint=f"remove box or {', '.join(given)}")
        missing = [k for k, v in bounds.items() if v is None]
        if missing:
            raise ParameterError("a box needs all four bounds", field=missing[0], hint=f"add {', '.join(missing)}")
        for low, high in (("lat_min", "lat_max"), ("lon_min", "lon_max")):
            if bounds[low] >= bounds[high]:
                raise ParameterError(
                    f"{low} ({bounds[low]:g}) must be below {high} ({bounds[high]:g})",
                    field=high,
                    hint="swap or fix the bounds",
                )
        return Box(**bounds)

    @property
    def description(self) -> str:
        """Where the counts come from, how many check-ins they hold and how many rows were left out."""
        source = f"'{self.path}'" if self.path is not None else "shipped SNAP counts"
        text = f"{self.size:,} Gowalla check-ins in {self.area.describe()} ({source}), {self._grid.rows} x {self._grid.cols} cells of {self.cell_km:g} km"
        if self.path is None:
            text += f"; 001 Sec. IX-B reports {PAPER_SF_CHECKINS:,} ({PAPER_SF_CHECKINS - self.size} more than this reconstruction of the SNAP subset)"
        if self.margin:
            text += f", the box amid {self.margin} empty cells on every side"
        if self.outside:
            text += f"; {self.outside:,} rows outside the box left out"
        return text

    def _count(self) -> np.ndarray:
        if self.path is None:
            rows, cols, counts = read_shipped(SHIPPED, ["row", "col", "count"])
            cells = (rows + self.margin) * self._grid.cols + cols + self.margin
            return np.bincount(cells, weights=counts, minlength=self.domain.size).astype(np.int64)
        table, columns = self._table(self.path)
        counts = np.zeros(self.domain.size, dtype=np.int64)
        total = 0
        names = self._names(table)
        for start, (lat_text, lon_text) in table.chunks(columns):
            lat = numbers(lat_text, table, start, names[0])
            lon = numbers(lon_text, table, start, names[1])
            for values, limit, label in ((lat, 90, "latitude"), (lon, 180, "longitude")):
                bad = np.abs(values) > limit
                if bad.any():
                    i = int(np.argmax(bad))
                    raise table.error(
                        f"line {table.line_of(start + i)}: {label} {values[i]:g} is outside [-{limit}, {limit}]",
                        f"fix that row, or check that {'lat_column and lon_column' if table.header else 'the file is SNAP check-ins'} name the right columns",
                    )
            inside = self.area.inside(lat, lon)
            row, col = np.divmod(
                self.area.cells(lat[inside], lon[inside], self.cell_km), self._grid.cols - 2 * self.margin
            )
            cells = (row + self.margin) * self._grid.cols + col + self.margin
            counts += np.bincount(cells, minlength=self.domain.size)
            total += lat.size
        if total == 0:
            raise table.error("has no data rows", "give a file of check-ins")
        self.outside = total - int(counts.sum())
        if counts.sum() == 0:
            raise DataError(
                f"none of the {total:,} check-ins of '{self.path}' lies in the box {self.area.describe()}",
                field="path",
                hint="check the box bounds (latitudes first) and the file",
            )
        if self.outside and multiprocessing.parent_process() is None:  # workers reread what the main process reported
            warnings.warn(
                f"gowalla: {self.outside:,} of {total:,} check-ins in '{self.path.name}' lie outside the box {self.area.describe()} and were left out",
                OutsideBoxWarning,
                stacklevel=2,
            )
        return counts

    def _table(self, path: Path) -> tuple[Table, list[int]]:
        """The layout of the file at ``path``: raw SNAP (five tab-separated fields, no header) or a CSV with a header."""
        snap = Table(path, sep="\t", header=False, what="SNAP check-in file")
        first = snap.header_names()
        if len(first) == 5 and all(_is_number(first[i]) for i in (SNAP_LAT, SNAP_LON)):
            return snap, [SNAP_LAT, SNAP_LON]
        csv = Table(path)
        return csv, csv.positions([self.lat_column, self.lon_column], fields=["lat_column", "lon_column"])

    def _names(self, table: Table) -> tuple[str, str]:
        return (self.lat_column, self.lon_column) if table.header else ("latitude", "longitude")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@hookimpl
def register_datasets(register):
    register(Gowalla)
