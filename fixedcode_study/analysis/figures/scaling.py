"""The Scaling figure: the paired gap against training compute, one panel per fixed arm. It draws the
estimates of results/scaling.py (pairs, the gap line's band, predictions) and fits nothing.

Points: one per seed pair (same size, budget and seed), marker by model size. Line: the compute line
on the cell means, gap = c0 + c1 log10 C, with its 95% t band (random-cell model), solid over the
compute observed and dashed beyond it, out to the paper's compute. At the paper's and the earlier
version's compute: each fit's prediction with its interval (the two-factor fit and the law under
both parameter conventions offset sideways so they do not overlap), and the paper's measured gap
on WikiText as a star (another text and tokenizer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import ticker

from ..results.scaling import GAP_LINE, TWO_FACTOR
from ..stats import scaling as sc
from .style import BAND_ALPHA, MARKERS, PALETTE, FigureFile, legend_outside, new_figure, save

STEM = "scaling_gap_vs_compute"
METHOD_STYLE = {(GAP_LINE, ""): ("#000000", "o", 1.0), (TWO_FACTOR, ""): ("#4477AA", "D", 0.55),
                ("law L(N, D)", sc.CHINCHILLA): ("#CC6677", "s", 1.35),
                ("law L(N, D)", sc.KAPLAN): ("#117733", "^", 0.74)}


def scaling_figure(result, out_dir: Path) -> FigureFile | None:
    if result is None or result.pairs.empty:
        return None
    variants = list(dict.fromkeys(result.pairs["variant"]))
    fig, axes = new_figure(len(variants), panel_width=4.2, height=3.2)
    sizes = sorted(result.pairs["model_size"].unique(), key=str)
    for ax, variant in zip(axes, variants, strict=True):
        pairs = result.pairs[result.pairs["variant"] == variant]
        for i, size in enumerate(sizes):
            part = pairs[pairs["model_size"] == size]
            ax.scatter(part["compute"], part["gap"], s=12, marker=MARKERS[i % len(MARKERS)],
                       color=PALETTE[(i + 1) % len(PALETTE)], label=f"pair · {size}", zorder=3)
        preds = result.predictions[result.predictions["variant"] == variant]
        line = result.bands[result.bands["variant"] == variant]
        for extrapolated, style in ((False, "-"), (True, "--")):
            part = line[line["extrapolated"] == extrapolated]
            if part.empty:
                continue
            ax.plot(part["compute"], part["gap"], color="#000000", linestyle=style,
                    label="compute line on cell means (dashed: extrapolated)" if style == "-" else None)
            if np.isfinite(part[["low", "high"]].to_numpy()).all():
                ax.fill_between(part["compute"], part["low"], part["high"], color="#000000", alpha=BAND_ALPHA,
                                linewidth=0)
        for row in preds.itertuples():
            color, marker, shift = METHOD_STYLE[(row.method, row.convention)]
            if np.isfinite(row.gap):
                err = np.array([[row.gap - row.low], [row.high - row.gap]])
                ax.errorbar([row.target_compute * shift], [row.gap], yerr=np.nan_to_num(err, nan=0.0),
                            color=color, marker=marker, capsize=2, linestyle="none",
                            label=f"{row.method}" + (f", N {row.convention}" if row.convention else "")
                            + " at the paper / earlier version")
            if np.isfinite(row.measured_wikitext_gap_bpb):
                ax.scatter([row.target_compute], [row.measured_wikitext_gap_bpb], marker="*", s=90, color="#DDCC77",
                           edgecolor="#000000", zorder=4, label="paper measured (WikiText bpb)")
        for key, compute in preds.drop_duplicates("target")[["target", "target_compute"]].itertuples(index=False):
            ax.axvline(compute, color="#777777", linewidth=0.6, linestyle=":")
            ax.annotate(key, (compute, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=7)
        ax.axhline(0.0, color="#000000", linewidth=0.8)
        ax.set_xscale("log")   # 12+ decades: powers of ten read better than 1e+06T
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, numticks=8))
        ax.xaxis.set_major_formatter(ticker.LogFormatterMathtext())
        ax.set_xlabel("training compute C (FLOPs)")
        ax.set_ylabel(f"final val bpb gap vs {result.baseline}")
        ax.set_title(f"{variant} − {result.baseline}")
    legend_outside(fig, axes)
    caption = (f"Paired final val bpb gap (arm minus {result.baseline}, same seed, size and budget) against training "
               "compute (flops_per_token × tokens seen). Black line: gap = c0 + c1 log10 C fitted to the cell means, band: "
               "its 95% t interval (random-cell model); dashed where it extrapolates beyond the largest compute "
               "observed. Error bars at the paper's and the earlier version's compute (the earlier version's shape and "
               "tokens partly assumed): each fit's prediction, the two-factor fit (log N, log D) and the law's two "
               "parameter conventions drawn left (two-factor, Kaplan) and right (Chinchilla) of the true compute. Star: the paper's measured gap on WikiText (word perplexity converted to bits per "
               "byte), a different text and tokenizer from our validation split.")
    return save(fig, out_dir, STEM, caption)
