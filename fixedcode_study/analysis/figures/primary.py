"""The figure that answers a study's question: its primary comparisons as interval estimates.

A forest plot in rliable's shape (`plot_interval_estimates`): one row per primary comparison (and
per comparison context: a panel per comparison when there are several contexts), the point its Δ,
the bar its 95% CI, the marker its verdict, the shaded band the equivalence margin. It draws the
comparison rows it is given (stats/comparisons.py) and computes nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..stats.equivalence import BETTER, EQUIVALENT, EQUIVALENT_NONZERO, INCONCLUSIVE, WORSE
from ..stats.grouping import metric_title
from .style import FigureFile, legend_outside, new_figure, save

STEM = "primary_comparisons"
# verdict -> (colour, marker, filled): colour-blind-safe (Paul Tol), and the marker alone tells them apart
VERDICT_STYLE = {WORSE: ("#CC6677", "v", True), BETTER: ("#332288", "^", True), EQUIVALENT: ("#117733", "D", True),
                 EQUIVALENT_NONZERO: ("#117733", "D", True), INCONCLUSIVE: ("#777777", "o", False)}
OTHER_STYLE = ("#000000", "s", False)   # identical, n/a: no interval to draw


def primary_figure(rows: pd.DataFrame, context: list[str], out_dir: Path) -> FigureFile | None:
    """`rows`: the primary comparison rows; `context`: the context columns that vary (row labels)."""
    if rows.empty:
        return None
    several = bool(context) and rows[context].drop_duplicates().shape[0] > 1
    panels = list(dict.fromkeys(rows["comparison"])) if several else [None]
    height = max(1.6, 0.24 * (rows[context].drop_duplicates().shape[0] if several else len(rows)) + 1.0)
    fig, axes = new_figure(len(panels), panel_width=3.4, height=height, ncols_max=3)
    for ax, comparison in zip(axes, panels, strict=True):
        part = rows if comparison is None else rows[rows["comparison"] == comparison]
        labels = (part[context].astype(str).agg(" · ".join, axis=1) if several else part["comparison"]).tolist()
        measures = part["metric"].nunique() > 1   # a family on several measures: each row names its own
        if measures:
            labels = [f"{label}, {metric_title(m)}" for label, m in zip(labels, part["metric"], strict=True)]
        y = np.arange(len(part))[::-1]
        for yi, row in zip(y, part.itertuples(index=False), strict=True):
            color, marker, filled = VERDICT_STYLE.get(row.verdict, OTHER_STYLE)
            if math.isfinite(row.ci_low) and math.isfinite(row.ci_high):
                ax.plot([row.ci_low, row.ci_high], [yi, yi], color=color, linewidth=1.4)
            ax.plot([row.delta], [yi], marker=marker, color=color, markerfacecolor=color if filled else "white",
                    markersize=5, linestyle="none", label=row.verdict)
        margin = part["margin"].dropna()
        if len(margin):
            ax.axvspan(-float(margin.iloc[0]), float(margin.iloc[0]), color="#DDDDDD", zorder=0,
                       label=f"equivalence margin ±{float(margin.iloc[0]):g}")
        ax.axvline(0.0, color="#000000", linewidth=0.8)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xlabel("Δ = a − b, each row's measure" if measures else f"Δ = a − b, {metric_title(part['metric'].iloc[0])}")
        ax.grid(axis="y", visible=False)
        if comparison is not None:
            ax.set_title(comparison, fontsize=8)
    legend_outside(fig, axes)
    caption = ("The primary comparisons (the comparisons the study declares): Δ = a − b with its 95% CI from the "
               "comparison's own test (paired over seeds with common random numbers, else Welch), the marker its "
               "verdict at α = 0.05 on the Holm-adjusted p over the primary family; grey band: the equivalence "
               "margin. The numbers are the comparisons table's.")
    return save(fig, out_dir, STEM, caption)
