"""Findings written from the verdicts, and the seeds that would settle a comparison (issue 24, points 2-3).

The Findings of a synthetic comparison table with one row of every verdict equivalence.verdict()
can return must state each verdict and nothing stronger. Seeds needed for a difference are checked
against statsmodels' TTestPower solver, the exact TOST power against adaptive quadrature and
against Monte-Carlo TOST decisions.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root until pyproject adds it

from fixedcode_study.analysis.stats import equivalence as eq
from fixedcode_study.analysis.stats.comparisons import Plan, compare
from fixedcode_study.analysis.stats.power import (
    MIN_SEEDS,
    NO_MARGIN,
    NO_SPREAD,
    OUTSIDE_MARGIN,
    POWER,
    ZERO_DELTA,
    difference_power,
    seeds_for_difference,
    seeds_for_equivalence,
    tost_power,
)
from fixedcode_study.analysis.tables.compare import seeds_cell
from fixedcode_study.analysis.tables.findings import finding, findings_lines

ALPHA = 0.05
SEEDS = (1, 2, 3, 4)
SEED_EFFECT = {1: 0.0, 2: 0.05, 3: -0.03, 4: 0.02}   # shared by every arm at a seed (common random numbers)
ALTERNATE = np.array([1.0, -1.0, 1.0, -1.0])         # per-seed wobble with mean 0


def _arm(name: str, shift: float, wobble: float, seeds=SEEDS, crn: bool = True) -> list[dict]:
    return [{"model": "cpu_tiny", "variant": name, "input": name, "variant_order": 0, "metric": "val_bpb",
             "value": 2.0 + SEED_EFFECT[s] + shift + wobble * ALTERNATE[i], "run": f"{name}/seed={s}",
             "seed": s, "crn": crn} for i, s in enumerate(seeds)]


# arm name -> the verdict its difference from the baseline is built to get (val_bpb, margin ±0.01)
BUILT = {"up": eq.WORSE, "down": eq.BETTER, "flat": eq.EQUIVALENT, "nudge": eq.EQUIVALENT_NONZERO,
         "noisy": eq.INCONCLUSIVE, "copy": eq.IDENTICAL, "single": eq.NOT_AVAILABLE, "unpaired": eq.INCONCLUSIVE,
         "shift": eq.WORSE}  # shift: the same +0.05 at every seed, no spread (known exactly, untested)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    base = _arm("base", 0.0, 0.0)
    points = pd.DataFrame(
        base + _arm("up", 0.1, 0.002) + _arm("down", -0.1, 0.002) + _arm("flat", 0.0, 0.001)
        + _arm("nudge", 0.004, 0.0003) + _arm("noisy", 0.02, 0.03) + [dict(r, variant="copy", input="copy",
                                                                             run=r["run"] + "c") for r in base]
        + _arm("single", 0.05, 0.0, seeds=(1,)) + _arm("unpaired", 0.02, 0.03, crn=False) + _arm("shift", 0.05, 0.0))
    diffs = compare(points, ["model"], Plan(baseline="base", fixed_pair=False), ["val_bpb"])
    return diffs.set_index("variant_a", drop=False)


def test_the_synthetic_table_has_every_verdict(table):
    assert table["verdict"].to_dict() == BUILT
    assert table.loc["shift", "test"] == "exact" and table.loc["unpaired", "test"] == "welch"
    every = {eq.BETTER, eq.WORSE, eq.EQUIVALENT, eq.EQUIVALENT_NONZERO, eq.INCONCLUSIVE, eq.IDENTICAL, eq.NOT_AVAILABLE}
    assert set(BUILT.values()) == every


# Words that claim a verdict. A sentence may use its own verdict's word and none of the others.
CLAIMS = ("better", "worse", "equivalent", "identical", "beats", "behind", "ahead", "trails", "outperforms",
          "no difference", "clearly", "same")
ALLOWED = {eq.BETTER: {"better"}, eq.WORSE: {"worse"}, eq.EQUIVALENT: {"equivalent"},
           eq.EQUIVALENT_NONZERO: {"equivalent"}, eq.INCONCLUSIVE: set(), eq.IDENTICAL: {"identical"},
           eq.NOT_AVAILABLE: set()}


def _said(label: str, p: float) -> str:
    return f"{label} < 0.001" if p < 0.001 else f"{label} = {p:.3f}"


def _bullets(lines: list[str]) -> dict[str, str]:
    return {re.match(r"- \*\*(\w+) − base\*\*", ln).group(1): ln for ln in lines if ln.startswith("- **") and " − base**" in ln}


def test_each_finding_states_its_verdict_and_nothing_stronger(table):
    bullets = _bullets(findings_lines(table.reset_index(drop=True)))
    assert set(bullets) == set(BUILT)
    for arm, text in bullets.items():
        verdict = BUILT[arm]
        said = {w for w in CLAIMS if re.search(rf"\b{w}\b", text, re.IGNORECASE)}
        assert said == ALLOWED[verdict], (arm, said, text)
        row = table.loc[arm]
        if verdict in (eq.BETTER, eq.WORSE):
            assert f"{arm} is *{verdict}* than base" in text and f"[{row.ci_low:.3f}, {row.ci_high:.3f}]" in text
            if row.test == "exact":
                assert "no spread between seeds, so Δ is exact and untested" in text and "Holm p" not in text
            else:
                assert _said("Holm p", row.p_holm) in text
        if verdict in (eq.EQUIVALENT, eq.EQUIVALENT_NONZERO):
            assert "are *equivalent* within ±0.01" in text and _said("TOST Holm p", row.tost_p_holm) in text
        if verdict == eq.INCONCLUSIVE:
            assert "*inconclusive*: neither a difference (Holm p = " in text and "nor equivalence within ±0.01" in text
            assert _said("Holm p", row.p_holm) in text
            assert _said("TOST Holm p", row.tost_p_holm) in text
            assert f"95% CI [{row.ci_low:.3f}, {row.ci_high:.3f}]" in text
    assert "*not tested*" in bullets["single"] and "*identical*" in bullets["copy"]


def test_inconclusive_rows_carry_the_seeds_that_would_settle_them(table):
    noisy, unpaired = table.loc["noisy"], table.loc["unpaired"]
    sd = noisy.se * math.sqrt(noisy.n_pairs)
    m_diff = int(np.isfinite(table["p_value"]).sum())  # the Holm family of the tests of Δ = 0
    assert noisy.seeds_for_difference == seeds_for_difference(noisy.delta, sd, ALPHA / m_diff).n
    assert noisy.seeds_for_difference_unadjusted == seeds_for_difference(noisy.delta, sd, ALPHA).n
    assert noisy.seeds_for_difference > noisy.seeds_for_difference_unadjusted  # Holm-safe α/m asks for more
    # |Δ| = 0.02 is outside the ±0.01 margin: no number of seeds shows equivalence
    assert noisy.seeds_for_equivalence == math.inf and noisy.seeds_for_equivalence_note == OUTSIDE_MARGIN
    assert seeds_cell(noisy) == f"{int(noisy.seeds_for_difference):,} / — (Δ outside the margin)"
    assert math.isnan(unpaired.seeds_for_difference) and seeds_cell(unpaired) == "— (not paired)"
    assert seeds_cell(table.loc["up"]) == ""  # decided rows need no more seeds
    text = "\n".join(findings_lines(table.reset_index(drop=True)))
    assert f"{int(noisy.seeds_for_difference):,} to show Δ ≠ 0 ({int(noisy.seeds_for_difference_unadjusted):,} at α" in text
    assert "no number of seed pairs can show equivalence within ±0.01 (Δ outside the margin)" in text
    assert "the runs are not paired" in _bullets(text.splitlines())["unpaired"]
    # a number no larger than the pairs already run is said to be so (the noncentral t is skewed at few dof)
    few = noisy.copy()
    few["seeds_for_difference"] = few["seeds_for_difference_unadjusted"] = noisy.n_pairs
    assert f"{noisy.n_pairs} to show Δ ≠ 0 (no more than the {noisy.n_pairs} run here)" in finding(few, 3)
    assert (f"a paired study of {int(noisy.seeds_for_difference):,} seed pairs would give every inconclusive "
            "paired row (1) at least 80% power") in text


def test_findings_can_be_read_back_from_a_table_written_before_the_seeds_columns(table, tmp_path):
    old = table.reset_index(drop=True).drop(columns=[c for c in table if c.startswith(("seeds_", "sd_diff"))])
    old.to_csv(tmp_path / "comparisons.csv", index=False)
    assert findings_lines(pd.read_csv(tmp_path / "comparisons.csv")) == findings_lines(table.reset_index(drop=True))


# ---------------------------------------------------------------- seeds for a difference: statsmodels


@pytest.mark.parametrize("delta,sd,alpha", [
    (0.0062, 0.0267, 0.05), (0.0062, 0.0267, 0.05 / 3), (-0.0418, 0.0094, 0.05 / 14), (0.037, 0.031, 0.05 / 14),
    (0.001, 0.03, 0.05), (0.5, 1.0, 0.01), (-0.2, 0.3, 0.05),
])
def test_seeds_for_a_difference_match_statsmodels(delta, sd, alpha):
    solver = TTestPower()
    expected = math.ceil(solver.solve_power(effect_size=abs(delta) / sd, alpha=alpha, power=POWER,
                                            alternative="two-sided"))
    got = seeds_for_difference(delta, sd, alpha)
    assert got.n == expected > MIN_SEEDS
    n = int(got.n)
    assert difference_power(delta, sd, n, alpha) >= POWER > difference_power(delta, sd, n - 1, alpha)
    for k in (n - 1, n, n + 1):  # the same power function (statsmodels' own gives NaN at some large nc)
        reference = solver.power(abs(delta) / sd, k, alpha)
        assert math.isnan(reference) or math.isclose(difference_power(delta, sd, k, alpha), reference, rel_tol=1e-9)


def _difference_power_by_quad(d, n, alpha):
    """P(|T| > t*) for T = (Z + d sqrt(n)) / V, integrated over V's chi density: no noncentral t involved."""
    dof, nc = n - 1, d * math.sqrt(n)
    crit = sps.t.isf(alpha / 2, dof)
    chi = sps.chi(dof, scale=1 / math.sqrt(dof))
    inner = lambda v: (sps.norm.sf(crit * v - nc) + sps.norm.cdf(-crit * v - nc)) * chi.pdf(v)
    return integrate.quad(inner, 0, math.inf, limit=400)[0]


@pytest.mark.parametrize("d_z,alpha", [(4.79, 0.05 / 3), (9.17, 0.05 / 14), (12.0, 0.05 / 3), (2.0, 0.05)])
def test_large_effects_where_the_noncentral_t_tail_underflows(d_z, alpha):
    # At d_z ~ 5-12 and small α, scipy's nct.cdf of the far tail is NaN, and statsmodels' TTestPower then
    # returns NaN power or a wrong root (at d_z 4.79, α/3 it solves 2.39 although 3 pairs have power 0.68)
    n = MIN_SEEDS
    while (power := _difference_power_by_quad(d_z, n, alpha)) < POWER:
        assert abs(difference_power(d_z, 1.0, n, alpha) - power) < 1e-9
        n += 1
    assert abs(difference_power(d_z, 1.0, n, alpha) - power) < 1e-9
    assert seeds_for_difference(d_z, 1.0, alpha).n == n   # the first n whose power reaches 80%


def test_unreachable_seeds_say_why():
    assert seeds_for_difference(0.0, 0.02, ALPHA).n == math.inf and seeds_for_difference(0.0, 0.02, ALPHA).reason == ZERO_DELTA
    assert seeds_for_difference(0.01, 0.0, ALPHA).reason == NO_SPREAD
    for delta in (0.01, -0.02):  # on or outside the margin: TOST cannot reach 80%
        got = seeds_for_equivalence(delta, 0.02, 0.01, ALPHA)
        assert got.n == math.inf and got.reason == OUTSIDE_MARGIN and not got.finite
    assert seeds_for_equivalence(0.0, 0.02, None, ALPHA).reason == NO_MARGIN
    assert seeds_for_equivalence(0.0, 0.0, 0.01, ALPHA).reason == NO_SPREAD
    assert seeds_for_equivalence(0.0, 0.001, 0.01, ALPHA).n == MIN_SEEDS  # tiny spread: two pairs already do


# ---------------------------------------------------------------- seeds for equivalence: exact TOST power


def _tost_power_by_quad(delta, sd, margin, n, alpha):
    """The same expectation over V = S/sd, integrated adaptively on V's own scale with its chi density."""
    dof, root_n = n - 1, math.sqrt(n)
    a, b = (margin - delta) * root_n / sd, (-margin - delta) * root_n / sd
    crit = sps.t.isf(alpha, dof)
    v_max = (a - b) / (2 * crit)
    chi = sps.chi(dof, scale=1 / math.sqrt(dof))
    inner = lambda v: (sps.norm.cdf(a - crit * v) - sps.norm.cdf(b + crit * v)) * chi.pdf(v)
    peak = math.sqrt(max(dof - 1, 0) / dof)  # the chi mode: tell quad where the mass is
    return integrate.quad(inner, 0, v_max, points=[peak] if peak < v_max else None, epsabs=1e-12, limit=400)[0]


@pytest.mark.parametrize("delta,sd,margin,n,alpha", [
    (0.0, 0.02, 0.01, 3, 0.05), (0.0, 0.0267, 0.01, 63, 0.05), (0.0062, 0.0267, 0.01, 307, 0.05),
    (-0.003, 0.005, 0.01, 7, 0.05 / 3), (0.009, 0.0267, 0.01, 4409, 0.05),
])
def test_tost_power_matches_adaptive_quadrature(delta, sd, margin, n, alpha):
    assert abs(tost_power(delta, sd, margin, n, alpha) - _tost_power_by_quad(delta, sd, margin, n, alpha)) < 1e-6


def _simulated_tost_power(delta, sd, margin, n, alpha, reps, rng) -> float:
    """Share of simulated paired studies whose two one-sided t tests both reject (TOST decides equivalence)."""
    d = rng.normal(delta, sd, size=(reps, n))
    mean, se = d.mean(axis=1), d.std(axis=1, ddof=1) / math.sqrt(n)
    crit = sps.t.isf(alpha, n - 1)
    return float((((mean + margin) / se > crit) & ((mean - margin) / se < -crit)).mean())


@pytest.mark.parametrize("delta,sd,margin,alpha", [
    (0.0, 0.02, 0.01, 0.05), (0.004, 0.01, 0.01, 0.05 / 3), (-0.003, 0.005, 0.01, 0.05), (0.002, 0.015, 0.01, 0.05),
])
def test_seeds_for_equivalence_reach_80_percent_power_by_monte_carlo(delta, sd, margin, alpha):
    got = seeds_for_equivalence(delta, sd, margin, alpha)
    n = int(got.n)
    assert got.finite and 3 <= n <= 120
    rng = np.random.default_rng(20261201)
    reps = 100_000
    tol = 4 * math.sqrt(POWER * (1 - POWER) / reps)   # 4 Monte-Carlo standard errors
    at_n = _simulated_tost_power(delta, sd, margin, n, alpha, reps, rng)
    below = _simulated_tost_power(delta, sd, margin, n - 1, alpha, reps, rng)
    assert at_n >= POWER - tol and below < POWER + tol
    assert abs(at_n - tost_power(delta, sd, margin, n, alpha)) < tol
    assert abs(below - tost_power(delta, sd, margin, n - 1, alpha)) < tol
    assert tost_power(delta, sd, margin, n, alpha) >= POWER > tost_power(delta, sd, margin, n - 1, alpha)


def test_difference_power_survives_scipys_sporadic_nan_in_the_far_lower_tail():
    """scipy's nct.cdf gave NaN at dof 15, nc 6.69, alpha 0.001 (the output_side study's Holm-safe
    level over 50 rows): the lower tail is below Phi(-6.69) = 1e-11 there, so power is the upper tail."""
    import scipy.stats as sps

    from fixedcode_study.analysis.stats.power import difference_power

    crit = sps.t.isf(0.001 / 2, 15)  # scipy 1.x: nct.cdf(-crit, 15, 6.69) is NaN here
    power = difference_power(1.6727, 1.0, 16, 0.001)
    assert power == pytest.approx(float(sps.nct.sf(crit, 15, 1.6727 * 4)), abs=1e-9)
