"""Seed summaries and Welch comparisons against the learned baseline.

Conventions (also stated in report.md):
- std is the sample standard deviation over seeds (ddof=1); with one seed there is none,
  and lm-eval's own stderr (when reported) is shown instead.
- Differences are variant minus learned. The 95% CI is Welch's: delta +/- t_{0.975, nu} * se with
  se^2 = s_v^2/n_v + s_l^2/n_l and Welch-Satterthwaite nu. The p-value is
  scipy.stats.ttest_ind(variant, learned, equal_var=False), i.e. the same test.
- With fewer than two seeds on either side no CI or p-value is computed ("n/a"): a spread
  over seeds cannot be estimated from one seed, and lm-eval's sampling stderr does not
  measure seed-to-seed variation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

CONFIDENCE = 0.95
# Metric-name fragments for which smaller is better; everything else (acc, acc_norm, f1,
# exact_match, ...) is treated as higher-is-better.
LOWER_IS_BETTER = ("ppl", "perplexity", "bpb", "bits_per_byte", "loss")
WITHIN = "within seed variation"
NOT_AVAILABLE = "n/a (n<2)"


def lower_is_better(metric: str) -> bool:
    return any(fragment in metric.lower() for fragment in LOWER_IS_BETTER)


def summarize(points: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group and metric: n, mean, std (ddof=1), lm-eval stderr when n == 1, run paths."""
    points = points[np.isfinite(points["value"])]
    keys = by + ["metric"]
    grouped = points.groupby(keys, sort=False, dropna=False)
    out = grouped["value"].agg(n="count", mean="mean", std="std").reset_index()
    first_stderr = grouped["stderr"].first().reset_index(drop=True)
    out["stderr"] = np.where(out["n"] == 1, first_stderr, np.nan)
    out["runs"] = grouped["run"].agg(lambda runs: ";".join(sorted(runs))).reset_index(drop=True)
    return out


@dataclass(frozen=True)
class Comparison:
    delta: float
    ci_low: float
    ci_high: float
    dof: float
    p_value: float
    n_variant: int
    n_baseline: int


def welch_compare(variant, baseline, confidence: float = CONFIDENCE) -> Comparison:
    a = np.asarray(variant, dtype=float)
    b = np.asarray(baseline, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    na, nb = len(a), len(b)
    delta = float(a.mean() - b.mean()) if na and nb else math.nan
    if na < 2 or nb < 2:
        return Comparison(delta, math.nan, math.nan, math.nan, math.nan, na, nb)
    va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    se = math.sqrt(va + vb)
    if se == 0.0:
        # Identical values within each arm: the difference is exact, no test is possible.
        return Comparison(delta, delta, delta, math.nan, math.nan, na, nb)
    dof = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half_width = sps.t.ppf(0.5 + confidence / 2, dof) * se
    p_value = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
    return Comparison(delta, delta - half_width, delta + half_width, float(dof), p_value, na, nb)


def verdict(comparison: Comparison, metric: str) -> str:
    if math.isnan(comparison.ci_low):
        return NOT_AVAILABLE
    if comparison.ci_low <= 0.0 <= comparison.ci_high:
        return WITHIN
    improved = comparison.delta < 0 if lower_is_better(metric) else comparison.delta > 0
    return "better" if improved else "worse"


def compare_to_baseline(points: pd.DataFrame, context: list[str], baseline_input: str = "learned") -> pd.DataFrame:
    """One row per (context, variant, metric) with the Welch comparison to the baseline input."""
    rows = []
    for ctx, group in points.groupby(context, sort=False, dropna=False):
        ctx = ctx if isinstance(ctx, tuple) else (ctx,)
        learned = group[group["input"] == baseline_input]
        if learned.empty:
            continue
        # The baseline is one variant: the plain `learned` row when present. Other learned
        # variants (e.g. a different init) are compared against it, never pooled into it.
        variants = list(dict.fromkeys(learned.sort_values("variant_order")["variant"]))
        base_variant = baseline_input if baseline_input in variants else variants[0]
        base = group[group["variant"] == base_variant]
        arms = group[group["variant"] != base_variant].groupby(["variant", "metric"], sort=False)
        for (variant, metric), arm in arms:
            ref = base[base["metric"] == metric]
            if ref.empty:
                continue
            cmp = welch_compare(arm["value"], ref["value"])
            rows.append(dict(zip(context, ctx, strict=True)) | {
                "variant": variant, "variant_order": arm["variant_order"].iloc[0], "metric": metric,
                "baseline_mean": float(ref["value"].mean()), "variant_mean": float(arm["value"].mean()),
                "n_variant": cmp.n_variant, "n_baseline": cmp.n_baseline, "delta": cmp.delta,
                "ci_low": cmp.ci_low, "ci_high": cmp.ci_high, "dof": cmp.dof, "p_value": cmp.p_value,
                "verdict": verdict(cmp, metric),
                "runs": ";".join(sorted(arm["run"])), "baseline_runs": ";".join(sorted(ref["run"])),
            })
    return pd.DataFrame(rows)
