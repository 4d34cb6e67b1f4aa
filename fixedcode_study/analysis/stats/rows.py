"""One tested quantity as a row: what a table cell or a generated sentence needs, and its Holm family.

Every test in trend.py, contrasts.py and ladder_gap.py returns `Tested` rows. A row is tested on its
own until it joins a family (`in_family`): then its p is Holm-adjusted over the stated family and
`shown` decides on the adjusted p. Holm is core.holm (the function every table uses, checked against
statsmodels' multipletests in the tests), so a row's verdict here and in a comparison table come from
one rule.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from .core import CONFIDENCE, EXACT, NONE, holm

UP, DOWN, NOT_SHOWN = "up", "down", "not shown"


@dataclass(frozen=True)
class Tested:
    """An estimate with its interval and test. `n` counts the independent units the interval rests on
    (`unit`: seeds, cells, ...); `method` says how it was computed, in words a Methods line can quote.
    `context` holds the row's labels (arm, size, budget, ...) as (key, value) pairs."""
    name: str
    estimate: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    dof: float
    method: str
    unit: str = "seeds"
    se: float = math.nan
    context: tuple[tuple[str, object], ...] = ()
    family: str = ""
    family_size: int = 0
    p_adjusted: float = math.nan
    confidence: float = CONFIDENCE

    @property
    def tested(self) -> bool:
        return math.isfinite(self.p_value)

    @property
    def p_decision(self) -> float:
        """The p a verdict uses: Holm-adjusted within its family, else the row's own."""
        return self.p_adjusted if self.family else self.p_value

    def shown(self, alpha: float | None = None) -> str:
        """UP / DOWN where the test rejects 0 at `alpha` (default: 1 - confidence), else NOT_SHOWN."""
        alpha = 1.0 - self.confidence if alpha is None else alpha
        p = self.p_decision
        if not (math.isfinite(p) and p < alpha and math.isfinite(self.estimate)) or self.estimate == 0:
            return NOT_SHOWN
        return UP if self.estimate > 0 else DOWN

    def get(self, key: str, default=None):
        return dict(self.context).get(key, default)

    def record(self) -> dict:
        """A flat dict for a table row: context first, then the numbers."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "context"}
        return dict(self.context) | fields


def rows_frame(rows: Iterable[Tested]) -> pd.DataFrame:
    return pd.DataFrame([r.record() for r in rows])


def in_family(rows: Sequence[Tested], family: str) -> tuple[Tested, ...]:
    """The rows as one Holm family named `family`: each gets p_adjusted and the family's size (rows
    without a finite p do not count and keep a NaN adjusted p)."""
    if not family:
        raise ValueError("a family needs a name that says what it holds")
    adjusted = holm([r.p_value for r in rows])
    size = int(np.isfinite([r.p_value for r in rows]).sum())
    return tuple(dataclasses.replace(r, family=family, family_size=size, p_adjusted=float(q))
                 for r, q in zip(rows, adjusted, strict=True))


def t_row(name: str, values, method: str, confidence: float = CONFIDENCE, unit: str = "seeds",
          context: tuple = ()) -> Tested:
    """The mean of independent values (one per unit) with its t interval and two-sided p against 0."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    mean = float(x.mean()) if n else math.nan
    if n < 2:
        return Tested(name, mean, math.nan, math.nan, math.nan, n, math.nan, method, unit, context=context,
                      confidence=confidence)
    se = float(x.std(ddof=1)) / math.sqrt(n)
    return from_se(name, mean, se, n - 1, n, method, confidence, unit, context)


def t_rows(name: str, columns, method: str, confidence: float = CONFIDENCE, unit: str = "seeds",
           contexts=None) -> list[Tested]:
    """`t_row` for each column of a complete (units x k) array, in one pass (no NaNs allowed)."""
    x = np.asarray(columns, dtype=float)
    n, k = x.shape
    contexts = contexts or [()] * k
    if n < 2 or not np.all(np.isfinite(x)):
        return [t_row(name, x[:, j], method, confidence, unit, contexts[j]) for j in range(k)]
    mean = x.mean(axis=0)
    se = x.std(axis=0, ddof=1) / math.sqrt(n)
    q = float(sps.t.ppf(0.5 + confidence / 2, n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * sps.t.sf(np.abs(mean) / se, n - 1)
    return [Tested(name, float(m), float(m - q * e), float(m + q * e), float(pv) if e > 0 else math.nan,
                   n, float(n - 1), method, unit, float(e), contexts[j], confidence=confidence)
            if e > 0 else from_se(name, float(m), float(e), n - 1, n, method, confidence, unit, contexts[j])
            for j, (m, e, pv) in enumerate(zip(mean, se, p, strict=True))]


def from_se(name: str, estimate: float, se: float, dof: float, n: int, method: str,
            confidence: float = CONFIDENCE, unit: str = "seeds", context: tuple = ()) -> Tested:
    """A t interval and two-sided p from an estimate, its standard error and degrees of freedom."""
    if not (math.isfinite(se) and se > 0 and math.isfinite(dof) and dof > 0):
        return Tested(name, estimate, math.nan, math.nan, math.nan, n, dof, method, unit, se, context,
                      confidence=confidence)
    half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * se
    p = float(2 * sps.t.sf(abs(estimate) / se, dof))
    return Tested(name, estimate, estimate - half, estimate + half, p, n, float(dof), method, unit, se, context,
                  confidence=confidence)


def from_comparison(name: str, comparison, method: str, confidence: float = CONFIDENCE,
                    context: tuple = ()) -> Tested:
    """A core.Comparison (paired or Welch t) as a row; n is the pairs, or the smaller arm for Welch."""
    n = comparison.n_pairs or min(comparison.n_a, comparison.n_b)
    if comparison.test == EXACT:
        method += ": not tested (no spread: the difference is exact)"
    elif comparison.test == NONE:
        method += ": not tested (fewer than 2 runs on a side)"
    return Tested(name, comparison.delta, comparison.ci_low, comparison.ci_high, comparison.p_value, n,
                  comparison.dof, method, "seed pairs" if comparison.n_pairs else "seeds", comparison.se, context,
                  confidence=confidence)


def equivalence_p(row: Tested, margin: float) -> float:
    """TOST of H0: |estimate| >= margin on the row's own se and df (the p an absence claim needs:
    "equivalent within ±margin" only when it is below alpha). NaN without an se or df."""
    if not (math.isfinite(row.se) and row.se > 0 and math.isfinite(row.dof) and row.dof > 0 and margin > 0):
        return math.nan
    lower = sps.t.sf((row.estimate + margin) / row.se, row.dof)    # H0: estimate <= -margin
    upper = sps.t.cdf((row.estimate - margin) / row.se, row.dof)   # H0: estimate >= +margin
    return float(max(lower, upper))
