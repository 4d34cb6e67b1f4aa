"""Where the gap lives: the final validation loss per bucket, compared arm against arm.

Per run and bucket the value is the bucket's mean loss, nats / tokens (nats per token), from the
sums results.json records (read/breakdown.py); a bucket without tokens has no value. The arms
compared are the headline's (comparisons.arm_pairs: every variant against the baseline, gf2 −
binary16, --pairs), in each comparison context, on each breakdown both arms recorded with the
same buckets. Per bucket the test is the headline's (pairing.compare_arms: paired over CRN seeds,
else Welch), with the val-loss equivalence margin for TOST; Holm runs across the bucket rows of
one (context, pair, breakdown), for the difference tests and separately for TOST, and the verdict
rule is the headline's (equivalence.verdict).

Each bucket's share of the gap is gap_b x tokens_b / T over the whole gap sum_b gap_b x tokens_b / T
(T the validation tokens): the buckets partition the tokens, so the shares add up to 1 and the
whole is the gap in val loss (nats/token) itself. A share is NaN when the whole gap is 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .comparisons import Plan, arm_pairs
from .core import CONFIDENCE
from .equivalence import ALPHA, DEFAULT_LOSS_MARGIN, holm_verdicts, tost_p
from .grouping import context_columns
from .pairing import compare_arms, n_label, test_label

METRIC = "val_loss"  # the scale and direction of a bucket's mean loss (nats/token, lower is better)


def bucket_values(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with tokens > 0, with value = the bucket's mean loss (nats/token)."""
    rows = frame[frame["tokens"] > 0]
    return rows.assign(value=rows["nats"] / rows["tokens"])


def missing_breakdown_note(study) -> list[str]:
    """A note on included jobs whose record has no breakdown (trained before it was recorded) beside
    jobs that have one. When none has one there is no breakdown section, as for a study of old records."""
    included = set(study.included_jobs["run"])
    have = (set(study.breakdown["run"]) if len(study.breakdown) else set()) & included
    missing = sorted(included - have)
    if not missing or not have:
        return []
    shown = "; ".join(missing[:3]) + (f"; ... ({len(missing) - 3} more)" if len(missing) > 3 else "")
    return [(f"{len(missing)} included job(s) record no loss breakdown (val_breakdown: trained before it was "
             f"recorded) and are left out of the breakdown tables: {shown}")]


def compare_buckets(study, plan: Plan, margin: float = DEFAULT_LOSS_MARGIN, confidence: float = CONFIDENCE,
                    alpha: float = ALPHA) -> tuple[pd.DataFrame, list[str]]:
    """One row per (context, pair, breakdown, bucket): both arms' mean loss, the gap with its test,
    CI, Holm p's, TOST and verdict, the bucket's tokens and its share of the whole gap; and notes."""
    notes = missing_breakdown_note(study)
    frame = study.breakdown
    if not len(frame):
        return pd.DataFrame(), notes
    included = set(study.included_jobs["run"])
    frame = bucket_values(frame[frame["run"].isin(included)])
    context = context_columns(study.jobs)
    out: list[pd.DataFrame] = []
    for ctx, group in frame.groupby(context, sort=False, dropna=False):
        ctx = ctx if isinstance(ctx, tuple) else (ctx,)
        variants = group[["variant", "input", "variant_order"]]
        for a, b, kind in arm_pairs(variants, plan):
            for name in dict.fromkeys(group["breakdown"]):
                rows = _compare_one(group[group["breakdown"] == name], a, b, margin, confidence, alpha, notes)
                if rows is not None:
                    out.append(rows.assign(**dict(zip(context, ctx, strict=True)), comparison=f"{a} − {b}",
                                           variant_a=a, variant_b=b, kind=kind, breakdown=name))
    return (pd.concat(out, ignore_index=True) if out else pd.DataFrame()), notes


def _compare_one(rows: pd.DataFrame, a: str, b: str, margin: float, confidence: float, alpha: float,
                 notes: list[str]) -> pd.DataFrame | None:
    arm_a, arm_b = rows[rows["variant"] == a], rows[rows["variant"] == b]
    if arm_a.empty or arm_b.empty:
        return None
    if set(arm_a["edges"]) != set(arm_b["edges"]) or arm_a["edges"].nunique() != 1:
        notes.append(f"breakdown {rows['breakdown'].iloc[0]}: {a} and {b} record different buckets "
                     "(another vocabulary, window or code width); not compared")
        return None
    records, comparisons = [], []
    for bucket, cell in rows.groupby("bucket", sort=True):
        ca, cb = cell[cell["variant"] == a], cell[cell["variant"] == b]
        if ca.empty or cb.empty:
            continue
        cmp, why = compare_arms(ca, cb, confidence)
        tokens = float(cell["tokens"].mean())
        records.append({
            "bucket": int(bucket), "label": cell["label"].iloc[0], "lower": cell["lower"].iloc[0],
            "upper": cell["upper"].iloc[0], "tokens": tokens,
            "token_share": tokens / float(cell["total_tokens"].mean()),
            "mean_a": float(ca["value"].mean()), "mean_b": float(cb["value"].mean()),
            "sd_a": float(ca["value"].std(ddof=1)) if len(ca) > 1 else math.nan,
            "sd_b": float(cb["value"].std(ddof=1)) if len(cb) > 1 else math.nan,
            "test": cmp.test, "test_label": test_label(cmp, why), "n": n_label(cmp),
            "delta": cmp.delta, "ci_low": cmp.ci_low, "ci_high": cmp.ci_high, "se": cmp.se, "dof": cmp.dof,
            "p_value": cmp.p_value, "margin": margin, "tost_p": tost_p(cmp, margin),
            "runs_a": ";".join(sorted(ca["run"])), "runs_b": ";".join(sorted(cb["run"])),
        })
        comparisons.append(cmp)
    if not records:
        return None
    table = pd.DataFrame(records)
    holm_verdicts(table, comparisons, alpha, metric=METRIC)
    weighted = table["delta"] * table["tokens"]
    total = float(table["tokens"].sum())
    whole = float(np.nansum(weighted)) / total if total else math.nan
    table["gap_share"] = weighted / total / whole if whole else math.nan
    table["whole_gap"] = whole
    return table
