"""A trend over ordered buckets (code weight, target frequency, window position), tested over seeds.

Input: the paired gap per seed and bucket (arm a minus arm b at one seed, common random numbers, on
one common partition of the tokens), columns seed, bucket, gap, plus optionally a numeric position
column and a weight column (the bucket's tokens). Method:

- **Slope.** Per seed, the (weighted) least-squares slope of the bucket gap on the bucket's position
  (its ordinal 0, 1, ... by default, or the given numeric column). The slopes of independent seeds
  are i.i.d. under the model gap_sb = profile_b + e_sb (e independent across seeds), so their mean
  gets a t interval with n_seeds - 1 df: exact under normality, whatever the profile's shape or the
  buckets' correlation within a seed. The estimand is the slope of the least-squares line through
  the population profile (with the same weights), not a claim that the profile is a line.
- **Curvature.** Per seed, the quadratic coefficient of a (weighted) fit on the centred position
  (needs 3 positions), its mean with the same t interval.
- **Monotonicity.** Each adjacent step (bucket k to k+1) is a paired difference over seeds; a step
  *against* the slope's sign is counted, and called shown against it when its paired t test (Holm
  over the steps) rejects 0 in that direction.

The reading (`Trend.reading`): "increases" / "decreases" only when the slope is shown (CI excludes 0,
or Holm within a stated family) and no step goes against it in the seed means; a shown slope with
steps against it is "a linear trend, not monotone"; otherwise "not shown". Buckets absent from some
seed are left out (`dropped`), since a per-seed slope over different buckets estimates different
things.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import AnalysisError
from .core import CONFIDENCE, holm
from .rows import DOWN, NOT_SHOWN, UP, Tested, t_row, t_rows

INCREASES, DECREASES, NOT_MONOTONE = "increases", "decreases", "linear trend, not monotone"


@dataclass(frozen=True)
class Step:
    """The mean change from one bucket to the next over seeds, its paired test and Holm over the steps."""
    lower: object
    upper: object
    change: Tested
    against: bool          # its mean goes the other way from the slope
    shown_against: bool    # and its Holm-adjusted paired test rejects 0


@dataclass(frozen=True)
class Trend:
    slope: Tested
    curvature: Tested
    steps: tuple[Step, ...]
    buckets: tuple
    positions: tuple[float, ...]
    weighted: bool
    dropped: tuple = ()

    @property
    def monotone(self) -> bool:
        return not any(s.against for s in self.steps)

    @property
    def steps_against(self) -> int:
        return sum(s.against for s in self.steps)

    @property
    def steps_shown_against(self) -> int:
        return sum(s.shown_against for s in self.steps)

    def reading(self, alpha: float | None = None) -> str:
        direction = self.slope.shown(alpha)
        if direction == NOT_SHOWN:
            return NOT_SHOWN
        if not self.monotone:
            return NOT_MONOTONE
        return INCREASES if direction == UP else DECREASES

    def with_slope(self, slope: Tested) -> Trend:
        """The same trend with its slope row replaced (e.g. by its row in a Holm family)."""
        return dataclasses.replace(self, slope=slope)


def _wide(gaps: pd.DataFrame, value: str) -> tuple[pd.DataFrame, tuple]:
    missing = {"seed", "bucket", value} - set(gaps.columns)
    if missing:
        raise AnalysisError(f"bucket_trend: the gaps frame lacks column(s) {sorted(missing)}; "
                            "give one row per seed and bucket with seed, bucket and gap")
    if gaps.duplicated(["seed", "bucket"]).any():
        raise AnalysisError("bucket_trend: a (seed, bucket) appears twice; give one gap per seed and bucket")
    wide = gaps.pivot(index="seed", columns="bucket", values=value).sort_index(axis=1)
    complete = wide.columns[wide.notna().all(axis=0)]
    dropped = tuple(c for c in wide.columns if c not in set(complete))
    return wide[complete], dropped


def _per_bucket(gaps: pd.DataFrame, column: str, buckets) -> np.ndarray:
    values = gaps.groupby("bucket")[column]
    if (values.nunique() > 1).any():
        raise AnalysisError(f"bucket_trend: column {column!r} must be one value per bucket (it is the "
                            "bucket's position or weight), but it varies across seeds")
    return values.first().reindex(buckets).to_numpy(dtype=float)


def _wls_poly(x: np.ndarray, y: np.ndarray, w: np.ndarray, degree: int) -> np.ndarray:
    """Coefficients (highest degree first) of a weighted polynomial fit, one fit per row of y."""
    xc = x - np.average(x, weights=w)
    design = np.vander(xc, degree + 1)
    root = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(design * root[:, None], (y * root).T, rcond=None)
    return coef.T


def bucket_trend(gaps: pd.DataFrame, position: str | None = None, weight: str | None = None,
                 value: str = "gap", confidence: float = CONFIDENCE, context: tuple = ()) -> Trend:
    """The trend of the per-bucket paired gap over ordered buckets (see the module docstring).

    gaps: one row per seed and bucket; columns seed, bucket (sortable: the buckets' order), `value`
    (default gap), and the `position` / `weight` columns when given. position None: the ordinal of
    the bucket in sorted order; weight None: every bucket counts the same.
    """
    wide, dropped = _wide(gaps, value)
    buckets = tuple(wide.columns)
    x = np.arange(len(buckets), dtype=float) if position is None else _per_bucket(gaps, position, buckets)
    w = np.ones(len(buckets)) if weight is None else _per_bucket(gaps, weight, buckets)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(w)) and np.all(w > 0)):
        raise AnalysisError("bucket_trend: positions must be finite and weights positive in every bucket")
    y = wide.to_numpy(dtype=float)
    where = f"on {'the ' + position if position else 'the bucket ordinal'}" + (f", weighted by {weight}" if weight else "")
    distinct = len(np.unique(x))
    slopes = _wls_poly(x, y, w, 1)[:, 0] if distinct >= 2 else np.full(len(y), math.nan)
    slope = t_row("slope of the gap over buckets", slopes,
                  f"per-seed least-squares slope {where}; t over seeds", confidence, context=context)
    curves = _wls_poly(x, y, w, 2)[:, 0] if distinct >= 3 else np.full(len(y), math.nan)
    curvature = t_row("curvature of the gap over buckets", curves,
                      f"per-seed quadratic coefficient {where} (centred); t over seeds", confidence, context=context)
    return Trend(slope, curvature, _steps(wide, slope, confidence, context), buckets, tuple(x.tolist()),
                 weight is not None, dropped)


def _steps(wide: pd.DataFrame, slope: Tested, confidence: float, context: tuple) -> tuple[Step, ...]:
    cols = list(wide.columns)
    y = wide.to_numpy(dtype=float)
    edges = list(zip(cols, cols[1:], strict=False))
    changes = t_rows("change to the next bucket", y[:, 1:] - y[:, :-1],
                     "paired difference of adjacent buckets; t over seeds", confidence,
                     contexts=[context + (("lower", a), ("upper", b)) for a, b in edges])
    adjusted = holm([c.p_value for c in changes])
    shown = slope.shown()
    sign = 1.0 if shown == UP else -1.0 if shown == DOWN else float(np.sign(np.nan_to_num(slope.estimate)))
    alpha = 1.0 - confidence
    out = []
    for (a, b), change, q in zip(edges, changes, adjusted, strict=True):
        against = bool(sign and change.estimate * sign < 0)
        out.append(Step(a, b, change, against, bool(against and math.isfinite(q) and q < alpha)))
    return tuple(out)
