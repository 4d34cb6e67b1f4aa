"""The input continuum's curve: each arm's gap to the baseline against its trainable input parameters.

One row per (context, arm) of the arms whose records split their trainable input parameters into
token-specific (one row per token ID: a table, a low-rank factor) and shared (a map every token goes
through), results.json `params.input_token_specific_trainable` / `params.input_shared_trainable`
(accounting.input_split). The gap is the report's own comparison row `arm − baseline` on the
primary metric (stats/comparisons.py: paired over seeds, 95% CI, Holm within its family, a verdict
only where the row is primary), copied, never recomputed; the baseline itself is one more row at
Δ = 0 by definition (`reference`), so a figure can place it on the parameter axis.

The curve exists only where it can say something: in some context at least two arms with the split
recorded differ in their trainable input parameters. Records from before the split (every committed
report but this study's) give no row, so their reports are unchanged.
"""

from __future__ import annotations

import math

import pandas as pd

from ..stats.comparisons import resolve
from ..stats.grouping import context_columns, context_mask, sort_rows

TOKEN_SPECIFIC = "params.input_token_specific_trainable"
SHARED = "params.input_shared_trainable"
TRAINABLE = "params.input_trainable"
# copied from each comparison row: what the table prints and the figure draws
ROW_COLUMNS = ["comparison", "family", "metric", "scale", "test", "n", "delta", "ci_low", "ci_high", "p_holm",
               "tost_p_holm", "margin", "margin_label", "verdict"]
COLUMNS = ["variant", "input", "variant_order", "token_specific", "shared", "input_trainable", "reference",
           *ROW_COLUMNS, "decimals"]


def has_split(jobs: pd.DataFrame) -> bool:
    """Do the records say which trainable input parameters are token-specific and which shared?"""
    return all(c in jobs for c in (TOKEN_SPECIFIC, SHARED))


def arm_parameters(jobs: pd.DataFrame, context: list[str], notes: list[str]) -> pd.DataFrame:
    """One row per (context, variant) with its token-specific, shared and total trainable input
    parameters; an arm without the split recorded is left out, and one whose runs disagree (a changed
    interface between seeds) is left out with a note rather than placed at one of its counts."""
    split = jobs.assign(token_specific=pd.to_numeric(jobs[TOKEN_SPECIFIC], errors="coerce"),
                        shared=pd.to_numeric(jobs[SHARED], errors="coerce"))
    split = split[split["token_specific"].notna() & split["shared"].notna()]
    keys = context + ["variant"]
    counts = split.groupby(keys, sort=False, dropna=False)[["token_specific", "shared"]].nunique()
    varying = counts[(counts > 1).any(axis=1)].index
    for key in varying:
        notes.append(f"input continuum: the runs of {key[-1]} ({', '.join(map(str, key[:-1]))}) record different "
                     "token-specific or shared input parameter counts; the arm is left out of the curve")
    per_arm = (split.groupby(keys, sort=False, dropna=False)
               .agg(input=("input", "first"), variant_order=("variant_order", "first"),
                    token_specific=("token_specific", "first"), shared=("shared", "first"))
               .drop(index=varying).reset_index())
    total = pd.to_numeric(jobs[TRAINABLE], errors="coerce") if TRAINABLE in jobs else None
    per_arm["input_trainable"] = per_arm["token_specific"] + per_arm["shared"]
    if total is not None:   # the split must add up to the input's trainable count (accounting.py)
        recorded = jobs.assign(_total=total).groupby(keys, sort=False, dropna=False)["_total"].first()
        for r in per_arm.itertuples(index=False):
            have = recorded.get(tuple(getattr(r, c) for c in keys), math.nan)
            if math.isfinite(have) and have != r.input_trainable:
                notes.append(f"input continuum: {r.variant} records {r.token_specific:,.0f} token-specific + "
                             f"{r.shared:,.0f} shared but {have:,.0f} trainable input parameters")
    return per_arm


def applies(per_arm: pd.DataFrame, context: list[str]) -> bool:
    """At least two arms of one context differ in their trainable input parameters."""
    if per_arm.empty:
        return False
    kinds = per_arm.groupby(context, sort=False, dropna=False)[["token_specific", "shared"]].apply(
        lambda g: len(g.drop_duplicates()))
    return bool((kinds >= 2).any())


def continuum_rows(study, comparisons: pd.DataFrame, baseline: str, metric: str) -> tuple[pd.DataFrame, list[str]]:
    """The curve's rows (module docstring) and notes; empty where the curve does not apply."""
    notes: list[str] = []
    jobs = study.included_jobs
    if not len(jobs) or comparisons.empty or not has_split(jobs):
        return pd.DataFrame(columns=COLUMNS), notes
    context = context_columns(study.jobs)
    per_arm = arm_parameters(jobs, context, notes)
    if not applies(per_arm, context):
        return pd.DataFrame(columns=COLUMNS), []
    rows = comparisons[comparisons["metric"] == metric]
    out = []
    for key, arms in per_arm.groupby(context, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        base = resolve(baseline, jobs[context_mask(jobs, context, key)])
        if base is None:
            continue
        here = rows[context_mask(rows, context, key) & (rows["variant_b"] == base)].set_index("variant_a")
        for arm in arms.itertuples(index=False):
            record = arm._asdict()
            if arm.variant == base:
                out.append(record | {"reference": True, "delta": 0.0, "metric": metric})
            elif arm.variant in here.index:
                row = here.loc[arm.variant]
                copied = {c: row[c] for c in ROW_COLUMNS + ["decimals"] if c in row.index}
                out.append(record | {"reference": False} | copied)
    if not out:
        return pd.DataFrame(columns=COLUMNS), notes
    frame = pd.DataFrame(out)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = math.nan
    return sort_rows(frame[context + COLUMNS], study.jobs).reset_index(drop=True), notes
