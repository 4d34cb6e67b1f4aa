"""Where the gap lives: the final validation gap per bucket of each loss breakdown, with its CI.

One panel per breakdown (stats/breakdown.py rows), buckets along x in their recorded order, one
series per comparison (a − b, nats/token) with the 95% CI of the comparisons' own test as error bars,
slightly offset so the series do not hide each other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..tables.breakdown import PREFIX, title
from .style import FigureFile, legend_outside, new_figure, save, series_styles

STEM = "loss_breakdown"


def breakdown_figure(rows: pd.DataFrame, out_dir: Path) -> FigureFile | None:
    if rows is None or rows.empty:
        return None
    names = list(dict.fromkeys(rows["breakdown"]))
    comparisons = list(dict.fromkeys(rows["comparison"]))
    styles = series_styles(comparisons)
    fig, axes = new_figure(len(names), panel_width=4.2, ncols_max=2)
    width = 0.6 / max(1, len(comparisons))
    for ax, name in zip(axes, names, strict=True):
        part = rows[rows["breakdown"] == name]
        buckets = part.drop_duplicates("bucket").sort_values("bucket")
        x_of = {b: i for i, b in enumerate(buckets["bucket"])}
        for j, comparison in enumerate(comparisons):
            series = part[part["comparison"] == comparison].sort_values("bucket")
            if series.empty:
                continue
            x = np.array([x_of[b] for b in series["bucket"]]) + (j - (len(comparisons) - 1) / 2) * width
            err = np.vstack([series["delta"] - series["ci_low"], series["ci_high"] - series["delta"]])
            style = styles[comparison]
            ax.errorbar(x, series["delta"], yerr=np.nan_to_num(err, nan=0.0), capsize=2, linestyle="none",
                        marker=style["marker"], color=style["color"], markersize=3.5, label=comparison)
        ax.axhline(0.0, color="#000000", linewidth=0.8, zorder=1)
        ax.set_xticks(range(len(buckets)))
        ax.set_xticklabels(buckets["label"], rotation=60 if len(buckets) > 8 else 0, fontsize=7)
        ax.set_ylabel("gap a − b (nats/token)")
        ax.set_title(title(name), fontsize=8)
    legend_outside(fig, axes)
    caption = ("Where the gap lives: the final validation loss gap a − b (nats/token) per bucket of each breakdown "
               "(target token's training frequency, input token's code weight, position in the window; tables "
               f"{', '.join(f'`{PREFIX}{n}`' for n in names)}). Error bar: 95% CI of the comparisons' test (paired "
               "over seeds with common random numbers, else Welch); none with one seed per side. A bucket's weight "
               "in the whole gap is its share column in the tables, not the height here.")
    return save(fig, out_dir, STEM, caption)

