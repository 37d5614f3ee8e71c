"""The look of every figure, in one place: fonts, colours, widths, axis scales, titles.

Two styles: ``default`` (screen-sized figures, matplotlib's fonts) and ``paper`` (fonts of a two-column
paper, 8 pt text and 7 pt ticks, thin lines, fonts embedded as text in PDF and SVG). Any figure can be
set to a column's width (3.5 in) or a page's (7 in); the format follows the output file's suffix, so
``-o fig.pdf`` gives vector output. Every plot kind draws inside :func:`styled` and takes its colours
from :func:`colour`, so one policy holds for all of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import textwrap
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base.errors import LdpsimError

if TYPE_CHECKING:
    pass

#: the styles of ``ldpsim plot --style``
STYLES = ("default", "paper")
#: figure widths of a two-column paper, in inches (``--width column`` or ``page``)
WIDTHS = {"column": 3.5, "page": 7.0}
#: axis scales of ``--xscale`` and ``--yscale``
SCALES = ("linear", "log", "symlog")
#: a numeric sweep axis whose positive values span at least this many decades gets a log x axis by default
LOG_DECADES = 2.0
#: colours of hues, in order (matplotlib's tab10: distinct in print and for the common colour blindnesses)
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: matplotlib settings of each style (on top of matplotlib's defaults)
RC: dict[str, dict[str, Any]] = {
    "default": {"axes.prop_cycle": None},
    "paper": {
        "axes.prop_cycle": None,
        "font.size": 8,
        "axes.titlesize": 8,
        "axes.labelsize": 8,
        "figure.titlesize": 9,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 7,
        "legend.title_fontsize": 7,
        "axes.linewidth": 0.6,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "lines.linewidth": 1.0,
        "lines.markersize": 3.5,
        "patch.linewidth": 0.6,
        "boxplot.flierprops.markersize": 2,
        "pdf.fonttype": 42,  # TrueType: text stays text (selectable, editable) in the PDF
        "svg.fonttype": "none",
        "figure.constrained_layout.h_pad": 0.02,
        "figure.constrained_layout.w_pad": 0.02,
    },
}
#: resolution of raster output per style, in dots per inch (vector output ignores it)
DPI = {"default": 120, "paper": 300}


def pyplot():
    """``matplotlib.pyplot``, imported only when a figure is drawn; Agg unless a backend is chosen (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def colour(k: int) -> str:
    """The colour of the ``k``-th hue (estimator, mechanism, ...), the same in every kind of figure."""
    return PALETTE[k % len(PALETTE)]


def check_style(style: str) -> str:
    """``style`` if it is one of :data:`STYLES`.

    Raises
    ------
    LdpsimError
        Naming ``--style`` and the styles there are.
    """
    if style not in STYLES:
        raise LdpsimError(f"unknown style '{style}'", field="--style", hint="choose " + " or ".join(STYLES))
    return style


def figure_width(width: str | float | None) -> float | None:
    """Inches from ``column`` (3.5), ``page`` (7) or a number of inches; None: the figure's own width.

    Raises
    ------
    LdpsimError
        For another word or a width that is not positive.
    """
    if width is None:
        return None
    if isinstance(width, str) and width in WIDTHS:
        return WIDTHS[width]
    try:
        inches = float(width)
    except ValueError:
        inches = float("nan")
    if not inches > 0:
        raise LdpsimError(f"unknown width '{width}'", field="--width", hint="write column, page or inches, e.g. 5")
    return inches


#: the width the figure being drawn must have (None: its own), set by :func:`styled`
_WIDTH: contextvars.ContextVar[float | None] = contextvars.ContextVar("ldpsim_figure_width", default=None)


@contextlib.contextmanager
def styled(style: str, width: float | None = None) -> Iterator[None]:
    """Draw inside this to get ``style``'s fonts, lines and colours (text takes its size when created), and
    figures ``width`` inches wide (:func:`figure_size`), so that layouts are worked out at the final size."""
    from cycler import cycler

    settings = {**RC[check_style(style)], "axes.prop_cycle": cycler(color=list(PALETTE))}
    token = _WIDTH.set(width)
    try:
        with pyplot().rc_context(settings):
            yield
    finally:
        _WIDTH.reset(token)


def figure_size(width: float, height: float) -> tuple[float, float]:
    """A figure's size: its own (``width``, ``height``), or the width :func:`styled` asks for, the height
    scaled along but never below 60 % of its own (fonts do not shrink with the figure: a wide summary
    shrunk to a column keeps room for its panels' text)."""
    wanted = _WIDTH.get()
    if wanted is None:
        return width, height
    return wanted, max(height * wanted / width, min(height * 0.6, 1.6 * wanted))


def points(setting: str) -> float:
    """The current style's font size of an rc ``setting`` ("xtick.labelsize"), in points."""
    from matplotlib.font_manager import FontProperties

    return float(FontProperties(size=pyplot().rcParams[setting]).get_size_in_points())


def check_scale(scale: str | None, option: str) -> str | None:
    """``scale`` if it is one of :data:`SCALES` (None: automatic).

    Raises
    ------
    LdpsimError
        Naming the option and the scales there are.
    """
    if scale is not None and scale not in SCALES:
        raise LdpsimError(f"unknown scale '{scale}'", field=option, hint="choose " + ", ".join(SCALES))
    return scale


def auto_xscale(values: Sequence[Any] | np.ndarray) -> str:
    """``log`` for numbers > 0 that span at least :data:`LOG_DECADES` decades (n = 300, 3000, 30000), else ``linear``."""
    array = np.asarray(values)
    if array.size < 2 or not np.issubdtype(array.dtype, np.number):
        return "linear"
    numbers = array.astype(float)
    if not np.all(numbers > 0):
        return "linear"
    return "log" if np.log10(numbers.max() / numbers.min()) >= LOG_DECADES else "linear"


def wrap_title(text: str, width_inches: float, fontsize: float = 14.4) -> str:
    """``text`` broken into lines that fit ``width_inches`` (a figure's title is never clipped).

    Lines break first between the `` | ``-separated parts, then between words.
    """
    chars = max(20, int(width_inches * 72 / (0.55 * fontsize)))  # an average character is ~0.55 em wide
    lines: list[str] = []
    for part in text.split(" | "):
        if lines and len(lines[-1]) + 3 + len(part) <= chars:
            lines[-1] += " | " + part
        else:
            lines.extend(textwrap.wrap(part, chars) or [part])
    return "\n".join(lines)


def set_ylabel(ax: Any, label: str) -> None:
    """A y label wrapped to the panel's height, so that a long metric name does not run into the title."""
    ax.set_ylabel("\n".join(textwrap.wrap(label, 32)) if len(label) > 32 else label)


def title_points() -> float:
    """The current style's figure title size, in points (:func:`wrap_title` needs it)."""
    return points("figure.titlesize")
