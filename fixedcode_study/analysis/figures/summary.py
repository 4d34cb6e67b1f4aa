"""Summary figures from final values: downstream (lm-eval) bars and final metric vs a numeric sweep axis."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import ticker

from .style import (
    FigureFile,
    human_number,
    legend_outside,
    line_kwargs,
    log_axis,
    new_figure,
    save,
    series_styles,
)
from .curves import (
    context_title,
    ordered_contexts,
    variant_order,
    variant_styles,
)
from ..stats.grouping import (
    FINAL_METRICS,
    context_columns,
    context_mask,
    metric_title,
)
from ..tables.reference import CHANCE, PAPER, eval_references
from ..read.variants import LEARNED, PROP_PREFIX, variant_label


def _error(row) -> float:
    """Std over seeds when n >= 2, else lm-eval's stderr (NaN draws no bar)."""
    return row["std"] if row["n"] >= 2 else row["stderr"]


def eval_bar_figure(study, summary: pd.DataFrame, out_dir: Path) -> FigureFile | None:
    """`summary`: the report's seed summaries (results.Results.summary); the downstream metrics are drawn."""
    summary = summary[summary["metric"].astype(str).str.contains("/")] if len(summary) else summary  # task/metric
    if summary.empty:
        return None
    context = context_columns(study.jobs)
    metrics = sorted(summary["metric"].unique())
    contexts = ordered_contexts(study)
    variants = [v for v in variant_order(study) if v in set(summary["variant"])]
    styles = variant_styles(study)
    refs = eval_references(metrics)
    paper_variants = [v for v in dict.fromkeys(refs.loc[refs["source"] == PAPER, "variant"])] if not refs.empty else []
    width = 0.8 / max(len(variants), len(paper_variants), 1)
    groups = len(contexts) + (1 if paper_variants else 0)
    fig, axes = new_figure(len(metrics), panel_width=max(3.3, 0.9 * groups * len(variants) / 2))
    for ax, metric in zip(axes, metrics, strict=True):
        rows = summary[summary["metric"] == metric]
        for i, variant in enumerate(variants):
            xs, ys, errs = [], [], []
            for x, key in enumerate(contexts):
                hit = rows[(rows["variant"] == variant) & context_mask(rows, context, key)]
                if not hit.empty:
                    xs.append(x + (i - (len(variants) - 1) / 2) * width)
                    ys.append(hit["mean"].iloc[0])
                    errs.append(_error(hit.iloc[0]))
            style = styles[variant]
            ax.bar(xs, ys, width, yerr=np.nan_to_num(errs, nan=0.0), capsize=2, label=variant,
                   color=style["color"], hatch=style["hatch"], edgecolor="white" if i == 0 else "black",
                   linewidth=0.5, error_kw={"elinewidth": 0.8, "ecolor": "#888888"})
        labels = [context_title(context, k) for k in contexts]
        if paper_variants:
            labels.append("paper's 1.7B\n(reference)")
            _reference_bars(ax, refs[refs["metric"] == metric], paper_variants, len(contexts), width, styles)
        _chance_line(ax, refs[refs["metric"] == metric] if not refs.empty else refs)
        ax.set_xticks(range(groups), labels)
        ax.set_ylabel(metric_title(metric))
        ax.grid(axis="x", visible=False)
    legend_outside(fig, axes)
    caption = ("Downstream (lm-eval) metrics per input variant. Bar: mean over seeds; error bar: sample std over "
               "seeds when n ≥ 2, lm-eval's stderr when n = 1. Arrows give the better direction."
               + (" Right of the dotted line, hollow bars: the paper's own results for its 1.7B models "
                  "(reference only, another scale; ≈ and a range bar mark approximate values)." if paper_variants else "")
               + (" Grey dotted line: chance level (reference)." if not refs.empty and (refs["source"] == CHANCE).any()
                  else ""))
    return save(fig, out_dir, "eval_metrics", caption)


def _reference_bars(ax, refs: pd.DataFrame, paper_variants: list[str], x0: int, width: float, styles: dict) -> None:
    """The paper's numbers as hollow bars in the matching variant's colour, behind a dotted divider."""
    if not (refs["source"] == PAPER).any():
        return
    ax.axvline(x0 - 0.5, color="#888888", linestyle=":", linewidth=0.8)
    first = True
    for i, variant in enumerate(paper_variants):
        hit = refs[(refs["source"] == PAPER) & (refs["variant"] == variant)]
        if hit.empty or not np.isfinite(hit["mid"].iloc[0]):
            continue
        r = hit.iloc[0]
        x = x0 + (i - (len(paper_variants) - 1) / 2) * width
        color = styles.get(variant, {}).get("color", "#888888")
        half = (r["high"] - r["low"]) / 2
        ax.bar([x], [r["mid"]], width, yerr=[half] if half > 0 else None, capsize=2, facecolor="white",
               edgecolor=color, hatch="////", linewidth=1.0, error_kw={"elinewidth": 0.8, "ecolor": color},
               label="paper's 1.7B results (reference)" if first else "_nolegend_")
        first = False
        if r["approx"]:
            ax.annotate("≈", (x, r["high"]), ha="center", va="bottom", fontsize=7)


def _chance_line(ax, refs: pd.DataFrame) -> None:
    if refs.empty:
        return
    chance = refs[(refs["source"] == CHANCE) & np.isfinite(refs["mid"])]
    for value in chance["mid"].unique():
        ax.axhline(value, color="#777777", linestyle=(0, (1, 1)), linewidth=1.0, label="chance level (reference)")


@dataclass(frozen=True)
class SweepAxis:
    column: str      # jobs column holding the x value
    prop: str        # input prop the axis corresponds to (excluded from the series key)
    label: str
    stem: str
    log_x: bool
    ticks_at_data: bool = False   # few discrete values (e.g. widths 8/16/32): label exactly those


CODE_WIDTH = SweepAxis("code_width", PROP_PREFIX + "code_width", "code width (bits)", "final_vs_code_width",
                       True, ticks_at_data=True)
SCALE = SweepAxis(PROP_PREFIX + "scale", PROP_PREFIX + "scale", "code scale", "final_vs_scale", True)
MODEL_SIZE = SweepAxis("params.total", "", "total parameters", "final_vs_model_params", True)


def _determined_by_axis(jobs: pd.DataFrame, prop: str, axis: str) -> bool:
    return jobs.groupby(axis, dropna=False)[prop].nunique(dropna=False).max() <= 1


def series_labels(study, axis: SweepAxis) -> pd.Series:
    """Series = same model, input and non-axis design props; the axis varies along a series."""
    jobs = study.included_jobs
    labels = pd.Series(index=jobs.index, dtype=object)
    multi_ctx = len(ordered_contexts(study)) > 1 and axis is not MODEL_SIZE
    for input_name, group in jobs.groupby("input", sort=False):
        props = [p for p in study.label_props.get(input_name, [])
                 if p != axis.prop and not (axis.column in group and _determined_by_axis(group, p, axis.column))]
        for idx, row in group.iterrows():
            label = variant_label(input_name, row, props)
            labels[idx] = (f"{row['model']} · " if multi_ctx else "") + label
    return labels


def sweep_points(study, axis: SweepAxis) -> pd.DataFrame:
    """Mean/std of each final metric per (series, axis value); empty when the axis never varies."""
    jobs = study.included_jobs
    if axis.column not in jobs:
        return pd.DataFrame()
    if axis is MODEL_SIZE:
        if jobs["model"].nunique() < 2:
            return pd.DataFrame()
        series = jobs["variant"]
    else:
        jobs = jobs[jobs["input"] != LEARNED]
        series = series_labels(study, axis).loc[jobs.index]
    jobs = jobs.assign(series=series, x=pd.to_numeric(jobs[axis.column], errors="coerce")).dropna(subset=["x"])
    if jobs.empty or jobs.groupby("series")["x"].nunique().max() < 2:
        return pd.DataFrame()
    finals = [f"final.{m}" for m in FINAL_METRICS if f"final.{m}" in jobs]
    if axis is MODEL_SIZE:
        # x is each (model, variant) row's own mean size: fixed codes have fewer parameters than learned.
        grouped = jobs.groupby(["series", "model"], sort=False)
    else:
        grouped = jobs.groupby(["series", "x"], sort=False)
    agg = grouped[finals].agg(["mean", "std", "count"])
    agg.columns = [f"{m}|{stat}" for m, stat in agg.columns]
    agg = agg.reset_index()
    if axis is MODEL_SIZE:
        agg["x"] = grouped["x"].mean().values
    return agg.sort_values(["series", "x"])


def sweep_figure(study, axis: SweepAxis, out_dir: Path) -> FigureFile | None:
    agg = sweep_points(study, axis)
    if agg.empty:
        return None
    metrics = [m for m in FINAL_METRICS if f"final.{m}|mean" in agg]
    if axis is MODEL_SIZE:  # series are variants: keep the table's order so learned stays black
        series = [v for v in variant_order(study) if v in set(agg["series"])]
        styles = variant_styles(study)  # same colour per variant as the curve figures
    else:
        series = list(dict.fromkeys(agg["series"]))
        styles = series_styles([LEARNED] + series)
    fig, axes = new_figure(len(metrics))
    for ax, metric in zip(axes, metrics, strict=True):
        for name in series:
            part = agg[agg["series"] == name]
            ax.errorbar(part["x"], part[f"final.{metric}|mean"], yerr=part[f"final.{metric}|std"].fillna(0),
                        capsize=2, label=name, **line_kwargs(styles[name]))
        if axis is not MODEL_SIZE:
            _learned_reference(ax, study, metric)
        if axis.log_x and agg["x"].max() >= 10 * agg["x"].min() > 0:  # log only when it spans a decade
            log_axis(ax, "x")
        if axis.ticks_at_data:
            values = sorted(agg["x"].unique())
            ax.set_xticks(values, [f"{v:g}" for v in values])
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        if ax.get_xscale() != "log":
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(human_number))
        ax.set_xlabel(axis.label)
        ax.set_ylabel(f"final {metric_title(metric)}")
    legend_outside(fig, axes)
    caption = (f"Final validation metrics vs {axis.label}. Point: mean over seeds; error bar: sample std over seeds "
               f"(none with one seed). Each line keeps model, input type and other design props fixed"
               + ("; horizontal dashed line: learned baseline mean per model." if axis is not MODEL_SIZE else
                  "; x is the total parameter count of that variant on that model preset."))
    return save(fig, out_dir, axis.stem, caption)


def _learned_reference(ax, study, metric: str) -> None:
    column = f"final.{metric}"
    learned = study.included_jobs[study.included_jobs["input"] == LEARNED]
    if column not in learned:
        return
    for model, value in learned.groupby("model")[column].mean().items():
        ax.axhline(value, color="#000000", linestyle="--", linewidth=1.0, label=f"learned ({model})")


def sweep_figures(study, out_dir: Path) -> list[FigureFile]:
    made = [sweep_figure(study, axis, out_dir) for axis in (CODE_WIDTH, SCALE, MODEL_SIZE)]
    return [f for f in made if f is not None]
