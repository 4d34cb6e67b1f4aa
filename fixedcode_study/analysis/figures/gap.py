"""Gap figures: how far each variant trails (or leads) the baseline, in validation bits per byte.
They draw the estimates of results/curves.py and compute none.

1. Gap vs training tokens (gap_curves: stats.pairing.paired_curve_gap per variant, paired
   differences where runs record common random numbers, Welch otherwise), a 95% CI band over seeds.
   Runs are aligned by training tokens, never assumed evenly spaced: where two arms validate on
   different schedules (the isoflop arms), each run is interpolated in log tokens onto the other
   arm's points; the caption says so, and says where a line stops before the variant's own last
   validation (the baseline trained fewer tokens).
2. Gap vs model size / compute for studies over several model presets (size_gaps: the report's own
   final val bpb comparison rows with their 95% CI), against the baseline's trainable parameters
   and, when records carry flops_per_token, training FLOPs (flops_per_token x tokens_seen).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker

from .style import (
    BAND_ALPHA,
    FigureFile,
    human_number,
    legend_outside,
    line_kwargs,
    log_axis,
    new_figure,
    save,
)
from .curves import (
    context_title,
    ordered_contexts,
    panel_groups,
    variant_order,
    variant_styles,
)
from ..read.ladder import tokens_label
from ..stats.grouping import context_columns, context_mask


def _zero_line(ax) -> None:
    ax.axhline(0.0, color="#000000", linewidth=0.8, linestyle="-", zorder=1)


def gap_vs_tokens_figure(study, gaps: pd.DataFrame, out_dir: Path, baseline: str) -> FigureFile | None:
    """`gaps`: results/curves.py gap_curves (the estimates; nothing is recomputed here)."""
    if gaps.empty:
        return None
    context = context_columns(study.jobs)
    styles = variant_styles(study)
    panels = []
    for key in ordered_contexts(study):
        part = gaps[context_mask(gaps, context, key)]
        if part.empty:
            continue
        base = part["baseline"].iloc[0]
        others = [v for v in variant_order(study) if v in set(part["variant"])]
        panels += [(key, title, [v for v in members if v != base], part, base)
                   for title, members in panel_groups(study, [base, *others])]
    panels = [p for p in panels if p[2]]
    if not panels:
        return None
    fig, axes = new_figure(len(panels), ncols_max=2 if len(panels) == 4 else 3)
    tests = set()
    interpolated, stops = False, {}
    shared: dict[tuple, object] = {}
    for ax, (key, title, members, part, base) in zip(axes, panels, strict=True):
        first = shared.setdefault(key, ax)  # panels of one context share the y range
        if first is not ax:
            ax.sharey(first)
        for variant in members:
            gap = part[part["variant"] == variant].sort_values("tokens")
            if gap.empty:
                continue
            tests.add(gap["test"].iloc[0])
            interpolated |= bool(gap["interpolated"].any())
            if gap["tokens"].iloc[-1] < gap["variant_last"].iloc[0]:
                where = context_title(context, key) if len({p[0] for p in panels}) > 1 else ""
                stops[(variant, where)] = _stop_note(variant, where, base, gap)
            style = styles[variant]
            ax.plot(gap["tokens"], gap["gap"], label=variant, markevery=0.12 if len(gap) > 10 else None,
                    **line_kwargs(style))
            ax.fill_between(gap["tokens"], gap["low"], gap["high"], color=style["color"], alpha=BAND_ALPHA, linewidth=0)
        _zero_line(ax)
        log_axis(ax, "x")
        ax.set_xlabel("training tokens")
        ax.set_ylabel(f"val bpb gap vs {base} (bits/byte)")
        ax.set_title(context_title(context, key) + (f"\n{title}" if title else ""))
    legend_outside(fig, axes)
    how = {"paired": "paired differences over seeds (common random numbers)",
           "welch": "Welch intervals over seeds (runs not paired)", "n/a": "no band where a side has one seed"}
    caption = (f"Validation gap vs training tokens: variant minus baseline ({baseline}) in bits per byte (below 0: "
               "the variant's val bpb is the lower). Line: mean gap at each validation point (training tokens) where every run "
               "compared has a value; band: 95% CI over seeds from " + "; ".join(how[t] for t in sorted(tests)) + ".")
    if interpolated:
        caption += (" Where two arms validate at different token counts, each run's val bpb is interpolated linearly "
                    "in log tokens between its own neighbouring validations onto the other arm's points: a model of "
                    "the curve between validations, not a measurement, and the band does not include its error (largest "
                    "where validations are sparse and the curve bends). Points both arms validated at are never "
                    "interpolated and no run is extrapolated, so a line ends at the last validation of the arm that "
                    "trained fewer tokens.")
    if stops:
        caption += " " + " ".join(stops.values())
    return save(fig, out_dir, "gap_vs_tokens", caption)


def _stop_note(variant: str, where: str, base: str, gap: pd.DataFrame) -> str:
    """Why a variant's gap line ends before the variant's own last validation."""
    end = gap["tokens"].iloc[-1]
    why = (f"{base} has no validation beyond it" if gap["baseline_last"].iloc[0] <= end
           else "not every run compared has a value beyond it")
    return (f"{variant}{f' ({where})' if where else ''}: the gap ends at {human_number(end)} tokens, before its "
            f"last validation at {human_number(gap['variant_last'].iloc[0])}, since {why}.")


def _series_column(data: pd.DataFrame, column: str) -> str | None:
    """The context column each line holds fixed on this axis, when the contexts are a ladder."""
    if "train_budget" not in data or data["train_budget"].nunique() < 2:
        return None
    return "train_budget" if column == "params.trainable" else "model_size"


def _series_name(column: str | None, value) -> str:
    if column is None:
        return ""
    return tokens_label(value) if column == "train_budget" else str(value)


def gap_vs_size_figure(study, data: pd.DataFrame, out_dir: Path, baseline: str) -> FigureFile | None:
    """`data`: results/curves.py size_gaps (the report's comparison rows with the x values)."""
    if data.empty or data["model"].nunique() < 2:
        return None
    axes_spec = [(c, label) for c, label in (("params.trainable", "trainable parameters of the baseline"),
                                              ("train_flops", "training FLOPs"))
                 if c in data and np.isfinite(data[c]).any()]
    if not axes_spec:
        return None
    styles = variant_styles(study)
    others = [c for c in context_columns(study.jobs) if c != "model"]
    fig, axes = new_figure(len(axes_spec))
    ladder = False
    for ax, (column, label) in zip(axes, axes_spec, strict=True):
        series = _series_column(data, column)
        ladder |= series is not None
        keys = ["variant_a", *others] + ([series] if series else [])
        fixed_values = sorted(data[series].dropna().unique()) if series else []
        ordered = data.sort_values(series, kind="stable") if series else data  # legend: sizes/budgets ascending
        for (variant, *rest), part in ordered.groupby(keys, sort=False):
            part = part.sort_values(column)
            held = rest.pop() if series else None
            name = variant + (f" · {', '.join(map(str, rest))}" if rest else "")
            kwargs = line_kwargs(styles.get(variant, styles[next(iter(styles))]))
            if series:
                name += f" · {_series_name(series, held)}"
                # one dash pattern per held size or budget, the variant's colour and marker kept
                kwargs["linestyle"] = SERIES_DASHES[fixed_values.index(held) % len(SERIES_DASHES)]
            err = np.vstack([part["delta"] - part["ci_low"], part["ci_high"] - part["delta"]])
            ax.errorbar(part[column], part["delta"], yerr=np.nan_to_num(err, nan=0.0), capsize=2, label=name,
                        **kwargs)
        _zero_line(ax)
        if data[column].max() >= 10 * data[column].min() > 0:
            log_axis(ax, "x")
        else:
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(human_number))
        ax.set_xlabel(label)
        ax.set_ylabel("final val bpb gap (bits/byte)")
    legend_outside(fig, axes)
    caption = (f"Final validation gap (variant minus baseline ({baseline}), bits per byte) per model preset, "
               "against the baseline's trainable parameters"
               + (" and training FLOPs (flops_per_token × tokens seen)" if len(axes_spec) > 1 else "") +
               ". Error bar: 95% CI of the difference from the comparisons' test (paired over seeds when the runs "
               "record common random numbers, else Welch); none with one seed per side."
               + (" A compute ladder: against parameters each line is one token budget, against FLOPs one model "
                  "size (line style), so no line joins points that differ in both." if ladder else ""))
    return save(fig, out_dir, "gap_vs_model_size", caption)


SERIES_DASHES = ("-", "--", ":", "-.")
