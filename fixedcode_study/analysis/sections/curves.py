"""Curves and gaps: validation perplexity and training loss over tokens, the gap to the baseline over
tokens and per model size, downstream bars, the sweep axes and a tuning curve. The gap figures draw
the estimates of results/curves.py; the curve figures draw the per-job curves themselves."""

from __future__ import annotations

from pathlib import Path

from ..figures import curves as figures
from ..figures import gap as figures_gap
from ..figures import summary as figures_summary
from ..figures import tuned as figures_tuned
from .base import Part, embed

TITLE = "Curves and gaps"
FIGURES = ("val_ppl_vs_tokens", "train_loss", "gap_vs_tokens", "gap_vs_model_size", "eval_metrics",
           "final_vs_code_width", "final_vs_scale", "final_vs_model_params", "tuned_lr")
TABLES: tuple[str, ...] = ()


def build(results, figures_dir: Path) -> Part:
    part = Part()
    if not results.has_jobs:
        return part
    compared, study, baseline = results.compared, results.study, results.options.baseline
    for figure in (figures.val_ppl_figure(compared, figures_dir),
                   figures.train_loss_figure(compared, figures_dir, results.options.ema_alpha),
                   figures_gap.gap_vs_tokens_figure(compared, results.curve_gaps, figures_dir, baseline),
                   figures_gap.gap_vs_size_figure(compared, results.size_gaps, figures_dir, baseline),
                   figures_summary.eval_bar_figure(compared, results.summary, figures_dir),
                   *figures_summary.sweep_figures(study, figures_dir),
                   figures_tuned.tuned_lr_figure(study, results.tuned_grid, figures_dir)
                   if results.tuned_grid is not None else None):
        part.add(figure)
    if part.figures:
        part.lines = [f"## {TITLE}", ""] + [line for figure in part.figures for line in embed(figure)]
    return part
