"""The statistics: seed summaries, paired and Welch t comparisons, standardized effects, Holm.

Conventions (also stated in report.md's methods):
- std is the sample standard deviation over seeds (ddof=1).
- A comparison is arm a minus arm b. Paired (runs matched by seed, common random numbers): the
  differences d_i = a_i - b_i give delta = mean(d), se = sd(d)/sqrt(n), nu = n - 1; the p-value is
  scipy.stats.ttest_rel(a, b). Welch (unmatched runs): se^2 = s_a^2/n_a + s_b^2/n_b,
  Welch-Satterthwaite nu; the p-value is scipy.stats.ttest_ind(a, b, equal_var=False). Either way
  the CI is delta +/- t(0.975, nu) * se, i.e. the interval of the same test.
- Standardized effects: d_z = mean(d) / sd(d) for paired data; Hedges' g (pooled sd, small-sample
  factor J = 1 - 3 / (4 nu - 1), nu = n_a + n_b - 2) otherwise. Their CIs, for the population
  standardized difference, invert the noncentral t distribution of the observed t statistic
  (exact under normality; a normal approximation would be far too narrow with three seeds).
- Multiplicity: Holm adjusted p-values are the step-down formula below, equal to the bit to statsmodels'
  `multipletests(method="holm")` (which calls gc.collect() on every call: about 0.5 s in a process
  that holds torch); Benjamini-Hochberg comes from `multipletests`.
- With fewer than two runs on a side (or fewer than two pairs and no Welch possible) nothing is
  tested: one seed carries no information about seed-to-seed variation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

from .metrics import lower_is_better

# lower_is_better is re-exported: callers have long imported it from here
__all__ = ["CONFIDENCE", "Comparison", "adjust", "hedges_g", "holm", "lower_is_better", "noncentral_ci", "paired_compare",
           "summarize", "welch_compare"]

CONFIDENCE = 0.95
PAIRED, WELCH, EXACT, NONE = "paired", "welch", "exact", "n/a"
# A spread this small relative to the values is floating-point noise (e.g. bitwise-identical runs
# whose difference was formed in floating point): treat it as no spread, not as a huge effect.
SPREAD_RTOL = 1e-12


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
    """Arm a minus arm b on one metric (on the scale the metric is tested on)."""
    test: str           # paired | welch | exact (no spread: the difference is known exactly) | n/a
    delta: float
    ci_low: float
    ci_high: float
    dof: float
    p_value: float
    se: float
    n_a: int
    n_b: int
    n_pairs: int = 0
    effect_name: str = ""     # d_z (paired) | g (Hedges, independent)
    effect: float = math.nan
    effect_low: float = math.nan
    effect_high: float = math.nan


def _no_spread(sd: float, *arrays: np.ndarray) -> bool:
    scale = max((float(np.max(np.abs(a))) for a in arrays if len(a)), default=0.0)
    return sd <= SPREAD_RTOL * max(scale, 1e-300)


def _clean(values) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[np.isfinite(x)]


def noncentral_ci(t_obs: float, dof: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """CI for the noncentrality parameter given an observed t: the values nc with
    P(T <= t_obs | nc) = 1 - alpha/2 (lower) and alpha/2 (upper). NaN where it cannot be solved."""
    if not (math.isfinite(t_obs) and math.isfinite(dof) and dof > 0):
        return math.nan, math.nan
    alpha = 1.0 - confidence

    def solve(target: float) -> float:
        def f(nc: float) -> float:  # decreasing in nc
            return sps.nct.cdf(t_obs, dof, nc) - target

        width = 4.0 + abs(t_obs)
        lo, hi = t_obs - width, t_obs + width
        for _ in range(60):  # widen the bracket until it holds the root
            if f(lo) > 0 > f(hi):
                return optimize.brentq(f, lo, hi, xtol=1e-10)
            width *= 2
            lo, hi = t_obs - width, t_obs + width
        return math.nan

    try:
        return solve(1.0 - alpha / 2), solve(alpha / 2)
    except (ValueError, RuntimeError):
        return math.nan, math.nan


def paired_compare(a, b, confidence: float = CONFIDENCE) -> Comparison:
    """Paired t on aligned arrays (a[i] and b[i] share a seed). Non-finite pairs are dropped."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    n = len(a)
    d = a - b
    delta = float(d.mean()) if n else math.nan
    if n < 2:
        return Comparison(NONE, delta, math.nan, math.nan, math.nan, math.nan, math.nan, n, n, n)
    sd = float(d.std(ddof=1))
    if _no_spread(sd, a, b):
        return Comparison(EXACT, delta, delta, delta, math.nan, math.nan, 0.0, n, n, n)
    se = sd / math.sqrt(n)
    dof = n - 1
    half = sps.t.ppf(0.5 + confidence / 2, dof) * se
    p = float(sps.ttest_rel(a, b).pvalue)
    d_z = delta / sd
    nc_lo, nc_hi = noncentral_ci(d_z * math.sqrt(n), dof, confidence)
    return Comparison(PAIRED, delta, delta - half, delta + half, float(dof), p, se, n, n, n,
                      "d_z", d_z, nc_lo / math.sqrt(n), nc_hi / math.sqrt(n))


def welch_compare(a, b, confidence: float = CONFIDENCE) -> Comparison:
    """Welch t on two independent samples; Hedges' g with a noncentral-t CI as the standardized effect."""
    a, b = _clean(a), _clean(b)
    na, nb = len(a), len(b)
    delta = float(a.mean() - b.mean()) if na and nb else math.nan
    if na < 2 or nb < 2:
        return Comparison(NONE, delta, math.nan, math.nan, math.nan, math.nan, math.nan, na, nb)
    va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    se = math.sqrt(va + vb)
    if _no_spread(se, a, b):
        # Identical values within each arm: the difference is exact, no test is possible.
        return Comparison(EXACT, delta, delta, delta, math.nan, math.nan, 0.0, na, nb)
    dof = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = sps.t.ppf(0.5 + confidence / 2, dof) * se
    p = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
    g, g_lo, g_hi = hedges_g(a, b, confidence)
    return Comparison(WELCH, delta, delta - half, delta + half, float(dof), p, se, na, nb, 0, "g", g, g_lo, g_hi)


def hedges_g(a: np.ndarray, b: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Hedges' g = J (mean_a - mean_b) / s_pooled, and the CI of the population standardized
    difference from the noncentral t (J only de-biases the point estimate; the interval is exact as is)."""
    na, nb = len(a), len(b)
    dof = na + nb - 2
    pooled = math.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / dof)
    if pooled == 0.0:
        return math.nan, math.nan, math.nan
    j = 1.0 - 3.0 / (4.0 * dof - 1.0)
    d = (a.mean() - b.mean()) / pooled
    scale = math.sqrt(1.0 / na + 1.0 / nb)
    nc_lo, nc_hi = noncentral_ci(d / scale, dof, confidence)
    return float(j * d), float(nc_lo * scale), float(nc_hi * scale)


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), computed as statsmodels'
    `multipletests(method="holm")` computes them. NaNs stay NaN and do not count as tests."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    order = np.argsort(p[idx])
    stepped = np.maximum.accumulate(p[idx][order] * np.arange(len(idx), 0, -1))
    out[idx[order]] = np.minimum(stepped, 1.0)
    return out


def adjust(p_values, method: str) -> np.ndarray:
    """statsmodels' `multipletests` adjusted p-values over the finite entries ("holm", "fdr_bh", ...);
    NaN entries stay NaN and are not tests."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    if len(idx):
        out[idx] = multipletests(p[idx], method=method)[1]
    return out
