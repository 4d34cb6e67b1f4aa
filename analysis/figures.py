"""Training-curve figures: validation perplexity and smoothed training loss vs training tokens.

Seeds of one variant are aligned by the logged token count; the line is their mean and the
shaded band spans min-max over seeds (stated in each caption). Token counts <= 0 are dropped
because the x axis is logarithmic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.figstyle import BAND_ALPHA, FigureFile, line_kwargs, log_axis, new_figure, save, series_styles
from analysis.grouping import context_columns, context_mask, model_rank

DEFAULT_EMA_ALPHA = 0.1
# More points than this per line are invisible at print size but slow to draw and bloat PDFs.
MAX_POINTS_PER_LINE = 1000
UNIGRAM_STYLE = {"color": "#7f7f7f", "linestyle": (0, (1, 1)), "linewidth": 1.2}


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


def included_curve(study, metric: str) -> pd.DataFrame:
    long = study.long
    curve = long[long["included"].astype(bool) & (long["kind"] == "curve") & (long["metric"] == metric)]
    return curve[np.isfinite(curve["value"]) & (curve["tokens"] > 0)]


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
        ax.plot(agg.index, agg["mean"], label=f"{variant} (n={n_seeds})",
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
    variants = variant_order(study)
    styles = series_styles(variants)
    fig, axes = new_figure(len(contexts))
    for ax, key in zip(axes, contexts, strict=True):
        _plot_band_lines(ax, curve[context_mask(curve, context, key)], variants, styles)
        if unigram:
            _unigram_line(ax, study, context, key)
        log_axis(ax, "x")
        if log_y:
            log_axis(ax, "y")
        ax.set_xlabel("training tokens")
        ax.set_ylabel(ylabel)
        ax.set_title(context_title(context, key))
        ax.legend(frameon=False)
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
               "token count; band: min–max over seeds; n = seeds per variant. "
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
               f"bias-corrected at the start). Line: mean over seeds; band: min–max over seeds.")
    return save(fig, out_dir, "train_loss", caption)
