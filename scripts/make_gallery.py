"""The docs' gallery: figures of the shipped scenarios, run small and drawn by ``ldpsim plot``.

Each figure is made the way a user would make it: ``ldpsim run scenarios/NAME.toml --set
repetitions=2 ...`` then ``ldpsim plot`` (the scenario's own ``[plot]`` table, or the options
listed), and stored as a 256-colour PNG (a third of matplotlib's size; the figures are flat
colours). The script also writes the gallery page, docs/gallery/index.md, from the same list,
so page and figures agree. The PNGs are checked in; tests/test_docs.py checks that every
figure's scenario exists and regenerates the cheapest one.

    python scripts/make_gallery.py                          # every figure and the page
    python scripts/make_gallery.py --only quickstart --out DIR   # one figure, into DIR
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "docs" / "gallery"
#: largest PNG kept in the repository, in bytes
MAX_BYTES = 150_000
#: widest PNG kept, in pixels (wider ones are halved)
MAX_WIDTH = 2_000


@dataclass(frozen=True)
class Figure:
    """One gallery figure: a shipped scenario, run small, and how to draw it."""

    name: str  # scenarios/NAME.toml, docs/gallery/NAME.png
    title: str
    caption: str
    settings: tuple[str, ...] = ()  # --set KEY=VALUE besides repetitions=2
    plot: tuple[str, ...] = ()  # ldpsim plot options besides the scenario's [plot] table

    @property
    def scenario(self) -> Path:
        """The shipped scenario file."""
        return ROOT / "scenarios" / f"{self.name}.toml"

    def run_args(self, output: str) -> list[str]:
        """``ldpsim run`` arguments writing the results to ``output``."""
        sets = [arg for kv in ("repetitions=2", *self.settings) for arg in ("--set", kv)]
        return ["run", f"scenarios/{self.name}.toml", "-o", output, *sets, "--executor", "serial", "--quiet"]

    def plot_args(self, results: str, figure: str) -> list[str]:
        """``ldpsim plot`` arguments drawing ``results`` into ``figure``."""
        return ["plot", results, "-o", figure, *self.plot]


#: the gallery, cheapest first (the test regenerates the first)
FIGURES = (
    Figure(
        "quickstart",
        "Quickstart: IBU against matrix inversion (001 Fig. 2)",
        "10^5 users on 0..99 through the truncated geometric mechanism, eps = 0.1: the errors of IBU, "
        "INV-N and INV-P over the repetitions, and the estimates of one repetition beside the truth "
        "(`plot`'s default `summary`).",
    ),
    Figure(
        "001-fig9-gowalla-planar-geometric",
        "Gowalla check-ins in San Francisco, planar geometric (001 Fig. 9)",
        "The true distribution of check-ins on a 16 x 24 grid of 0.5 km cells, the noisy reports of the "
        "planar geometric mechanism at eps = 1/km, and the IBU, INV-N and INV-P estimates on one colour "
        "scale (`heatmap`, as the scenario's `[plot]` table says).",
    ),
    Figure(
        "004-fig1-adult-ages-geometric",
        "Adult ages, truncated geometric (004 Fig. 1)",
        "The ages of the 48,842 persons of UCI Adult, their noisy reports at eps = 0.05 and the estimates "
        "over them (`bar`).",
    ),
    Figure(
        "001-fig10-gowalla-planar-geometric",
        "Planar geometric over eps: TV and EMD (001 Fig. 10)",
        "The errors of IBU and the inversions on the Gowalla grid as eps grows, a box per estimator (`box`).",
    ),
    Figure(
        "002-fig5-binary-lip-vs-ldp",
        "Binary LIP against LDP (002 Fig. 5)",
        "The mean squared error of a binary survey under eps-LIP and eps-LDP mechanisms, a curve per "
        "model, a panel per prior, log scale (`line`, with the scenario's `hue`, `col` and `yscale`).",
    ),
    Figure(
        "longitudinal-switch",
        "Estimates over ten rounds (longitudinal-switch)",
        "Users report in ten rounds (here 10,000 of them; the scenario has 30,000), two thirds switching "
        "mechanism halfway: GIBU on each user's whole sequence improves with every round, per-round IBU "
        "and inversion do not (`line` against `round`).",
        settings=("users=10000",),
        plot=("--kind", "line", "--sweep", "round"),
    ),
    Figure(
        "coverage",
        "Coverage of 95 % intervals, styled for a paper (coverage)",
        "Do the MLE's and INV-P's intervals hold the truth 95 % of the time? 27 sweep points (mechanism, "
        "eps, n): coverage as points with binomial intervals beside the nominal level, TV as the mean with "
        "a band (past 12 points boxes crowd), the estimates at the first, middle and last point; "
        "`--style paper --width page` gives a two-column paper's fonts at 7 inches (with `-o figure.pdf`, "
        "vector output).",
        plot=("--style", "paper", "--width", "page"),
    ),
)


def ldpsim_command() -> list[str]:
    """The ``ldpsim`` script of this Python's environment (else the one on PATH)."""
    beside = Path(sys.executable).with_name("ldpsim")
    found = str(beside) if beside.exists() else shutil.which("ldpsim")
    if found is None:
        raise SystemExit("make_gallery: the ldpsim command is not installed (pip install -e .)")
    return [found]


def make(figure: Figure, out: Path) -> Path:
    """Run and draw one figure; store it as ``out/NAME.png`` (256 colours) and return its path."""
    command = ldpsim_command()
    with tempfile.TemporaryDirectory() as tmp:
        results, drawn = str(Path(tmp) / "results.nc"), str(Path(tmp) / "figure.png")
        for args in (figure.run_args(results), figure.plot_args(results, drawn)):
            done = subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"make_gallery: `ldpsim {' '.join(args)}` failed:\n{done.stderr}")
        target = out / f"{figure.name}.png"
        with Image.open(drawn) as image:
            rgb = image.convert("RGB")
            if rgb.width > MAX_WIDTH:  # a paper-style figure's 300 dpi: halved, the page shows it at half anyway
                rgb = rgb.resize((rgb.width // 2, rgb.height // 2), Image.Resampling.LANCZOS)
            rgb.quantize(colors=256).save(target, optimize=True)
    size = target.stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"make_gallery: {target} is {size:,} bytes, more than {MAX_BYTES:,}")
    return target


def page() -> str:
    """The gallery page, docs/gallery/index.md, for ``FIGURES``."""
    parts = [
        "# Gallery\n\n"
        "Figures of the shipped scenarios, each run small (2 repetitions) and drawn by `ldpsim plot`, "
        "exactly as below from the repository root. `python scripts/make_gallery.py` remakes them all "
        "and this page; the full-size runs and their numbers are in [the reproductions](../reproductions.md) "
        "and the [user guide](../guide/command-line.md).\n"
    ]
    for figure in FIGURES:
        run = " ".join(["ldpsim", *figure.run_args(f"{figure.name}.nc")])
        draw = " ".join(["ldpsim", *figure.plot_args(f"{figure.name}.nc", f"{figure.name}.png")])
        parts.append(
            f"\n## {figure.title}\n\n{figure.caption} The scenario: "
            f"[scenarios/{figure.name}.toml](../../scenarios/{figure.name}.toml).\n\n    {run}\n    {draw}\n\n"
            f"![{figure.title}]({figure.name}.png)\n"
        )
    return "".join(parts)


def main(argv: list[str] | None = None) -> None:
    """Make the figures asked for (all by default) and, for all of them, the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=[f.name for f in FIGURES], help="one figure (repeatable)")
    parser.add_argument("--out", type=Path, default=GALLERY, help="folder of the PNGs (default docs/gallery)")
    parser.add_argument("--jobs", type=int, default=2, help="figures made at once (default 2)")
    args = parser.parse_args(argv)
    figures = [f for f in FIGURES if args.only is None or f.name in args.only]
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for target in pool.map(lambda f: make(f, args.out), figures):
            print(f"wrote {target} ({target.stat().st_size / 1000:.0f} kB)")
    if args.only is None and args.out == GALLERY:
        (GALLERY / "index.md").write_text(page())
        print(f"wrote {GALLERY / 'index.md'}")
    print(f"{len(figures)} figures in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
