"""The tuning curve: selection metric vs learning rate per arm, with each arm's chosen setting circled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .style import (
    FigureFile,
    legend_outside,
    line_kwargs,
    log_axis,
    new_figure,
    save,
    series_styles,
)
from .curves import context_title, ordered_contexts, variant_families
from ..stats.grouping import context_columns, context_mask, metric_title

LR = "optim.lr"


def tuned_lr_figure(study, grid: pd.DataFrame, out_dir: Path) -> FigureFile | None:
    if grid.empty or LR not in grid or pd.to_numeric(grid[LR], errors="coerce").nunique() < 2:
        return None
    select = grid.attrs["select"]
    context = context_columns(study.jobs)
    contexts = [k for k in ordered_contexts(study) if context_mask(grid, context, k).any()]
    arms = list(dict.fromkeys(grid.sort_values("variant_order", kind="stable")["arm"]))
    families = variant_families(study)
    arm_family = {a: families.get(v) for a, v in zip(grid["arm"], grid["variant"], strict=True)}
    styles = series_styles(arms, arm_family if any(arm_family.values()) else None)
    fig, axes = new_figure(len(contexts))
    for ax, key in zip(axes, contexts, strict=True):
        part = grid[context_mask(grid, context, key)].assign(lr=lambda g: pd.to_numeric(g[LR], errors="coerce"))
        for arm in arms:
            line = part[part["arm"] == arm].sort_values("lr")
            if line.empty:
                continue
            style = styles[arm]
            ax.errorbar(line["lr"], line[f"{select}|mean"], yerr=line[f"{select}|std"].fillna(0), capsize=2,
                        label=arm, **line_kwargs(style))
            best = line[line["chosen"]]
            ax.plot(best["lr"], best[f"{select}|mean"], linestyle="none", marker="o", markersize=10,
                    markerfacecolor="none", markeredgecolor=style["color"], markeredgewidth=1.2)
        if np.nanmax(part["lr"]) >= 4 * np.nanmin(part["lr"]) > 0:
            log_axis(ax, "x")
        ax.set_xlabel("learning rate (optim.lr)")
        ax.set_ylabel(f"final {metric_title(select)}")
        ax.set_title(context_title(context, key))
    legend_outside(fig, axes)
    caption = (f"Tuning curve: final {metric_title(select)} vs learning rate, mean ± sample std over seeds. "
               "Circled: each arm's chosen learning rate (lowest mean); the comparisons use the other validation "
               "half at that learning rate.")
    return save(fig, out_dir, "tuned_lr", caption)
