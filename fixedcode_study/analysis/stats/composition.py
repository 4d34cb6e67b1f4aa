"""The composition measures summarised per arm (read/compose.py gives one value per pair of models).

    arm_rows(points, context)     per (context, arm, measure): pairs n, mean, sd and the 95% t interval
    by_k(stitches, context)       per (context, arm, stitch kind, k): the stitched loss minus the members'
                                  mean, its mean over pairs with the same interval (the stitch figure)
    along_path(paths, context)    per (context, arm, alpha): the path's excess over the endpoints' line,
                                  its mean over pairs and the pairs' lowest and highest (the barrier figure)

The pairs of one arm share no model (a seed is in one pair only: composition/declared.py), so they are
independent draws of the measure: the interval is mean ± t(0.975, n − 1) sd / sqrt(n), as a seed
summary's. An arm against another is not tested here: that is the comparison table's row
(stats/comparisons.py), paired over the two arms' pairs at the same seeds when every member records
common random numbers (stats/pairing.py), as two runs at one seed are, else Welch.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from .core import CONFIDENCE

ARM_COLUMNS = ["variant", "variant_order", "metric", "n", "mean", "sd", "ci_low", "ci_high", "runs"]


def t_interval(values, confidence: float = CONFIDENCE) -> tuple[int, float, float, float, float]:
    """(n, mean, sd, low, high) over independent values: the t interval on n − 1 df (NaN below two)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return 0, math.nan, math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n < 2:
        return n, mean, math.nan, math.nan, math.nan
    sd = float(x.std(ddof=1))
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return n, mean, sd, mean - half, mean + half


def _grouped(frame: pd.DataFrame, keys: list[str], column: str, extra: dict | None = None) -> pd.DataFrame:
    rows = []
    for key, group in frame.groupby(keys, sort=False, dropna=False):
        n, mean, sd, low, high = t_interval(group[column])
        rows.append(dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
                    | {"n": n, "mean": mean, "sd": sd, "ci_low": low, "ci_high": high}
                    | {name: how(group) for name, how in (extra or {}).items()})
    return pd.DataFrame(rows)


def arm_rows(points: pd.DataFrame, context: list[str], metrics: list[str]) -> pd.DataFrame:
    """Per context, arm and measure (in `metrics`' order): n pairs, mean, sd, t interval, the records."""
    if points.empty:
        return pd.DataFrame(columns=[*context, *ARM_COLUMNS])
    chosen = points[points["metric"].isin(metrics)]
    frame = _grouped(chosen, [*context, "variant", "metric"], "value",
                     {"variant_order": lambda g: g["variant_order"].iloc[0],
                      "runs": lambda g: ";".join(sorted(g["run"]))})
    order = {m: i for i, m in enumerate(metrics)}
    frame = frame.assign(_m=frame["metric"].map(order)).sort_values([*context, "variant_order", "_m"], kind="stable")
    return frame.drop(columns="_m")[[*context, *ARM_COLUMNS]].reset_index(drop=True)


def by_k(stitches: pd.DataFrame, context: list[str], order: dict) -> pd.DataFrame:
    """Per context, arm, kind and k: the mean stitched cost over pairs with its t interval."""
    if stitches.empty:
        return pd.DataFrame(columns=[*context, "variant", "kind", "k", "n", "mean", "sd", "ci_low", "ci_high"])
    frame = _grouped(stitches, [*context, "variant", "kind", "k"], "cost")
    frame = frame.assign(_o=frame["variant"].map(order)).sort_values([*context, "kind", "_o", "k"], kind="stable")
    return frame.drop(columns="_o").reset_index(drop=True)


def along_path(paths: pd.DataFrame, context: list[str], order: dict) -> pd.DataFrame:
    """Per context, arm and alpha: the mean excess over pairs, with the pairs' lowest and highest."""
    if paths.empty:
        return pd.DataFrame(columns=[*context, "variant", "alpha", "n", "mean", "low", "high"])
    keys = [*context, "variant", "alpha"]
    frame = (paths.groupby(keys, sort=False, dropna=False)["excess"]
             .agg(n="count", mean="mean", low="min", high="max").reset_index())
    frame = frame.assign(_o=frame["variant"].map(order)).sort_values([*context, "_o", "alpha"], kind="stable")
    return frame.drop(columns="_o").reset_index(drop=True)
