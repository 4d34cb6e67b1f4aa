"""The paired t power where scipy's noncentral t gives NaN for a tail that cannot matter (stats/power.py).

Met by the input continuum report: an inconclusive row at d_z 1.02 in a 17-row Holm family asks the
power at 32 seed pairs, where nct.cdf of the lower tail is NaN although Phi(-nc) = 3.5e-9.
"""

from __future__ import annotations

import math

from scipy import integrate
from scipy import stats as sps

from fixedcode_study.analysis.stats.power import difference_power, seeds_for_difference


def power_by_quad(d: float, n: int, alpha: float) -> float:
    """P(|T| > t*) for T = (Z + d sqrt(n)) / V, integrated over V's chi density: no noncentral t involved."""
    dof, nc = n - 1, d * math.sqrt(n)
    crit = sps.t.isf(alpha / 2, dof)
    chi = sps.chi(dof, scale=1 / math.sqrt(dof))
    inner = lambda v: (sps.norm.sf(crit * v - nc) + sps.norm.cdf(-crit * v - nc)) * chi.pdf(v)
    return integrate.quad(inner, 0, math.inf, limit=400)[0]


def test_power_where_the_lower_tail_is_nan_but_negligible():
    d_z, alpha = 0.08265615438887389 / 0.08075750561255876, 0.05 / 34
    # scipy 1.17's nct.cdf(-t*, 31, nc) is NaN here: the power must still be the integral's
    assert abs(difference_power(d_z, 1.0, 32, alpha) - power_by_quad(d_z, 32, alpha)) < 1e-6
    assert seeds_for_difference(d_z, 1.0, alpha).finite
