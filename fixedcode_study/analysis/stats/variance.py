"""How much of the spread comes from the GF(2) matrix, and how much from the run seed?

Model (two-way crossed random effects, one run per cell): y_ij = mu + a_i + b_j + e_ij with
matrix effects a_i ~ N(0, s2_matrix), seed effects b_j ~ N(0, s2_seed) and a residual
e_ij ~ N(0, s2_resid) that also holds the matrix x seed interaction (inseparable without
replicates). With I matrices and J seeds, the ANOVA (method of moments) estimates are
    MS_m = J sum_i (ybar_i. - ybar..)^2 / (I - 1)          E[MS_m] = s2_resid + J s2_matrix
    MS_s = I sum_j (ybar_.j - ybar..)^2 / (J - 1)          E[MS_s] = s2_resid + I s2_seed
    MS_r = sum_ij (y_ij - ybar_i. - ybar_.j + ybar..)^2 / ((I - 1)(J - 1)) = s2_resid
    s2_matrix = max(0, (MS_m - MS_r) / J),   s2_seed = max(0, (MS_s - MS_r) / I)
(equal to REML for balanced data when no estimate is truncated). Shares are each component over
their sum. p-values: the exact F tests MS_m / MS_r and MS_s / MS_r of "no matrix (seed) effect".

CIs (95%), from the mean squares, which under the model are independent with
df_q MS_q / E[MS_q] ~ chi2(df_q), df = I - 1, J - 1, (I - 1)(J - 1):
- s2_resid: the exact interval df_r MS_r / chi2 quantiles (Burdick & Graybill 1992,
  "Confidence Intervals on Variance Components").
- s2_matrix, s2_seed and the three shares: generalized confidence intervals (Weerahandi 1993,
  JASA 88:899; for this two-way crossed design Hamada & Weerahandi 2000, J. Quality Technology
  32:241, and Burdick, Borror & Montgomery 2005, "Design and Analysis of Gauge R&R Studies").
  Each E[MS_q] gets the generalized pivot T_q = df_q MS_q / W_q with W_q ~ chi2(df_q) drawn
  independently; s2_matrix* = (T_m - T_r) / J, s2_seed* = (T_s - T_r) / I, s2_resid* = T_r, and
  the interval is the central 95% of the draws of each component or share, clipped to [0, inf)
  or [0, 1]. The draws are not truncated before the shares are formed: truncating them piles
  the residual share at 1 and drops its coverage to ~0.90 when the residual dominates.
  The draws come from a fixed seed, so a report is reproducible.
Coverage of nominal 95% under this model (4000 simulated data sets each, 10k draws; the test
tests/analysis/test_analysis_variance.py checks >= 0.93 at the first four rows):
    grid     s2 matrix / seed / resid   var matrix  seed  resid   share matrix  seed  resid
    5 x 3    1   / 0.5 / 0.5               0.956  0.954  0.952       0.965  0.960  0.957
    5 x 3    0.1 / 0.5 / 0.5               0.959  0.954  0.952       0.965  0.958  0.962
    10 x 3   1   / 0.5 / 0.5               0.952  0.949  0.954       0.959  0.954  0.957
    10 x 3   0.1 / 0.5 / 0.5               0.952  0.949  0.954       0.964  0.955  0.955
  and between 0.94 and 0.98 for every quantity over 30 settings (2 x 2, 3 x 2, 5 x 3, 8 x 6,
  10 x 3; components from 0 to 5, including a dominant residual). A component that is truly 0
  is covered ~0.975: its lower bound is 0, so only the upper tail can miss.
The crossed "pigeonhole" bootstrap used before (Owen 2007) covered only 86 / 82 / 66% (5 x 3) and
96 / 72 / 76% (10 x 3) for var matrix / seed / resid at 1 / 0.5 / 0.5 (2000 data sets): a
resample of 3 seeds holds at most 2 distinct ones 78% of the time, so it cannot show their spread.
Modified large-sample intervals (Ting, Burdick, Graybill et al. 1990) cover as well at 5 x 3 and
10 x 3 but fell to 0.89 at 2 x 2 with large components, which complete_grid can leave.
Seeds are matched across matrices because, with common random numbers, seed j gives every
matrix the same body initialisation and data order; without CRN the seed factor still labels
the run but its effect is then just part of the noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..read.variants import variant_label
from .core import CONFIDENCE
from .grouping import COMPARED_FINAL, comparison_points, context_columns, metric_order
from .metrics import to_scale

# Generalized-pivot draws per interval. The upper bound of s2_seed with 3 seeds (2 df, a heavy
# 1/chi2 tail) is the noisiest: its Monte Carlo sd is ~2% of the interval's width at 100k draws
# (7% at 10k); every other bound is under 1%.
N_DRAWS = 100_000
DRAW_SEED = 12345  # fixed so a report is reproducible


def mean_squares(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MS_matrix, MS_seed, MS_resid of (..., I, J) arrays (batched over leading axes)."""
    i, j = y.shape[-2:]
    grand = y.mean(axis=(-2, -1), keepdims=True)
    rows = y.mean(axis=-1, keepdims=True)
    cols = y.mean(axis=-2, keepdims=True)
    ms_m = j * ((rows - grand) ** 2).sum(axis=(-2, -1)) / (i - 1)
    ms_s = i * ((cols - grand) ** 2).sum(axis=(-2, -1)) / (j - 1)
    ms_r = ((y - rows - cols + grand) ** 2).sum(axis=(-2, -1)) / ((i - 1) * (j - 1))
    return ms_m, ms_s, ms_r


def components(y: np.ndarray) -> dict[str, np.ndarray]:
    """Variance components and shares of (..., I, J) arrays."""
    i, j = y.shape[-2:]
    ms_m, ms_s, ms_r = mean_squares(y)
    var = {"matrix": np.maximum(0.0, (ms_m - ms_r) / j), "seed": np.maximum(0.0, (ms_s - ms_r) / i), "resid": ms_r}
    total = var["matrix"] + var["seed"] + var["resid"]
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = {f"share_{k}": np.where(total > 0, v / np.where(total > 0, total, 1.0), np.nan) for k, v in var.items()}
    return {f"var_{k}": v for k, v in var.items()} | shares


@dataclass
class Decomposition:
    n_matrices: int
    n_seeds: int
    mean: float
    estimates: dict[str, float]                 # var_*, share_*
    ci: dict[str, tuple[float, float]]
    p_matrix: float
    p_seed: float


def intervals(ms_m, ms_s, ms_r, i: int, j: int, n_draws: int = N_DRAWS, seed: int = DRAW_SEED,
              confidence: float = CONFIDENCE) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(low, high) of every var_* and share_* from mean squares of (...)-batched I x J grids.

    Exact chi-square interval for s2_resid, generalized confidence intervals (see the module
    docstring) for the rest. One set of pivot draws serves the whole batch, so each grid gets
    exactly the interval that decompose gives it alone.
    """
    df_m, df_s, df_r = i - 1, j - 1, (i - 1) * (j - 1)
    ms_m, ms_s, ms_r = (np.asarray(ms, dtype=float) for ms in (ms_m, ms_s, ms_r))
    tails = ((1 - confidence) / 2, (1 + confidence) / 2)
    ci = {"var_resid": (df_r * ms_r / sps.chi2.ppf(tails[1], df_r), df_r * ms_r / sps.chi2.ppf(tails[0], df_r))}
    rng = np.random.default_rng(seed)
    w_m, w_s, w_r = (rng.chisquare(df, n_draws) for df in (df_m, df_s, df_r))
    t_r = df_r * ms_r[..., None] / w_r                       # pivot of E[MS_r] = s2_resid
    draws = {"matrix": (df_m * ms_m[..., None] / w_m - t_r) / j,  # E[MS_m] = s2_resid + J s2_matrix
             "seed": (df_s * ms_s[..., None] / w_s - t_r) / i}
    # T_m / J + T_s / I + T_r (1 - 1/I - 1/J) > 0 for I, J >= 2: the untruncated total is positive
    # unless every mean square is 0 (a constant grid), where the shares are undefined.
    total = draws["matrix"] + draws["seed"] + t_r
    positive = total > 0
    safe_total = np.where(positive, total, 1.0)

    def central(x: np.ndarray, high: float) -> tuple[np.ndarray, np.ndarray]:
        low_q, high_q = np.quantile(x, tails, axis=-1)
        return np.clip(low_q, 0.0, high), np.clip(high_q, 0.0, high)

    for name, d in draws.items():
        ci[f"var_{name}"] = central(d, np.inf)
    for name, d in (draws | {"resid": t_r}).items():
        ci[f"share_{name}"] = central(np.where(positive, d / safe_total, np.nan), 1.0)
    return ci


def decompose(y: np.ndarray, n_draws: int = N_DRAWS, seed: int = DRAW_SEED,
              confidence: float = CONFIDENCE) -> Decomposition:
    """Estimates, F-test p-values and CIs (see the module docstring) for a complete I x J grid (I, J >= 2)."""
    y = np.asarray(y, dtype=float)
    i, j = y.shape
    if i < 2 or j < 2 or not np.isfinite(y).all():
        raise ValueError("need a complete grid of at least 2 matrices x 2 seeds")
    ms_m, ms_s, ms_r = mean_squares(y)
    df_m, df_s, df_r = i - 1, j - 1, (i - 1) * (j - 1)
    p_m = float(sps.f.sf(ms_m / ms_r, df_m, df_r)) if ms_r > 0 else np.nan
    p_s = float(sps.f.sf(ms_s / ms_r, df_s, df_r)) if ms_r > 0 else np.nan
    estimates = {k: float(v) for k, v in components(y).items()}
    bounds = intervals(ms_m, ms_s, ms_r, i, j, n_draws, seed, confidence)
    ci = {k: (float(bounds[k][0]), float(bounds[k][1])) for k in estimates}
    return Decomposition(i, j, float(y.mean()), estimates, ci, p_m, p_s)


def complete_grid(frame: pd.DataFrame, row: str, col: str) -> tuple[pd.DataFrame, list[str]]:
    """The largest complete rows x cols sub-grid of ``frame`` (columns row, col, value), dropping the
    level with the most missing cells first; returns the pivot and what was dropped."""
    grid = frame.pivot_table(index=row, columns=col, values="value", aggfunc="first")
    dropped = []
    while grid.isna().any().any() and min(grid.shape) >= 2:
        row_missing = grid.isna().mean(axis=1)
        col_missing = grid.isna().mean(axis=0)
        if row_missing.max() >= col_missing.max():
            level = row_missing.idxmax()
            grid = grid.drop(index=level)
            dropped.append(f"{row}={level}")
        else:
            level = col_missing.idxmax()
            grid = grid.drop(columns=level)
            dropped.append(f"{col}={level}")
    return grid, dropped


# ------------------------------------------------------------------------------------ a study's designs

MATRIX = "input_props.matrix_seed"


def _groups(study):
    """(context key, input, group label, runs) for every matrix x seed design in the study."""
    jobs = study.included_jobs
    if MATRIX not in jobs:
        return
    context = context_columns(study.jobs)
    for ctx, ctx_jobs in jobs.groupby(context, sort=False, dropna=False):
        ctx = ctx if isinstance(ctx, tuple) else (ctx,)
        for input_name, group in ctx_jobs.groupby("input", sort=False):
            props = study.label_props.get(input_name, [])
            if MATRIX not in props:
                continue
            others = [p for p in props if p != MATRIX]
            keyed = group.assign(_key=group[others].astype(str).agg("|".join, axis=1) if others else "")
            for _, sub in keyed.groupby("_key", sort=False):
                if sub[MATRIX].nunique() >= 2 and sub["seed"].nunique() >= 2:
                    yield ctx, variant_label(input_name, sub.iloc[0], others), sub


def variance_rows(study) -> tuple[pd.DataFrame, list[str]]:
    points = comparison_points(study)
    metrics = metric_order(points, COMPARED_FINAL)
    context = context_columns(study.jobs)
    rows, notes = [], []
    for ctx, label, sub in _groups(study):
        runs = sub.set_index("run")
        for metric in metrics:
            pts = points[points["run"].isin(runs.index) & (points["metric"] == metric)]
            frame = pd.DataFrame({"matrix": runs.loc[pts["run"], MATRIX].to_numpy(),
                                  "seed": runs.loc[pts["run"], "seed"].to_numpy(),
                                  "value": to_scale(pts["value"], metric)})
            grid, dropped = complete_grid(frame, "matrix", "seed")
            if min(grid.shape) < 2:
                continue
            if dropped:
                notes.append(f"matrix x seed variance of {label}, {metric}: incomplete grid, left out "
                             + ", ".join(dropped))
            dec = decompose(grid.to_numpy())
            row = dict(zip(context, ctx, strict=True)) | {
                "group": label, "metric": metric, "n_matrices": dec.n_matrices, "n_seeds": dec.n_seeds,
                "matrices": ";".join(map(str, grid.index)), "seeds": ";".join(map(str, grid.columns)),
                "mean": dec.mean, "p_matrix": dec.p_matrix, "p_seed": dec.p_seed}
            for key, value in dec.estimates.items():
                row[key] = value
                row[f"{key}_low"], row[f"{key}_high"] = dec.ci[key]
            rows.append(row)
    return pd.DataFrame(rows), notes
