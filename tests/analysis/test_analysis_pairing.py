"""Pairing by seed under common random numbers, the CLI's comparison options, and gap curves (issue 12)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import analysis as fx
from helpers.analysis import md_rows

from fixedcode_study.cli.analyze import main as cli_main
from fixedcode_study.analysis.figures.curves import included_curve
from fixedcode_study.analysis.figures.gap import gap_vs_tokens_figure
from fixedcode_study.analysis.results.curves import gap_curves
from fixedcode_study.analysis.read.records import is_crn
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.stats.pairing import (
    WHY_FEW_PAIRS,
    WHY_NOT_CRN,
    compare_arms,
    matched_pairs,
    paired_curve_gap,
)

REPO = Path(__file__).resolve().parents[2]



def arm(values: dict[int, float], crn: bool | dict[int, bool] = True) -> pd.DataFrame:
    flags = crn if isinstance(crn, dict) else {s: crn for s in values}
    return pd.DataFrame({"seed": list(values), "value": list(values.values()),
                         "run": [f"r{s}-{v}" for s, v in values.items()], "crn": [flags[s] for s in values]})


def test_crn_record_is_read_tolerantly():
    assert is_crn({"init": {"scheme": "per_group_generators", "seed": 3}})
    for results in ({}, {"init": None}, {"init": "per_group_generators"}, {"init": {"scheme": "global_seed"}}):
        assert not is_crn(results)


def test_runs_pair_by_seed_only_when_both_record_crn():
    a = arm({1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}, crn={1: True, 2: True, 3: True, 4: False})
    b = arm({2: 1.5, 3: 2.5, 4: 3.5, 5: 9.0})
    pairs = matched_pairs(a, b)
    assert pairs["seed"].tolist() == [2, 3]  # seed 1 and 5: one side only; seed 4: a's run is not CRN
    assert pairs["a"].tolist() == [2.0, 3.0] and pairs["b"].tolist() == [1.5, 2.5]


def test_test_choice_paired_welch_or_none():
    a, b = arm({1: 1.0, 2: 2.1, 3: 2.9}), arm({1: 0.5, 2: 1.7, 3: 2.2})
    cmp, why = compare_arms(a, b)
    ref = sps.ttest_rel([1.0, 2.1, 2.9], [0.5, 1.7, 2.2])
    assert cmp.test == "paired" and why == "" and math.isclose(cmp.p_value, ref.pvalue) and cmp.n_pairs == 3
    cmp, why = compare_arms(arm({1: 1.0, 2: 2.1, 3: 2.9}, crn=False), b)
    assert cmp.test == "welch" and why == WHY_NOT_CRN
    assert math.isclose(cmp.p_value, sps.ttest_ind([1.0, 2.1, 2.9], [0.5, 1.7, 2.2], equal_var=False).pvalue)
    cmp, why = compare_arms(arm({1: 1.0, 7: 2.1, 8: 2.9}), b)  # CRN, but only seed 1 in common
    assert cmp.test == "welch" and why == WHY_FEW_PAIRS
    cmp, _ = compare_arms(arm({1: 1.0}), b)
    assert cmp.test == "n/a"


@pytest.fixture(scope="module")
def crn_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("crn")
    sweep = fx.build_crn_sweep(root)
    out = root / "report"
    # no sweeps/crn.yaml: the command declares the primary family
    assert cli_main([str(sweep), f"out={out}", "primary=binary16:learned,gf2:learned,gf2:binary16"]) == 0
    return sweep, out


def test_crn_study_uses_paired_tests_that_match_scipy(crn_report):
    _, out = crn_report
    diffs = pd.read_csv(out / "tables" / "comparisons.csv")
    assert [(r.variant_a, r.variant_b) for r in diffs.itertuples()] == [
        ("binary16", "learned"), ("gf2", "learned"), ("gf2", "binary16")]
    for row in diffs.itertuples():
        a = [fx.crn_bpb(row.variant_a, s) for s in fx.CRN_SEEDS]
        b = [fx.crn_bpb(row.variant_b, s) for s in fx.CRN_SEEDS]
        ref = sps.ttest_rel(a, b)
        ci = ref.confidence_interval(0.95)
        assert row.test == "paired" and row.n_pairs == 4 and row.n == "4 pairs"
        assert math.isclose(row.p_value, ref.pvalue, rel_tol=1e-6)
        assert math.isclose(row.ci_low, ci.low, rel_tol=1e-6) and math.isclose(row.ci_high, ci.high, rel_tol=1e-6)
        assert row.effect_name == "d_z"
    # the seed effects are shared, so pairing removes them: far tighter than Welch on the same numbers
    welch = sps.ttest_ind([fx.crn_bpb("gf2", s) for s in fx.CRN_SEEDS],
                          [fx.crn_bpb("learned", s) for s in fx.CRN_SEEDS], equal_var=False)
    assert diffs.loc[1, "p_value"] < welch.pvalue / 100
    verdicts = md_rows(out / "tables" / "comparisons.md")
    assert [r[11] for r in verdicts] == ["worse", "worse", "equivalent"]  # gf2 − binary16: +0.002 within ±0.01
    assert [r[12] for r in verdicts] == ["", "", ""]  # seeds needed: only for inconclusive rows
    # the Findings follow the first screen's primary rows, one sentence per row, in its verdict's words
    report = (out / "report.md").read_text()
    findings = report.split("## Findings\n")[1].split("\n## ")[0]
    assert report.index("## Primary comparisons") < report.index("## Findings") < report.index("## Comparisons")
    assert "The study declares 3 comparison(s) in the command's primary=:" in report.split("## Findings")[0]
    assert "- **binary16 − learned**, val bpb ↓: binary16 is *worse* than learned" in findings
    assert "- **gf2 − binary16**, val bpb ↓: gf2 and binary16 are *equivalent* within ±0.01" in findings
    assert "3 primary rows: 2 worse, 1 equivalent." in findings and "Seeds that would settle" not in findings


def test_same_numbers_without_the_crn_record_fall_back_to_welch(tmp_path):
    sweep = fx.build_crn_sweep(tmp_path, crn=False)
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    diffs = pd.read_csv(out / "tables" / "comparisons.csv")
    assert (diffs["test"] == "welch").all() and (diffs["test_label"] == "welch (no CRN)").all()
    assert (diffs["n"] == "4/4").all()
    report = (out / "report.md").read_text()
    assert "| cpu_tiny | gf2 | 1, 2, 3, 4 | 4 | no |" in report


def test_gap_curve_is_paired_and_aligned_on_shared_steps(crn_report):
    sweep, _ = crn_report
    study = load_run_dirs([sweep])
    curve = included_curve(study, "val/bpb")
    cols = ["run", "seed", "crn", "step", "tokens", "value"]
    gap, test = paired_curve_gap(curve.loc[curve["variant"] == "gf2", cols],
                                 curve.loc[curve["variant"] == "learned", cols])
    assert test == "paired" and (gap["n"] == 4).all()
    missing_tokens = fx.LOG_STEPS[5] * 2048  # gf2 seed 2 skipped this validation: no gap drawn there
    assert missing_tokens not in set(gap["tokens"]) and len(gap) == len(fx.LOG_STEPS) - 1 >= 12
    assert gap["tokens"].is_monotonic_increasing
    diffs = np.array([fx.crn_bpb("gf2", s) - fx.crn_bpb("learned", s) for s in fx.CRN_SEEDS])
    half = sps.t.ppf(0.975, 3) * diffs.std(ddof=1) / 2  # the step terms cancel: same gap at every step
    assert np.allclose(gap["gap"], diffs.mean(), atol=1e-8)
    assert np.allclose(gap["high"] - gap["gap"], half, atol=1e-7)
    assert not gap["interpolated"].any()  # one schedule: no value is interpolated, the skipped one is not filled in


# Two arms on different log-spaced validation schedules (an isoflop arm trains fewer tokens and
# validates at its own points): training tokens of each run's validations, and val bpb there.
LONG_TOKENS = [100, 1000, 10_000, 100_000]
LONG_BPB = [3.0, 2.0, 1.5, 1.2]
SHORT_TOKENS = [100, 300, 3000, 30_000]
SHORT_BPB = [3.1, 2.6, 1.9, 1.45]
SCHEDULE_SEEDS = {1: 0.0, 2: 0.03, 3: -0.02}          # shared by both arms at a seed (CRN)
SHORT_WOBBLE = {1: 0.01, 2: -0.005, 3: 0.0}


def schedule_arm(name: str, tokens: list[int], bpb: list[float], wobble: dict[int, float] | None = None) -> pd.DataFrame:
    rows = [{"run": f"{name}-{seed}", "seed": seed, "crn": True, "step": t // 10, "tokens": float(t),
             "value": v + effect + (wobble or {}).get(seed, 0.0)}
            for seed, effect in SCHEDULE_SEEDS.items() for t, v in zip(tokens, bpb, strict=True)]
    return pd.DataFrame(rows)


def test_gap_curve_of_arms_on_different_schedules_is_aligned_by_tokens():
    short = schedule_arm("short", SHORT_TOKENS, SHORT_BPB, SHORT_WOBBLE)
    long = schedule_arm("long", LONG_TOKENS, LONG_BPB)
    gap, test = paired_curve_gap(short, long)
    # every validation of either arm within the range both trained through: the short arm's line runs to
    # the end of its training (30k), not only to the one point both arms logged (100 tokens)
    assert test == "paired" and (gap["n"] == 3).all()
    assert gap["tokens"].tolist() == [100, 300, 1000, 3000, 10_000, 30_000]
    assert gap["interpolated"].tolist() == [False, True, True, True, True, True]
    # by hand, linear in log10 tokens between a run's own neighbouring validations:
    # the long arm at 300, 3000, 30000 (log10 fraction 0.477 of a decade) ...
    f = math.log10(3)
    long_at = {100: 3.0, 300: 3.0 - f * 1.0, 1000: 2.0, 3000: 2.0 - f * 0.5, 10_000: 1.5, 30_000: 1.5 - f * 0.3}
    # ... the short arm at 1000 and 10000, log(10/3) / log(10) of the way between its points a decade apart
    g = math.log10(10 / 3)
    short_at = {100: 3.1, 300: 2.6, 1000: 2.6 + g * (1.9 - 2.6), 3000: 1.9, 10_000: 1.9 + g * (1.45 - 1.9),
                30_000: 1.45}
    wobble = np.array(list(SHORT_WOBBLE.values()))  # the seed effects cancel in each pair
    for row in gap.itertuples():
        diffs = short_at[row.tokens] - long_at[row.tokens] + wobble
        half = sps.t.ppf(0.975, 2) * diffs.std(ddof=1) / math.sqrt(3)
        assert row.gap == pytest.approx(diffs.mean(), abs=1e-12)
        assert row.high - row.gap == pytest.approx(half, abs=1e-12)
    # the same the other way round: the long arm's gap stops at the short arm's last validation
    # (beyond it there is nothing to compare with and nothing is extrapolated)
    back, _ = paired_curve_gap(long, short)
    assert back["tokens"].tolist() == gap["tokens"].tolist() and np.allclose(back["gap"], -gap["gap"], atol=1e-12)
    # Welch (no CRN) aligns the same way
    welch, test = paired_curve_gap(short.assign(crn=False), long.assign(crn=False))
    assert test == "welch" and welch["tokens"].tolist() == gap["tokens"].tolist()
    assert np.allclose(welch["gap"], gap["gap"], atol=1e-12)


def test_gap_figure_says_it_interpolates_and_where_a_line_stops(tmp_path):
    sweep = tmp_path / "multirun" / "schedules"
    for name, tokens, bpb in (("learned", LONG_TOKENS, LONG_BPB), ("binary16", SHORT_TOKENS, SHORT_BPB)):
        for seed, effect in SCHEDULE_SEEDS.items():
            job = fx.write_job(sweep, name, seed, val_ppl=float(np.exp(bpb[-1] * 4 * np.log(2))), val_bpb=bpb[-1],
                               curves=False, crn=True)
            fx.write_curve_csv(job, {t // 10: v + effect for t, v in zip(tokens, bpb, strict=True)}, tokens_per_step=10)
    study = load_run_dirs([sweep])
    caption = gap_vs_tokens_figure(study, gap_curves(study, "learned"), tmp_path / "a", "learned").caption
    assert "interpolated linearly in log tokens" in caption and "not a measurement" in caption
    assert "the gap ends at" not in caption  # binary16's line runs to its own last validation
    caption = gap_vs_tokens_figure(study, gap_curves(study, "binary16"), tmp_path / "b", "binary16").caption
    assert ("learned: the gap ends at 30k tokens, before its last validation at 100k, since binary16 has no "
            "validation beyond it.") in caption


def test_baseline_and_pairs_options(crn_report, tmp_path):
    sweep, _ = crn_report
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}", "baseline=binary16", "pairs=learned:gf2",
                     "primary=learned:binary16,gf2:binary16,learned:gf2", "margin=val_bpb=0.001"]) == 0
    rows = md_rows(out / "tables" / "comparisons.md")
    # vs baseline binary16 (gf2 − binary16 once, not repeated by the fixed-code rule), then the requested pair
    assert [r[0] for r in rows] == ["learned − binary16", "gf2 − binary16", "learned − gf2"]
    assert rows[1][9] == "±0.001" and rows[1][11] == "inconclusive"  # a margin below the 0.002 gap
    # |Δ| ≥ margin: no number of seeds shows equivalence; a difference would need this many seed pairs
    diffs = pd.read_csv(out / "tables" / "comparisons.csv")
    need = int(diffs.loc[1, "seeds_for_difference"])
    assert rows[1][12] == f"{need:,} / — (Δ outside the margin)" and need > 4
    findings = (out / "report.md").read_text().split("## Findings\n")[1].split("\n## ")[0]
    assert "*inconclusive*: neither a difference (Holm p = " in findings and f"{need:,} to show Δ ≠ 0" in findings
    assert "variant minus baseline (binary16)" in (out / "report.md").read_text()  # the gap figure follows baseline=


@pytest.mark.parametrize("args,message", [
    (["pairs=gf2:nosuch"], "no included variant or input named 'nosuch'"),
    (["baseline=nosuch"], "baseline=nosuch"),
    (["primary=gf2:nosuch"], "primary=gf2:nosuch: no included variant or input named 'nosuch'"),
    (["primary=gf2"], "primary: expects A:B[,C:D]"),
    (["margin=val_bpb"], "margin: expects METRIC=VALUE"),
])
def test_bad_comparison_options_fail_with_one_line(crn_report, tmp_path, args, message):
    sweep, _ = crn_report
    proc = subprocess.run([sys.executable, "-m", "analysis", str(sweep), "out=" + str(tmp_path / "r"), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "r" / "report.md").exists()


def test_margin_given_for_an_untested_metric_is_noted(crn_report, tmp_path):
    sweep, _ = crn_report
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}", "margin=val_ppl=3%"]) == 0
    assert "margin= given for metrics that are not compared here: val_ppl" in (out / "report.md").read_text()


def test_crn_record_is_listed_per_run(crn_report):
    sweep, _ = crn_report
    results = json.loads(next(sweep.glob("input=gf2,seed=1")).joinpath("results.json").read_text())
    assert results["init"]["scheme"] == "per_group_generators"
    study = load_run_dirs([sweep])
    assert study.jobs["crn"].all() and study.long.loc[study.long["kind"] == "final", "crn"].all()
