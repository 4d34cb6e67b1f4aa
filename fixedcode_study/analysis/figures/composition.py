"""The composition section's figures, one per question, each drawing the numbers it is given
(results/composition.py, the tables composition_by_k and composition_path) and computing nothing:

  stitch_figure    the stitched loss minus the members' mean against the block boundary k, per arm,
                   one panel per stitch (identity, affine): the mean over pairs with its 95% t interval
  barrier_figure   the straight path between the two members' weights: the val loss minus the
                   endpoints' line against alpha, per arm, the mean over pairs and the band from the
                   lowest to the highest pair
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .style import BAND_ALPHA, FigureFile, legend_outside, line_kwargs, new_figure, save

STITCH, BARRIER = "composition_stitch", "composition_barrier"
KINDS = ("identity", "affine")


def _series(frame: pd.DataFrame, context: list[str]):
    """(label, style key, rows) per arm (and context where several are shown), in the frame's order."""
    keys = [*context, "variant"]
    for key, rows in frame.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        label = " · ".join(str(k) for k in key)
        yield label, str(key[-1]), rows


def stitch_figure(by_k: pd.DataFrame, context: list[str], styles: dict[str, dict], out_dir: Path) -> FigureFile | None:
    kinds = [k for k in KINDS if k in set(by_k["kind"])]
    if not kinds:
        return None
    fig, axes = new_figure(len(kinds), panel_width=3.4, height=2.8)
    for ax, kind in zip(axes, kinds, strict=True):
        for label, arm, rows in _series(by_k[by_k["kind"] == kind], context):
            rows = rows.sort_values("k")
            style = line_kwargs(styles.get(arm, {"color": "#777777", "linestyle": "-", "marker": "o"}))
            ax.plot(rows["k"], rows["mean"], label=label, **style)
            low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
            if np.isfinite(low).all() and np.isfinite(high).all():
                ax.fill_between(rows["k"], low, high, color=style["color"], alpha=BAND_ALPHA, linewidth=0)
        ax.axhline(0.0, color="#000000", linewidth=0.8)
        ax.set_xticks(sorted(set(by_k["k"])))
        ax.set_xlabel("k (blocks 0..k-1 of a, then blocks k.. of b)")
        ax.set_ylabel("stitched − members' mean (nats)")
        ax.set_title(f"{kind} stitch")
    legend_outside(fig, axes)
    caption = ("What stitching costs at each block boundary k: the stitched model's val loss minus the mean of its two "
               "members' (nats per token, 0 = free), per arm the mean over its pairs with the 95% t interval; left the "
               "identity stitch, right the trained affine one. The primary measure is the mean over k ≥ 1 (k = 0 feeds "
               "a's input to all of b's blocks). The numbers are tables/composition_by_k.csv.")
    return save(fig, out_dir, STITCH, caption)


def barrier_figure(path: pd.DataFrame, context: list[str], styles: dict[str, dict], out_dir: Path) -> FigureFile | None:
    if path.empty:
        return None
    fig, axes = new_figure(1, panel_width=3.8, height=2.8)
    ax = axes[0]
    for label, arm, rows in _series(path, context):
        rows = rows.sort_values("alpha")
        style = line_kwargs(styles.get(arm, {"color": "#777777", "linestyle": "-", "marker": "o"}))
        ax.plot(rows["alpha"], rows["mean"], label=label, **style)
        ax.fill_between(rows["alpha"], rows["low"], rows["high"], color=style["color"], alpha=BAND_ALPHA, linewidth=0)
    ax.axhline(0.0, color="#000000", linewidth=0.8)
    ax.set_xlabel("alpha: (1 − alpha) a + alpha b")
    ax.set_ylabel("val loss − endpoints' line (nats)")
    legend_outside(fig, axes)
    caption = ("The loss barrier: along the straight line between the two members' weights (no alignment of units), "
               "the val loss minus the line between the endpoints' losses (nats per token), per arm the mean over its "
               "pairs and the band from the lowest to the highest pair; the barrier is each path's largest value. "
               "The numbers are tables/composition_path.csv.")
    return save(fig, out_dir, BARRIER, caption)
