"""The tested readings of a report (issue 40): every trend, cross-cell contrast, probe contrast, gap
against gap and point on a gap curve that a reading may rest on, as rows of stated Holm families.

One row per tested quantity (stats/rows.py `Tested`, flattened), with `kind` (what it tests),
`family` and `family_size` (its Holm family, named by what it holds), `role` and `reading` (the
words its test allows). The rows are computed here once; tables/readings.py writes their sentences
and report sections and the summary blocks (analysis/summaries.py) read them back from
tables/readings.csv.

**Which rows may be worded.** A row is *stated* when it is built from the study's declared
comparisons (the bucket trends and ends, the points of a gap curve, the ladder's fits and size
contrasts of each primary comparison's gap) or by a rule the report states in full before any number
(probes: every pair of arms at equal input RMS, at the layer the head reads; sides: each fixed code's
untied gap against each table-free head's). Stated rows of one kind form one family per report, Holm
over it, and their reading is a direction ("increases", "larger", "above 0") only where the Holm p
is below alpha, or "equivalent" only where the TOST Holm p is; otherwise "not shown". Rows built
from exploratory comparisons are *exploratory*: Holm within their own family, raw and adjusted p,
no reading. The seed-only and bootstrap compute slopes of a ladder are *beside* (shown to say why the
cell-mean interval is the one read).

Kinds:
- TREND: the slope of a comparison's per-bucket gap over an ordered breakdown (input token's binary16
  weight, target frequency, position), per seed, weighted by the bucket's tokens, t over seeds
  (stats/trend.py), with its curvature and the steps against it; over tested buckets only.
- END: the gap in the first / last tested bucket of an ordered breakdown minus the token-weighted
  mean gap of the other tested buckets, per seed, t over seeds, with TOST at the val-loss margin
  (an absence, "no excess at the first positions", needs it).
- SIZE: on a ladder, the paired gap at one model size minus at another at the same budget (Welch).
- LADDER: the ladder's cell-mean fits (results/scaling.py, already in their families), and
  EXTRAPOLATION: what they predict at the paper's points, labelled with the distance (not tested).
- PROBE: current-token identity at the last probed layer, arm a minus arm b at equal input RMS (Welch).
- SIDES: (fixed code + untied head − learned + untied) − (learned + table-free head − learned +
  untied), paired by seed.
- POINT / CHANGE: a primary comparison's val bpb gap at the first, middle and last validation
  shared by its runs, and its change between the last two (paired by seed); not on a ladder, whose
  cells answer its question at their final validation.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from ..stats.breakdown import PROFILES, bucket_values
from ..stats.contrasts import gap_at, gap_change, gap_difference, probe_contrasts, size_contrasts
from ..stats.core import CONFIDENCE
from ..stats.equivalence import PRIMARY
from ..stats.grouping import context_columns, context_mask, shown_context
from ..stats.rows import DOWN, NOT_SHOWN, UP, Tested, equivalence_p, in_family, t_row
from ..stats.trend import bucket_trend
from ..tables.readings import (
    BESIDE, CHANGE, END, EQUIVALENT, EXPLORATORY, EXTRAPOLATION, KINDS, LADDER, NOT_TESTED, POINT, PROBE, SIDES, SIZE,
    STATED, TREND, budget_label,
)
from .curves import CURVE, included_curve

ORDERED = ("input_id_weight", "target_frequency", "position")   # breakdowns with ordered buckets
MIN_TREND_BUCKETS = 3        # a slope and its curvature need three tested buckets
PROBE_MEASURE = "identity_offset0"
RMS_COLUMN = "input_props.code_rms"
RMS_RTOL = 0.05
TABLE_HEADS = ("untied", "tied")   # heads with a trainable table; every other head is table-free

FAMILY_NAMES = {
    TREND: "bucket trends: the slope of each primary comparison's gap over each ordered breakdown, per context",
    END: "bucket ends: the first and last tested bucket against the others, each primary comparison, ordered "
         "breakdown and context",
    SIZE: "size contrasts: the gap at each larger model size minus at each smaller one, at every budget, each "
          "primary comparison against the baseline",
    PROBE: "probe contrasts: current-token identity at the layer the head reads, every pair of arms at equal "
           "input RMS",
    SIDES: "sides: each fixed code's input-side gap (untied heads) against each table-free head's output-side gap "
           "(learned input)",
    POINT: "gap curve points: each primary comparison's val bpb gap at its first, middle and last shared validation",
    CHANGE: "gap curve ends: each primary comparison's change in val bpb gap between its last two validations",
}
COLUMNS = ["kind", "role", "family", "family_size", "context", "comparison", "name", "breakdown", "bucket",
           "reading", "estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "n", "dof", "unit", "method",
           "margin", "tost_p", "tost_p_adjusted", "confidence"]


# ------------------------------------------------------------------------------------ shared pieces


def _label(key: tuple, context: list[str], shown: list[str]) -> str:
    values = dict(zip(context, key, strict=True))
    return ", ".join(str(values[c]) for c in shown)


def _primary(results) -> set[tuple[tuple, str]]:
    """(context key, comparison) of every primary row on the tested metric: the readings are of the jobs'
    validation loss, so a comparison declared on the composition measures alone states none of them."""
    rows = results.comparisons
    if rows.empty:
        return set()
    context = context_columns(results.compared.jobs)
    primary = rows[(rows["family"] == PRIMARY) & (rows["metric"] == results.finals[0])]
    return {(tuple(getattr(r, c) for c in context), r.comparison) for r in primary.itertuples(index=False)}


def _record(row: Tested, kind: str, role: str, reading: str, **extra) -> dict:
    out = row.record() | {"kind": kind, "role": role, "reading": reading}
    return out | extra


def _direction(row: Tested, tost_q: float = math.nan) -> str:
    if not row.tested:
        return NOT_TESTED
    shown = row.shown()
    if shown == NOT_SHOWN and math.isfinite(tost_q) and tost_q < 1 - row.confidence:
        return EQUIVALENT
    return shown


def _families(rows: list[tuple[Tested, str, dict]], kind: str, margin: float | None = None) -> list[dict]:
    """Stated rows as one Holm family of `kind`, exploratory rows as another (no reading); with a
    margin, TOST p's on each row's se and df, Holm-adjusted within the same family."""
    out = []
    for role in (STATED, EXPLORATORY):
        part = [(r, extra) for r, rl, extra in rows if rl == role]
        if not part:
            continue
        name = FAMILY_NAMES[kind] + ("" if role == STATED else " (exploratory comparisons)")
        family = in_family([r for r, _ in part], name)
        tost = [equivalence_p(r, margin) if margin else math.nan for r, _ in part]
        tost_q = in_family([_p_only(p) for p in tost], name) if margin else ()
        for i, (row, (_, extra)) in enumerate(zip(family, part, strict=True)):
            q = tost_q[i].p_adjusted if margin else math.nan
            reading = _direction(row, q) if role == STATED else ""
            out.append(_record(row, kind, role, reading, margin=margin if margin else math.nan, tost_p=tost[i],
                               tost_p_adjusted=q, **extra))
    return out


def _p_only(p: float) -> Tested:
    return Tested("tost", math.nan, math.nan, math.nan, p, 0, math.nan, "")


# ------------------------------------------------------------------------------------ buckets


def bucket_rows(results) -> list[dict]:
    """TREND and END rows of every compared ordered breakdown (module docstring)."""
    buckets = results.buckets
    if buckets.empty:
        return []
    study = results.compared
    context, shown = context_columns(study.jobs), shown_context(study.jobs)
    frame = study.breakdown
    frame = bucket_values(frame[frame["run"].isin(set(study.included_jobs["run"]))])
    primary = _primary(results)
    trends, ends = [], []
    for key, part in buckets[buckets["breakdown"].isin(ORDERED)].groupby(context + ["comparison", "breakdown"],
                                                                           sort=False, dropna=False):
        *ctx, comparison, name = key
        ctx = tuple(ctx)
        tested = part[part["tested"]].sort_values("bucket")
        if len(tested) < MIN_TREND_BUCKETS:
            continue
        a, b = part["variant_a"].iloc[0], part["variant_b"].iloc[0]
        cells = frame[context_mask(frame, context, ctx) & (frame["breakdown"] == name)
                      & frame["bucket"].isin(set(tested["bucket"]))]
        gaps = _bucket_gaps(cells, a, b)
        if gaps.empty:
            continue
        gaps["tokens"] = gaps["bucket"].map(tested.set_index("bucket")["tokens"])
        role = STATED if (ctx, comparison) in primary else EXPLORATORY
        labels = tested.set_index("bucket")["label"]
        where = {"context": _label(ctx, context, shown), "comparison": comparison, "breakdown": name}
        trend = bucket_trend(gaps, weight="tokens")
        steps = {"curvature": trend.curvature.estimate, "curvature_p": trend.curvature.p_value,
                 "steps": len(trend.steps), "steps_against": trend.steps_against,
                 "steps_shown_against": trend.steps_shown_against,
                 "bucket": f"{labels.iloc[0]} .. {labels.iloc[-1]}"}
        trends.append((trend, role, where | steps))
        for end, bucket in (("first", tested["bucket"].iloc[0]), ("last", tested["bucket"].iloc[-1])):
            ends.append((_end_row(gaps, bucket, end), role, where | {"bucket": str(labels[bucket]), "end": end}))
    margin = results.options.loss_margin
    return _trend_family(trends) + _families(ends, END, margin)


def _bucket_gaps(cells: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per seed and bucket, the paired gap a − b over CRN seed pairs (pairing.matched_pairs' rule: a seed
    with two runs in one arm is left out); empty under 2 pairs."""
    crn = cells[cells["crn"].astype(bool) & cells["seed"].notna()]
    wide = []
    for arm in (a, b):
        part = crn[crn["variant"] == arm]
        runs = part.groupby("seed")["run"].nunique()
        part = part[part["seed"].isin(runs.index[runs == 1])]
        wide.append(part.pivot(index="seed", columns="bucket", values="value"))
    diff = (wide[0] - wide[1]).dropna(how="all")
    gaps = diff.reset_index().melt(id_vars="seed", var_name="bucket", value_name="gap").dropna()
    return gaps if gaps["seed"].nunique() >= 2 else gaps.iloc[0:0]


def _end_row(gaps: pd.DataFrame, bucket, end: str) -> Tested:
    """The gap in one bucket minus the token-weighted mean gap of the other buckets, per seed."""
    wide = gaps.pivot(index="seed", columns="bucket", values="gap").dropna(axis=1)
    tokens = gaps.groupby("bucket")["tokens"].first()
    rest = [c for c in wide.columns if c != bucket]
    others = (wide[rest] * tokens[rest]).sum(axis=1) / tokens[rest].sum()
    return t_row("gap in an end bucket minus the other tested buckets' token-weighted mean",
                 wide[bucket] - others, "per seed: the bucket's gap minus the others' token-weighted mean; t over seeds",
                 unit="seed pairs")


def _trend_family(trends: list) -> list[dict]:
    out = []
    for role in (STATED, EXPLORATORY):
        part = [(t, extra) for t, rl, extra in trends if rl == role]
        if not part:
            continue
        name = FAMILY_NAMES[TREND] + ("" if role == STATED else " (exploratory comparisons)")
        family = in_family([t.slope for t, _ in part], name)
        for (trend, extra), slope in zip(part, family, strict=True):
            reading = (trend.with_slope(slope).reading() if slope.tested else NOT_TESTED) if role == STATED else ""
            out.append(_record(slope, TREND, role, reading, **extra))
    return out


# ------------------------------------------------------------------------------------ a ladder


def ladder_rows(results) -> list[dict]:
    """SIZE rows, the ladder's fits (LADDER, already in their families) and its EXTRAPOLATION rows."""
    scaling = results.scaling
    if scaling is None or scaling.pairs.empty:
        return []
    base = scaling.baseline
    primary = {c for _, c in _primary(results)}
    sizes = []
    for variant in dict.fromkeys(scaling.pairs["variant"]):
        comparison = f"{variant} − {base}"
        gaps = _ladder_gaps(scaling, variant)
        role = STATED if comparison in primary else EXPLORATORY
        for row in size_contrasts(gaps, arm=variant):
            sizes.append((row, role, {"comparison": comparison, "context": budget_label(row.get("budget")),
                                      "bucket": f"{row.get('size_a')} − {row.get('size_b')}"}))
    out = _families(sizes, SIZE)
    for variant, ladder in scaling.ladders.items():
        comparison = ladder.arm
        role = STATED if comparison in primary else EXPLORATORY
        fitted = [(ladder.compute_slope, "compute"), (ladder.compute_curvature, "compute"),
                  (ladder.size_slope, "fixed budget"), (ladder.budget_slope, "fixed size"), (ladder.curvature, ""),
                  *[(r, str(r.get("size"))) for r in ladder.per_size],
                  *[(r, budget_label(r.get("budget"))) for r in ladder.per_budget]]
        for row, where in fitted:
            reading = (_direction(row) if row.name != "curvature in log N and log D" else
                       ("curved" if row.tested and row.p_decision < 1 - row.confidence else NOT_SHOWN))
            out.append(_record(row, LADDER, role, reading if role == STATED else "", comparison=comparison,
                               context=where))
        for row in (ladder.seed_only, ladder.bootstrap):
            out.append(_record(row, LADDER, BESIDE, "", comparison=comparison, context="compute"))
    for r in scaling.predictions.itertuples(index=False):
        if r.convention or not math.isfinite(r.gap):
            continue   # the law's predictions stay in the Scaling section's own table and readings
        row = Tested(r.method, float(r.gap), float(r.low), float(r.high), math.nan, 0, math.nan, r.label,
                     "cells")
        out.append(_record(row, EXTRAPOLATION, STATED if f"{r.variant} − {base}" in primary else EXPLORATORY, "",
                           comparison=f"{r.variant} − {base}", context=r.target_label, flags=r.flags,
                           measured=r.measured_wikitext_gap_bpb))
    return out


def _ladder_gaps(scaling, variant: str) -> pd.DataFrame:
    from .scaling import ladder_input   # one builder of the ladder's input

    return ladder_input(scaling, variant)


# ------------------------------------------------------------------------------------ probes


def probe_rows(results) -> list[dict]:
    """PROBE rows: identity at the last probed layer, every pair of arms at equal input RMS."""
    probes, study = results.probes, results.probe_study
    if probes is None or probes.empty or RMS_COLUMN not in study.included_jobs:
        return []
    values = probes.values
    finals = values[(values["label"] == "final") & (values["measure"] == PROBE_MEASURE)]
    if finals.empty:
        return []
    last = finals[finals["layer_index"] == finals.groupby("run")["layer_index"].transform("max")]
    rms = study.included_jobs.drop_duplicates("run").set_index("run")[RMS_COLUMN]
    frame = last.assign(input_rms=last["run"].map(rms).astype(float))
    frame = frame[np.isfinite(frame["input_rms"])]
    # one RMS per arm: an arm whose runs disagree (a changed code) is left out rather than mixed
    per_arm = frame.groupby("variant")["input_rms"].nunique()
    frame = frame[frame["variant"].isin(per_arm.index[per_arm == 1])]
    order = dict.fromkeys(study.included_jobs.sort_values("variant_order")["variant"])
    frame = frame.assign(_order=frame["variant"].map({v: i for i, v in enumerate(order)})).sort_values(
        ["_order", "seed"])
    rows = []
    for layer, part in frame.groupby("layer", sort=False):
        try:
            found = probe_contrasts(part[["variant", "seed", "value", "input_rms"]], by=(), rtol=RMS_RTOL)
        except AnalysisError:
            continue
        for row in found:
            a, b = row.get("variant_a"), row.get("variant_b")
            rows.append((row, STATED, {"comparison": f"{a} − {b}", "context": f"input RMS {row.get('input_rms'):.2g}",
                                       "bucket": str(layer)}))
    return _families(rows, PROBE)


# ------------------------------------------------------------------------------------ input side vs output side


def side_rows(results) -> list[dict]:
    """SIDES rows: (code + untied − learned + untied) − (learned + head − learned + untied)."""
    from ..stats.comparisons import label_parts

    study = results.compared
    jobs = study.included_jobs
    parts = {v: label_parts(v) for v in dict.fromkeys(jobs["variant"])}
    heads = {v: dict(p).get("output") for v, (_, p) in parts.items()}
    base = next((v for v, (name, _) in parts.items() if name == "learned" and heads[v] == "untied"), None)
    if base is None:
        return []
    codes = [v for v, (name, _) in parts.items() if name != "learned" and heads[v] == "untied"]
    tables_free = [v for v, (name, _) in parts.items() if name == "learned" and heads[v] not in (None, *TABLE_HEADS)]
    if not codes or not tables_free:
        return []
    finals = study.long[(study.long["kind"] == "final") & (study.long["metric"] == "val_bpb")
                        & study.long["included"].astype(bool)]
    context, shown = context_columns(study.jobs), shown_context(study.jobs)
    rows = []
    for key, part in finals.groupby(context, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        crn = part[part["crn"].astype(bool)] if "crn" in part else part
        values = crn[["seed", "variant", "value"]]
        for code in codes:
            for head in tables_free:
                if not {code, head, base} <= set(values["variant"]):
                    continue
                diff = gap_difference(values, (code, base), (head, base)).difference
                rows.append((diff, STATED, {"comparison": f"({code} − {base}) − ({head} − {base})",
                                            "context": _label(key, context, shown)}))
    return _families(rows, SIDES)


# ------------------------------------------------------------------------------------ points of a gap curve


def curve_rows(results) -> list[dict]:
    """POINT and CHANGE rows of every primary comparison's val bpb curve (not on a ladder)."""
    if results.scaling is not None:
        return []
    study = results.compared
    curve = included_curve(study, CURVE)
    if curve.empty or results.comparisons.empty:
        return []
    context, shown = context_columns(study.jobs), shown_context(study.jobs)
    primary = _primary(results)
    rows = results.comparisons.drop_duplicates(context + ["comparison"])
    points, changes = [], []
    for r in rows.itertuples(index=False):
        key = tuple(getattr(r, c) for c in context)
        role = STATED if (key, r.comparison) in primary else EXPLORATORY
        part = curve[context_mask(curve, context, key) & curve["variant"].isin((r.variant_a, r.variant_b))]
        part = part[part["crn"].astype(bool)][["seed", "variant", "run", "tokens", "value"]]
        shared = _shared_points(part, r.variant_a, r.variant_b)
        if len(shared) < 2:
            continue
        where = {"comparison": r.comparison, "context": _label(key, context, shown)}
        middle = shared[int(np.argmin(np.abs(np.log(shared) - np.log(shared).mean())))]
        values = part.drop(columns="run")
        for tokens in dict.fromkeys((shared[0], middle, shared[-1])):
            row = gap_at(values, r.variant_a, r.variant_b, tokens)
            points.append((row, role, where | {"bucket": f"{tokens:,.0f} tokens", "name": "gap at a validation"}))
        row = gap_change(values, r.variant_a, r.variant_b, shared[-2], shared[-1])
        changes.append((row, role, where | {"bucket": f"{shared[-2]:,.0f} to {shared[-1]:,.0f} tokens",
                                            "name": "change of the gap over the last two validations"}))
    return _families(points, POINT) + _families(changes, CHANGE)


def _shared_points(part: pd.DataFrame, a: str, b: str) -> list[float]:
    """Token counts every run of both arms validated at (nothing is interpolated)."""
    runs = part.groupby("run")["tokens"].apply(lambda t: set(t.astype(float)))
    if len(set(part["variant"])) < 2 or runs.empty:
        return []
    return sorted(set.intersection(*runs.tolist()))


# ------------------------------------------------------------------------------------ all of them


def compute_readings(results) -> pd.DataFrame:
    """Every tested reading row of a report, in the order the sections show them."""
    rows = (bucket_rows(results) + ladder_rows(results) + probe_rows(results) + side_rows(results)
            + curve_rows(results))
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.DataFrame(rows)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = np.nan if column not in ("context", "comparison", "breakdown", "bucket") else ""
    rest = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + rest]


__all__ = ["compute_readings", "KINDS", "STATED", "EXPLORATORY", "BESIDE", "UP", "DOWN", "NOT_SHOWN", "EQUIVALENT",
           "NOT_TESTED", "CONFIDENCE"]
