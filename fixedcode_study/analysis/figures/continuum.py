"""The input continuum: each arm's gap to the baseline against its trainable input parameters.

It draws results/continuum.py's rows (the comparison rows, copied) and computes nothing: the point
is Δ = arm − baseline, the bar its 95% CI, the x its trainable input parameters on a log axis. An arm
with none cannot sit on a log axis, so a narrow panel left of a broken axis holds the "0" arms. The
marker tells the two kinds of trainable input apart (open square: no token-specific parameter, a
shared map or nothing; filled circle: token-specific parameters, one row per ID); the colour and the
thin line are the model context. Each point carries its arm's number (the legend names it): ten arm
names at two contexts would cover each other. Arms at the same x are spread a little sideways so no
bar hides another.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker

from ..stats.grouping import metric_title
from .style import PALETTE, FigureFile, human_number, legend_outside, plt, save

STEM = "input_continuum"
SHARED_MARKER, SPECIFIC_MARKER = "s", "o"
SPREAD_DECADES = 0.035    # sideways step between arms at one x on the log panel, in decades
SPREAD_ZERO = 0.16        # the same on the zero panel, whose x runs from -1 to 1
BREAK_MARK = 0.015        # half-size of the diagonal break marks, in axes coordinates
WIDTHS = [1, 7]           # the zero panel and the log panel


def _series_labels(frame: pd.DataFrame, context: list[str]) -> pd.Series:
    if not context:
        return pd.Series("all runs", index=frame.index)
    return frame[context].astype(str).agg(" · ".join, axis=1)


def _spread(frame: pd.DataFrame) -> pd.Series:
    """Each row's sideways slot among the rows at the same x: 0 alone, else centred around 0."""
    slot = frame.groupby("x", sort=False).cumcount()
    size = frame.groupby("x", sort=False)["x"].transform("size")
    return slot - (size - 1) / 2


def _draw(ax, rows: pd.DataFrame, x: np.ndarray, color: str, numbers: dict[str, int]) -> None:
    for xi, row in zip(x, rows.itertuples(index=False), strict=True):
        shared_only = row.token_specific == 0
        if math.isfinite(row.ci_low) and math.isfinite(row.ci_high):
            ax.plot([xi, xi], [row.ci_low, row.ci_high], color=color, linewidth=1.2, zorder=2)
        ax.plot([xi], [row.delta], marker=SHARED_MARKER if shared_only else SPECIFIC_MARKER, color=color,
                markerfacecolor="white" if shared_only else color, markersize=5, linestyle="none", zorder=3)
        ax.annotate(str(numbers[row.variant]), (xi, row.delta), xytext=(3, 1), textcoords="offset points",
                    fontsize=6, color=color)


def _break_marks(zero_ax, log_ax, widths: list[int]) -> None:
    """The broken-axis diagonals at the join of the two panels (matplotlib's broken-axis example); the
    narrow panel's are stretched by the width ratio so both sides slant alike."""
    d = BREAK_MARK
    for ax, x, stretch in ((zero_ax, 1.0, widths[1] / widths[0]), (log_ax, 0.0, 1.0)):
        for y in (0.0, 1.0):
            ax.plot((x - d * stretch, x + d * stretch), (y - d, y + d), transform=ax.transAxes, color="#000000",
                    clip_on=False, linewidth=0.8)


def continuum_figure(frame: pd.DataFrame, context: list[str], baseline: str, out_dir: Path) -> FigureFile | None:
    """`frame`: results/continuum.py's rows; `context`: the context columns that vary (series labels)."""
    if frame.empty:
        return None
    frame = frame.assign(x=frame["input_trainable"].astype(float), series=_series_labels(frame, context),
                         ci_low=frame["ci_low"].astype(float), ci_high=frame["ci_high"].astype(float))
    frame = frame.assign(slot=_spread(frame))
    zero, positive = frame[frame["x"] == 0], frame[frame["x"] > 0]
    panels = [p for p in (zero, positive) if not p.empty]
    ratios = WIDTHS if len(panels) == 2 else [1]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4, 3.4), sharey=True, squeeze=False,
                             width_ratios=ratios)   # no wspace: save()'s tight_layout spaces the panels
    axes = list(axes.flat)
    zero_ax = axes[0] if not zero.empty else None
    log_ax = axes[-1] if not positive.empty else None
    colors = {s: PALETTE[1 + i % (len(PALETTE) - 1)] for i, s in enumerate(dict.fromkeys(frame["series"]))}
    numbers = {v: i for i, v in enumerate(dict.fromkeys(frame.sort_values("variant_order", kind="stable")["variant"]),
                                          start=1)}
    for series, color in colors.items():
        if zero_ax is not None:
            rows = zero[zero["series"] == series]
            _draw(zero_ax, rows, (rows["slot"] * SPREAD_ZERO).to_numpy(), color, numbers)
        if log_ax is not None:
            rows = positive[positive["series"] == series].sort_values("x", kind="stable")
            x = (rows["x"] * 10 ** (rows["slot"] * SPREAD_DECADES)).to_numpy()
            log_ax.plot(rows["x"], rows["delta"], color=color, linewidth=0.7, alpha=0.6, zorder=1)
            _draw(log_ax, rows, x, color, numbers)
        axes[-1].plot([], [], color=color, linewidth=1.2, label=series)
    margin = pd.to_numeric(frame["margin"], errors="coerce").dropna()
    for ax in axes:
        if len(margin):
            ax.axhspan(-float(margin.iloc[0]), float(margin.iloc[0]), color="#DDDDDD", zorder=0)
        ax.axhline(0.0, color="#000000", linewidth=0.8, zorder=1)
    if len(margin):
        axes[-1].fill_between([], [], color="#DDDDDD", label=f"equivalence margin ±{float(margin.iloc[0]):g}")
    axes[-1].plot([], [], marker=SHARED_MARKER, color="#555555", markerfacecolor="white", linestyle="none",
                  label="no token-specific parameter")
    axes[-1].plot([], [], marker=SPECIFIC_MARKER, color="#555555", linestyle="none", label="token-specific parameters")
    for variant, number in numbers.items():
        axes[-1].plot([], [], marker=f"${number}$", color="#555555", linestyle="none", label=str(variant))
    if zero_ax is not None:
        zero_ax.set_xlim(-1.0, 1.0)
        zero_ax.set_xticks([0.0])
        zero_ax.set_xticklabels(["0"])
        zero_ax.grid(axis="x", visible=False)
    if log_ax is not None:
        log_ax.set_xscale("log")
        low, high = positive["x"].min(), positive["x"].max()
        log_ax.set_xlim(low / 3.0, high * 3.0)
        log_ax.xaxis.set_major_locator(ticker.LogLocator(base=10))
        log_ax.xaxis.set_major_formatter(ticker.FuncFormatter(human_number))
        log_ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    if zero_ax is not None and log_ax is not None:
        zero_ax.spines["right"].set_visible(False)
        log_ax.spines["left"].set_visible(False)
        log_ax.tick_params(axis="y", left=False)
        _break_marks(zero_ax, log_ax, WIDTHS)
    axes[0].set_ylabel(f"Δ {metric_title(frame['metric'].dropna().iloc[0])} = arm − {baseline}")
    axes[-1].set_xlabel("trainable input parameters (log scale; 0 left of the break)")
    legend_outside(fig, axes[-1:])
    caption = (f"The final Δ = arm − {baseline} (95% CI of each comparison's own test, paired over seeds; the numbers "
               f"are the comparisons table's, drawn as given: table `{STEM}`) against the arm's trainable input "
               "parameters on a log axis; the arms with none sit at the 0 left of the break. Open square: no "
               "token-specific parameter (a shared map over a fixed code, or nothing trainable); filled circle: "
               "token-specific parameters (one row per token ID). One colour per model context, its arms joined in "
               f"order of their parameters; {baseline} itself is at Δ = 0 by definition; grey band: the equivalence "
               "margin. The number beside a point names its arm (legend); a point without a bar has no interval (fewer than "
               "two seeds on a side). Arms at the same x are spread sideways.")
    return save(fig, out_dir, STEM, caption)
