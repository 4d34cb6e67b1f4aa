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
CIs: percentile intervals of a crossed bootstrap that resamples matrices and seeds independently
with replacement (Owen 2007, "pigeonhole bootstrap"), which is conservative (too wide rather than
too narrow); with 5 matrices and 3 seeds they are rough, and say so by their width.
Seeds are matched across matrices because, with common random numbers, seed j gives every
matrix the same body initialisation and data order; without CRN the seed factor still labels
the run but its effect is then just part of the noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from .core import CONFIDENCE

N_BOOT = 2000
BOOT_SEED = 12345  # fixed so a report is reproducible


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


def decompose(y: np.ndarray, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
              confidence: float = CONFIDENCE) -> Decomposition:
    """Estimates, F-test p-values and crossed-bootstrap CIs for a complete I x J grid (I, J >= 2)."""
    y = np.asarray(y, dtype=float)
    i, j = y.shape
    if i < 2 or j < 2 or not np.isfinite(y).all():
        raise ValueError("need a complete grid of at least 2 matrices x 2 seeds")
    ms_m, ms_s, ms_r = mean_squares(y)
    df_m, df_s, df_r = i - 1, j - 1, (i - 1) * (j - 1)
    p_m = float(sps.f.sf(ms_m / ms_r, df_m, df_r)) if ms_r > 0 else np.nan
    p_s = float(sps.f.sf(ms_s / ms_r, df_s, df_r)) if ms_r > 0 else np.nan
    estimates = {k: float(v) for k, v in components(y).items()}
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, i, size=(n_boot, i))
    cols = rng.integers(0, j, size=(n_boot, j))
    boot = components(y[rows[:, :, None], cols[:, None, :]])
    tail = 100 * (1 - confidence) / 2
    ci = {k: (float(np.nanpercentile(v, tail)), float(np.nanpercentile(v, 100 - tail))) for k, v in boot.items()}
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
