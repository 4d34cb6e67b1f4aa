"""Where the gap lives: the final validation loss per bucket, compared arm against arm.

Per run and bucket the value is the bucket's mean loss, nats / tokens (nats per token), from the
sums results.json records (read/breakdown.py); a bucket without tokens has no value.

**Comparisons on a common partition.** The arms compared are the report's (comparisons.arm_pairs:
every variant against the baseline, gf2 − binary16, pairs=, the declared primaries), in each
comparison context, on each breakdown whose buckets hold the same validation tokens in every run
of both arms (target frequency, the input token's binary16 weight, position: the validation text
is the same for every arm). Then Σ_b Δ_b tokens_b / T is the gap in total val loss exactly
(`whole_gap` against `total_gap`, the gap of the runs' own totals), and each bucket's share of it,
Δ_b tokens_b / T over the whole gap, adds up to 1 (NaN when the gap is 0).

**Which buckets are tested.** A bucket with at least `min_tokens` validation tokens (MIN_TOKENS by
default) is tested like the headline (pairing.compare_arms: paired over CRN seeds, else Welch) and
by TOST at the val-loss margin; a smaller one is shown with its Δ and not tested (a bucket of one to
three tokens says nothing about an arm). Every bucket test is exploratory: one procedure, the
Benjamini–Hochberg false discovery rate (statsmodels' `multipletests`, "fdr_bh"), runs over every
tested bucket of the report at once, for the difference tests (`q_value`) and separately for TOST
(`tost_q`). No bucket gets a verdict.

**The arm's own code is a profile, not a comparison.** The input token's weight under each arm's own
code (PROFILES) puts different tokens in a bucket for different codes (at V = 4,096, weight 12 holds
3 tokens under binary16 and 4,345 under gf2), so a bucket-by-bucket gap there is not a part of any
gap. It is shown per arm (`profiles`): each arm's tokens and mean loss per bucket of its own code,
with no difference, no test, no whole gap and no share.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .comparisons import Plan, arm_pairs
from .core import CONFIDENCE, NONE, adjust
from .equivalence import DEFAULT_LOSS_MARGIN, tost_p
from .grouping import context_columns
from .pairing import compare_arms, n_label, test_label

METRIC = "val_loss"  # the scale and direction of a bucket's mean loss (nats/token, lower is better)
MIN_TOKENS = 100     # smaller buckets are shown, not tested
METHOD = "fdr_bh"    # the one procedure over every tested bucket of a report
PROFILES = ("input_code_weight",)  # breakdowns whose buckets are each arm's own partition of the tokens


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


def _included(study) -> pd.DataFrame:
    frame = study.breakdown
    if not len(frame):
        return frame
    return frame[frame["run"].isin(set(study.included_jobs["run"]))]


def compare_buckets(study, plan: Plan, margin: float = DEFAULT_LOSS_MARGIN, min_tokens: float = MIN_TOKENS,
                    confidence: float = CONFIDENCE) -> tuple[pd.DataFrame, list[str]]:
    """One row per (context, pair, breakdown, bucket) of the common-partition breakdowns: both arms'
    mean loss, the gap (tested when the bucket holds >= min_tokens tokens: CI, p, TOST), the BH q's
    over every tested bucket, the bucket's tokens and share of the gap; and notes."""
    notes = missing_breakdown_note(study)
    frame = _included(study)
    if not len(frame):
        return pd.DataFrame(), notes
    frame = frame[~frame["breakdown"].isin(PROFILES)]
    context = context_columns(study.jobs)
    out: list[pd.DataFrame] = []
    groups = dict(iter(frame.groupby(context, sort=False, dropna=False)))
    for ctx in sorted(groups, key=_context_rank(study)):
        group = groups[ctx]
        ctx = ctx if isinstance(ctx, tuple) else (ctx,)
        variants = group[["variant", "input", "variant_order"]]
        for a, b, kind in arm_pairs(variants, plan):
            for name in dict.fromkeys(group["breakdown"]):
                rows = _compare_one(group[group["breakdown"] == name], a, b, margin, min_tokens, confidence, notes)
                if rows is not None:
                    out.append(rows.assign(**dict(zip(context, ctx, strict=True)), comparison=f"{a} − {b}",
                                           variant_a=a, variant_b=b, kind=kind, breakdown=name))
    if not out:
        return pd.DataFrame(), notes
    rows = pd.concat(out, ignore_index=True)
    rows["q_value"] = adjust(rows["p_value"], METHOD)
    rows["tost_q"] = adjust(rows["tost_p"], METHOD)
    return rows, notes


def _common_partition(rows: pd.DataFrame) -> bool:
    """Every run holds the same validation tokens in each bucket (a bucket missing from a run: 0)."""
    tokens = rows.pivot_table(index="bucket", columns="run", values="tokens", aggfunc="first").fillna(0.0)
    return bool((tokens.nunique(axis=1) <= 1).all())


def _run_totals(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its total val loss (nats/token) over the breakdown, for the whole-gap check."""
    per_run = rows.drop_duplicates("run")
    return per_run.assign(value=per_run["total_nats"] / per_run["total_tokens"])


def _compare_one(rows: pd.DataFrame, a: str, b: str, margin: float, min_tokens: float, confidence: float,
                 notes: list[str]) -> pd.DataFrame | None:
    name = rows["breakdown"].iloc[0]
    arm_a, arm_b = rows[rows["variant"] == a], rows[rows["variant"] == b]
    if arm_a.empty or arm_b.empty:
        return None
    both = pd.concat([arm_a, arm_b])
    if set(arm_a["edges"]) != set(arm_b["edges"]) or arm_a["edges"].nunique() != 1:
        notes.append(f"breakdown {name}: {a} and {b} record different buckets "
                     "(another vocabulary, window or code width); not compared")
        return None
    if not _common_partition(both):
        notes.append(f"breakdown {name}: {a} and {b} put different validation tokens in a bucket, so a "
                     "bucket-by-bucket gap would not be part of the whole gap; not compared")
        return None
    total = float(both["total_tokens"].iloc[0])
    values = bucket_values(both)
    records, deltas = [], []
    for bucket, cell in values.groupby("bucket", sort=True):
        ca, cb = cell[cell["variant"] == a], cell[cell["variant"] == b]
        if ca.empty or cb.empty:
            continue
        cmp, why = compare_arms(ca, cb, confidence)
        tokens = float(cell["tokens"].iloc[0])
        tested = tokens >= min_tokens and cmp.test != NONE
        records.append({
            "bucket": int(bucket), "label": cell["label"].iloc[0], "lower": cell["lower"].iloc[0],
            "upper": cell["upper"].iloc[0], "tokens": tokens, "token_share": tokens / total,
            "mean_a": float(ca["value"].mean()), "mean_b": float(cb["value"].mean()),
            "sd_a": float(ca["value"].std(ddof=1)) if len(ca) > 1 else math.nan,
            "sd_b": float(cb["value"].std(ddof=1)) if len(cb) > 1 else math.nan,
            "tested": tested, "test": cmp.test, "test_label": test_label(cmp, why) if tested else "not tested",
            "n": n_label(cmp), "delta": cmp.delta,
            "ci_low": cmp.ci_low if tested else math.nan, "ci_high": cmp.ci_high if tested else math.nan,
            "se": cmp.se, "dof": cmp.dof, "p_value": cmp.p_value if tested else math.nan, "margin": margin,
            "tost_p": tost_p(cmp, margin) if tested else math.nan,
            "runs_a": ";".join(sorted(ca["run"])), "runs_b": ";".join(sorted(cb["run"])),
        })
    if not records:
        return None
    table = pd.DataFrame(records)
    totals, _ = compare_arms(*(_run_totals(rows[rows["variant"] == v]) for v in (a, b)), confidence)
    weighted = table["delta"] * table["tokens"] / total
    table["whole_gap"] = float(np.nansum(weighted))        # Σ_b Δ_b tokens_b / T
    table["total_gap"] = totals.delta                       # the same gap from the runs' own totals
    table["gap_share"] = weighted / table["whole_gap"] if table["whole_gap"].iloc[0] else math.nan
    return table


def profiles(study) -> pd.DataFrame:
    """Per (context, variant, breakdown in PROFILES, bucket): the arm's tokens in the bucket of its own
    code, its mean loss over seeds (± sd, n) and the runs. No difference and no test: the buckets of
    two codes hold different tokens."""
    frame = _included(study)
    if not len(frame):
        return pd.DataFrame()
    frame = bucket_values(frame[frame["breakdown"].isin(PROFILES)])
    if frame.empty:
        return pd.DataFrame()
    keys = context_columns(study.jobs) + ["variant", "variant_order", "breakdown", "bucket"]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(label=("label", "first"), lower=("lower", "first"), upper=("upper", "first"),
                      tokens=("tokens", "mean"), tokens_min=("tokens", "min"), tokens_max=("tokens", "max"),
                      total_tokens=("total_tokens", "first"), mean=("value", "mean"), sd=("value", "std"),
                      n=("value", "count"), runs=("run", lambda r: ";".join(sorted(r)))).reset_index()
    out["token_share"] = out["tokens"] / out["total_tokens"]
    rank = _context_rank(study)
    order = [rank(k) for k in out[context_columns(study.jobs)].itertuples(index=False, name=None)]
    return (out.assign(_context=order).sort_values(["_context", "variant_order", "breakdown", "bucket"], kind="stable")
            .drop(columns="_context").reset_index(drop=True))


def _context_rank(study):
    """A context key's place in the study's job order (a ladder: size, then budget)."""
    context = context_columns(study.jobs)
    order = {k: i for i, k in enumerate(dict.fromkeys(study.included_jobs[context].itertuples(index=False, name=None)))}

    def rank(key) -> int:
        return order.get(key if isinstance(key, tuple) else (key,), len(order))
    return rank
