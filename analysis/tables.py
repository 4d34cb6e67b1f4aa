"""Build the report's tables (main results, differences vs learned, parameters, references)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import numfmt
from analysis.grouping import context_columns, metric_order, metric_title, shown_context, sort_rows, table_points
from analysis.render import Table
from analysis.stats import compare_to_baseline, lower_is_better, summarize

BASELINE = "learned"
REFERENCE_CSV = Path(__file__).with_name("reference_results.csv")
PUBLISHED = "published, not produced here"


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


def main_table(study) -> tuple[Table, dict[str, int]]:
    points = table_points(study)
    context = context_columns(study.jobs)
    summary = summarize(points, context + ["variant", "variant_order"])
    decimals = metric_decimals(summary)
    summary["cell"] = [numfmt.mean_cell(r.mean, r.std, r.n, r.stderr, decimals[r.metric])
                       for r in summary.itertuples()]
    summary["best"] = _best_mask(summary, context, decimals)
    metrics = metric_order(points)
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
    caption = ("Final metrics per input variant: mean ± sample std over seeds (n seeds); with one seed, "
               "value ± lm-eval stderr. Bold: best per column" + (" within each model" if "model" in shown else "")
               + " (lower is better for ppl/bpb/loss, higher for accuracy).")
    data = sort_rows(summary, study.jobs).drop(columns="variant_order")
    numeric = set(range(len(shown) + 1, len(columns)))
    return Table("main_results", caption, columns, rows, data, bold, numeric), decimals


def diff_table(study, decimals: dict[str, int]) -> Table:
    points = table_points(study)
    context = context_columns(study.jobs)
    diffs = compare_to_baseline(points, context, BASELINE)
    shown = shown_context(study.jobs)
    columns = shown + ["input variant", "metric", "n (variant/learned)", "Δ (variant − learned)",
                       "95% CI of Δ", "Welch p", "verdict"]
    rows = []
    if not diffs.empty:
        order = {m: i for i, m in enumerate(metric_order(points))}
        diffs = sort_rows(diffs.assign(_m=diffs["metric"].map(order)), study.jobs, extra=["_m"])
        for d in diffs.itertuples(index=False):
            dd = decimals.get(d.metric, 3)
            ci = "n/a" if math.isnan(d.ci_low) else f"[{numfmt.num(d.ci_low, dd)}, {numfmt.num(d.ci_high, dd)}]"
            rows.append([str(getattr(d, c)) for c in shown] + [
                d.variant, metric_title(d.metric), f"{d.n_variant}/{d.n_baseline}",
                f"{d.delta:+.{dd}f}", ci, numfmt.p_value(d.p_value), d.verdict])
        diffs = diffs.drop(columns=["variant_order", "_m"])
    caption = ("Difference of each variant from the learned baseline of the same model (variant − learned). "
               "95% CI: Welch t interval with Welch–Satterthwaite degrees of freedom; p: Welch's t-test. "
               "n/a: fewer than 2 seeds on a side, so no CI or test. Verdict 'within seed variation' when the "
               "CI contains 0, else better/worse in the metric's direction.")
    numeric = set(range(len(shown) + 2, len(shown) + 6))
    return Table("diff_vs_learned", caption, columns, rows, diffs, set(), numeric)


def params_table(study) -> Table:
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    cols = [c for c in ("params.total", "params.trainable", "params.input_trainable") if c in jobs]
    grouped = jobs.groupby(context + ["variant", "variant_order", "input"], sort=False, dropna=False)
    data = grouped[cols].first().reset_index() if cols else grouped.size().reset_index()[context + ["variant"]]
    data["n_jobs"] = grouped.size().values
    data["runs"] = grouped["run"].agg(lambda r: ";".join(sorted(r))).values
    if "params.trainable" in data:
        data["params_vary_across_seeds"] = grouped["params.trainable"].nunique().values > 1
        learned = data[data["input"] == BASELINE].groupby(context, dropna=False)["params.trainable"].first()
        base = data.set_index(context).index.map(lambda k: learned.get(k, np.nan))
        data["trainable_removed_share"] = 1.0 - data["params.trainable"].to_numpy() / np.asarray(base, dtype=float)
    data = sort_rows(data, study.jobs)
    shown = shown_context(study.jobs)
    columns = shown + ["input variant", "total params", "trainable", "input-trainable",
                       "trainable removed vs learned"]
    rows = []
    for d in data.to_dict("records"):
        share = d.get("trainable_removed_share", np.nan)
        share_text = "baseline" if d["input"] == BASELINE else (
            "n/a (no learned run)" if not np.isfinite(share) else f"{100 * share:.2f} %")
        rows.append([str(d[c]) for c in shown] + [d["variant"]] +
                    [numfmt.integer(d.get(c, np.nan)) for c in ("params.total", "params.trainable",
                                                                 "params.input_trainable")] + [share_text])
    caption = ("Parameter accounting per variant (from results.json params). Trainable removed = "
               "1 − trainable(variant) / trainable(learned, same model).")
    numeric = set(range(len(shown) + 1, len(columns)))
    return Table("params", caption, columns, rows, data.drop(columns=["variant_order"]), set(), numeric)


def reference_table(path: Path = REFERENCE_CSV) -> Table:
    # Leading '#' lines are provenance notes; not comment="#", which would cut URLs with fragments.
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    refs = pd.read_csv(io.StringIO("\n".join(lines)))
    refs.insert(0, "provenance", PUBLISHED)
    columns = ["provenance", "source", "model", "metric", "value", "citation", "note"]
    rows = [[str(r.get(c, "")) if pd.notna(r.get(c, "")) else "" for c in columns] for r in refs.to_dict("records")]
    caption = ("Published reference numbers (published, not produced here): copied from the cited sources, "
               "evaluated with their own harness and settings, so not directly comparable to the rows above.")
    return Table("reference", caption, columns, rows, refs, set(), {4})


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
    keep = [c for c in ("run", "sweep", "job_key", "input", "variant", "model", "seed", "data", "status",
                        "included", "reason", "tokens_seen", "params.total", "params.trainable",
                        "params.input_trainable", "data.unigram_val_ppl") if c in study.jobs]
    return study.jobs[keep].merge(wide.reset_index(), on="run", how="left")


def table_notes(study) -> list[str]:
    """Caveats a reader of the tables must see: missing baselines, parameter counts that differ by seed."""
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    notes = []
    if "params.trainable" in jobs:
        varying = jobs.groupby(context + ["variant"], dropna=False)["params.trainable"].nunique()
        for key in varying[varying > 1].index:
            notes.append(f"trainable parameter counts differ between seeds of {key}; the parameter table shows the "
                         "first job's counts (see tables/jobs.csv)")
    for key, group in jobs.groupby(context, sort=False, dropna=False):
        if not (group["input"] == BASELINE).any():
            key = key if isinstance(key, tuple) else (key,)
            where = ", ".join(f"{c}={v}" for c, v in zip(context, key, strict=True))
            notes.append(f"no completed '{BASELINE}' run for {where}: its variants have no difference rows "
                         "and no 'trainable removed' share")
    return notes
