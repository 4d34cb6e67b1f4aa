"""Matrix vs seed variance decomposition (issue 12): against statsmodels and synthetic data with
known components, and the table built from a gf2_matrices-shaped study."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import analysis as fx

from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.tables.variance import variance_table
from fixedcode_study.analysis.stats.variance import (complete_grid, components, decompose, intervals, mean_squares,
                                                     variance_rows)


def crossed(rng, n_m: int, n_s: int, sd_m: float, sd_s: float, sd_e: float) -> np.ndarray:
    return (1.9 + rng.normal(0, sd_m, (n_m, 1)) + rng.normal(0, sd_s, (1, n_s))
            + rng.normal(0, sd_e, (n_m, n_s)))


def long_frame(y: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame([(i, j, y[i, j]) for i in range(y.shape[0]) for j in range(y.shape[1])],
                        columns=["m", "s", "y"])


@pytest.mark.parametrize("shape", [(5, 3), (8, 6), (3, 2)])
def test_mean_squares_and_f_tests_match_statsmodels_anova(shape):
    y = crossed(np.random.default_rng(sum(shape)), *shape, 0.02, 0.015, 0.01)
    table = anova_lm(smf.ols("y ~ C(m) + C(s)", long_frame(y)).fit())
    ms_m, ms_s, ms_r = mean_squares(y)
    assert np.allclose([ms_m, ms_s, ms_r], table["mean_sq"].to_numpy(), rtol=1e-10)
    dec = decompose(y, n_draws=50)
    assert math.isclose(dec.p_matrix, table.loc["C(m)", "PR(>F)"], rel_tol=1e-8)
    assert math.isclose(dec.p_seed, table.loc["C(s)", "PR(>F)"], rel_tol=1e-8)


def test_components_equal_statsmodels_reml_for_a_balanced_design():
    """Balanced data with positive estimates: ANOVA estimates = REML (crossed random effects in MixedLM)."""
    y = crossed(np.random.default_rng(3), 8, 6, 0.03, 0.02, 0.01)
    frame = long_frame(y).assign(g=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter
        fit = sm.MixedLM.from_formula("y ~ 1", groups="g", vc_formula={"m": "0 + C(m)", "s": "0 + C(s)"},
                                      data=frame).fit(reml=True)
    ours = components(y)
    reml = dict(zip(fit.model.exog_vc.names, fit.vcomp, strict=True))
    assert math.isclose(ours["var_matrix"], reml["m"], rel_tol=2e-3)
    assert math.isclose(ours["var_seed"], reml["s"], rel_tol=2e-3)
    assert math.isclose(ours["var_resid"], fit.scale, rel_tol=2e-3)


def test_known_components_are_recovered_and_covered_on_a_large_synthetic_design():
    sd_m, sd_s, sd_e = 0.02, 0.01, 0.005
    total = sd_m**2 + sd_s**2 + sd_e**2
    dec = decompose(crossed(np.random.default_rng(7), 60, 60, sd_m, sd_s, sd_e), n_draws=400)
    for name, true in (("matrix", sd_m**2), ("seed", sd_s**2), ("resid", sd_e**2)):
        assert math.isclose(dec.estimates[f"var_{name}"], true, rel_tol=0.35), name
        lo, hi = dec.ci[f"share_{name}"]
        assert lo <= true / total <= hi, (name, lo, hi)
    assert dec.estimates["share_matrix"] > dec.estimates["share_seed"] > dec.estimates["share_resid"]
    assert dec.p_matrix < 1e-6 and dec.p_seed < 1e-6
    # and with no matrix effect at all, the matrix share is small and its F test does not reject
    null = decompose(crossed(np.random.default_rng(8), 30, 30, 0.0, sd_s, sd_e), n_draws=200)
    assert null.estimates["share_matrix"] < 0.05 and null.p_matrix > 0.01


COVERAGE_SETS = 2000  # coverage SE ~0.005 at 95%: 0.93 is 4 SE below nominal
COVERAGE_DRAWS = 1000  # pivot draws per interval; fewer than the default keeps 2000 x 1000 arrays small


def simulated_grids(shape: tuple[int, int], var: tuple[float, float, float], n: int = COVERAGE_SETS,
                    seed: int = 2024) -> np.ndarray:
    """n data sets from the module's own model, as an (n, I, J) array."""
    rng = np.random.default_rng(seed)
    (n_m, n_s), (v_m, v_s, v_e) = shape, var
    return (1.9 + rng.normal(0, math.sqrt(v_m), (n, n_m, 1)) + rng.normal(0, math.sqrt(v_s), (n, 1, n_s))
            + rng.normal(0, math.sqrt(v_e), (n, n_m, n_s)))


def true_values(var: tuple[float, float, float]) -> dict[str, float]:
    total = sum(var)
    named = dict(zip(("matrix", "seed", "resid"), var, strict=True))
    return {f"var_{k}": v for k, v in named.items()} | {f"share_{k}": v / total for k, v in named.items()}


def coverage(ci: dict, truth: dict[str, float]) -> dict[str, float]:
    return {k: float(np.mean((ci[k][0] <= t) & (t <= ci[k][1]))) for k, t in truth.items()}


@pytest.mark.parametrize("shape", [(5, 3), (10, 3)])
@pytest.mark.parametrize("var", [(1.0, 0.5, 0.5), (0.1, 0.5, 0.5)])
def test_nominal_95_intervals_cover_at_least_93_percent_under_the_model(shape, var):
    """Issue 24: the crossed bootstrap covered 86 / 82 / 66% (matrix / seed / residual) at 5 x 3 with
    variances 1 / 0.5 / 0.5. Honest means neither too narrow (>= 0.93) nor vacuous (<= 0.99)."""
    y = simulated_grids(shape, var)
    ci = intervals(*mean_squares(y), *shape, n_draws=COVERAGE_DRAWS)
    cov = coverage(ci, true_values(var))
    assert all(0.93 <= c <= 0.99 for c in cov.values()), cov
    # the batch gives each data set exactly the interval decompose reports for it alone
    dec = decompose(y[3], n_draws=COVERAGE_DRAWS)
    for key, (low, high) in dec.ci.items():
        assert (low, high) == pytest.approx((ci[key][0][3], ci[key][1][3]), rel=1e-12, abs=1e-15), key


def test_incomplete_grids_drop_the_emptiest_level():
    frame = pd.DataFrame([(m, s, 1.0) for m in range(4) for s in range(3) if (m, s) not in {(3, 0), (3, 1)}],
                         columns=["matrix", "seed", "value"])
    grid, dropped = complete_grid(frame, "matrix", "seed")
    assert grid.shape == (3, 3) and dropped == ["matrix=3"]
    with pytest.raises(ValueError):
        decompose(np.ones((1, 3)))


MATRIX_EFFECT = {12345: 0.00, 1: 0.03, 2: -0.02, 3: 0.01, 4: -0.015}
SEED_EFFECT = {1: 0.0, 2: 0.012, 3: -0.008}
NOISE = {(m, s): 0.002 * ((i * 3 + s) % 5 - 2) for i, m in enumerate(MATRIX_EFFECT) for s in SEED_EFFECT}


def test_matrix_sweep_gets_a_variance_table_built_from_the_runs(tmp_path):
    study = load_run_dirs([fx.build_matrix_sweep(tmp_path, MATRIX_EFFECT, SEED_EFFECT, NOISE)])
    data, notes = variance_rows(study)
    assert not notes and len(data) == 1  # one design: min_weight=4 gf2 over 5 matrices x 3 seeds
    row = data.iloc[0]
    assert row["n_matrices"] == 5 and row["n_seeds"] == 3 and row["metric"] == "val_bpb"
    assert row["group"] == "gf2 (min_weight=4)"  # the min_weight=8 arm is another design, not a matrix
    expected = np.array([[1.9 + MATRIX_EFFECT[m] + SEED_EFFECT[s] + NOISE[(m, s)] for s in SEED_EFFECT]
                         for m in sorted(MATRIX_EFFECT)])
    ref = components(expected)
    for key in ("var_matrix", "var_seed", "var_resid", "share_matrix"):
        assert math.isclose(row[key], float(ref[key]), rel_tol=1e-9, abs_tol=1e-15)
    table = variance_table(study, data)
    cells = table.rows[0]
    assert cells[:3] == ["gf2 (min_weight=4)", "val bpb ↓", "5 × 3"]
    assert cells[6].startswith(f"{100 * float(ref['share_matrix']):.0f}% [")


def test_a_missing_job_shrinks_the_grid_and_says_so(tmp_path):
    import shutil

    sweep = fx.build_matrix_sweep(tmp_path, MATRIX_EFFECT, SEED_EFFECT, NOISE)
    shutil.rmtree(sweep / "input=gf2,input.matrix_seed=3,seed=2")
    data, notes = variance_rows(load_run_dirs([sweep]))
    assert data.iloc[0]["n_matrices"] == 4 and data.iloc[0]["n_seeds"] == 3
    assert notes and "left out matrix=3" in notes[0]


def test_measured_code_statistics_never_name_a_variant():
    """The code's measured statistics change with the matrix, but the matrix seed is the design choice:
    even when a statistic's column comes first, the label must be matrix_seed."""
    from fixedcode_study.analysis.read.variants import label_props_for

    jobs = pd.DataFrame({"input_props.hamming_mean": [8.0, 8.1, 8.2] * 2,
                         "input_props.constant_bits": ["[]", "[3]", "[]"] * 2,
                         "input_props.matrix_seed": [12345, 1, 2] * 2, "seed": [1, 1, 1, 2, 2, 2],
                         "model": "cpu_tiny", "data": "shakespeare"})
    assert label_props_for(jobs) == ["input_props.matrix_seed"]
