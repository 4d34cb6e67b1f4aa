"""Where the gap lives, as pictures of the estimates stats/breakdown.py made (nothing is recomputed).

- One heat map per compared breakdown: a row per (context, comparison), a column per bucket, the
  colour the gap a − b (nats/token, diverging around 0); a dot marks a bucket whose BH q < 0.05, a
  hatched cell one too small to be tested, a blank one that has no tokens.
- One figure per own-code profile: each arm's mean loss per bucket of its own code, a panel per
  context, the marker's area the arm's share of the tokens in that bucket.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors

from ..stats.equivalence import ALPHA
from ..tables.breakdown import PREFIX, PROFILE_PREFIX, title
from .style import FigureFile, legend_outside, line_kwargs, new_figure, plt, save

HEAT_CMAP = "RdBu_r"


def _row_label(part: pd.DataFrame, context: list[str]) -> pd.Series:
    where = part[context].astype(str).agg(" · ".join, axis=1) if context else pd.Series("", index=part.index)
    return (where + " · ").where(where != "", "") + part["comparison"]


def breakdown_heatmap(rows: pd.DataFrame, name: str, context: list[str], out_dir: Path) -> FigureFile | None:
    part = rows[rows["breakdown"] == name]
    if part.empty:
        return None
    part = part.assign(_row=_row_label(part, context))
    order = list(dict.fromkeys(part["_row"]))
    buckets = part.drop_duplicates("bucket").sort_values("bucket")
    grid = part.pivot_table(index="_row", columns="bucket", values="delta", aggfunc="first").reindex(
        index=order, columns=buckets["bucket"])
    tested = part.pivot_table(index="_row", columns="bucket", values="tested", aggfunc="first").reindex(
        index=order, columns=buckets["bucket"]).fillna(False).astype(bool)
    q = part.pivot_table(index="_row", columns="bucket", values="q_value", aggfunc="first").reindex(
        index=order, columns=buckets["bucket"])
    values = grid.to_numpy(dtype=float)
    limit = np.nanmax(np.abs(values[tested.to_numpy()])) if tested.to_numpy().any() else np.nanmax(np.abs(values))
    limit = float(limit) if np.isfinite(limit) and limit > 0 else 1.0
    height = max(2.0, 0.28 * len(order) + 1.2)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.42 * len(buckets) + 3.5), height))
    image = ax.imshow(np.ma.masked_invalid(values), cmap=HEAT_CMAP, norm=mcolors.TwoSlopeNorm(0.0, -limit, limit),
                      aspect="auto", interpolation="nearest")
    for (i, j), value in np.ndenumerate(values):
        if not np.isfinite(value):
            continue
        if not tested.iat[i, j]:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="////", edgecolor="#777777",
                                       linewidth=0))
        elif np.isfinite(q.iat[i, j]) and q.iat[i, j] < ALPHA:
            ax.plot(j, i, marker="o", markersize=3, color="#000000", linestyle="none")
    ax.set_xticks(range(len(buckets)))
    ax.set_xticklabels(buckets["label"], rotation=60 if len(buckets) > 8 else 0, fontsize=7)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(order, fontsize=7)
    ax.set_xlabel("bucket")
    ax.grid(False)
    ax.set_title(title(name), fontsize=8)
    fig.colorbar(image, ax=ax, label="gap a − b (nats/token)", shrink=0.8)
    caption = (f"Final validation loss gap a − b (nats/token) {title(name)}: one row per context and comparison, one "
               f"column per bucket (table `{PREFIX}{name}`). Dot: BH q < {ALPHA} over every tested bucket of the report "
               "(exploratory, not a finding); hatched: a bucket below the minimum token count, shown and not tested; "
               "blank: no validation token. The colour scale is symmetric around 0 (red: a is worse).")
    return save(fig, out_dir, f"{PREFIX}{name}", caption)


def profile_figure(profiles: pd.DataFrame, name: str, context: list[str], styles: dict,
                   out_dir: Path) -> FigureFile | None:
    part = profiles[profiles["breakdown"] == name]
    if part.empty:
        return None
    keys = list(dict.fromkeys(part[context].itertuples(index=False, name=None))) if context else [()]
    fig, axes = new_figure(len(keys), panel_width=3.6, ncols_max=4)
    for ax, key in zip(axes, keys, strict=True):
        here = part
        for column, value in zip(context, key, strict=True):
            here = here[here[column] == value]
        for variant, line in here.groupby("variant", sort=False):
            line = line.sort_values("bucket")
            ax.plot(line["lower"], line["mean"], label=variant, markersize=0, **line_kwargs(styles[variant]))
            ax.scatter(line["lower"], line["mean"], s=8 + 400 * line["token_share"], color=styles[variant]["color"],
                       zorder=3)
        ax.set_xlabel("own-code weight (bucket)")
        ax.set_ylabel("mean loss (nats/token)")
        ax.set_title(" · ".join(map(str, key)), fontsize=8)
    legend_outside(fig, axes)
    caption = (f"Final validation loss {title(name)} (table `{PROFILE_PREFIX}{name}`): each arm's mean loss over seeds "
               "per bucket of its own code; marker area: the arm's share of the validation tokens in that bucket. "
               "Two codes put different tokens in a bucket, so the lines are profiles of each arm, not a gap.")
    return save(fig, out_dir, f"{PROFILE_PREFIX}{name}", caption)
