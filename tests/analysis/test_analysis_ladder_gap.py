"""The ladder's paired gap read as the design allows (issue 40, point 2).

On a synthetic 3 sizes x 4 budgets x 3 seeds ladder with a random cell effect, the random-cell
interval covers the true slope at about its nominal rate while the seed-only interval does not; the
fit equals statsmodels' MixedLM (REML) on a balanced ladder and OLS on the cell means; the curvature
tests find planted curvature; the reading says "decreases with compute" only when the random-cell
interval excludes 0; an extrapolation is labelled with its distance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

from fixedcode_study.analysis.errors import AnalysisError
from fixedcode_study.analysis.stats.ladder_gap import (cell_means, cluster_bootstrap_slope, extrapolate, ladder_gap,
                                                       reading)
from fixedcode_study.analysis.stats.rows import DOWN, NOT_SHOWN
from fixedcode_study.analysis.stats.scaling import fit_gap

RNG_SEED = 4041
SIZES = {"d32": 26_784, "d48": 60_000, "d64": 106_000}      # body parameters of a 3-size ladder (d32 is the real one)
BUDGETS = (2**19, 2**21, 2**22, 2**23)
SLOPE = -0.08


def synthetic(rng, slope: float = SLOPE, s_cell: float = 0.05, s_seed: float = 0.01, seeds: int = 3,
              extra=None) -> pd.DataFrame:
    """gap = 0.3 + slope (log10 C - mean) [+ extra(logN, logD)] + u_cell + e, C = 6 N D, so the slope
    per decade is the same over compute, over size at fixed budget and over budget at fixed size."""
    rows = []
    for size, n in SIZES.items():
        for d in BUDGETS:
            u = rng.normal(0.0, s_cell)
            for seed in range(1, seeds + 1):
                rows.append({"size": size, "budget": d, "seed": seed, "n": n, "d": d, "compute": 6.0 * n * d,
                             "noise": u + rng.normal(0.0, s_seed)})
    frame = pd.DataFrame(rows)
    lc, ln, ld = (np.log10(frame[c]) for c in ("compute", "n", "d"))
    frame["gap"] = 0.3 + slope * (lc - lc.mean()) + frame.pop("noise")
    if extra is not None:
        frame["gap"] += extra(ln - ln.mean(), ld - ld.mean())
    return frame


def test_the_random_cell_interval_covers_the_true_slope_and_the_seed_only_one_does_not():
    """200 ladders with s_cell = 0.05 and s_seed = 0.01 (about the compute ladder's own estimates:
    0.069 and 0.011 for binary16): the random-cell intervals of the compute slope and of both factor
    slopes cover the truth 88-99% of the time at 95% nominal; the seed-only t interval over per-seed
    slopes covers it under 75% (about 37% here: the seeds share every cell's effect)."""
    rng = np.random.default_rng(RNG_SEED)
    reps = 200
    hits = dict.fromkeys(("compute", "size", "budget", "seed_only"), 0)
    for _ in range(reps):
        fit = ladder_gap(synthetic(rng), n_boot=50)
        for key, row in (("compute", fit.compute_slope), ("size", fit.size_slope), ("budget", fit.budget_slope),
                         ("seed_only", fit.seed_only)):
            hits[key] += row.ci_low <= SLOPE <= row.ci_high
    rates = {k: v / reps for k, v in hits.items()}
    for key in ("compute", "size", "budget"):
        assert 0.88 <= rates[key] <= 0.99, rates
    assert rates["seed_only"] < 0.75, rates


@pytest.mark.slow
def test_coverage_over_many_ladders_including_the_two_stage_bootstrap():
    """300 ladders, seeded (measured on this stream: random-cell 95.3%, two-stage bootstrap 91.0%,
    seed-only 28.7%; with no cell effect seed-only 95.0% and the two-stage bootstrap 99.7%; over
    1000 ladders 95.1%, 91.1%, 31.4%, 94.2% and 99.5%): random-cell 93-97%; the bootstrap 88-97%
    (12 clusters: below nominal); seed-only far below; with no cell effect the seed-only interval is
    fine, which is why it looks right on paper, and resampling seeds within cells makes the
    bootstrap conservative (module docstring). On the same ladders a 90% bootstrap interval (a wrong
    percentile) covers 85.0%, a one-stage bootstrap (cells only) 91.0% without a cell effect, and a
    z seed-only interval 82.3% without one: each fails its bound."""
    rng = np.random.default_rng(RNG_SEED + 100)
    reps = 300
    hits = dict.fromkeys(("compute", "boot", "seed_only", "seed_only_no_cell", "boot_no_cell"), 0)
    for _ in range(reps):
        fit = ladder_gap(synthetic(rng), n_boot=500)
        hits["compute"] += fit.compute_slope.ci_low <= SLOPE <= fit.compute_slope.ci_high
        hits["boot"] += fit.bootstrap.ci_low <= SLOPE <= fit.bootstrap.ci_high
        hits["seed_only"] += fit.seed_only.ci_low <= SLOPE <= fit.seed_only.ci_high
        plain = ladder_gap(synthetic(rng, s_cell=0.0), n_boot=500)
        hits["seed_only_no_cell"] += plain.seed_only.ci_low <= SLOPE <= plain.seed_only.ci_high
        hits["boot_no_cell"] += plain.bootstrap.ci_low <= SLOPE <= plain.bootstrap.ci_high
    rates = {k: v / reps for k, v in hits.items()}
    assert 0.93 <= rates["compute"] <= 0.97, rates
    assert 0.88 <= rates["boot"] <= 0.97, rates
    assert rates["seed_only"] < 0.6 and rates["seed_only_no_cell"] >= 0.93, rates
    assert rates["boot_no_cell"] >= 0.97, rates


# MixedLM warns "may be on the boundary" from its optimizer's path even where the REML cell variance it
# returns is far from 0 and equals the moments estimate (asserted below).
MIXEDLM_WARNING = "ignore:The MLE may be on the boundary"


def _with_cells(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(cell=frame["size"] + "@" + frame["budget"].astype(str),
                        lc=np.log10(frame["compute"]), ln=np.log10(frame["n"]), ld=np.log10(frame["d"]))


@pytest.mark.filterwarnings(MIXEDLM_WARNING)
def test_on_a_balanced_ladder_the_fit_is_statsmodels_mixedlm_reml():
    rng = np.random.default_rng(RNG_SEED + 1)
    frame = synthetic(rng)
    fit = ladder_gap(frame, n_boot=50)
    data = _with_cells(frame)
    for formula, term, row in (("gap ~ lc", "lc", fit.compute_slope), ("gap ~ ln + ld", "ln", fit.size_slope),
                               ("gap ~ ln + ld", "ld", fit.budget_slope)):
        mixed = smf.mixedlm(formula, data, groups=data["cell"]).fit(reml=True)
        assert row.estimate == pytest.approx(mixed.fe_params[term], rel=1e-6)
        assert row.se == pytest.approx(mixed.bse_fe[term], rel=1e-3)
    mixed = smf.mixedlm("gap ~ lc", data, groups=data["cell"]).fit(reml=True)
    assert fit.s2_cell == pytest.approx(float(mixed.cov_re.iloc[0, 0]), rel=1e-3)
    assert fit.s2_seed == pytest.approx(mixed.scale, rel=1e-3)


def test_per_level_slopes_and_curvature_are_ols_on_the_cell_means():
    rng = np.random.default_rng(RNG_SEED + 2)
    frame = synthetic(rng)
    fit = ladder_gap(frame, n_boot=50)
    means = _with_cells(frame).groupby(["size", "budget"], as_index=False)[["gap", "ln", "ld", "lc"]].mean()
    means["ldc"], means["lnc"] = means["ld"] - means["ld"].mean(), means["ln"] - means["ln"].mean()
    per_size = smf.ols("gap ~ 0 + C(size) + C(size):ldc", means).fit()
    for row in fit.per_size:
        term = f"C(size)[{row.get('size')}]:ldc"
        assert row.estimate == pytest.approx(per_size.params[term], rel=1e-8)
        assert (row.ci_low, row.ci_high) == pytest.approx(tuple(per_size.conf_int().loc[term]), rel=1e-8)
    assert [r.get("size") for r in fit.per_size] == ["d32", "d48", "d64"]
    means["b"] = means["budget"].astype(str)
    per_budget = smf.ols("gap ~ 0 + C(b) + C(b):lnc", means).fit()
    for row in fit.per_budget:
        term = f"C(b)[{row.get('budget')}]:lnc"
        assert row.estimate == pytest.approx(per_budget.params[term], rel=1e-8)
        assert row.p_value == pytest.approx(per_budget.pvalues[term], rel=1e-6)
    small = smf.ols("gap ~ lnc + ldc", means).fit()
    big = smf.ols("gap ~ lnc + ldc + I(lnc**2) + I(ldc**2) + lnc:ldc", means).fit()
    table = anova_lm(small, big)
    assert fit.curvature.estimate == pytest.approx(table["F"].iloc[1], rel=1e-8)
    assert fit.curvature.p_value == pytest.approx(table["Pr(>F)"].iloc[1], rel=1e-6)
    quad = smf.ols("gap ~ lc + I(lc**2)", means.assign(lc=means["lc"] - means["lc"].mean())).fit()
    assert fit.compute_curvature.p_value == pytest.approx(quad.pvalues["I(lc ** 2)"], rel=1e-6)


def test_the_seed_only_slope_is_the_reports_gap_fit_slope():
    rng = np.random.default_rng(RNG_SEED + 3)
    frame = synthetic(rng)
    fit = ladder_gap(frame, n_boot=50)
    assert fit.seed_only.estimate == pytest.approx(fit_gap(frame["compute"], frame["gap"], frame["seed"]).slope)
    assert fit.compute_slope.estimate == pytest.approx(fit.seed_only.estimate)   # balanced: the same line
    assert fit.compute_slope.ci_high - fit.compute_slope.ci_low > fit.seed_only.ci_high - fit.seed_only.ci_low


def test_planted_curvature_is_found_and_flagged_and_a_plane_is_not():
    rng = np.random.default_rng(RNG_SEED + 4)
    bent = ladder_gap(synthetic(rng, s_cell=0.005, extra=lambda ln, ld: -0.6 * ln * ld), n_boot=50)
    assert bent.curvature.p_value < 0.001
    interaction = next(r for r in bent.curvature_terms if r.name == "log10 N x log10 D")
    assert interaction.ci_low <= -0.6 <= interaction.ci_high and interaction.ci_high < 0
    assert reading(bent).curved
    assert "the ladder is curved" in reading(bent).sentences[0]
    plane = ladder_gap(synthetic(rng, s_cell=0.005), n_boot=50)
    assert plane.curvature.p_value > 0.01 and not reading(plane).curved


def test_the_reading_says_decreases_with_compute_only_where_the_random_cell_interval_excludes_0():
    rng = np.random.default_rng(RNG_SEED + 5)
    clear = reading(ladder_gap(synthetic(rng, s_cell=0.005), n_boot=50))
    assert clear.compute == DOWN and clear.sentences[0].startswith("the gap decreases with compute (-0.0")
    # a big cell effect: every seed agrees (seed-only excludes 0) but the cells do not
    for attempt in range(50):
        fit = ladder_gap(synthetic(rng, slope=-0.03, s_cell=0.06, s_seed=0.002), "binary16", n_boot=50)
        if fit.seed_only.ci_high < 0 and fit.compute_slope.ci_high > 0:
            break
    else:
        pytest.fail("no ladder where the seed-only and random-cell intervals disagree")
    said = reading(fit)
    assert said.compute == NOT_SHOWN
    assert said.sentences[0].startswith("binary16: a trend with compute is not shown")
    assert "at fixed budget" in said.sentences[1] and "at fixed size" in said.sentences[1]
    assert [size for size, _ in said.per_size] == ["d32", "d48", "d64"]
    assert len(said.per_budget) == 4
    assert all("decreases with compute" not in s for s in said.sentences)


def test_an_extrapolation_is_labelled_with_its_distance_and_widens():
    rng = np.random.default_rng(RNG_SEED + 6)
    fit = ladder_gap(synthetic(rng), n_boot=50)
    near = extrapolate(fit, compute=fit.max_compute * 10)
    far = extrapolate(fit, compute=fit.max_compute * 1e7)
    assert near.label == "extrapolation: C 1.0 orders of magnitude past the largest observed"
    assert dict(far.orders)["C"] == pytest.approx(7.0)
    assert far.ci_high - far.ci_low > near.ci_high - near.ci_low
    inside = extrapolate(fit, compute=float(fit.cells["compute"].median()))
    assert inside.label == "inside the observed range"
    point = extrapolate(fit, n=1.6e9, d=1e11)
    assert dict(point.orders)["N"] == pytest.approx(math.log10(1.6e9 / 106_000))
    assert "N 4.2" in point.label and "D 4.1" in point.label
    with pytest.raises(AnalysisError, match="give compute="):
        extrapolate(fit, n=1e9)


@pytest.mark.filterwarnings(MIXEDLM_WARNING)
def test_an_unbalanced_ladder_is_weighted_and_stays_close_to_mixedlm():
    rng = np.random.default_rng(RNG_SEED + 7)
    frame = synthetic(rng, s_cell=0.02, s_seed=0.02, seeds=4)
    frame = frame[~((frame["size"] == "d64") & (frame["seed"] > 1))]     # d64 cells keep one seed
    fit = ladder_gap(frame, n_boot=50)
    assert fit.compute_fit.weighted
    assert "method-of-moments weights" in fit.compute_slope.method
    data = _with_cells(frame)
    mixed = smf.mixedlm("gap ~ lc", data, groups=data["cell"]).fit(reml=True)
    assert fit.compute_slope.estimate == pytest.approx(mixed.fe_params["lc"], abs=0.1 * mixed.bse_fe["lc"])
    assert fit.compute_slope.se == pytest.approx(mixed.bse_fe["lc"], rel=0.25)


def test_the_bootstrap_is_reproducible_and_resamples_seeds_within_cells():
    rng = np.random.default_rng(RNG_SEED + 8)
    frame = synthetic(rng)
    one = cluster_bootstrap_slope(frame, n_boot=300, rng_seed=3)
    again = cluster_bootstrap_slope(frame, n_boot=300, rng_seed=3)
    assert (one.estimate, one.ci_low, one.ci_high, one.p_value) == (again.estimate, again.ci_low, again.ci_high,
                                                                    again.p_value)
    other = cluster_bootstrap_slope(frame, n_boot=300, rng_seed=4)
    assert (one.ci_low, one.ci_high) != (other.ci_low, other.ci_high)
    cells_only = cluster_bootstrap_slope(frame, n_boot=300, rng_seed=3, resample_seeds=False)
    assert "cells, then seeds within each" in one.method and "(cells;" in cells_only.method
    assert one.estimate == cells_only.estimate


def test_bad_ladders_get_one_line_errors_naming_the_field():
    rng = np.random.default_rng(RNG_SEED + 9)
    frame = synthetic(rng)
    with pytest.raises(AnalysisError, match=r"lacks column\(s\) \['compute'\]"):
        cell_means(frame.drop(columns="compute"))
    with pytest.raises(AnalysisError, match="appears twice"):
        cell_means(pd.concat([frame, frame.head(1)]))
    with pytest.raises(AnalysisError, match="'n' must be positive"):
        cell_means(frame.assign(n=0))
    with pytest.raises(AnalysisError, match="one value per"):
        cell_means(frame.assign(compute=frame["compute"] + frame["seed"]))
    with pytest.raises(AnalysisError, match="needs at least 3 sizes and 3 budgets"):
        ladder_gap(frame[frame["size"] != "d64"])
