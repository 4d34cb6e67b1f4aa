"""The gap estimates the figures draw: over training tokens, and per model size.

- `gap_curves`: per comparison context and variant, variant minus baseline along training
  (stats/pairing.py paired_curve_gap: paired over CRN seeds, else Welch; aligned by training tokens,
  interpolated in log tokens only where the two arms validate on different schedules), with each
  arm's last validation so a figure can say why a line stops early.
- `size_gaps`: the final val bpb comparison rows against the baseline (the report's own comparison
  rows, never recomputed) with the baseline's trainable parameters and training FLOPs per context.
"""

from __future__ import annotations

import pandas as pd

from ..stats.comparisons import VS_BASELINE, resolve
from ..stats.grouping import context_columns, context_mask
from ..stats.pairing import paired_curve_gap

CURVE = "val/bpb"
METRIC = "val_bpb"
GAP_COLUMNS = ["variant", "baseline", "tokens", "gap", "low", "high", "n", "interpolated", "test", "variant_last",
               "baseline_last"]
# A compute ladder's contexts are (model size, token budget): a line across sizes is drawn at one
# budget, and a line across compute at one size, so no line joins points that differ in both.
LADDER_AXES = ("model_size", "train_budget")


def included_curve(study, metric: str) -> pd.DataFrame:
    long = study.long
    curve = long[long["included"].astype(bool) & (long["kind"] == "curve") & (long["metric"] == metric)]
    return curve[pd.to_numeric(curve["value"], errors="coerce").notna() & (curve["tokens"] > 0)]


def gap_curves(study, baseline: str) -> pd.DataFrame:
    """One row per (context, variant, token count): the gap to the baseline with its 95% CI band."""
    curve = included_curve(study, CURVE)
    context = context_columns(study.jobs)
    if curve.empty:
        return pd.DataFrame(columns=context + GAP_COLUMNS)
    jobs = study.included_jobs
    cols = ["run", "seed", "crn", "step", "tokens", "value"]
    out = []
    for key in dict.fromkeys(curve[context].itertuples(index=False, name=None)):
        part = curve[context_mask(curve, context, key)]
        base = resolve(baseline, jobs[context_mask(jobs, context, key) & jobs["run"].isin(part["run"])])
        if base is None:
            continue
        b = part[part["variant"] == base]
        for variant in [v for v in dict.fromkeys(part["variant"]) if v != base]:
            a = part[part["variant"] == variant]
            gap, test = paired_curve_gap(a[cols], b[cols])
            gap = gap[gap["tokens"] > 0]
            if gap.empty:
                continue
            out.append(gap.assign(**dict(zip(context, key, strict=True)), variant=variant, baseline=base, test=test,
                                  variant_last=float(a["tokens"].max()), baseline_last=float(b["tokens"].max())))
    return pd.concat(out, ignore_index=True)[context + GAP_COLUMNS] if out else pd.DataFrame(columns=context + GAP_COLUMNS)


def size_gaps(study, comparisons: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Final val bpb gap per (data, model, variant) with its CI (the comparison rows), and the x values."""
    jobs = study.included_jobs
    if jobs["model"].nunique() < 2 or comparisons.empty:
        return pd.DataFrame()
    context = context_columns(study.jobs)
    bases = {key: resolve(baseline, jobs[context_mask(jobs, context, key)])
             for key in dict.fromkeys(jobs[context].itertuples(index=False, name=None))}
    against = pd.Series([bases.get(key) == b for key, b in zip(comparisons[context].itertuples(index=False, name=None),
                                                               comparisons["variant_b"], strict=True)],
                        index=comparisons.index)
    diffs = comparisons[(comparisons["kind"] == VS_BASELINE) & (comparisons["metric"] == METRIC) & against]
    if diffs.empty:
        return pd.DataFrame()
    jobs = jobs.assign(train_flops=pd.to_numeric(jobs["flops_per_token"], errors="coerce")
                       * pd.to_numeric(jobs["tokens_seen"], errors="coerce"))
    base_jobs = jobs[jobs["variant"].isin(diffs["variant_b"])]
    sizes = base_jobs.groupby(context, dropna=False)[["params.trainable", "train_flops"]].mean()
    ladder = [c for c in LADDER_AXES if c in base_jobs]  # read/ladder.py: the size and budget of a context
    if ladder:
        sizes = sizes.join(base_jobs.groupby(context, dropna=False)[ladder].first())
    return diffs.join(sizes, on=context)
