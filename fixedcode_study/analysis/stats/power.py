"""How many paired seeds would settle a comparison: sample sizes for 80% power.

A paired comparison has observed mean difference delta and sd of the paired differences s (on the
metric's test scale, as in pairing.py: s = se * sqrt(n_pairs)). Taking (delta, s) as the truth
(a plug-in planning number, not a guarantee: from three pairs the 95% interval of s runs from
about 0.5 to 6 times the estimate), this module gives the smallest number of seed pairs n with
power >= 0.8 for

- **difference**: the two-sided paired t test of delta = 0 at level alpha. Power is the
  noncentral t probability P(|T| > t_{1-alpha/2, n-1}), T ~ t'(n-1, delta sqrt(n) / s), the same
  formula as statsmodels' TTestPower (Cohen 1988, ch. 2); the tests check the two agree. At large
  effects (d_z ~ 5-12, the fixed-code gaps here) scipy's nct.cdf of the far lower tail is NaN;
  statsmodels then returns NaN power or a wrong root, so that tail (below Phi(-nc)) is taken as 0,
  checked against direct quadrature over the sd.
- **equivalence**: TOST (Schuirmann 1987) within +-margin, each one-sided test at level alpha, at
  the true difference delta. Power is exact under normality: with z = (dbar - delta) sqrt(n) / s
  ~ N(0, 1) and V = S / s, (n - 1) V^2 ~ chi^2(n - 1), independent, both tests reject when
  (-margin - delta) sqrt(n)/s + t* V < z < (margin - delta) sqrt(n)/s - t* V, t* = t_{1-alpha, n-1},
  so power = E_V[Phi(a - t* V) - Phi(b + t* V); V < (a - b) / (2 t*)] (Owen 1965's Q function,
  integrated numerically here over the quantiles of V so the integrand is bounded for every n).

Holm: a row's verdict uses Holm-adjusted p-values, and a p-value below alpha/m is rejected by Holm
whatever the other rows do (Holm's adjusted p is at most m times the raw one). So the numbers the
report shows are solved at alpha/m, m = the size of the primary family (the Bonferroni-conservative
bound for Holm's first step); the same numbers at alpha alone (one test, no family) are kept next
to them in the CSV. Either way they are numbers of seed pairs in a new study, not extra seeds.

Not reachable: delta = 0 (no n detects a zero difference), |delta| >= margin (TOST power stays
below alpha there), s = 0 (no spread: nothing to test), no margin, or more than MAX_SEEDS pairs:
the value is math.inf (or NaN when the row is not a paired comparison) with a reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special
from scipy import stats as sps

from .core import PAIRED, WELCH
from .equivalence import PRIMARY

POWER = 0.8
MIN_SEEDS = 2           # a paired t test needs two pairs for one degree of freedom
MAX_SEEDS = 10_000_000  # beyond this the answer is "never, in practice"

# Reasons a number is not given (shown in the table as "— (reason)").
ZERO_DELTA = "Δ = 0"
OUTSIDE_MARGIN = "Δ outside the margin"
NO_SPREAD = "no spread"
NO_MARGIN = "no margin"
TOO_MANY = f"> {MAX_SEEDS:,}"
NOT_PAIRED = "not paired"    # a Welch row: no sd of paired differences
NOT_TESTED = "not tested"    # no spread or fewer than two runs: no test, so no power
EXPLORATORY = "exploratory"  # not a declared comparison: no verdict to settle

# Gauss-Legendre nodes for tost_power: its error is below 1e-6 in power (checked in the tests).
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(256)


@dataclass(frozen=True)
class SeedsNeeded:
    """Smallest number of seed pairs reaching the power; inf (not reachable) with a reason."""
    n: float
    reason: str = ""

    @property
    def finite(self) -> bool:
        return math.isfinite(self.n)


# A power's lower tail this small cannot move the seed search, which compares power with 0.8 (POWER):
# 1e-6 is far under any difference it can see, and still holds the NaN tails met at 32 seed pairs.
NEGLIGIBLE_TAIL = 1e-6


def difference_power(delta: float, sd: float, n: int, alpha: float) -> float:
    """Power of the two-sided paired t test of delta = 0 with n pairs (statsmodels' ttest_power)."""
    dof = n - 1
    nc = abs(delta) / sd * math.sqrt(n)
    crit = sps.t.isf(alpha / 2, dof)
    upper = float(sps.nct.sf(crit, dof, nc))
    lower = float(sps.nct.cdf(-crit, dof, nc))
    # scipy's nct.cdf returns NaN where the far tail underflows (e.g. dof 4, nc 9.9; and sporadically
    # at moderate nc: dof 15, nc 6.7, alpha 0.001; dof 31, nc 5.8, alpha 0.0015); T < 0 needs Z < -nc,
    # so that tail is below Phi(-nc) and counts as 0 once Phi(-nc) is negligible (NEGLIGIBLE_TAIL)
    if math.isnan(lower) and sps.norm.cdf(-nc) < NEGLIGIBLE_TAIL:
        lower = 0.0
    power = upper + lower
    if not math.isfinite(power):
        raise ValueError(f"paired t power not computable at n={n}, effect {delta / sd:g}")
    return power


def tost_power(delta: float, sd: float, margin: float, n: int, alpha: float) -> float:
    """Exact power of TOST (each one-sided test at alpha) within +-margin with n pairs at true delta.

    The expectation over V is taken on V's quantile scale u in [0, P(V < v_max)], where the
    integrand is bounded by 1 for every n (on V's own scale its density is a spike of width
    ~1/sqrt(2n) at large n), by Gauss-Legendre quadrature; V = sqrt(chi2_ppf(u) / (n - 1)) through
    scipy.special.gammaincinv. The tests check it against adaptive quadrature over V and against
    Monte-Carlo TOST decisions.
    """
    dof = n - 1
    root_n = math.sqrt(n)
    a = (margin - delta) * root_n / sd
    b = (-margin - delta) * root_n / sd
    crit = float(sps.t.isf(alpha, dof))
    v_max = (a - b) / (2 * crit)          # beyond it the two rejection regions no longer overlap
    u_max = float(special.gammainc(dof / 2, dof * v_max**2 / 2))   # P(V < v_max)
    if u_max <= 0.0:
        return 0.0
    u = (_NODES + 1) / 2 * u_max
    v = np.sqrt(2 * special.gammaincinv(dof / 2, u) / dof)
    inner = np.clip(special.ndtr(a - crit * v) - special.ndtr(b + crit * v), 0.0, None)
    return float(min(np.dot(_WEIGHTS, inner) * u_max / 2, 1.0))


def _smallest(power, target: float) -> SeedsNeeded:
    """Smallest n in [MIN_SEEDS, MAX_SEEDS] with power(n) >= target; power rises with n."""
    if power(MIN_SEEDS) >= target:
        return SeedsNeeded(MIN_SEEDS)
    low, high = MIN_SEEDS, MIN_SEEDS * 2
    while power(high) < target:   # double until the bracket holds the answer
        low, high = high, high * 2
        if high > MAX_SEEDS:
            if power(MAX_SEEDS) < target:
                return SeedsNeeded(math.inf, TOO_MANY)
            high = MAX_SEEDS
            break
    while high - low > 1:         # invariant: power(low) < target <= power(high)
        mid = (low + high) // 2
        low, high = (mid, high) if power(mid) < target else (low, mid)
    return SeedsNeeded(high)


def seeds_for_difference(delta: float, sd: float, alpha: float, power: float = POWER) -> SeedsNeeded:
    """Seed pairs for `power` to detect delta != 0 with a two-sided paired t test at level alpha."""
    if not (math.isfinite(delta) and math.isfinite(sd)):
        return SeedsNeeded(math.nan, NOT_PAIRED)
    if sd <= 0:
        return SeedsNeeded(math.inf, NO_SPREAD)
    if delta == 0:
        return SeedsNeeded(math.inf, ZERO_DELTA)
    return _smallest(lambda n: difference_power(delta, sd, n, alpha), power)


def seeds_for_equivalence(delta: float, sd: float, margin: float | None, alpha: float,
                          power: float = POWER) -> SeedsNeeded:
    """Seed pairs for `power` to show |delta| < margin by TOST (each one-sided test at alpha)."""
    if not (math.isfinite(delta) and math.isfinite(sd)):
        return SeedsNeeded(math.nan, NOT_PAIRED)
    if margin is None or not math.isfinite(margin):
        return SeedsNeeded(math.inf, NO_MARGIN)
    if sd <= 0:
        return SeedsNeeded(math.inf, NO_SPREAD)
    if abs(delta) >= margin:
        return SeedsNeeded(math.inf, OUTSIDE_MARGIN)
    return _smallest(lambda n: tost_power(delta, sd, margin, n, alpha), power)


def paired_sd(test: str, se: float, n_pairs: int) -> float:
    """The sd of the paired differences behind a comparison row (se = sd / sqrt(n)); NaN unless paired."""
    if test != PAIRED or not n_pairs:
        return math.nan
    return float(se) * math.sqrt(n_pairs)


def seeds_columns(table: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The seeds-needed columns for a comparison table (compare()'s rows, or its CSV read back).

    Holm families as in comparisons.py: the primary rows (all rows without a `family` column) with
    a finite p_value (difference) and those with a finite tost_p (equivalence); exploratory rows
    get no number (they have no verdict to settle). Columns: sd_diff; seeds_for_difference /
    seeds_for_equivalence at alpha/m (what the report shows) and *_unadjusted at alpha, each with a
    *_note giving the reason when there is no finite number; seeds_alpha_difference /
    seeds_alpha_equivalence the levels solved at. Only paired rows get numbers (a Welch row has no
    sd of paired differences: its arms did not share seeds under common random numbers).
    """
    primary = (table["family"] == PRIMARY) if "family" in table else pd.Series(True, index=table.index)
    m_diff = max(int(np.isfinite(table.loc[primary, "p_value"].astype(float)).sum()), 1)
    m_tost = max(int(np.isfinite(table.loc[primary, "tost_p"].astype(float)).sum()), 1)
    out = []
    for row, in_family in zip(table.itertuples(index=False), primary, strict=True):
        sd = paired_sd(row.test, row.se, int(row.n_pairs) if math.isfinite(row.n_pairs) else 0)
        margin = None if not math.isfinite(row.margin) else float(row.margin)
        if not in_family:
            diff = diff_1 = equiv = equiv_1 = SeedsNeeded(math.nan, EXPLORATORY)
        elif math.isnan(sd):
            why = NOT_PAIRED if row.test == WELCH else NOT_TESTED
            diff = diff_1 = equiv = equiv_1 = SeedsNeeded(math.nan, why)
        else:
            diff = seeds_for_difference(row.delta, sd, alpha / m_diff)
            diff_1 = seeds_for_difference(row.delta, sd, alpha)
            equiv = seeds_for_equivalence(row.delta, sd, margin, alpha / m_tost)
            equiv_1 = seeds_for_equivalence(row.delta, sd, margin, alpha)
        out.append({"sd_diff": sd,
                    "seeds_for_difference": diff.n, "seeds_for_difference_unadjusted": diff_1.n,
                    "seeds_for_difference_note": diff.reason, "seeds_alpha_difference": alpha / m_diff,
                    "seeds_for_equivalence": equiv.n, "seeds_for_equivalence_unadjusted": equiv_1.n,
                    "seeds_for_equivalence_note": equiv.reason, "seeds_alpha_equivalence": alpha / m_tost})
    return pd.DataFrame(out, index=table.index)
