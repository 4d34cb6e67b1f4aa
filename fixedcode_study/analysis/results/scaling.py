"""A compute ladder's scaling estimates (issues 25 and 40), computed once: per arm a law L(N, D) under
both parameter conventions with seed-bootstrap intervals (stats/scaling.py); per fixed arm the paired
gap read as the design allows (stats/ladder_gap.py: cell means, random-cell intervals, the compute
slope, the two factors log N and log D, curvature, a slope per size and per budget), its rows in
stated Holm families; what each fit predicts at the paper's and the earlier version's (N, D),
labelled with the extrapolation's distance; and the compute line's band for the figure. Every point
traces to a run (`points`, the scaling_jobs table).

A study gets them when the baseline and at least one other arm each ran at >= 2 model sizes and >= 2
token budgets (read/ladder.py: model_size, train_budget). The law and the ladder's gap fit need >= 3
of each and say so otherwise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..errors import AnalysisError
from ..read.ladder import epochs
from ..stats import scaling as sc
from ..stats.comparisons import resolve
from ..stats.ladder_gap import Extrapolation, LadderGap, extrapolate, ladder_gap
from ..stats.rows import in_family
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
    ladders: dict = field(default_factory=dict)       # variant -> LadderGap (variant - baseline), rows in families
    notes: list = field(default_factory=list)         # why a ladder fit was not made
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    bands: pd.DataFrame = field(default_factory=pd.DataFrame)   # each compute line and its band, for the figure
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
    """A ladder: the baseline and another arm each at several sizes and budgets, on one corpus (a law
    fitted across corpora would read a change of text as an effect of size or budget)."""
    points = scaling_points(study)
    if points.empty or points["data"].nunique(dropna=False) > 1:
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
    result.ladders, result.notes = ladders(result)
    result.predictions = predictions(result)
    result.bands = bands(result)
    return result


def ladder_input(result: Scaling, variant: str) -> pd.DataFrame:
    """The ladder's input for one arm (stats/ladder_gap.py): size, budget, seed, gap, n (the body's
    parameters, the same for both arms of a size), d (the budget in tokens) and compute."""
    body = result.points.groupby("model_size")["n_kaplan"].first()
    part = result.pairs[result.pairs["variant"] == variant]
    gaps = part.rename(columns={"model_size": "size", "train_budget": "budget"})
    return gaps.assign(n=gaps["size"].map(body), d=gaps["budget"].astype(float))[
        ["size", "budget", "seed", "gap", "n", "d", "compute"]]


# The ladder's stated families: each is Holm-adjusted over its own rows (every fixed arm together).
FAMILIES = {
    "compute_slope": "ladder: the gap's slope per decade of compute, one per fixed arm",
    "factors": "ladder: the gap's slope over size at fixed budget and over budget at fixed size, per fixed arm",
    "levels": "ladder: the gap's slope over budget at each size and over size at each budget, per fixed arm",
    "curvature": "ladder: curvature (log10 C squared; log N and log D terms jointly), per fixed arm",
}


def ladders(result: Scaling) -> tuple[dict[str, LadderGap], list[str]]:
    """Per fixed arm its LadderGap, the rows of each stated family Holm-adjusted over every arm."""
    fits, notes = {}, []
    for variant in dict.fromkeys(result.pairs["variant"]) if len(result.pairs) else ():
        try:
            fits[variant] = ladder_gap(ladder_input(result, variant), f"{variant} − {result.baseline}")
        except AnalysisError as err:
            notes.append(f"{variant} − {result.baseline}: no design-respecting gap fit ({err})")
    if not fits:
        return fits, notes
    arms = list(fits)
    slots = {"compute_slope": lambda f: [f.compute_slope],
             "factors": lambda f: [f.size_slope, f.budget_slope],
             "levels": lambda f: [*f.per_size, *f.per_budget],
             "curvature": lambda f: [f.compute_curvature, f.curvature]}
    adjusted = {}
    for key, take in slots.items():
        rows = [r for v in arms for r in take(fits[v])]
        family = in_family(rows, FAMILIES[key])
        at = 0
        for v in arms:
            k = len(take(fits[v]))
            adjusted[(key, v)] = family[at:at + k]
            at += k
    out = {}
    for v, fit in fits.items():
        slope, = adjusted[("compute_slope", v)]
        size, budget = adjusted[("factors", v)]
        levels = adjusted[("levels", v)]
        quad, curved = adjusted[("curvature", v)]
        out[v] = dataclasses.replace(fit, compute_slope=slope, size_slope=size, budget_slope=budget,
                                     per_size=levels[:len(fit.per_size)], per_budget=levels[len(fit.per_size):],
                                     compute_curvature=quad, curvature=curved)
    return out, notes


GAP_LINE, TWO_FACTOR = "gap vs compute (cell means)", "gap on log N, log D (cell means)"


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
    for variant in dict.fromkeys(result.pairs["variant"]) if len(result.pairs) else ():
        ladder = result.ladders.get(variant)
        input_name = points.loc[points["variant"] == variant, "input"].iloc[0]
        for target in POINTS:
            ran = input_name in target.arms
            paper_gap = measured.get(input_name, {}).get("gap_bpb", math.nan) if target is PAPER_POINT else math.nan
            common = {"variant": variant, "baseline": base, "target": target.key, "target_label": target.label,
                      "target_ran_arm": ran, "target_tokens": target.tokens, "target_compute": target.compute,
                      "assumed": target.assumed, "orders_compute": sc.orders(target.compute, max_c),
                      "orders_tokens": sc.orders(target.tokens, max_d),
                      "measured_wikitext_gap_bpb": paper_gap if ran else math.nan}
            body = target.params(sc.KAPLAN, False)
            for method, line in ((GAP_LINE, _extrapolation(ladder, compute=target.compute)),
                                 (TWO_FACTOR, _extrapolation(ladder, n=body, d=target.tokens))):
                orders_n = dict(line.orders).get("N", math.nan) if line else math.nan
                rows.append({**common, "method": method, "convention": "", "gap": line.estimate if line else math.nan,
                             "low": line.ci_low if line else math.nan, "high": line.ci_high if line else math.nan,
                             "n_variant": body if method == TWO_FACTOR else math.nan, "n_baseline": math.nan,
                             "orders_params": orders_n, "label": line.label if line else "not fitted",
                             "flags": "; ".join(line.flags) if line else "not fitted: needs 3 sizes and 3 budgets"})
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
                             "high": hi, "n_variant": nv, "n_baseline": nb, "orders_params": orders_n,
                             "label": "", "flags": flags})
    return pd.DataFrame(rows)


def _extrapolation(ladder: LadderGap | None, **point) -> Extrapolation | None:
    return extrapolate(ladder, **point) if ladder is not None else None


def bands(result: Scaling) -> pd.DataFrame:
    """Per fixed arm: the compute line on the cell means and its 95% t band (random-cell model) on a log
    grid of compute, over the compute observed (extrapolated = False) and beyond it out to 1.5x the
    farthest target (True)."""
    rows = []
    for variant, ladder in result.ladders.items():
        fit = ladder.compute_fit
        lowest = float(ladder.cells["compute"].min())
        preds = result.predictions[result.predictions["variant"] == variant]
        far = max(preds["target_compute"].max(), ladder.max_compute) if len(preds) else ladder.max_compute
        q = float(sps.t.ppf(0.5 + fit.confidence / 2, fit.dof)) if fit.dof > 0 else math.nan
        for lo, hi, extrapolated in ((lowest, ladder.max_compute, False), (ladder.max_compute, far * 1.5, True)):
            for c in np.geomspace(lo, hi, BAND_POINTS):
                mean, se = fit.predict({"C": float(c)})
                rows.append({"variant": variant, "compute": float(c), "gap": mean, "low": mean - q * se,
                             "high": mean + q * se, "extrapolated": extrapolated})
    return pd.DataFrame(rows, columns=["variant", "compute", "gap", "low", "high", "extrapolated"])
