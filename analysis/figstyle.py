"""Shared figure style: print-readable sizes, Okabe-Ito colours, and a line style + marker per
series so curves stay distinguishable in greyscale and for colour-blind readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # headless: report generation must never need a display
import matplotlib.pyplot as plt
from matplotlib import ticker

# Okabe & Ito (2008) colour-blind-safe palette; black first so the learned baseline is black,
# yellow last because it prints poorly on white.
OKABE_ITO = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
HATCHES = ["", "//", "\\\\", "xx", "..", "--", "++", "oo"]
BAND_ALPHA = 0.18
RC = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 7.5,
      "xtick.labelsize": 8, "ytick.labelsize": 8, "lines.linewidth": 1.6, "lines.markersize": 4.5,
      "axes.grid": True, "grid.alpha": 0.3, "savefig.dpi": 200, "savefig.bbox": "tight",
      "pdf.fonttype": 42}  # embed TrueType so PDFs stay editable/searchable


@dataclass
class FigureFile:
    stem: str
    caption: str
    files: list[Path] = field(default_factory=list)


def style_context():
    """Apply the print style to every figure made inside the ``with`` block (rcParams are read
    when artists are created, so the whole figure must be built inside it)."""
    return plt.rc_context(RC)


def series_styles(names: list[str]) -> dict[str, dict]:
    """Stable style per series name, in the given order (learned first => black solid circles)."""
    return {name: {"color": OKABE_ITO[i % len(OKABE_ITO)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
                   "marker": MARKERS[i % len(MARKERS)], "hatch": HATCHES[i % len(HATCHES)]}
            for i, name in enumerate(names)}


def line_kwargs(style: dict) -> dict:
    return {k: style[k] for k in ("color", "linestyle", "marker")}


def new_figure(n_panels: int, panel_width: float = 3.3, height: float = 2.7, ncols_max: int = 3):
    ncols = min(n_panels, ncols_max)
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n_panels])


def save(fig, out_dir: Path, stem: str, caption: str) -> FigureFile:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    fig.tight_layout()
    for ext in ("png", "pdf"):
        path = out_dir / f"{stem}.{ext}"
        fig.savefig(path)
        files.append(path)
    plt.close(fig)
    return FigureFile(stem, caption, files)


def human_number(value: float, _pos=None) -> str:
    """1.5e6 -> '1.5M': short tick labels that stay legible when printed small."""
    for threshold, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / threshold:g}{suffix}"
    return f"{value:g}"


def log_axis(ax, which: str = "x") -> None:
    """Log scale with plain labels (20k, 1M): 1-2-5 ticks over short ranges, decades over long ones.
    Call after plotting, since the choice depends on the data range."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    low, high = axis.get_data_interval()
    decades = np.log10(high / low) if low > 0 and np.isfinite(high / low) else 0.0
    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2 else (1.0,)))
    axis.set_major_formatter(ticker.FuncFormatter(human_number))
    axis.set_minor_formatter(ticker.NullFormatter())


def legend_above(fig, axes, ncol_max: int = 4) -> None:
    """One legend for the figure, above the panels, so it never hides data."""
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                   ncol=min(ncol_max, len(labels)), frameon=False)
