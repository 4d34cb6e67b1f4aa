"""Training-curve figures: validation perplexity and smoothed training loss vs training tokens.

Seeds of one variant are aligned by the logged token count; the line is their mean and the
shaded band spans min-max over seeds (stated in each caption). Token counts <= 0 are dropped
because the x axis is logarithmic. With more than MAX_ARMS_PER_PANEL arms in a context the
figure becomes small multiples, one panel per family of arms (fixed codes, size-matched codes,
learned-table controls, random-code controls), each with the baseline repeated as a black
reference; the legend sits outside the panels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .style import (
    BAND_ALPHA,
    FigureFile,
    legend_outside,
    line_kwargs,
    log_axis,
    new_figure,
    save,
    series_styles,
)
from ..results.curves import included_curve
from ..stats.grouping import context_columns, context_mask, model_rank

__all__ = ["included_curve", "train_loss_figure", "val_ppl_figure"]   # included_curve: the curves these figures draw

DEFAULT_EMA_ALPHA = 0.1
# More points than this per line are invisible at print size but slow to draw and bloat PDFs.
MAX_POINTS_PER_LINE = 1000
UNIGRAM_STYLE = {"color": "#7f7f7f", "linestyle": (0, (1, 1)), "linewidth": 1.2}
# Above this many arms in one panel the curves and bands crowd each other: split by family.
MAX_ARMS_PER_PANEL = 5


def ordered_contexts(study) -> list[tuple]:
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    rank = model_rank(study.jobs)
    keys = jobs[context].drop_duplicates()
    keys = keys.assign(_r=keys["model"].map(rank)).sort_values(
        [c for c in context if c != "model"] + ["_r"], kind="stable")
    return [tuple(k) for k in keys[context].itertuples(index=False)]


def context_title(context: list[str], key: tuple) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(context, key, strict=True))


def variant_order(study) -> list[str]:
    jobs = study.jobs.sort_values("variant_order", kind="stable")
    return list(dict.fromkeys(jobs["variant"]))


def variant_families(study) -> dict[str, str]:
    jobs = study.jobs
    if "family" not in jobs:
        return {}
    return dict(zip(jobs["variant"], jobs["family"], strict=True))


def variant_styles(study) -> dict[str, dict]:
    """One style per variant for every figure of a report: colour and marker by order, line style by family."""
    return series_styles(variant_order(study), variant_families(study) or None)


def seeds_caption(study) -> str:
    """'n = 3 seeds per variant' or the per-variant counts when they differ."""
    jobs = study.included_jobs
    counts = jobs.groupby(context_columns(study.jobs) + ["variant"], dropna=False)["run"].count()
    if counts.nunique() == 1:
        n = int(counts.iloc[0])
        return f"n = {n} seed{'s' if n != 1 else ''} per variant"
    per_variant = counts.groupby(level="variant", sort=False).agg(lambda c: "/".join(map(str, sorted(set(c)))))
    order = [v for v in variant_order(study) if v in per_variant.index]
    return "seeds per variant: " + ", ".join(f"{v} {per_variant[v]}" for v in order)


def panel_groups(study, variants: list[str]) -> list[tuple[str, list[str]]]:
    """[(title suffix, variants)]: one group, or one per family with the baseline in each."""
    if len(variants) <= MAX_ARMS_PER_PANEL:
        return [("", variants)]
    families = variant_families(study)
    base = [v for v in variants if families.get(v) == "baseline"][:1]
    groups: dict[str, list[str]] = {}
    for v in variants:
        if v not in base:
            groups.setdefault(families.get(v, "other"), []).append(v)
    return [(family, base + members) for family, members in groups.items()]


def ema_smooth(curve: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Per-run EMA over logged points in step order; adjust=True divides by the summed weights,
    so early points are not biased toward zero (unlike a plain recursive EMA started at 0)."""
    curve = curve.sort_values(["run", "step"], kind="stable")
    smooth = curve.groupby("run", sort=False)["value"].transform(lambda s: s.ewm(alpha=alpha, adjust=True).mean())
    return curve.assign(value=smooth)


def thin_log_spaced(agg: pd.DataFrame, limit: int = MAX_POINTS_PER_LINE) -> pd.DataFrame:
    """Keep at most ``limit`` rows, evenly spaced on the log-x axis, always including the ends.
    Applied after aggregation (and after smoothing), so no logged value is skipped by the statistics."""
    if len(agg) <= limit:
        return agg
    keep = np.unique(np.round(np.geomspace(1, len(agg), limit)).astype(int) - 1)
    return agg.iloc[keep]


def _plot_band_lines(ax, curve: pd.DataFrame, variants: list[str], styles: dict) -> None:
    for variant in variants:
        part = curve[curve["variant"] == variant]
        if part.empty:
            continue
        agg = thin_log_spaced(part.groupby("tokens")["value"].agg(["mean", "min", "max"]))
        n_seeds = part["run"].nunique()
        style = styles[variant]
        ax.plot(agg.index, agg["mean"], label=variant,
                # float markevery spaces markers evenly on screen (also on log x) but can hide
                # every marker of a very short line, so short lines mark every point
                markevery=0.12 if len(agg) > 10 else None, **line_kwargs(style))
        if n_seeds > 1:
            ax.fill_between(agg.index, agg["min"], agg["max"], color=style["color"], alpha=BAND_ALPHA, linewidth=0)


def _curve_figure(study, curve: pd.DataFrame, ylabel: str, log_y: bool, unigram: bool):
    context = context_columns(study.jobs)
    contexts = [k for k in ordered_contexts(study) if context_mask(curve, context, k).any()]
    if not contexts:
        return None
    styles = variant_styles(study)
    panels = []
    for key in contexts:
        part = curve[context_mask(curve, context, key)]
        present = [v for v in variant_order(study) if v in set(part["variant"])]
        panels += [(key, title, members, part) for title, members in panel_groups(study, present)]
    fig, axes = new_figure(len(panels), ncols_max=2 if len(panels) == 4 else 3)
    shared: dict[tuple, object] = {}
    for ax, (key, title, members, part) in zip(axes, panels, strict=True):
        _plot_band_lines(ax, part, members, styles)
        if unigram:
            _unigram_line(ax, study, context, key)
        log_axis(ax, "x")
        if log_y:
            log_axis(ax, "y")
        ax.set_xlabel("training tokens")
        ax.set_ylabel(ylabel)
        ax.set_title(context_title(context, key) + (f"\n{title} vs baseline" if title else ""))
        if title:  # small multiples of one context share the y range so panels compare at a glance
            first = shared.setdefault(key, ax)
            if first is not ax:
                ax.sharey(first)
    legend_outside(fig, axes)
    return fig


def _unigram_line(ax, study, context: list[str], key: tuple) -> None:
    jobs = study.included_jobs
    if "data.unigram_val_ppl" not in jobs:
        return
    values = jobs.loc[context_mask(jobs, context, key), "data.unigram_val_ppl"].dropna().unique()
    for value in values:
        ax.axhline(value, label=f"unigram ppl (val) = {value:.4g}", **UNIGRAM_STYLE)


def val_ppl_figure(study, out_dir: Path) -> FigureFile | None:
    fig = _curve_figure(study, included_curve(study, "val/ppl"), "validation perplexity", True, True)
    if fig is None:
        return None
    jobs = study.included_jobs
    has_unigram = "data.unigram_val_ppl" in jobs and jobs["data.unigram_val_ppl"].notna().any()
    caption = ("Validation perplexity vs training tokens (log–log). Line: mean over seeds at each logged "
               f"token count; band: min–max over seeds; {seeds_caption(study)}. "
               + ("Dotted grey line: perplexity of a unigram model on the validation split "
                  "(results.json data.unigram_val_ppl)." if has_unigram else
                  "No unigram reference line: the runs do not record data.unigram_val_ppl."))
    return save(fig, out_dir, "val_ppl_vs_tokens", caption)


def train_loss_figure(study, out_dir: Path, ema_alpha: float = DEFAULT_EMA_ALPHA) -> FigureFile | None:
    curve = included_curve(study, "train/loss")
    if curve.empty:
        return None
    fig = _curve_figure(study, ema_smooth(curve, ema_alpha), "training loss (EMA-smoothed)", False, False)
    caption = (f"Training loss vs training tokens (log x), each run smoothed with an exponential moving "
               f"average over logged points (alpha = {ema_alpha}, pandas ewm adjust=True, i.e. "
               f"bias-corrected at the start). Line: mean over seeds; band: min–max over seeds; {seeds_caption(study)}.")
    return save(fig, out_dir, "train_loss", caption)
