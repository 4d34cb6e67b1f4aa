"""A compute ladder's scaling estimates (issue 25), computed once: per arm a law L(N, D) under both
parameter conventions, the paired gap against compute, what each predicts at the paper's and the
earlier version's (N, D), with seed-bootstrap intervals (stats/scaling.py), and the gap line's band
for the figure. Every point traces to a run (`points`, the scaling_jobs table).

A study gets them when the baseline and at least one other arm each ran at >= 2 model sizes and >= 2
token budgets (read/ladder.py: model_size, train_budget). The law needs >= 3 of each and says so
otherwise; the gap fit needs two compute values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..read.ladder import epochs
from ..stats import scaling as sc
from ..stats.comparisons import resolve
from ..tables.scaling_points import POINTS, PAPER_POINT, paper_wikitext_gaps

METRIC = "val_bpb"
MIN_LEVELS = 2
CONVENTION_COLUMN = {sc.CHINCHILLA: "n_chinchilla", sc.KAPLAN: "n_kaplan"}  # columns of scaling_points
BAND_POINTS = 60   # points per drawn stretch of a gap line


@dataclass
class Scaling:
    baseline: str
    points: pd.DataFrame
    pairs: pd.DataFrame
    laws: dict = field(default_factory=dict)          # (variant, convention) -> LawFit
    gaps: dict = field(default_factory=dict)          # variant -> GapFit (variant - baseline)
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    bands: pd.DataFrame = field(default_factory=pd.DataFrame)   # each gap line and its band, for the figure
    draws: object = None


def _column(jobs: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(jobs[name], errors="coerce") if name in jobs else pd.Series(np.nan, index=jobs.index)


def scaling_points(study) -> pd.DataFrame:
    """One row per included job: arm, size, budget, seed, N under both conventions, D, C, epochs, val bpb."""
    jobs = study.included_jobs
    if jobs.empty or "model_size" not in jobs:
        return pd.DataFrame()
    finals = study.long[(study.long["kind"] == "final") & (study.long["metric"] == METRIC)]
    bpb = finals.drop_duplicates("run", keep="last").set_index("run")["value"]
    out = pd.DataFrame({
        "variant": jobs["variant"], "input": jobs["input"], "data": jobs["data"], "model_size": jobs["model_size"],
        "train_budget": jobs["train_budget"], "seed": jobs["seed"], "crn": jobs["crn"], "run": jobs["run"],
        "n_chinchilla": _column(jobs, "params.trainable"), "n_kaplan": _column(jobs, "params.body"),
        "learned_input": _column(jobs, "params.input_trainable").fillna(0) > 0,
        "tokens": pd.to_numeric(jobs["tokens_seen"], errors="coerce"),
        "flops_per_token": pd.to_numeric(jobs["flops_per_token"], errors="coerce"),
        "epochs": epochs(jobs), METRIC: jobs["run"].map(bpb)})
    out["compute"] = out["flops_per_token"] * out["tokens"]
    return out.reset_index(drop=True)


def _ladder_arms(points: pd.DataFrame) -> list[str]:
    levels = points.groupby("variant")[["model_size", "train_budget"]].nunique()
    return [v for v, row in levels.iterrows() if row.min() >= MIN_LEVELS]


def applies(study, baseline: str) -> bool:
    points = scaling_points(study)
    if points.empty:
        return False
    arms = _ladder_arms(points)
    base = resolve(baseline, study.included_jobs)
    return base in arms and len(arms) >= 2


def paired_gaps(points: pd.DataFrame, base: str, variant: str) -> pd.DataFrame:
    """Same data, size, budget and seed, both runs with common random numbers: gap = variant - base."""
    key = ["data", "model_size", "train_budget", "seed"]
    cols = key + ["run", METRIC, "compute", "crn"]
    a = points[(points["variant"] == variant) & points["crn"]][cols].drop_duplicates(key, keep=False)
    b = points[(points["variant"] == base) & points["crn"]][cols].drop_duplicates(key, keep=False)
    pairs = a.merge(b, on=key, suffixes=("", "_base"))
    pairs["gap"] = pairs[METRIC] - pairs[f"{METRIC}_base"]
    pairs["compute"] = (pairs["compute"] + pairs["compute_base"]) / 2   # equal: input lookups are not FLOPs
    pairs["variant"] = variant
    return pairs[["variant", *key, "compute", "gap", "run", "run_base"]]


def build(study, baseline: str, n_boot: int = sc.N_BOOT) -> Scaling | None:
    points = scaling_points(study)
    if points.empty or not applies(study, baseline):
        return None
    base = resolve(baseline, study.included_jobs)
    arms = [v for v in _ladder_arms(points) if v in set(study.included_jobs["variant"])]
    ordered = study.included_jobs.drop_duplicates("variant").set_index("variant")["variant_order"]
    arms = sorted(arms, key=lambda v: ordered.get(v, 0))
    points = points[points["variant"].isin(arms) & np.isfinite(points[METRIC])]
    draws = sc.seed_draws(points["seed"].dropna().tolist(), n_boot)
    result = Scaling(base, points, pd.DataFrame(), draws=draws)
    for variant in arms:
        part = points[points["variant"] == variant]
        for convention, column in CONVENTION_COLUMN.items():
            result.laws[(variant, convention)] = sc.fit_law(part[column], part["tokens"], part[METRIC],
                                                            part["seed"].tolist(), draws)
    pairs = [paired_gaps(points, base, v) for v in arms if v != base]
    result.pairs = pd.concat(pairs, ignore_index=True) if pairs else pd.DataFrame()
    for variant in [v for v in arms if v != base]:
        part = result.pairs[result.pairs["variant"] == variant]
        result.gaps[variant] = sc.fit_gap(part["compute"], part["gap"], part["seed"].tolist(), draws)
    result.predictions = predictions(result)
    result.bands = bands(result)
    return result




def _arm_n(points: pd.DataFrame, variant: str) -> bool:
    return bool(points.loc[points["variant"] == variant, "learned_input"].any())


def predictions(result: Scaling) -> pd.DataFrame:
    """Per fixed arm x target point x method: predicted gap with its interval and the extrapolation."""
    measured = paper_wikitext_gaps()
    rows = []
    base = result.baseline
    points = result.points
    max_c = points["compute"].max()
    max_d = points["tokens"].max()
    for variant, gap_fit in result.gaps.items():
        input_name = points.loc[points["variant"] == variant, "input"].iloc[0]
        for target in POINTS:
            ran = input_name in target.arms
            paper_gap = measured.get(input_name, {}).get("gap_bpb", math.nan) if target is PAPER_POINT else math.nan
            common = {"variant": variant, "baseline": base, "target": target.key, "target_label": target.label,
                      "target_ran_arm": ran, "target_tokens": target.tokens, "target_compute": target.compute,
                      "assumed": target.assumed, "orders_compute": sc.orders(target.compute, max_c),
                      "orders_tokens": sc.orders(target.tokens, max_d),
                      "measured_wikitext_gap_bpb": paper_gap if ran else math.nan}
            boot = gap_fit.boot_predict(target.compute)
            lo, hi = sc.interval(boot, gap_fit.confidence)
            rows.append({**common, "method": "gap vs compute", "convention": "", "gap": gap_fit.predict(target.compute),
                         "low": lo, "high": hi, "n_variant": math.nan, "n_baseline": math.nan, "orders_params": math.nan,
                         "flags": "; ".join(gap_fit.flags)})
            for convention in (sc.CHINCHILLA, sc.KAPLAN):
                fv, fb = result.laws[(variant, convention)], result.laws[(base, convention)]
                nv = target.params(convention, _arm_n(points, variant))
                nb = target.params(convention, _arm_n(points, base))
                gap = fv.predict(nv, target.tokens) - fb.predict(nb, target.tokens)
                bv, bb = fv.boot_predict(nv, target.tokens), fb.boot_predict(nb, target.tokens)
                lo, hi = sc.interval(bv - bb, fv.confidence) if len(bv) and len(bb) else (math.nan, math.nan)
                orders_n = max(sc.orders(nv, fv.max_n), sc.orders(nb, fb.max_n))
                flags = "; ".join(f"{name}: {f}" for name, fit in ((variant, fv), (base, fb)) for f in fit.flags)
                rows.append({**common, "method": "law L(N, D)", "convention": convention, "gap": gap, "low": lo,
                             "high": hi, "n_variant": nv, "n_baseline": nb, "orders_params": orders_n, "flags": flags})
    return pd.DataFrame(rows)


def bands(result: Scaling) -> pd.DataFrame:
    """Per fixed arm: the gap line and its bootstrap band on a log grid of compute, over the compute
    observed (extrapolated = False) and beyond it out to 1.5x the farthest target (True)."""
    rows = []
    for variant, fit in result.gaps.items():
        if not fit.fitted:
            continue
        preds = result.predictions[result.predictions["variant"] == variant]
        far = max(preds["target_compute"].max(), fit.max_c) if len(preds) else fit.max_c
        for lo, hi, extrapolated in ((fit.min_c, fit.max_c, False), (fit.max_c, far * 1.5, True)):
            for c in np.geomspace(lo, hi, BAND_POINTS):
                low, high = sc.interval(fit.boot_predict(c), fit.confidence) if len(fit.boot) else (math.nan, math.nan)
                rows.append({"variant": variant, "compute": float(c), "gap": fit.predict(c), "low": low, "high": high,
                             "extrapolated": extrapolated})
    return pd.DataFrame(rows, columns=["variant", "compute", "gap", "low", "high", "extrapolated"])
