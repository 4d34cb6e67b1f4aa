"""Which runs of two arms form pairs, and which test a comparison therefore uses.

Two runs are a pair when they ran with the same seed in the same comparison context (model,
data) AND both record common random numbers: results.json ``init.scheme`` =
"per_group_generators", i.e. body/head initialisation and data order come from per-group
generators seeded by the run seed alone, so every input variant at one seed starts from the same
body and sees the same batches. Only then does the seed-to-seed variation cancel in a difference,
which is what makes the paired test valid and more powerful. Runs without that record (older
runs, W&B runs logged without it) are treated as independent samples: Welch.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .core import CONFIDENCE, NONE, Comparison, paired_compare, welch_compare

MIN_PAIRS = 2

# Why a comparison did not use the paired test (shown in the table's test column).
WHY_NOT_CRN = "no CRN"   # the runs do not record init.scheme = per_group_generators
WHY_FEW_PAIRS = "<2 seed pairs"


def matched_pairs(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Seeds present in both arms where both runs are CRN. Columns: seed, a, b, run_a, run_b.
    Input frames have columns seed, value, run, crn (one row per run)."""
    cols = ["seed", "value", "run"]
    left = a[a["crn"].astype(bool) & a["seed"].notna()][cols]
    right = b[b["crn"].astype(bool) & b["seed"].notna()][cols]
    # a seed that appears twice in one arm cannot be matched unambiguously: leave it out
    left = left.drop_duplicates("seed", keep=False)
    right = right.drop_duplicates("seed", keep=False)
    merged = left.merge(right, on="seed", suffixes=("_a", "_b"))
    return merged.rename(columns={"value_a": "a", "value_b": "b"}).sort_values("seed").reset_index(drop=True)


def compare_arms(a: pd.DataFrame, b: pd.DataFrame, confidence: float = CONFIDENCE) -> tuple[Comparison, str]:
    """The comparison of arm a minus arm b and a short note on the test choice:
    paired when >= 2 CRN seed pairs exist, else Welch when both arms have >= 2 runs, else n/a."""
    pairs = matched_pairs(a, b)
    pairs = pairs[np.isfinite(pairs["a"]) & np.isfinite(pairs["b"])]
    if len(pairs) >= MIN_PAIRS:
        return paired_compare(pairs["a"], pairs["b"], confidence), ""
    comparison = welch_compare(a["value"], b["value"], confidence)
    if comparison.test == NONE:
        return comparison, ""
    crn = a["crn"].astype(bool).all() and b["crn"].astype(bool).all()
    return comparison, WHY_FEW_PAIRS if crn else WHY_NOT_CRN


def test_label(comparison: Comparison, why: str) -> str:
    if comparison.test == NONE:
        return "n/a (n<2)"
    if comparison.test == "exact":
        return "none (no spread)"
    return comparison.test + (f" ({why})" if why and comparison.test != "paired" else "")


def n_label(comparison: Comparison) -> str:
    if comparison.test == "paired" or (comparison.test == "exact" and comparison.n_pairs):
        return f"{comparison.n_pairs} pairs"
    return f"{comparison.n_a}/{comparison.n_b}"


def paired_curve_gap(a: pd.DataFrame, b: pd.DataFrame, confidence: float = CONFIDENCE) -> tuple[pd.DataFrame, str]:
    """Gap a - b along training, from curves (columns run, seed, crn, step, tokens, value).

    Paired when >= 2 CRN seed pairs exist: per pair, the difference at steps logged by both runs;
    then, at steps present in every pair, the mean over pairs with a t interval (n - 1 dof).
    Otherwise Welch at steps logged by every run of both arms. Returns (frame with tokens, gap,
    low, high, n; test name). Steps are never assumed to be evenly spaced.
    """
    runs_a = a.drop_duplicates("run")[["run", "seed", "crn"]].assign(value=0.0)
    runs_b = b.drop_duplicates("run")[["run", "seed", "crn"]].assign(value=0.0)
    pairs = matched_pairs(runs_a, runs_b)
    wide_a = a.pivot_table(index="step", columns="run", values="value", aggfunc="last")
    wide_b = b.pivot_table(index="step", columns="run", values="value", aggfunc="last")
    tokens = pd.concat([a, b]).groupby("step")["tokens"].median()
    if len(pairs) >= MIN_PAIRS:
        diffs = pd.concat({p.seed: wide_a[p.run_a] - wide_b[p.run_b] for p in pairs.itertuples()}, axis=1)
        diffs = diffs.dropna(how="any")  # steps present in both runs of every pair
        n = diffs.shape[1]
        mean, se = diffs.mean(axis=1), diffs.std(axis=1, ddof=1) / math.sqrt(n)
        half = _t_half(se, n - 1, confidence)
        test = "paired"
    else:
        wide_a, wide_b = wide_a.dropna(how="any"), wide_b.dropna(how="any")
        steps = wide_a.index.intersection(wide_b.index)
        wide_a, wide_b = wide_a.loc[steps], wide_b.loc[steps]
        na, nb = wide_a.shape[1], wide_b.shape[1]
        n = min(na, nb)
        mean = wide_a.mean(axis=1) - wide_b.mean(axis=1)
        if na >= 2 and nb >= 2:
            va, vb = wide_a.var(axis=1, ddof=1) / na, wide_b.var(axis=1, ddof=1) / nb
            se = np.sqrt(va + vb)
            with np.errstate(divide="ignore", invalid="ignore"):
                dof = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
            half = _t_half(se, dof, confidence)
        else:
            half = pd.Series(np.nan, index=mean.index)
        test = "welch" if na >= 2 and nb >= 2 else "n/a"
    out = pd.DataFrame({"tokens": tokens.reindex(mean.index), "gap": mean, "low": mean - half,
                        "high": mean + half, "n": n})
    return out.dropna(subset=["tokens", "gap"]).sort_values("tokens"), test


def _t_half(se, dof, confidence: float):
    from scipy import stats as sps

    dof = np.asarray(dof, dtype=float)
    with np.errstate(invalid="ignore"):
        q = np.where(np.isfinite(dof) & (dof > 0), sps.t.ppf(0.5 + confidence / 2, np.where(dof > 0, dof, 1)), np.nan)
    return se * q
