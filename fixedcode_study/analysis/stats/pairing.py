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
    left, right = _crn_runs(a), _crn_runs(b)
    shared = sorted(set(left) & set(right))
    return pd.DataFrame({"seed": pd.Series(shared, dtype=a["seed"].dtype if len(shared) else float),
                         "a": [left[s][0] for s in shared], "b": [right[s][0] for s in shared],
                         "run_a": [left[s][1] for s in shared], "run_b": [right[s][1] for s in shared]})


def _crn_runs(frame: pd.DataFrame) -> dict:
    """seed -> (value, run) of an arm's CRN runs; a seed that appears twice in the arm cannot be matched
    unambiguously and is left out. Plain arrays, not a merge: the breakdown pairs thousands of buckets."""
    ok = frame["crn"].to_numpy(dtype=bool) & frame["seed"].notna().to_numpy()
    seeds = frame["seed"].to_numpy()[ok]
    values = frame["value"].to_numpy(dtype=float)[ok]
    runs = frame["run"].to_numpy()[ok]
    unique, counts = np.unique(seeds, return_counts=True)
    once = set(unique[counts == 1].tolist())
    return {s: (v, r) for s, v, r in zip(seeds.tolist(), values.tolist(), runs.tolist(), strict=True) if s in once}


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

    Runs are aligned by training tokens, not by step (see ``curves_on_token_grid``): the grid is
    every token count either arm validated at; a run's value there is its own logged value where its
    arm's schedule has that point, and, where only the other arm's schedule has it, its value
    interpolated linearly in log tokens between its own neighbouring validations. Interpolation is a
    model of the curve between validations, not a measurement; when both arms share one schedule
    nothing is interpolated and the gap is exactly the difference of logged values. No run is
    extrapolated: the curve covers only the token range every compared run trained through, so it
    ends at the last validation of the arm that trained fewer tokens.

    Paired when >= 2 CRN seed pairs exist: per pair, the difference on the grid; then, at points
    present in every pair, the mean over pairs with a t interval (n - 1 dof). Otherwise Welch at
    points where every run of both arms has a value. Returns (frame with tokens, gap, low, high, n,
    interpolated (some run's value at that point is interpolated); test name). Validation points
    are never assumed to be evenly spaced.
    """
    a, b = (_curve_points(x) for x in (a, b))
    wide_a, wide_b, interpolated = curves_on_token_grid(a, b)
    runs_a = a.drop_duplicates("run")[["run", "seed", "crn"]].assign(value=0.0)
    runs_b = b.drop_duplicates("run")[["run", "seed", "crn"]].assign(value=0.0)
    pairs = matched_pairs(runs_a, runs_b)
    if len(pairs) >= MIN_PAIRS:
        diffs = pd.concat({p.seed: wide_a[p.run_a] - wide_b[p.run_b] for p in pairs.itertuples()}, axis=1)
        diffs = diffs.dropna(how="any")  # points where both runs of every pair have a value
        n = diffs.shape[1]
        mean, se = diffs.mean(axis=1), diffs.std(axis=1, ddof=1) / math.sqrt(n)
        half = _t_half(se, n - 1, confidence)
        test = "paired"
    else:
        wide_a, wide_b = wide_a.dropna(how="any"), wide_b.dropna(how="any")
        points = wide_a.index.intersection(wide_b.index)
        wide_a, wide_b = wide_a.loc[points], wide_b.loc[points]
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
    out = pd.DataFrame({"tokens": mean.index.to_numpy(dtype=float), "gap": mean.to_numpy(),
                        "low": (mean - half).to_numpy(), "high": (mean + half).to_numpy(), "n": n,
                        "interpolated": interpolated.reindex(mean.index).to_numpy(dtype=bool)})
    return out.dropna(subset=["gap"]).sort_values("tokens").reset_index(drop=True), test


def _curve_points(curve: pd.DataFrame) -> pd.DataFrame:
    """Finite values at known token counts; a point logged twice by one run (a resumed run) keeps
    the last row."""
    curve = curve[np.isfinite(curve["value"].astype(float)) & np.isfinite(curve["tokens"].astype(float))]
    return curve.drop_duplicates(["run", "tokens"], keep="last")


def curves_on_token_grid(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Two arms' curves (columns run, tokens, value) on one grid of training tokens.

    The grid is the union of the token counts the two arms validated at. An arm's schedule is the
    token counts any of its runs logged; at a grid point on its own schedule a run keeps its logged
    value, and a run that skipped that validation has none there (a missing validation is not filled
    in). At a grid point only the other arm's schedule has, the run's value is interpolated linearly
    in log tokens between its own neighbouring validations, and only within its own first and last
    positive-token validation (never extrapolated). Returns (a, b: grid x run, NaN where a run has no
    value; per grid point, whether some run's value there is interpolated).
    """
    schedules = [set(x["tokens"].astype(float)) for x in (a, b)]
    grid = pd.Index(sorted(schedules[0] | schedules[1]), dtype=float, name="tokens")
    wides, interpolated = [], pd.Series(False, index=grid)
    for curve, own in zip((a, b), schedules, strict=True):
        logged = curve.pivot(index="tokens", columns="run", values="value").reindex(grid)
        foreign = ~grid.isin(list(own)) & (grid > 0)
        if foreign.any():
            for run, points in curve.groupby("run", sort=False):
                knots = points[points["tokens"] > 0].sort_values("tokens")
                if knots.empty:
                    continue
                x = np.log(knots["tokens"].to_numpy(dtype=float))
                where = foreign & (grid >= knots["tokens"].iloc[0]) & (grid <= knots["tokens"].iloc[-1])
                logged.loc[where, run] = np.interp(np.log(grid[where].to_numpy()), x, knots["value"].to_numpy(dtype=float))
            interpolated |= pd.Series(foreign, index=grid) & logged.notna().any(axis=1)
        wides.append(logged)
    return wides[0], wides[1], interpolated


def _t_half(se, dof, confidence: float):
    from scipy import stats as sps

    dof = np.asarray(dof, dtype=float)
    with np.errstate(invalid="ignore"):
        q = np.where(np.isfinite(dof) & (dof > 0), sps.t.ppf(0.5 + confidence / 2, np.where(dof > 0, dof, 1)), np.nan)
    return se * q
