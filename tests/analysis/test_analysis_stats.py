"""analysis statistics against reference implementations (issue 12).

Paired t and Welch against scipy, TOST against statsmodels' ttost_paired / ttost_ind, Holm against
statsmodels' multipletests, effect-size intervals by their coverage on simulated data, and the
verdict logic on constructed cases whose answer is known by design.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root until pyproject adds it

from fixedcode_study.analysis.stats.comparisons import Plan, compare, parse_pairs
from fixedcode_study.analysis.stats.equivalence import Margins, default_margin, parse_margin, tost_p
from fixedcode_study.analysis.errors import AnalysisError
from fixedcode_study.analysis.stats.metrics import on_log_scale
from fixedcode_study.analysis.stats.core import holm, paired_compare, welch_compare

RNG_SEED = 20261130


def samples(n_sets: int = 8):
    """Small seeded samples of the sizes this study has (2-6 seeds), with and without a shift."""
    rng = np.random.default_rng(RNG_SEED)
    out = []
    for k in range(n_sets):
        n = 2 + k % 5
        base = rng.normal(2.0, 0.05, n)
        out.append((base + rng.normal(0.01 * (k % 3), 0.02, n), base))
    return out


@pytest.mark.parametrize("a,b", samples())
def test_paired_compare_matches_scipy_ttest_rel(a, b):
    got = paired_compare(a, b)
    ref = sps.ttest_rel(a, b)
    ci = ref.confidence_interval(0.95)
    d = a - b
    assert got.test == "paired" and got.n_pairs == len(a)
    assert math.isclose(got.delta, d.mean(), abs_tol=1e-15)
    assert math.isclose(got.p_value, ref.pvalue, rel_tol=1e-10)
    assert math.isclose(got.dof, ref.df) and got.dof == len(a) - 1
    assert math.isclose(got.ci_low, ci.low, rel_tol=1e-10) and math.isclose(got.ci_high, ci.high, rel_tol=1e-10)
    assert math.isclose(got.effect, d.mean() / d.std(ddof=1), rel_tol=1e-12) and got.effect_name == "d_z"


@pytest.mark.parametrize("a,b", samples())
def test_welch_compare_matches_scipy_and_hedges_g_by_hand(a, b):
    got = welch_compare(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert got.test == "welch"
    assert math.isclose(got.p_value, ref.pvalue, rel_tol=1e-10) and math.isclose(got.dof, ref.df, rel_tol=1e-10)
    assert math.isclose(got.ci_low, ci.low, rel_tol=1e-10) and math.isclose(got.ci_high, ci.high, rel_tol=1e-10)
    na, nb = len(a), len(b)
    pooled = math.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2))
    j = 1 - 3 / (4 * (na + nb) - 9)  # Hedges (1981): J = 1 - 3 / (4 (n_a + n_b) - 9)
    assert math.isclose(got.effect, j * (a.mean() - b.mean()) / pooled, rel_tol=1e-12) and got.effect_name == "g"


@pytest.mark.parametrize("margin", [0.005, 0.02, 0.1])
@pytest.mark.parametrize("a,b", samples(5))
def test_tost_matches_statsmodels(a, b, margin):
    paired = tost_p(paired_compare(a, b), margin)
    assert math.isclose(paired, ttost_paired(a, b, -margin, margin)[0], rel_tol=1e-9, abs_tol=1e-15)
    welch = tost_p(welch_compare(a, b), margin)
    assert math.isclose(welch, ttost_ind(a, b, -margin, margin, usevar="unequal")[0], rel_tol=1e-9, abs_tol=1e-15)


def test_holm_matches_statsmodels_including_ties_and_nan():
    rng = np.random.default_rng(RNG_SEED)
    for m in (1, 2, 5, 13, 40):
        p = rng.uniform(0, 0.2 if m < 40 else 1.0, m)  # the large family reaches the cap at 1
        p[: m // 3] = p[0]  # ties
        assert np.array_equal(holm(p), multipletests(p, method="holm")[1])  # to the bit
    with_nan = np.array([0.01, np.nan, 0.04, 0.03, np.nan])
    got = holm(with_nan)
    finite = np.isfinite(with_nan)
    assert np.isnan(got[~finite]).all()  # untested rows stay untested and do not count as tests
    assert np.array_equal(got[finite], multipletests(with_nan[finite], method="holm")[1])
    assert holm([]).shape == (0,) and np.isnan(holm([np.nan])).all()


def test_effect_size_intervals_have_their_nominal_coverage():
    """The noncentral-t intervals must cover the true standardized effect ~95% of the time even
    with 5 pairs / 4+4 runs, where a normal approximation undercovers badly."""
    rng = np.random.default_rng(RNG_SEED)
    n_sims, true = 600, 0.8
    hits_dz = hits_g = 0
    for _ in range(n_sims):
        d = rng.normal(true, 1.0, 5)
        c = paired_compare(d, np.zeros(5))
        hits_dz += c.effect_low <= true <= c.effect_high
        w = welch_compare(rng.normal(true, 1.0, 4), rng.normal(0.0, 1.0, 4))
        hits_g += w.effect_low <= true <= w.effect_high
    assert 0.92 <= hits_dz / n_sims <= 0.975, hits_dz / n_sims
    assert 0.92 <= hits_g / n_sims <= 0.975, hits_g / n_sims


def test_degenerate_inputs():
    one = paired_compare([1.0], [0.5])
    assert one.test == "n/a" and math.isnan(one.p_value)
    same_diff = paired_compare([1.1, 2.1, 3.1], [1.0, 2.0, 3.0])  # identical differences: exact, no test
    assert same_diff.test == "exact" and math.isnan(same_diff.p_value) and math.isclose(same_diff.delta, 0.1)
    assert math.isnan(tost_p(same_diff, 0.5))


# ---------------------------------------------------------------- margins


def test_default_margins_and_scales():
    assert default_margin("val_bpb").value == 0.01 and not default_margin("val_bpb").relative
    assert default_margin("val_loss_report").value == 0.02
    assert default_margin("hellaswag/acc_norm").value == 0.01
    ppl = default_margin("wikitext/word_perplexity")
    assert ppl.relative and math.isclose(ppl.on_scale, math.log(1.02)) and ppl.label() == "±2%"
    assert default_margin("gsm8k/some_score") is None
    assert on_log_scale("val_ppl") and on_log_scale("lambada_openai/perplexity") and not on_log_scale("val_bpb")


def test_margin_overrides_parse_and_match_by_full_or_short_name():
    assert parse_margin("val_bpb=0.005") == ("val_bpb", 0.005)
    assert parse_margin("val_ppl=3%") == ("val_ppl", pytest.approx(0.03))
    margins = Margins.from_args(["acc_norm=0.02", "val_ppl=3%", "piqa/acc=0.03"])
    assert margins.for_metric("hellaswag/acc_norm").value == 0.02  # the short name applies to every task
    assert margins.for_metric("piqa/acc").value == 0.03 and margins.for_metric("arc_easy/acc").value == 0.01
    assert math.isclose(margins.for_metric("val_ppl").on_scale, math.log(1.03))
    assert margins.unused({"hellaswag/acc_norm", "piqa/acc"}) == ["val_ppl"]
    for bad in ("val_bpb", "val_bpb=", "=0.1", "val_bpb=abc", "val_bpb=-1", "val_bpb=0"):
        with pytest.raises(AnalysisError):
            parse_margin(bad)


def test_pairs_argument_parsing():
    assert parse_pairs(["binary16:gf2,random_fixed:learned", "a:b"]) == (
        ("binary16", "gf2"), ("random_fixed", "learned"), ("a", "b"))
    for bad in (["gf2"], ["gf2:gf2"], [":x"]):
        with pytest.raises(AnalysisError):
            parse_pairs(bad)


# ---------------------------------------------------------------- verdicts on constructed cases


def constructed_points() -> pd.DataFrame:
    """One context, CRN seeds 1-6, arms built so each comparison has a known verdict at margin 0.01:
    'same' differs from base by ±0.001 (equivalent), 'good' is 0.05 lower (better on a loss-type
    metric), 'bad' 0.05 higher (worse), 'noisy' differs by N(0, 0.03) noise (inconclusive), and
    'tiny' is exactly 0.004 higher with almost no noise (equivalent, though the difference is real)."""
    seeds = np.arange(1, 7)
    seed_effect = np.array([0.00, 0.08, -0.05, 0.03, -0.02, 0.06])
    base = 1.9 + seed_effect
    arms = {"base": base,
            "same": base + np.array([0.001, -0.001, 0.0005, -0.0005, 0.001, -0.001]),
            "good": base - 0.05 + np.array([0.002, -0.001, 0.0, 0.001, -0.002, 0.0]),
            "bad": base + 0.05 + np.array([0.002, -0.001, 0.0, 0.001, -0.002, 0.0]),
            "noisy": base + np.array([0.03, -0.04, 0.02, -0.01, 0.035, -0.03]),
            "tiny": base + 0.004 + np.array([1e-4, -1e-4, 0.0, 1e-4, -1e-4, 0.0])}
    rows = []
    for order, (name, values) in enumerate(arms.items()):
        for seed, value in zip(seeds, values, strict=True):
            rows.append({"model": "m", "variant": name, "input": name, "variant_order": order, "metric": "val_bpb",
                         "value": value, "run": f"{name}/{seed}", "seed": seed, "crn": True})
    return pd.DataFrame(rows)


def test_verdicts_on_constructed_cases():
    table = compare(constructed_points(), ["model"], Plan(baseline="base", fixed_pair=False), ["val_bpb"])
    verdicts = dict(zip(table["variant_a"], table["verdict"], strict=True))
    assert verdicts == {"same": "equivalent", "good": "better", "bad": "worse", "noisy": "inconclusive",
                        "tiny": "equivalent (Δ ≠ 0)"}
    assert (table["test"] == "paired").all() and (table["n_pairs"] == 6).all()
    # the verdicts use Holm-adjusted p-values of this one table, and those match statsmodels
    assert np.allclose(table["p_holm"], multipletests(table["p_value"], method="holm")[1])
    assert np.allclose(table["tost_p_holm"], multipletests(table["tost_p"], method="holm")[1])


def test_holm_adjustment_can_change_a_verdict():
    """A difference that is significant alone (p < 0.05) but not after Holm over 5 tests is inconclusive."""
    points = constructed_points()
    a, b = points["variant"] == "noisy", points["variant"] == "base"
    diffs = np.array([0.03, 0.012, 0.025, 0.0, 0.02, 0.0])  # one-sample t: p = 0.038
    points.loc[a, "value"] = points.loc[b, "value"].to_numpy() + diffs
    table = compare(points, ["model"], Plan(baseline="base", fixed_pair=False), ["val_bpb"])
    row = table.set_index("variant_a").loc["noisy"]
    assert math.isclose(row["p_value"], sps.ttest_1samp(diffs, 0.0).pvalue, rel_tol=1e-9)
    assert row["p_value"] < 0.05 <= row["p_holm"] and row["verdict"] == "inconclusive"
    alone = compare(points[points["variant"].isin(["base", "noisy"])], ["model"],
                    Plan(baseline="base", fixed_pair=False), ["val_bpb"])
    assert alone["verdict"].tolist() == ["worse"]  # the same comparison on its own is significant


def test_no_margin_means_no_equivalence_verdict():
    points = constructed_points().assign(metric="custom_score")  # no default margin for this name
    table = compare(points, ["model"], Plan(baseline="base", fixed_pair=False), ["custom_score"])
    verdicts = dict(zip(table["variant_a"], table["verdict"], strict=True))
    assert verdicts["same"] == "inconclusive" and table["tost_p"].isna().all()
    assert verdicts["good"] == "worse"  # higher-is-better for an unknown score: lower values are worse


def test_perplexities_are_compared_as_log_ratios():
    points = constructed_points()
    points = points[points["variant"].isin(["base", "bad"])].assign(metric="val_ppl")
    points["value"] = np.exp(points["value"])
    table = compare(points, ["model"], Plan(baseline="base", fixed_pair=False), ["val_ppl"])
    a = np.log(points.loc[points["variant"] == "bad", "value"].to_numpy())
    b = np.log(points.loc[points["variant"] == "base", "value"].to_numpy())
    ref = sps.ttest_rel(a, b)
    row = table.iloc[0]
    assert row["scale"] == "log" and math.isclose(row["delta"], (a - b).mean()) and math.isclose(row["p_value"], ref.pvalue)
    assert math.isclose(row["margin"], math.log(1.02))
