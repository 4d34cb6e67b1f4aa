"""Seed-level contrasts for issue 40's readings: sizes at a fixed budget, probe measures at equal input
RMS, one gap against another, points on a gap curve. Each against scipy's t tests (and Holm against
statsmodels' multipletests), on seeded synthetic values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from fixedcode_study.analysis.errors import AnalysisError
from fixedcode_study.analysis.stats.contrasts import (gap_at, gap_change, gap_difference, linear_contrast,
                                                      probe_contrasts, size_contrasts)
from fixedcode_study.analysis.stats.rows import DOWN, NOT_SHOWN, UP, in_family, rows_frame

RNG_SEED = 4042


def ladder_gaps(rng, seeds=(1, 2, 3)) -> pd.DataFrame:
    rows = []
    for size, n, level in (("d32", 26_784, 0.35), ("d48", 60_000, 0.27), ("d64", 106_000, 0.17)):
        for budget in (2**19, 2**21):
            for seed in seeds:
                rows.append({"size": size, "n": n, "budget": budget, "seed": seed,
                             "gap": level + rng.normal(0, 0.01)})
    return pd.DataFrame(rows)


def test_size_contrasts_are_welch_per_budget_larger_minus_smaller_and_holm_over_a_stated_family():
    rng = np.random.default_rng(RNG_SEED)
    gaps = ladder_gaps(rng)
    rows = size_contrasts(gaps, arm="binary16")
    assert len(rows) == 2 * 3
    assert [(r.get("size_a"), r.get("size_b")) for r in rows[:3]] == [("d48", "d32"), ("d64", "d32"), ("d64", "d48")]
    for r in rows:
        part = gaps[gaps["budget"] == r.get("budget")]
        a, b = (part.loc[part["size"] == s, "gap"] for s in (r.get("size_a"), r.get("size_b")))
        ref = sps.ttest_ind(a, b, equal_var=False)
        assert r.p_value == pytest.approx(ref.pvalue, rel=1e-10)
        assert (r.ci_low, r.ci_high) == pytest.approx(tuple(ref.confidence_interval(0.95)), rel=1e-8)
        assert r.method.startswith("Welch") and r.get("arm") == "binary16"
    family = in_family(rows, "size contrasts: every size pair at every budget (binary16)")
    assert [f.p_adjusted for f in family] == pytest.approx(list(multipletests([r.p_value for r in rows],
                                                                              method="holm")[1]))
    assert all(f.family_size == 6 for f in family)
    assert all(f.shown() == DOWN for f in family)           # 0.08-0.18 apart with sd 0.01
    table = rows_frame(family)
    assert {"arm", "budget", "size_a", "size_b", "estimate", "ci_low", "p_adjusted", "family"} <= set(table.columns)


def test_size_contrasts_paired_on_request_and_bad_sizes_named():
    rng = np.random.default_rng(RNG_SEED + 1)
    gaps = ladder_gaps(rng)
    rows = size_contrasts(gaps, pairs=[("d64", "d32")], paired=True)
    for r in rows:
        part = gaps[gaps["budget"] == r.get("budget")]
        a, b = (part[part["size"] == s].sort_values("seed")["gap"].to_numpy() for s in ("d64", "d32"))
        assert r.p_value == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-10)
        assert r.method.startswith("paired")
    with pytest.raises(AnalysisError, match="size 'd128' is not in the gaps"):
        size_contrasts(gaps, pairs=[("d128", "d32")])


def probe_values(rng) -> pd.DataFrame:
    arms = {"learned": (0.02, 0.795, 8), "binary16_scaled": (0.02, 0.650, 3), "frozen_learned": (0.0201, 0.74, 3),
            "binary16": (0.61, 0.996, 8), "frozen_codestats": (0.61, 0.998, 3)}
    rows = []
    for variant, (rms, level, n) in arms.items():
        for seed in range(1, n + 1):
            for layer in ("final_norm", "block_0"):
                rows.append({"variant": variant, "seed": seed, "input_rms": rms, "measure": "identity_0",
                             "layer": layer, "value": level + rng.normal(0, 0.05)})
    return pd.DataFrame(rows)


def test_probe_arms_are_compared_only_at_equal_input_rms():
    rng = np.random.default_rng(RNG_SEED + 2)
    values = probe_values(rng)
    rows = probe_contrasts(values)
    pairs = {(r.get("variant_a"), r.get("variant_b")) for r in rows}
    assert pairs == {("learned", "binary16_scaled"), ("learned", "frozen_learned"),
                     ("binary16_scaled", "frozen_learned"), ("binary16", "frozen_codestats")}
    assert len(rows) == 2 * len(pairs)                                        # per layer
    r = next(r for r in rows if r.get("variant_b") == "binary16_scaled" and r.get("layer") == "final_norm")
    part = values[values["layer"] == "final_norm"]
    ref = sps.ttest_ind(part.loc[part["variant"] == "learned", "value"],
                        part.loc[part["variant"] == "binary16_scaled", "value"], equal_var=False)
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-10) and r.get("input_rms") == 0.02
    with pytest.raises(AnalysisError, match="compare arms at equal input RMS"):
        probe_contrasts(values, pairs=[("learned", "binary16")])
    with pytest.raises(AnalysisError, match="one value per variant"):
        probe_contrasts(values.assign(input_rms=values["input_rms"] + 0.001 * values["seed"]))


def arms(rng, seeds=5, levels=None) -> pd.DataFrame:
    levels = levels or {"binary16+untied": 3.30, "learned+untied": 3.00, "learned+fixed": 3.45}
    shared = rng.normal(0, 0.05, seeds)                        # a seed effect every arm shares (CRN)
    return pd.DataFrame([{"seed": s + 1, "variant": v, "value": level + shared[s] + rng.normal(0, 0.01)}
                         for v, level in levels.items() for s in range(seeds)])


def test_the_input_side_gap_against_the_output_side_gap_is_a_paired_difference_of_gaps():
    rng = np.random.default_rng(RNG_SEED + 3)
    values = arms(rng)
    got = gap_difference(values, ("binary16+untied", "learned+untied"), ("learned+fixed", "learned+untied"))
    wide = values.pivot(index="seed", columns="variant", values="value")
    ref = sps.ttest_rel(wide["binary16+untied"], wide["learned+fixed"])     # (a - b) - (c - b) = a - c
    assert got.difference.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert got.difference.estimate == pytest.approx(got.first.estimate - got.second.estimate)
    assert got.difference.shown() == DOWN and got.first.shown() == UP
    assert got.difference.name == "(binary16+untied − learned+untied) − (learned+fixed − learned+untied)"


def test_an_unpaired_linear_contrast_is_welch_satterthwaite_and_covers_at_its_nominal_rate():
    rng = np.random.default_rng(RNG_SEED + 4)
    values = arms(rng)
    two = linear_contrast(values, {"binary16+untied": 1, "learned+untied": -1}, "gap", paired=False)
    ref = sps.ttest_ind(values.loc[values["variant"] == "binary16+untied", "value"],
                        values.loc[values["variant"] == "learned+untied", "value"], equal_var=False)
    assert two.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    # four independent arms, unequal sizes and spreads: (a - b) - (c - d)
    levels, sds, sizes = np.array([3.30, 3.00, 3.45, 2.90]), np.array([0.02, 0.02, 0.04, 0.02]), [4, 3, 3, 3]
    variant = np.repeat(list("abcd"), sizes)
    seed = np.concatenate([np.arange(1, n + 1) for n in sizes])
    index = np.repeat(np.arange(4), sizes)
    truth = (3.30 - 3.00) - (3.45 - 2.90)
    hits, reps = 0, 400
    for _ in range(reps):
        frame = pd.DataFrame({"seed": seed, "variant": variant,
                              "value": levels[index] + rng.normal(0, 1, index.size) * sds[index]})
        row = linear_contrast(frame, {"a": 1, "b": -1, "c": -1, "d": 1}, "gap", paired=False)
        hits += row.ci_low <= truth <= row.ci_high
    low, high = sps.binom.ppf([0.0005, 0.9995], reps, 0.95)
    assert low <= hits <= high, hits


def curves(rng) -> pd.DataFrame:
    points = (1e5, 2e5, 4e5, 8e5)
    rows = []
    for seed in (1, 2, 3, 4):
        for variant, gap in (("learned", np.zeros(4)), ("gf2", np.array([0.0, 0.05, 0.10, 0.20]))):
            for tokens, g in zip(points, gap, strict=True):
                rows.append({"seed": seed, "variant": variant, "tokens": tokens,
                             "value": 4.0 - 0.5 * np.log10(tokens) + g + rng.normal(0, 0.005)})
    return pd.DataFrame(rows)


def test_a_gap_at_a_named_point_and_its_change_between_two_points_are_paired_by_seed():
    rng = np.random.default_rng(RNG_SEED + 5)
    frame = curves(rng)
    at = gap_at(frame, "gf2", "learned", 4e5)
    wide = frame[frame["tokens"] == 4e5].pivot(index="seed", columns="variant", values="value")
    assert at.p_value == pytest.approx(sps.ttest_rel(wide["gf2"], wide["learned"]).pvalue, rel=1e-10)
    assert at.get("tokens") == 4e5 and at.shown() == UP
    first = gap_at(frame, "gf2", "learned", 1e5)
    assert first.shown() == NOT_SHOWN
    change = gap_change(frame, "gf2", "learned", 2e5, 8e5)
    per_seed = []
    for _, part in frame.groupby("seed"):
        v = part.set_index(["variant", "tokens"])["value"]
        per_seed.append((v["gf2", 8e5] - v["learned", 8e5]) - (v["gf2", 2e5] - v["learned", 2e5]))
    assert change.p_value == pytest.approx(sps.ttest_1samp(per_seed, 0).pvalue, rel=1e-10)
    assert change.estimate == pytest.approx(0.15, abs=0.02) and change.shown() == UP
    unpaired = gap_change(frame, "gf2", "learned", 2e5, 8e5, paired=False)
    runs = frame.pivot_table(index=["variant", "seed"], columns="tokens", values="value")
    delta = runs[8e5] - runs[2e5]
    ref = sps.ttest_ind(delta["gf2"], delta["learned"], equal_var=False)
    assert unpaired.p_value == pytest.approx(ref.pvalue, rel=1e-10)


def test_a_point_that_was_not_logged_is_an_error_naming_the_nearest():
    frame = curves(np.random.default_rng(RNG_SEED + 6))
    with pytest.raises(AnalysisError, match=r"no validation at tokens=300000; the nearest logged are 200000, 400000"):
        gap_at(frame, "gf2", "learned", 3e5)
    with pytest.raises(AnalysisError, match="no values for binary16"):
        linear_contrast(frame, {"binary16": 1, "learned": -1}, "gap")
    with pytest.raises(AnalysisError, match=r"lacks column\(s\) \['step'\]"):
        gap_at(frame, "gf2", "learned", 10, at="step")


def test_an_absence_claim_gets_tost_on_the_rows_own_se_and_df():
    from statsmodels.stats.weightstats import ttost_paired

    from fixedcode_study.analysis.stats.rows import equivalence_p

    frame = curves(np.random.default_rng(RNG_SEED + 7))
    row = gap_at(frame, "gf2", "learned", 1e5)
    wide = frame[frame["tokens"] == 1e5].pivot(index="seed", columns="variant", values="value")
    assert equivalence_p(row, 0.02) == pytest.approx(ttost_paired(wide["gf2"], wide["learned"], -0.02, 0.02)[0],
                                                     rel=1e-8)
    assert equivalence_p(row, 0.02) < 0.05 < equivalence_p(row, 0.002)
    welch = linear_contrast(frame[frame["tokens"] == 1e5], {"gf2": 1, "learned": -1}, "gap", paired=False)
    assert np.isfinite(equivalence_p(welch, 0.02))
