"""Number formatting shared by all tables, so a metric has the same precision everywhere.

Precision per metric: two significant digits of the smallest positive uncertainty (std over
seeds, or lm-eval stderr) in that metric's column; with no uncertainty at all, four
significant digits of the largest value. Capped to 0..6 decimals.
"""

from __future__ import annotations

import math

import numpy as np

MAX_DECIMALS = 6
# Guards floor(log10(.)) against float noise: a std of 0.01 computed as 0.00999999999 must still
# give 3 decimals, not 4.
_LOG_EPS = 1e-9


def decimals_for(uncertainties, values) -> int:
    u = np.asarray([x for x in uncertainties if x is not None], dtype=float)
    u = u[np.isfinite(u) & (u > 0)]
    if u.size:
        return int(np.clip(1 - math.floor(math.log10(u.min()) + _LOG_EPS), 0, MAX_DECIMALS))
    v = np.abs(np.asarray(list(values), dtype=float))
    v = v[np.isfinite(v) & (v > 0)]
    if v.size:
        return int(np.clip(3 - math.floor(math.log10(v.max()) + _LOG_EPS), 0, MAX_DECIMALS))
    return 2


def num(value, decimals: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{decimals}f}"


def mean_cell(mean: float, std: float, n: int, stderr: float, decimals: int) -> str:
    """'mean ± std (n=k)' over seeds; 'value ± stderr (n=1, stderr)' for one seed with lm-eval stderr."""
    if n >= 2:
        return f"{num(mean, decimals)} ± {num(std, decimals)} (n={n})"
    if n == 1 and stderr is not None and math.isfinite(stderr):
        return f"{num(mean, decimals)} ± {num(stderr, decimals)} (n=1, stderr)"
    return f"{num(mean, decimals)} (n={n})"


def integer(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{round(value):,}"


def p_value(p: float) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
