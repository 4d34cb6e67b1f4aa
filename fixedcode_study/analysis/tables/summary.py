"""Build the report's summary tables: final metrics, parameters, excluded jobs, per-job values, caveats."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import numfmt
from ..stats.grouping import (
    FINAL_METRICS,
    context_columns,
    metric_title,
    shown_context,
    sort_rows,
)
from .render import Table
from ..stats.core import lower_is_better
from ..read.variants import (
    LEARNED as BASELINE,  # the parameter table's reference: the learned table
)


def metric_decimals(summary: pd.DataFrame) -> dict[str, int]:
    decimals = {}
    for metric, rows in summary.groupby("metric", sort=False):
        spread = np.where(rows["n"] >= 2, rows["std"], rows["stderr"])
        decimals[metric] = numfmt.decimals_for(spread, rows["mean"])
    return decimals


def _best_mask(summary: pd.DataFrame, context: list[str], decimals: dict[str, int]) -> pd.Series:
    """Best mean per context and metric, compared at displayed precision so ties are all marked."""
    shown = summary.apply(lambda r: round(r["mean"], decimals[r["metric"]]), axis=1)
    best = pd.Series(False, index=summary.index)
    for idx in summary.groupby(context + ["metric"], sort=False, dropna=False).groups.values():
        values = shown.loc[idx]
        metric = summary.loc[idx[0], "metric"]
        target = values.min() if lower_is_better(metric) else values.max()
        best.loc[idx] = values == target
    return best


def summary_metrics(summary: pd.DataFrame, evals: bool) -> list[str]:
    """The metrics of one table in table order: the final validation metrics first, evals sorted."""
    present = list(dict.fromkeys(summary["metric"]))
    if evals:
        return sorted(m for m in present if "/" in str(m))
    return [m for m in FINAL_METRICS if m in present]


def summary_table(study, summary: pd.DataFrame, name: str, what: str,
                  metrics: list[str]) -> tuple[Table, dict[str, int], pd.DataFrame]:
    """Mean ± std per (context, variant) and metric, from the report's seed summaries (stats/core.py
    summarize, computed once); bold = best per column within a context. Returns the table,
    per-metric decimals and the summary rows it shows (for reference rows)."""
    context = context_columns(study.jobs)
    summary = summary[summary["metric"].isin(metrics)].copy()
    decimals = metric_decimals(summary)
    summary["cell"] = [numfmt.mean_cell(r.mean, r.std, r.n, r.stderr, decimals[r.metric])
                       for r in summary.itertuples()]
    summary["best"] = _best_mask(summary, context, decimals)
    shown = shown_context(study.jobs)
    row_keys = sort_rows(summary[context + ["variant", "variant_order"]].drop_duplicates(), study.jobs)
    columns = shown + ["input variant"] + [metric_title(m) for m in metrics]
    lookup = summary.set_index(context + ["variant", "metric"])
    rows, bold = [], set()
    for r, key in enumerate(row_keys.itertuples(index=False)):
        key = key._asdict()
        row = [str(key[c]) for c in shown] + [key["variant"]]
        for metric in metrics:
            idx = tuple(key[c] for c in context) + (key["variant"], metric)
            if idx in lookup.index:
                hit = lookup.loc[idx]
                row.append(hit["cell"])
                if hit["best"]:
                    bold.add((r, len(row) - 1))
            else:
                row.append("—")
        rows.append(row)
    caption = (f"{what} per input variant: mean ± sample std over seeds (n seeds); with one seed, "
               "value ± lm-eval stderr. Bold: best per column" + (" within each model" if "model" in shown else "")
               + " (lower is better for ppl/bpb/loss, higher for accuracy).")
    data = sort_rows(summary, study.jobs).drop(columns="variant_order")
    numeric = set(range(len(shown) + 1, len(columns)))
    return Table(name, caption, columns, rows, data, bold, numeric), decimals, summary


def main_table(study, summary: pd.DataFrame) -> tuple[Table, dict[str, int]]:
    """Final validation metrics (val ppl, val bpb); the downstream metrics have their own table."""
    table, decimals, _ = summary_table(study, summary, "main_results", "Final validation metrics",
                                       summary_metrics(summary, evals=False))
    return table, decimals


def params_table(study) -> Table:
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    heads = "output" in jobs and (jobs["output"] != "untied").any()  # an output-head study: show the head too
    counted = ("params.total", "params.trainable", "params.input_trainable",
               *(("params.head_trainable", "params.token_specific_trainable") if heads else ()))
    cols = [c for c in counted if c in jobs]
    grouped = jobs.groupby(context + ["variant", "variant_order", "input"], sort=False, dropna=False)
    data = grouped[cols].first().reset_index() if cols else grouped.size().reset_index()[context + ["variant"]]
    data["n_jobs"] = grouped.size().values
    data["runs"] = grouped["run"].agg(lambda r: ";".join(sorted(r))).values
    if "params.trainable" in data:
        data["params_vary_across_seeds"] = grouped["params.trainable"].nunique().values > 1
        # the baseline variant: the learned input's plain variant (its untied head sorts first)
        learned = (data[data["input"] == BASELINE].sort_values("variant_order", kind="stable")
                   .groupby(context, dropna=False)["params.trainable"].first())
        base = data.set_index(context).index.map(lambda k: learned.get(k, np.nan))
        data["trainable_removed_share"] = 1.0 - data["params.trainable"].to_numpy() / np.asarray(base, dtype=float)
    data = sort_rows(data, study.jobs)
    shown = shown_context(study.jobs)
    head_cols = [c for c in ("params.head_trainable", "params.token_specific_trainable") if c in cols]
    columns = shown + ["input variant", "total params", "trainable", "input-trainable",
                       *(["head-trainable", "token-specific trainable"][:len(head_cols)]), "trainable removed vs learned"]
    baseline_order = data.loc[data["input"] == BASELINE, "variant_order"].min() if (data["input"] == BASELINE).any() else None
    rows = []
    for d in data.to_dict("records"):
        share = d.get("trainable_removed_share", np.nan)
        is_base = d["input"] == BASELINE and d["variant_order"] == baseline_order
        share_text = "baseline" if is_base else (
            "n/a (no learned run)" if not np.isfinite(share) else f"{100 * share:.2f} %")
        rows.append([str(d[c]) for c in shown] + [d["variant"]] +
                    [numfmt.integer(d.get(c, np.nan)) for c in ("params.total", "params.trainable",
                                                                 "params.input_trainable", *head_cols)] + [share_text])
    caption = ("Parameter accounting per variant (from results.json params). Trainable removed = "
               "1 − trainable(variant) / trainable(learned, same model)."
               + (" Head-trainable: the output head's own parameters (a tied head owns none: its table is the "
                  "input's); token-specific: trainable parameters in tensors with a dimension of size V."
                  if head_cols else ""))
    numeric = set(range(len(shown) + 1, len(columns)))
    return Table("params", caption, columns, rows, data.drop(columns=["variant_order"]), set(), numeric)


def excluded_table(study) -> Table:
    excluded = study.excluded_jobs
    data = excluded[["run", "sweep", "job_key", "status", "reason"]].fillna("")
    rows = [[str(v) for v in r] for r in data.itertuples(index=False)]
    return Table("excluded_jobs", "Jobs left out of every table and figure, with their status and error.",
                 ["run", "sweep", "job_key", "status", "reason / error"], rows, data)


def jobs_table(study) -> pd.DataFrame:
    """Per-job values (every number the summaries are computed from), keyed by run path."""
    points = study.long[study.long["kind"].isin(["final", "eval"])]
    wide = points.pivot_table(index="run", columns="metric", values="value", aggfunc="first")
    keep = [c for c in ("run", "sweep", "job_key", "input", "variant", "model", "seed", "data", "code_sha", "status",
                        "included", "reason", "reused_from", "tokens_seen", "params.total", "params.trainable",
                        "params.input_trainable", "data.unigram_val_ppl") if c in study.jobs]
    return study.jobs[keep].merge(wide.reset_index(), on="run", how="left")


def table_notes(study, baseline: str = BASELINE) -> list[str]:
    """Caveats a reader of the tables must see: missing baselines, parameter counts that differ by seed."""
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    notes = []
    if "params.trainable" in jobs:
        varying = jobs.groupby(context + ["variant"], dropna=False)["params.trainable"].nunique()
        for key in varying[varying > 1].index:
            notes.append(f"trainable parameter counts differ between seeds of {key}; the parameter table shows the "
                         "first job's counts (see tables/jobs.csv)")
    mixed: dict[tuple, list[str]] = {}   # the training-code versions -> the contexts trained by all of them
    for key, group in jobs.groupby(context, sort=False, dropna=False):
        codes = group["code_sha"].dropna().unique() if "code_sha" in group else []
        if len(codes) > 1:
            key_ = key if isinstance(key, tuple) else (key,)
            mixed.setdefault(tuple(sorted(codes)), []).append(
                ", ".join(f"{c}={v}" for c, v in zip(context, key_, strict=True)))
        if not ((group["input"] == baseline) | (group["variant"] == baseline)).any():
            key = key if isinstance(key, tuple) else (key,)
            where = ", ".join(f"{c}={v}" for c, v in zip(context, key, strict=True))
            notes.append(f"no completed '{baseline}' run for {where}: no comparison against the baseline there"
                         + (" and no 'trainable removed' share" if baseline == BASELINE else ""))
    for codes, wheres in mixed.items():  # one note per set of versions, however many contexts share it
        where = wheres[0] if len(wheres) == 1 else f"{len(wheres)} contexts ({'; '.join(wheres[:2])}{'; ...' if len(wheres) > 2 else ''})"
        notes.append(f"runs for {where} were trained by {len(codes)} versions of the training code "
                     f"({', '.join(codes)}): they are compared as if equal (see tables/jobs.csv)")
    return notes
