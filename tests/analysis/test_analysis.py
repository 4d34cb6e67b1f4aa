"""Tests for the analysis package (issues 5 and 12): synthetic run directories with known numbers -> report.

The expected cells below are computed by hand from the numbers in tests/helpers/analysis.py;
CIs, dofs and p-values are checked against scipy independently of fixedcode_study.analysis.stats.core. The statistics
(paired t, TOST, Holm, effect sizes, variance components) have their own files:
tests/analysis/test_analysis_stats.py, test_analysis_pairing.py, test_analysis_variance.py, test_analysis_studies.py.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ helpers, without a conftest
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root until pyproject adds it

from helpers import analysis as fx
from helpers.analysis import md_rows

from fixedcode_study.cli.analyze import main as cli_main
from fixedcode_study.analysis.stats.equivalence import verdict
from fixedcode_study.analysis.figures.summary import CODE_WIDTH, MODEL_SIZE, SCALE, sweep_points
from fixedcode_study.analysis.read.runs import (
    Collected,
    build_study,
    load_run_dirs,
    results_to_frames,
)
from fixedcode_study.analysis.read.records import eval_rows
from fixedcode_study.analysis.tables.numfmt import decimals_for
from fixedcode_study.analysis.report import write_report
from fixedcode_study.analysis.stats.core import lower_is_better, welch_compare
from fixedcode_study.analysis.read.wandb import history_to_curves, results_from_wandb

REPO = Path(__file__).resolve().parents[2]
PM = "±"



def run_cli(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=REPO, capture_output=True, text=True,
                          check=False, env=env, timeout=120)


@pytest.fixture(scope="module")
def main_report(tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """The real CLI on learned/binary16/gf2 x 3 seeds + failed + running + no-results.json jobs."""
    root = tmp_path_factory.mktemp("runs")
    sweep = fx.build_main_sweep(root)
    out = root / "report"
    proc = run_cli([str(sweep), f"out={out}", "reference=true"])
    assert proc.returncode == 0, proc.stderr
    return sweep, out, proc


# ---------------------------------------------------------------- loading


def test_long_frame_holds_curves_finals_and_eval_with_provenance(tmp_path):
    sweep = fx.build_main_sweep(tmp_path)
    study = load_run_dirs([sweep])
    long = study.long
    for col in ("run", "sweep", "job_key", "input", "input_props.code_width", "input_props.type", "model", "seed",
                "tokens", "step", "metric", "value", "kind", "stderr"):
        assert col in long.columns, col
    completed = [p for p in sweep.iterdir() if (p / "metrics.csv").exists()]
    assert len(completed) == 9
    n_curve_rows = sum(len(pd.read_csv(p / "metrics.csv")) for p in completed)
    assert (long["kind"] == "curve").sum() == n_curve_rows
    finals = long[long["kind"] == "final"]
    assert len(finals) == 9 * 3  # val_loss, val_ppl, val_bpb per completed job
    gf2_seed2 = finals[(finals["input"] == "gf2") & (finals["seed"] == 2) & (finals["metric"] == "val_ppl")]
    assert gf2_seed2["value"].tolist() == [fx.VAL_PPL["gf2"][1]]
    assert gf2_seed2["run"].iloc[0].endswith("input=gf2,seed=2")
    assert gf2_seed2["tokens"].iloc[0] == 409_600 and gf2_seed2["step"].iloc[0] == 200
    evals = long[long["kind"] == "eval"]
    assert set(evals["metric"]) == {"hellaswag/acc_norm"}
    assert np.allclose(evals["stderr"], fx.HELLASWAG_STDERR)


def test_incomplete_failed_and_unreadable_jobs_are_excluded_with_reasons(tmp_path):
    sweep = fx.build_main_sweep(tmp_path)
    fx.write_job(sweep, "learned", 7, status="completed", val_ppl=float("nan"), val_bpb=1.9, curves=False)
    broken = sweep / "input=gf2,seed=8"
    broken.mkdir()
    (broken / "results.json").write_text('{"status": "comp')
    study = load_run_dirs([sweep])
    excluded = study.excluded_jobs.set_index("job_key")
    assert set(excluded.index) == {"input=gf2,seed=4", "input=binary16,seed=4", "input=learned,seed=4",
                                   "input=learned,seed=7", "input=gf2,seed=8"}
    assert excluded.loc["input=gf2,seed=4", "reason"] == "RuntimeError: CUDA out of memory"
    assert excluded.loc["input=binary16,seed=4", "reason"] == "not completed (status=running)"
    assert excluded.loc["input=learned,seed=4", "status"] == "missing results.json"
    assert "val_ppl" in excluded.loc["input=learned,seed=7", "reason"]
    assert excluded.loc["input=gf2,seed=8", "reason"].startswith("unreadable results.json (JSONDecodeError")
    # never mixed in: no long-format row of an excluded job is marked included
    assert not study.long.loc[study.long["run"].isin(study.excluded_jobs["run"]), "included"].any()
    assert len(study.included_jobs) == 9


def test_variant_labels_ignore_seed_like_props_and_pooled_config_differences_are_noted(tmp_path):
    sweep = tmp_path / "multirun" / "labels"
    for seed in (1, 2, 3):
        job = fx.write_job(sweep, "gf2", seed, val_ppl=60.0 + seed, val_bpb=1.9, curves=False)
        results = json.loads((job / "results.json").read_text())
        results["input_props"]["matrix_seed"] = 1000 + seed  # moves with the seed: not a design choice
        results["config"]["train"]["lr"] = 0.001 if seed < 3 else 0.002  # silently different run
        (job / "results.json").write_text(json.dumps(results))
    study = load_run_dirs([sweep])
    assert set(study.jobs["variant"]) == {"gf2"}
    assert study.label_props == {"gf2": []}
    assert any("pools jobs whose resolved configs differ in: train.lr" in note for note in study.notes)
    assert any("differ in settings other than the input variant and seed: train.lr" in n for n in study.notes)


# ---------------------------------------------------------------- main table


def test_main_table_cells_and_best_marks(main_report):
    _, out, _ = main_report
    rows = md_rows(out / "tables" / "main_results.md")
    header = (out / "tables" / "main_results.md").read_text().splitlines()[0]
    assert header == "| input variant | val ppl ↓ | val bpb ↓ |"
    # mean ± sample std (ddof=1): e.g. binary16 ppl [64, 65, 66.5] -> 65.1667 ± 1.2583
    assert rows == [
        ["learned", f"**61.00 {PM} 1.00 (n=3)**", f"**1.910 {PM} 0.010 (n=3)**"],
        ["binary16", f"65.17 {PM} 1.26 (n=3)", f"1.960 {PM} 0.010 (n=3)"],
        ["gf2", f"**61.00 {PM} 0.50 (n=3)**", f"1.913 {PM} 0.015 (n=3)"],
    ]
    evals = md_rows(out / "tables" / "eval_results.md")
    assert evals[:3] == [["learned", f"0.2700 {PM} 0.0100 (n=3)"], ["binary16", f"0.2550 {PM} 0.0050 (n=3)"],
                         ["gf2", f"**0.3100 {PM} 0.0100 (n=3)**"]]


def test_main_table_csv_traces_every_cell_to_run_dirs(main_report):
    _, out, _ = main_report
    table = pd.concat([pd.read_csv(out / "tables" / "main_results.csv"),
                       pd.read_csv(out / "tables" / "eval_results.csv").query("provenance == 'this study'")])
    assert len(table) == 9
    for row in table.itertuples():
        name = row.variant
        source = {"val_ppl": fx.VAL_PPL, "val_bpb": fx.VAL_BPB, "hellaswag/acc_norm": fx.HELLASWAG}[row.metric]
        assert row.n == 3
        assert math.isclose(row.mean, np.mean(source[name]))
        assert math.isclose(row.std, np.std(source[name], ddof=1))
        runs = row.runs.split(";")
        assert sorted(Path(r).name for r in runs) == [f"input={name},seed={s}" for s in fx.SEEDS]
        for run in runs:
            results = json.loads((Path(run) / "results.json").read_text())
            assert results["input"] == name and results["status"] == "completed"
    jobs = pd.read_csv(out / "tables" / "jobs.csv")
    assert len(jobs) == 12 and jobs["included"].sum() == 9


def test_latex_table_is_booktabs_with_bold_best(main_report):
    tex = (main_report[1] / "tables" / "main_results.tex").read_text()
    for token in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{lrr}"):
        assert token in tex
    assert r"\textbf{61.00 $\pm$ 1.00 (n=3)}" in tex
    tex = (main_report[1] / "tables" / "eval_results.tex").read_text()
    assert r"hellaswag/acc\_norm $\uparrow$" in tex
    assert r"\textbf{0.3100 $\pm$ 0.0100 (n=3)}" in tex
    assert r"\textit{paper $\cdot$ learned (reference)} & 0.5779 \\" in tex  # reference rows stay marked
    tex = (main_report[1] / "tables" / "comparisons.tex").read_text()
    assert r"comparison (a - b) & metric & test & n & $\Delta$ & 95\% CI of $\Delta$" in tex


# ---------------------------------------------------------------- comparisons (no CRN record: Welch)


def expected_welch(variant, learned):
    """Hand computation: Welch-Satterthwaite dof and t interval; p from scipy."""
    a, b = np.asarray(variant, float), np.asarray(learned, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = sps.t.ppf(0.975, dof) * math.sqrt(va + vb)
    delta = a.mean() - b.mean()
    scipy_result = sps.ttest_ind(a, b, equal_var=False)
    return delta, delta - half, delta + half, dof, scipy_result


def test_comparisons_match_hand_welch_scipy_and_holm(main_report):
    from statsmodels.stats.multitest import multipletests

    _, out, _ = main_report
    diffs = pd.read_csv(out / "tables" / "comparisons.csv")
    # val bpb and hellaswag for binary16 - learned, gf2 - learned and, by default, gf2 - binary16
    assert [(r.variant_a, r.variant_b) for r in diffs.itertuples()][::2] == [
        ("binary16", "learned"), ("gf2", "learned"), ("gf2", "binary16")]
    assert set(diffs["metric"]) == {"val_bpb", "hellaswag/acc_norm"} and len(diffs) == 6
    sources = {"val_bpb": fx.VAL_BPB, "hellaswag/acc_norm": fx.HELLASWAG}
    for row in diffs.itertuples():
        data = sources[row.metric]
        delta, lo, hi, dof, res = expected_welch(data[row.variant_a], data[row.variant_b])
        assert row.test == "welch" and row.test_label == "welch (no CRN)"  # helper runs record no init.scheme
        assert math.isclose(row.delta, delta, abs_tol=1e-12)
        assert math.isclose(row.ci_low, lo, rel_tol=1e-9) and math.isclose(row.ci_high, hi, rel_tol=1e-9)
        assert math.isclose(row.dof, dof, rel_tol=1e-9) and math.isclose(row.dof, res.df, rel_tol=1e-9)
        ci = res.confidence_interval(0.95)  # scipy's own Welch interval, as a second reference
        assert math.isclose(row.ci_low, ci.low, rel_tol=1e-9) and math.isclose(row.ci_high, ci.high, rel_tol=1e-9)
        assert math.isclose(row.p_value, res.pvalue, rel_tol=1e-9)
        assert row.n_a == 3 and row.n_b == 3 and row.n == "3/3"
        assert f"input={row.variant_b},seed=1" in row.runs_b and f"input={row.variant_a},seed=3" in row.runs_a
    # sweeps/main.yaml declares the val bpb rows primary; Holm runs within each family (statsmodels)
    assert diffs["family"].tolist() == ["primary", "exploratory"] * 3
    assert (diffs.loc[diffs["family"] == "primary", "metric"] == "val_bpb").all()
    for _, family in diffs.groupby("family"):
        assert np.allclose(family["p_holm"], multipletests(family["p_value"], method="holm")[1], rtol=1e-12)
        assert np.allclose(family["tost_p_holm"], multipletests(family["tost_p"], method="holm")[1], rtol=1e-12)


def test_comparison_table_rows_and_verdicts(main_report):
    rows = md_rows(main_report[1] / "tables" / "comparisons.md")
    # Primary (sweeps/main.yaml: val bpb), Holm over 3: binary16 +0.05, Holm p 0.011 -> worse; gf2 − binary16
    # -0.047, Holm p 0.032 -> better; gf2 − learned: CI straddles 0, n=3 cannot show |Δ| < 0.01 -> inconclusive.
    # Downstream rows are exploratory: Holm among themselves, no verdict however small their p.
    assert [[r[0], r[1], r[2], r[3], r[4], r[5], r[8], r[9], r[11]] for r in rows] == [
        ["binary16 − learned", "val bpb ↓", "welch (no CRN)", "3/3", "+0.050", "[0.027, 0.073]", "0.011", "±0.01", "worse"],
        ["binary16 − learned", "hellaswag/acc_norm ↑", "welch (no CRN)", "3/3", "-0.0150", "[-0.0358, 0.0058]", "0.104",
         "±0.01", "exploratory"],
        ["gf2 − learned", "val bpb ↓", "welch (no CRN)", "3/3", "+0.003", "[-0.028, 0.035]", "0.770", "±0.01",
         "inconclusive"],
        ["gf2 − learned", "hellaswag/acc_norm ↑", "welch (no CRN)", "3/3", "+0.0400", "[0.0173, 0.0627]", "0.016",
         "±0.01", "exploratory"],
        ["gf2 − binary16", "val bpb ↓", "welch (no CRN)", "3/3", "-0.047", "[-0.078, -0.015]", "0.032", "±0.01", "better"],
        ["gf2 − binary16", "hellaswag/acc_norm ↑", "welch (no CRN)", "3/3", "+0.0550", "[0.0342, 0.0758]", "0.011",
         "±0.01", "exploratory"],
    ]
    assert all(r[6].startswith("g = ") for r in rows)  # Hedges' g for unpaired comparisons
    assert "within seed variation" not in (main_report[1] / "report.md").read_text()


def test_welch_edge_cases_and_metric_direction():
    few = welch_compare([1.0], [1.0, 2.0])
    assert math.isnan(few.ci_low) and math.isnan(few.p_value) and few.delta == -0.5
    assert verdict(few, "val_ppl", few.p_value, math.nan) == "n/a (n<2)"
    exact = welch_compare([2.0, 2.0], [1.0, 1.0])  # no spread: the difference is exact, no test
    assert (exact.ci_low, exact.ci_high) == (1.0, 1.0) and math.isnan(exact.p_value) and exact.test == "exact"
    assert verdict(exact, "val_ppl", math.nan, math.nan) == "worse"
    assert verdict(exact, "arc_easy/acc", math.nan, math.nan) == "better"
    assert verdict(exact, "arc_easy/acc", math.nan, math.nan, margin=2.0) == "equivalent (Δ ≠ 0)"
    for metric in ("val_ppl", "val_bpb", "wikitext/word_perplexity", "wikitext/bits_per_byte", "val_loss"):
        assert lower_is_better(metric)
    for metric in ("hellaswag/acc_norm", "arc_easy/acc", "lambada_openai/acc"):
        assert not lower_is_better(metric)
    assert decimals_for([0.01 - 1e-17, 0.5], [1.0]) == 3  # float noise must not add a digit
    assert decimals_for([float("nan")], [61.0]) == 2


# ---------------------------------------------------------------- parameters, references, report


def test_parameter_accounting(main_report):
    rows = md_rows(main_report[1] / "tables" / "params.md")
    learned_total = fx.BODY + fx.HEAD + fx.LEARNED_INPUT
    fixed_total = fx.BODY + fx.HEAD
    removed = f"{100 * (1 - fixed_total / learned_total):.2f} %"
    assert rows == [
        ["learned", f"{learned_total:,}", f"{learned_total:,}", f"{fx.LEARNED_INPUT:,}", "baseline"],
        ["binary16", f"{fixed_total:,}", f"{fixed_total:,}", "0", removed],
        ["gf2", f"{fixed_total:,}", f"{fixed_total:,}", "0", removed],
    ]
    assert removed == "49.06 %"


def test_reference_rows_are_labelled_as_published(main_report):
    refs = pd.read_csv(main_report[1] / "tables" / "reference.csv", dtype=str, keep_default_na=False)
    assert list(refs.columns)[:6] == ["provenance", "source", "model", "variant", "metric", "lm_eval_metric"]
    assert (refs["provenance"] == "published, not produced here").all()
    smollm = refs[refs["source"].str.contains("SmolLM2")]
    assert len(smollm) == 9 and smollm["citation"].str.contains("2502.02737").all()
    assert (smollm["lm_eval_metric"] == "").all()  # lighteval numbers: never matched to our lm-eval columns
    report = (main_report[1] / "report.md").read_text()
    assert "## Published reference numbers (published, not produced here)" in report


def test_report_md_ties_everything_together(main_report):
    sweep, out, proc = main_report
    report = (out / "report.md").read_text()
    assert "9 jobs in tables, 3 excluded, 5 figures" in proc.stdout  # the primary comparisons' figure first
    assert "- Jobs found: 12; included: 9; excluded: 3" in report
    assert "| cpu_tiny | gf2 | 1, 2, 3 | 3 | no |" in report
    for name in ("main_results", "eval_results", "comparisons"):
        assert (out / "tables" / f"{name}.md").read_text() in report  # embedded, not just linked
    # the first screen: the question, the primary rows with their verdicts, their figure; then the Findings,
    # one line per primary row, each in its own verdict's words
    first = report.split("## Findings\n")[0]
    assert first.startswith("# Fixed-code input study: main\n\n**Question.** Does a fixed token-ID code")
    assert (out / "tables" / "primary.md").read_text() in first and "](figures/primary_comparisons.png)" in first
    assert len(first.splitlines()) < 40
    findings = report.split("## Findings\n")[1].split("\n## ")[0]
    assert report.index("## Primary comparisons") < report.index("## Findings") < report.index("## Comparisons")
    assert "3 primary rows: 1 worse, 1 better, 1 inconclusive. The other 3 row(s)" in findings
    assert "hellaswag" not in findings  # exploratory rows are never findings
    assert "- **binary16 − learned**, val bpb ↓: binary16 is *worse* than learned; Δ = +0.050" in findings
    assert ("- **gf2 − learned**, val bpb ↓: *inconclusive*: neither a difference (Holm p = 0.770) nor equivalence "
            "within ±0.01") in findings
    assert "Seeds needed: not computed, the runs are not paired" in findings  # these helper runs are Welch
    for stem in ("val_ppl_vs_tokens", "train_loss", "gap_vs_tokens", "eval_metrics"):
        assert f"](figures/{stem}.png)" in report and f"](figures/{stem}.pdf)" in report
    assert "min–max over seeds" in report and "alpha = 0.1" in report
    assert "## Caveats and notes\n\n- none" in report
    excluded = report.split("## Excluded jobs")[1].split("## Methods")[0]
    for key, reason in (("input=gf2,seed=4", "RuntimeError: CUDA out of memory"),
                        ("input=binary16,seed=4", "not completed (status=running)"),
                        ("input=learned,seed=4", "no results.json")):
        line = next(ln for ln in excluded.splitlines() if key in ln)
        assert reason in line and str(sweep / key) in line


def test_figures_are_written_as_png_and_pdf(main_report):
    figures = main_report[1] / "figures"
    for stem in ("val_ppl_vs_tokens", "train_loss", "gap_vs_tokens", "eval_metrics"):
        png, pdf = figures / f"{stem}.png", figures / f"{stem}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 5_000
    # no numeric axis varies in this sweep, so no sweep-axis figures
    assert not list(figures.glob("final_vs_*"))


# ---------------------------------------------------------------- other sweep shapes


def test_single_seed_uses_lm_eval_stderr_and_no_ci(tmp_path):
    sweep = fx.build_single_seed(tmp_path)
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    assert md_rows(out / "tables" / "main_results.md") == [
        ["learned", "**60.00 (n=1)**", "**1.900 (n=1)**"],
        ["gf2", "61.00 (n=1)", "1.920 (n=1)"],
    ]
    assert md_rows(out / "tables" / "eval_results.md")[:2] == [
        ["learned", f"0.2600 {PM} 0.0040 (n=1, stderr)"], ["gf2", f"**0.2700 {PM} 0.0045 (n=1, stderr)**"]]
    diff_rows = md_rows(out / "tables" / "comparisons.md")
    assert [[r[2], r[3], r[4], r[5], r[8], r[10], r[11]] for r in diff_rows] == [
        ["n/a (n<2)", "1/1", "+0.020", "n/a", "n/a", "n/a", "n/a (n<2)"],
        ["n/a (n<2)", "1/1", "+0.0100", "n/a", "n/a", "n/a", "n/a (n<2)"]]
    assert not (out / "tables" / "reference.md").exists()  # only with reference=true
    for stem in ("val_ppl_vs_tokens", "eval_metrics"):
        assert (out / "figures" / f"{stem}.pdf").stat().st_size > 0


def test_code_width_sweep_labels_variants_and_plots_the_axis(tmp_path):
    sweep = fx.build_width_sweep(tmp_path)
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    rows = md_rows(out / "tables" / "main_results.md")
    # tile_factor follows code_width and matrix_* are constant/derived: only code_width names the variant
    assert [r[0] for r in rows] == ["learned", "gf2 (code_width=8)", "gf2 (code_width=16)", "gf2 (code_width=32)"]
    assert rows[1][1] == f"71.50 {PM} 0.71 (n=2)"
    assert (out / "figures" / "final_vs_code_width.png").stat().st_size > 10_000
    assert not (out / "figures" / "val_ppl_vs_tokens.png").exists()  # no metrics.csv in this sweep
    assert "8 included job(s) have no per-step metrics" in (out / "report.md").read_text()


def test_two_model_sizes_get_a_model_column_best_per_model_and_size_figure(tmp_path):
    sweep = fx.build_model_sweep(tmp_path)
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    rows = md_rows(out / "tables" / "main_results.md")
    assert [r[:2] for r in rows] == [["cpu_tiny", "learned"], ["cpu_tiny", "gf2"],
                                     ["cpu_small", "learned"], ["cpu_small", "gf2"]]
    # best ppl is marked within each model, not only for the bigger model
    assert rows[0][2].startswith("**61.50") and rows[2][2].startswith("**51.50")
    assert not rows[1][2].startswith("**") and not rows[3][2].startswith("**")
    diff_rows = md_rows(out / "tables" / "comparisons.md")
    assert [r[:3] for r in diff_rows] == [["cpu_tiny", "gf2 − learned", "val bpb ↓"],
                                          ["cpu_small", "gf2 − learned", "val bpb ↓"]]
    assert (out / "figures" / "final_vs_model_params.pdf").stat().st_size > 0
    assert (out / "figures" / "gap_vs_model_size.pdf").stat().st_size > 0


def test_sweep_axes_keep_other_design_props_fixed_along_each_line(tmp_path):
    study = load_run_dirs([fx.build_width_and_scale_sweep(tmp_path)])
    assert study.label_props["gf2"] == ["input_props.code_width", "input_props.scale"]
    width = sweep_points(study, CODE_WIDTH)
    line = width[width["series"] == "gf2 (scale=1)"]
    assert line["x"].tolist() == [8.0, 16.0, 32.0]
    assert line["final.val_ppl|mean"].tolist() == [69.5, 67.5, 63.5]
    assert set(width["series"]) == {"gf2 (scale=0.5)", "gf2 (scale=1)", "gf2 (scale=2)"}
    scale = sweep_points(study, SCALE)
    line = scale[scale["series"] == "gf2 (code_width=16)"]
    assert line["x"].tolist() == [0.5, 1.0, 2.0] and line["final.val_ppl|count"].tolist() == [2, 2, 2]
    assert sweep_points(study, MODEL_SIZE).empty  # one model preset: no size axis


# ---------------------------------------------------------------- W&B source


def fake_wandb_run(name: str, seed: int, ppl: float) -> tuple[dict, dict]:
    """Config and summary as fixedcode_study.training.job logs them (config + input_props + params; final/*)."""
    config = {"name": "main", "seed": seed, "input": {"name": name}, "model": {"name": "cpu_tiny"},
              "data": {"name": "shakespeare"}, "input_props": fx.input_props(name), "params": fx.params_for(name)}
    summary = {"final/val_ppl": ppl, "final/val_bpb": 1.9, "final/val_loss": math.log(ppl), "tokens_seen": 51_200,
               "val/ppl": 999.0, "eval/hellaswag/acc_norm": 0.3, "eval/hellaswag/acc_norm_stderr": 0.004}
    return config, summary


def test_wandb_runs_map_to_the_same_frames_and_tables(tmp_path):
    collected = Collected(sources=["wandb:ent/proj"])
    for name, ppls in (("learned", [60.0, 62.0]), ("gf2", [61.0, 61.5])):
        for seed, ppl in enumerate(ppls, start=1):
            config, summary = fake_wandb_run(name, seed, ppl)
            results = results_from_wandb(f"main/input={name},seed={seed}", "main", "finished", config, summary)
            history = [{"trainer/global_step": s, "tokens": s * 1024, "train/loss": 5.0 - s / 100,
                        "val/ppl": ppl * (1 + 1 / s)} for s in range(1, 51)]
            run = f"wandb:ent/proj/{name}{seed}"
            rec, frames = results_to_frames(results, run, Path(name), history_to_curves(history, run))
            collected.records.append(rec)
            collected.frames.extend(frames)
    crashed_cfg, crashed_summary = fake_wandb_run("gf2", 3, 99.0)
    crashed = results_from_wandb("main/input=gf2,seed=3", "main", "crashed", crashed_cfg, crashed_summary)
    rec, frames = results_to_frames(crashed, "wandb:ent/proj/gf2x", Path("gf2"), None)
    collected.records.append(rec)
    collected.frames.extend(frames)
    study = build_study(collected)
    assert study.excluded_jobs["reason"].tolist() == ["W&B run state: crashed"]
    jobs = study.jobs.set_index("run")
    assert jobs.loc["wandb:ent/proj/gf21", "job_key"] == "input=gf2,seed=1"
    assert jobs.loc["wandb:ent/proj/gf21", "sweep"] == "main"
    assert jobs.loc["wandb:ent/proj/gf21", "input_props.code_width"] == 16
    curves = study.long[(study.long["kind"] == "curve") & (study.long["run"] == "wandb:ent/proj/gf21")]
    assert set(curves["metric"]) == {"train/loss", "val/ppl"} and curves["step"].max() == 50
    write_report(study, tmp_path / "report")
    rows = md_rows(tmp_path / "report" / "tables" / "main_results.md")
    # final/val_ppl wins over the last logged val/ppl; learned [60, 62] -> 61.00 ± 1.41; gf2 [61, 61.5]
    assert [r[:2] for r in rows] == [["learned", f"**61.00 {PM} 1.41 (n=2)**"], ["gf2", f"61.25 {PM} 0.35 (n=2)"]]
    evals = md_rows(tmp_path / "report" / "tables" / "eval_results.md")
    assert evals[0][1].startswith("**0.3000") and "(n=2)" in evals[0][1]
    assert md_rows(tmp_path / "report" / "tables" / "params.md")[1][-1] == "49.06 %"
    assert (tmp_path / "report" / "figures" / "val_ppl_vs_tokens.png").stat().st_size > 0


def test_lm_eval_filters_stay_distinct_and_pair_with_their_stderr():
    tasks = {"gsm8k": {"exact_match,strict-match": 0.1, "exact_match_stderr,strict-match": 0.01,
                       "exact_match,flexible-extract": 0.2, "exact_match_stderr,flexible-extract": None},
             "hellaswag": {"acc,none": 0.3, "acc_stderr,none": 0.004, "alias": "hellaswag"},
             "wikitext": {"word_perplexity": 800.0, "word_perplexity_stderr": None}}
    rows = {r["metric"]: r["stderr"] for r in eval_rows({"eval": {"tasks": tasks}})}
    assert set(rows) == {"gsm8k/exact_match,strict-match", "gsm8k/exact_match,flexible-extract",
                         "hellaswag/acc", "wikitext/word_perplexity"}
    assert rows["gsm8k/exact_match,strict-match"] == 0.01 and rows["hellaswag/acc"] == 0.004
    assert math.isnan(rows["gsm8k/exact_match,flexible-extract"]) and math.isnan(rows["wikitext/word_perplexity"])


def test_wandb_results_dict_in_summary_is_used_verbatim():
    logged = {"status": "completed", "input": "gf2", "seed": 3, "final": {"val_ppl": 1.0, "val_bpb": 2.0}}
    results = results_from_wandb("x", "g", "finished", {"seed": 3}, {"results": logged})
    assert results["input"] == "gf2" and results["final"] == {"val_ppl": 1.0, "val_bpb": 2.0}
    assert results_from_wandb("x", "g", "killed", {}, {"results": logged})["status"] == "failed"


@pytest.mark.parametrize("mode", ["offline", "no-key"])
def test_wandb_without_access_fails_with_one_line(tmp_path, mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"HOME": str(tmp_path), "WANDB_CONFIG_DIR": str(tmp_path / "wandb"), "NETRC": str(tmp_path / "netrc")}
    if mode == "offline":
        env["WANDB_MODE"] = "offline"
    proc = run_cli(["wandb=ent/proj", "out=" + str(tmp_path / "report")], env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "W&B" in lines[0], proc.stderr
    assert not (tmp_path / "report").exists()


def test_a_run_repeated_in_two_studies_is_counted_once(tmp_path):
    """The learned arm of `main` re-run inside another study must not double n (bitwise-identical seeds)."""
    import shutil

    main = fx.build_main_sweep(tmp_path)
    other = tmp_path / "multirun" / "controls"
    for seed in (1, 2, 3):  # the same learned jobs again, under another study
        src = next(main.glob(f"input=learned*seed={seed}"))
        shutil.copytree(src, other / src.name)
    study = load_run_dirs([main, other])
    learned = study.included_jobs[study.included_jobs["input"] == "learned"]
    assert len(learned) == 3
    repeats = study.excluded_jobs[study.excluded_jobs["reason"].str.startswith("repeats ")]
    assert len(repeats) == 3 and repeats["reason"].str.startswith("repeats ").all()
    assert any("counted once" in note for note in study.notes)


def test_baseline_is_one_learned_variant_never_a_pool_of_them(tmp_path):
    from fixedcode_study.analysis.stats.comparisons import Plan, compare
    from fixedcode_study.analysis.stats.grouping import comparison_points

    main = fx.build_main_sweep(tmp_path)
    for seed in (1, 2, 3):  # a second learned variant (another init) in the same study
        job = fx.write_job(main, "learned", seed, val_ppl=500.0 + seed, val_bpb=3.0, extra_key="_wide_init")
        res = json.loads((job / "results.json").read_text())
        res["input_props"]["init_std"] = 0.5
        (job / "results.json").write_text(json.dumps(res))
    study = load_run_dirs([main])
    diffs = compare(comparison_points(study), ["model", "data"], Plan(fixed_pair=False), ["val_bpb"])
    # the plain learned runs (no init_std recorded) are the baseline, labelled "init_std=default"
    assert not diffs.empty and (diffs["variant_b"] == "learned (init_std=default)").all()
    assert (diffs["n_b"] == 3).all()  # 3 seeds of one learned variant, not 6 pooled
    assert diffs["variant_a"].str.startswith("learned").any()  # the other learned variant is an arm


def test_pooling_evaluations_with_different_settings_is_flagged(tmp_path):
    main = fx.build_main_sweep(tmp_path)
    job = next(main.glob("input=binary16,seed=1"))
    res = json.loads((job / "results.json").read_text())
    res["eval"]["settings"] = {**(res["eval"].get("settings") or {}), "limit": 100}  # a smoke evaluation
    (job / "results.json").write_text(json.dumps(res))
    notes = " ".join(load_run_dirs([main]).notes)
    assert "lm_eval_run.limit" in notes


def test_runs_trained_by_different_training_code_are_flagged(tmp_path):
    sweep = tmp_path / "sweep"
    for seed, code in ((1, "a" * 64), (2, "b" * 64)):
        for name in ("learned", "binary16"):
            fx.write_job(sweep, name, seed, val_ppl=200.0 + seed, val_bpb=2.5 + seed / 100,
                         results_extra={"fingerprint": {"code_sha": code}})
    out = tmp_path / "report"
    cli_main([str(sweep), f"out={out}"])
    report = (out / "report.md").read_text()
    assert "were trained by 2 versions of the training code (aaaaaaaaaaaa, bbbbbbbbbbbb)" in report
    assert set(pd.read_csv(out / "tables" / "jobs.csv")["code_sha"]) == {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}


def test_a_row_evaluated_on_some_seeds_says_so_and_its_eval_settings_are_not_a_config_difference(tmp_path):
    main = fx.build_main_sweep(tmp_path)
    for seed in (2, 3):  # only seed 1 of learned was evaluated
        job = main / f"input=learned,seed={seed}"
        res = json.loads((job / "results.json").read_text())
        del res["eval"]
        (job / "results.json").write_text(json.dumps(res))
    notes = load_run_dirs([main]).notes
    assert not [n for n in notes if "lm_eval_run" in n], notes  # a job never evaluated has no lm-eval setting
    assert ("row cpu_tiny / learned: its downstream (lm-eval) cells are from 1 of its 3 jobs; the others were "
            "not evaluated (its validation cells are from all 3)") in notes
    assert not [n for n in notes if "/ binary16:" in n or "/ gf2:" in n]  # fully evaluated rows: nothing to say


def test_nested_run_dirs_read_an_external_record_once(tmp_path):
    """`analysis multirun/main multirun` finds main's external record under both roots; read twice it
    was two rows of one reference, and the downstream table crashed on the doubled cell."""
    main = fx.build_main_sweep(tmp_path)
    folder = main / "external" / "tiny-llama@local"
    folder.mkdir(parents=True)
    (folder / "external.json").write_text(json.dumps({
        "external": {"name": "/models/tiny-llama", "revision": "local", "source": "local", "params": 1000},
        "settings": {"num_fewshot": 0}, "lm_eval_version": "0.4.13",
        "tasks": {"hellaswag": {"acc_norm": 0.26, "acc_norm_stderr": 0.06}}}))
    assert len(load_run_dirs([main, main.parent]).externals) == len(load_run_dirs([main]).externals) == 1
    assert cli_main([str(main), str(main.parent), "out=" + str(tmp_path / "report")]) == 0
    rows = [ln for ln in (tmp_path / "report" / "report.md").read_text().splitlines()
            if ln.startswith("| *external · tiny-llama")]
    assert rows == ["| *external · tiny-llama @ local (reference)* | 0.2600 ± 0.0600 (n=1, stderr) |"]


def test_a_smoke_evaluation_is_said_with_or_without_evaluated_trained_runs(tmp_path):
    main = fx.build_main_sweep(tmp_path)
    for job in main.glob("input=*,seed=*"):  # no trained run evaluated
        res = json.loads((job / "results.json").read_text()) if (job / "results.json").exists() else None
        if res and res.pop("eval", None) is not None:
            (job / "results.json").write_text(json.dumps(res))
    folder = main / "external" / "tiny-llama@local"
    folder.mkdir(parents=True)
    (folder / "external.json").write_text(json.dumps({
        "external": {"name": "/models/tiny-llama", "revision": "local", "source": "local", "params": 1000},
        "settings": {"limit": 50, "num_fewshot": 0}, "lm_eval_version": "0.4.13",
        "tasks": {"hellaswag": {"acc_norm": 0.26, "acc_norm_stderr": 0.06}}}))
    study = load_run_dirs([main])
    assert [n for n in study.notes if "tiny-llama" in n] == [
        "external · tiny-llama @ local (reference) was scored on at most 50 examples per task (eval.limit), "
        "not on the full tasks: a smoke test, not comparable with full-set scores"]
    # a trained row scored on a subset says so too
    job = main / "input=gf2,seed=1"
    res = json.loads((job / "results.json").read_text())
    res["eval"] = {"lm_eval_version": "0.4.13", "settings": {"limit": 50}, "tasks": {"hellaswag": {"acc_norm": 0.3}}}
    (job / "results.json").write_text(json.dumps(res))
    notes = load_run_dirs([main]).notes
    assert ("row cpu_tiny / gf2: downstream cells scored on at most 50 examples per task (eval.limit), not on the "
            "full tasks: a smoke test") in notes
