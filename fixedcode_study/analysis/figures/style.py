"""Shared figure style: print-readable sizes, a colour-blind-safe qualitative palette, and a line
style + marker per series so curves stay distinguishable in greyscale and for colour-blind readers.

With many arms (the controls study has 7+), colour alone is not enough: the palette is Paul Tol's
"muted" scheme (9 colours designed to stay distinct for colour-blind readers, no two near-identical
oranges), with black reserved for the baseline; the line style encodes the arm's family (fixed
code, code control, learned-table control, size/compute-matched) and the marker the arm itself.
Legends go outside the axes so they never cover data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # headless: report generation must never need a display
import matplotlib.pyplot as plt
from matplotlib import ticker

from ...record.atomic import atomic_file

# Black first so the baseline is black; then Paul Tol's "muted" colours, ordered so that (a) the
# first seven are pairwise >= 36 apart in CIELAB (Okabe-Ito's orange/vermillion are 33, its two
# blues 26) and (b) in the controls study's family panels (fixedcode_study.analysis.figures.curves.panel_groups) every
# panel's colours are >= 55 apart; the pale sand late because it prints poorly on white; grey last.
PALETTE = ["#000000", "#332288", "#CC6677", "#999933", "#AA4499", "#44AA99", "#117733", "#88CCEE",
           "#882255", "#DDCC77", "#777777"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]
FAMILY_LINESTYLES = {"baseline": "-", "fixed code": "-", "code control": ":", "learned-table control": "-.",
                     "size/compute-matched": "--", "other": (0, (5, 1))}
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]
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


def series_styles(names: list[str], families: dict[str, str] | None = None) -> dict[str, dict]:
    """Stable style per series name, in the given order (baseline first => black solid circles).
    With ``families`` (name -> family) the line style follows the family; else it cycles."""
    styles = {}
    for i, name in enumerate(names):
        family = (families or {}).get(name)
        linestyle = FAMILY_LINESTYLES.get(family, FAMILY_LINESTYLES["other"]) if families else LINESTYLES[i % len(LINESTYLES)]
        styles[name] = {"color": PALETTE[i % len(PALETTE)], "linestyle": linestyle,
                        "marker": MARKERS[i % len(MARKERS)], "hatch": HATCHES[i % len(HATCHES)]}
    return styles


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
    """PNG and PDF, each written atomically (record/atomic.py), then the figure is closed. The PDF carries no
    creation date, so regenerating a report from the same records rewrites the same bytes."""
    files = []
    fig.tight_layout()
    try:
        for ext in ("png", "pdf"):
            path = out_dir / f"{stem}.{ext}"
            with atomic_file(path, "wb") as fh:
                fig.savefig(fh, format=ext, metadata={"CreationDate": None} if ext == "pdf" else None)
            files.append(path)
    finally:
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


# Legend entries for reference lines (not arms) go after the arms.
REFERENCE_LABELS = ("unigram", "chance", "paper", "learned (")


def legend_outside(fig, axes) -> None:
    """One legend for the whole figure, right of the panels, with each label once (panels may
    repeat series) and reference lines last, so it never hides data however many arms there are."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    labels = sorted(seen, key=lambda lab: lab.startswith(REFERENCE_LABELS))  # stable: arms keep their order
    if labels:
        fig.legend([seen[lab] for lab in labels], labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)


def legend_above(fig, axes, ncol_max: int = 4) -> None:
    """One legend for the figure, above the panels, so it never hides data."""
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                   ncol=min(ncol_max, len(labels)), frameon=False)
