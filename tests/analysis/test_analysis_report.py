"""The report as issue 40 asks for it: declared families, the breakdown that adds up, estimates computed
once from one reading, and a report.md a reader can read.

- A primary verdict depends on the declared family alone: the same comparison on the same jobs gets
  the same verdict in a study that runs more arms, and an undeclared row is never worded.
- The loss breakdown compares arms only on a common partition of the tokens, where its buckets add up
  to the true gap; the weight under the arm's own code is a per-arm profile; one BH procedure runs
  over every tested bucket of the report, and buckets under the minimum are shown, not tested.
- results.json is read once per job; compare, summarize and the gap curves run once per report.
- No report.md of these fixtures passes 400 lines, and each opens with its primary rows.
"""

from __future__ import annotations

import cProfile
import json
import math
import pstats
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import analysis as fx

from fixedcode_study.cli.analyze import main as cli_main
from fixedcode_study.analysis.errors import AnalysisError
from fixedcode_study.analysis.read import declared as decl
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.report import write_report
from fixedcode_study.analysis.results import ReportOptions, compute
from fixedcode_study.analysis.sections import findings as findings_section
from fixedcode_study.analysis.stats.comparisons import resolve

MAIN_FAMILY = "binary16:learned,gf2:learned,gf2:binary16"
MAX_LINES = 400


@pytest.fixture
def unrendered(monkeypatch):
    """Figures are built (every estimate they draw, every caption and reference) but not rendered to PNG
    and PDF: for tests that read report.md and the tables only, rendering is most of a report's time
    (figure files are checked where they are the point, e.g. test_the_own_code_weight_is_a_per_arm_profile)."""
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", lambda self, *args, **kwargs: None)


def primary_rows(out: Path) -> pd.DataFrame:
    rows = pd.read_csv(out / "tables" / "comparisons.csv")
    return rows[rows["family"] == "primary"].set_index("comparison")


# ---------------------------------------------------------------- declared families


def test_a_primary_verdict_is_the_same_for_the_same_jobs_in_two_studies(tmp_path, unrendered):
    """main's jobs alone, and the same jobs inside a study with more arms: other arms add exploratory
    rows, never a member of the family, so every primary row keeps its p, Holm p and verdict."""
    main = fx.build_crn_sweep(tmp_path / "a")
    bigger = tmp_path / "b" / "multirun" / "more"
    shutil.copytree(main, bigger)
    for seed in fx.CRN_SEEDS:   # two more arms near learned: p's that a table-wide Holm would rank in between
        for name, wobble in (("binary16_permuted", 0.002), ("gaussian16", -0.003)):
            bpb = fx.crn_bpb("learned", seed) + wobble * (seed % 2 - 0.5) + 0.0005 * seed
            fx.write_job(bigger, name, seed, val_ppl=float(np.exp(bpb * 4 * np.log(2))), val_bpb=bpb, curves=False,
                         crn=True)
    assert cli_main([str(main), "out=" + str(tmp_path / "ra"), f"primary={MAIN_FAMILY}"]) == 0
    assert cli_main([str(bigger), "out=" + str(tmp_path / "rb"), f"primary={MAIN_FAMILY}"]) == 0
    a, b = primary_rows(tmp_path / "ra"), primary_rows(tmp_path / "rb")
    assert list(a.index) == list(b.index) == ["binary16 − learned", "gf2 − learned", "gf2 − binary16"]
    for column in ("delta", "p_value", "p_holm", "tost_p_holm"):
        assert np.allclose(a[column], b[column], rtol=1e-12, equal_nan=True), column
    assert a["verdict"].tolist() == b["verdict"].tolist()
    every = pd.read_csv(tmp_path / "rb" / "tables" / "comparisons.csv")
    extra = every[every["family"] == "exploratory"]
    assert len(extra) >= 2 and set(extra["verdict"]) == {"exploratory"}
    # the test can fail: Holm over the whole table (the old rule) gives the primary rows other p's
    whole = multipletests(every["p_value"], method="holm")[1][every["family"].to_numpy() == "primary"]
    assert not np.allclose(whole, b["p_holm"].to_numpy())


def test_without_a_declaration_every_row_is_exploratory_and_nothing_is_a_finding(tmp_path, unrendered):
    sweep = fx.build_crn_sweep(tmp_path)   # multirun/crn: no sweeps/crn.yaml
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    rows = pd.read_csv(out / "tables" / "comparisons.csv")
    assert (rows["family"] == "exploratory").all() and (rows["verdict"] == "exploratory").all()
    assert rows["p_holm"].notna().all()   # raw and adjusted p are still shown
    report = (out / "report.md").read_text()
    assert "No primary comparison is declared (`primary:` in sweeps/crn.yaml" in report
    findings = report.split("## Findings\n")[1].split("\n## ")[0]
    assert not [ln for ln in findings.splitlines() if ln.startswith("- **")]
    for word in ("*worse*", "*better*", "*equivalent*", "| worse |", "| better |", "| equivalent |"):
        assert word not in report.split("## Methods")[0]   # the Methods define the words; nothing uses them


def test_a_row_primary_in_another_study_says_so(tmp_path):
    """The controls study declares its one-factor contrasts; binary16 − learned is main's hypothesis:
    exploratory here, with the reason in the report."""
    results = compute(load_run_dirs([fx.build_controls_sweep(tmp_path)]))   # the estimates and one section:
    rows = results.comparisons.set_index("comparison")                         # no figure is drawn
    declared = [f"{a} − {b}" for a, b in decl.study_file("controls").pairs]
    assert set(rows.index[rows["family"] == "primary"]) == set(declared)   # all 9 resolve on these arms
    assert rows.loc["binary16 − learned", "family"] == "exploratory"
    assert "main" in rows.loc["binary16 − learned", "primary_in"].split(";")
    findings = "\n".join(findings_section.build(results, tmp_path).lines)
    line = next(ln for ln in findings.splitlines() if ln.startswith("- binary16 − learned"))
    assert "also declared primary by" in line and "main" in line and "Exploratory here" in line


def test_every_study_file_declares_a_readable_family_and_the_analysis_finds_sweeps_as_config_does():
    from fixedcode_study import config

    assert decl.SWEEPS_DIR == config.SWEEPS_DIR
    files = {f.name: f for f in decl.every_declaration()}
    for name in ("main", "controls", "output_side", "compute_ladder", "model_size", "tuned_lr", "probe_arms",
                 "code_width", "gf2_matrices", "scale_matching"):
        assert files[name].pairs and "?" in files[name].question, name
    assert files["main"].pairs == (("binary16", "learned"), ("gf2", "learned"), ("gf2", "binary16"))
    # the composition study declares its comparisons on the composition measures: none on val bpb, so no
    # other report's val bpb row is "primary in composition"
    composition = decl.study_file("composition")
    assert "composition" not in files and composition.pairs == ()
    assert composition.measure_pairs == (("binary16", "learned"), ("gf2", "learned"))
    assert composition.measures == ("ensemble_gain", "stitch_cost_identity", "stitch_cost_affine", "barrier")
    assert composition.compose_settings["stitch_tokens"] == 131072


@pytest.mark.parametrize("text,message", [
    ("primary: [binary16 - learned]\n", "expected {question: ..., comparisons: [A - B, ...]}"),
    ("primary:\n  comparisons: [binary16-learned]\n", "is not a comparison; write 'A - B'"),
    ("primary:\n  comparisons: [a - a]\n", "is not a comparison"),
    ("primary:\n  comparisons: [a - b, a - b]\n", "a comparison is listed twice"),
    ("primary:\n  comparisons: [a - b]\n  metric: val_bpb\n", "unknown key 'metric'"),
    ("primary:\n  comparisons: [a - b]\n  measures: [barrier]\n", "need the pairs the study composes"),
    ("pairs: {arms: [a]}\nprimary:\n  comparisons: [a - b]\n  measures: [barier]\n",
     "'barier' is not a composition or adaptation measure"),
    ("primary:\n  comparisons: [a - b]\n  measures: [adapt_other_loss]\n", "need the settings the study adapts"),
    ("adapt: {tokens: 1024}\npairs: {arms: [a]}\nprimary:\n  comparisons: [a - b]\n  measures: [barrier, adapt_other_loss]\n",
     "composition and adaptation measures are declared apart"),
    ("pairs: {arms: [a]}\nprimary:\n  comparisons: [a - b]\n  measures: barrier\n", "expected a list of composition"),
])
def test_a_bad_declaration_is_one_line_naming_the_field(tmp_path, text, message):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\n" + text)
    with pytest.raises(AnalysisError, match="mine.yaml:primary") as err:
        decl.read_study_file(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_partial_label_names_the_one_variant_that_has_those_settings():
    variants = pd.DataFrame({"variant": ["binary16 (values=01, scale_mode=fixed, scale=1)",
                                         "binary16 (values=pm1, scale_mode=fixed, scale=1)",
                                         "binary16 (values=pm1, scale_mode=match_init, scale=0.0327)"],
                             "input": ["binary16"] * 3, "variant_order": [0, 1, 2]})
    assert resolve("binary16 (values=pm1, scale_mode=match_init)", variants) == variants["variant"][2]
    assert resolve("binary16 (values=01, scale=1)", variants) == variants["variant"][0]
    assert resolve("binary16 (scale=1)", variants) is None      # two variants have it: not one arm
    assert resolve("binary16 (values=2)", variants) is None


def test_study_file_and_primary_options(tmp_path, unrendered):
    sweep = fx.build_crn_sweep(tmp_path)
    study_file = tmp_path / "crn.yaml"
    study_file.write_text("name: crn\nprimary:\n  question: Does gf2 differ from binary16?\n"
                          "  comparisons:\n    - gf2 - binary16\n    - gf2 - nosuch\n")
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}", f"study={study_file}"]) == 0
    rows = pd.read_csv(out / "tables" / "comparisons.csv")
    assert rows.loc[rows["family"] == "primary", "comparison"].tolist() == ["gf2 − binary16"]
    report = (out / "report.md").read_text()
    assert report.splitlines()[2] == "**Question.** Does gf2 differ from binary16?"
    assert "declared primary comparison gf2 − nosuch not made: no included variant or input named 'nosuch'" in report
    assert cli_main([str(sweep), "out=" + str(tmp_path / "r2"), "study=" + str(tmp_path / "none.yaml")]) == 2


# ---------------------------------------------------------------- the loss breakdown


@pytest.fixture(scope="module")
def breakdown(tmp_path_factory):
    root = tmp_path_factory.mktemp("breakdown")
    sweep = fx.build_breakdown_sweep(root)
    out = root / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    return sweep, out


def test_the_buckets_of_a_common_partition_add_up_to_the_true_gap(breakdown):
    sweep, out = breakdown
    rows = pd.concat([pd.read_csv(out / "tables" / f"loss_breakdown_{n}.csv") for n in ("input_id_weight", "position")])
    study = load_run_dirs([sweep])
    finals = study.long[(study.long["kind"] == "final") & (study.long["metric"] == "val_loss")]
    loss = {(r.variant, r.seed): r.value for r in finals.itertuples()}
    for (name, comparison), part in rows.groupby(["breakdown", "comparison"]):
        a, b = comparison.split(" − ")
        true_gap = np.mean([loss[(a, s)] - loss[(b, s)] for s in fx.SEEDS])   # the runs' own val loss
        weighted = float((part["delta"] * part["tokens"]).sum() / part["tokens"].sum())
        assert math.isclose(weighted, true_gap, rel_tol=1e-9, abs_tol=1e-12), (name, comparison)
        assert np.allclose(part["whole_gap"], true_gap, rtol=1e-9) and np.allclose(part["total_gap"], true_gap, rtol=1e-9)
        assert math.isclose(part["gap_share"].sum(), 1.0, rel_tol=1e-9)
        # the tokens are the same in every run: the partition is common
        assert part["tokens"].tolist() == (fx.ID_WEIGHT_TOKENS if name == "input_id_weight" else fx.POSITION_TOKENS)
    summary = pd.read_csv(out / "tables" / "loss_breakdown.csv")
    assert (summary["max_sum_error"] < 1e-9).all()


def test_the_own_code_weight_is_a_per_arm_profile_with_no_gap(breakdown):
    _, out = breakdown
    assert not (out / "tables" / "loss_breakdown_input_code_weight.csv").exists()
    profile = pd.read_csv(out / "tables" / "loss_profile_input_code_weight.csv")
    assert set(profile["variant"]) == {"binary16", "gf2"}   # learned has no code
    tokens = profile.groupby("variant")["tokens"].apply(list).to_dict()
    assert tokens == {"binary16": fx.ID_WEIGHT_TOKENS, "gf2": fx.GF2_OWN_TOKENS}   # each arm its own tokens
    assert not {"delta", "whole_gap", "gap_share", "p_value", "q_value"} & set(profile.columns)
    for row in profile.itertuples():
        losses = [fx.val_breakdown(row.variant, s)["breakdowns"]["input_code_weight"] for s in fx.SEEDS]
        means = [b["nats"][row.bucket] / b["tokens"][row.bucket] for b in losses]
        assert math.isclose(row.mean, np.mean(means), rel_tol=1e-12) and math.isclose(row.sd, np.std(means, ddof=1))
    assert (out / "figures" / "loss_profile_input_code_weight.png").is_file()


def test_small_buckets_are_shown_untested_and_one_bh_procedure_covers_the_report(breakdown):
    _, out = breakdown
    rows = pd.concat([pd.read_csv(out / "tables" / f"loss_breakdown_{n}.csv") for n in ("input_id_weight", "position")],
                     ignore_index=True)
    small = rows["tokens"] < 100
    assert small.any() and not rows.loc[small, "tested"].any()
    assert rows.loc[small, ["p_value", "q_value", "ci_low"]].isna().all().all() and rows.loc[small, "delta"].notna().all()
    tested = rows[rows["tested"]]
    # q: Benjamini-Hochberg over every tested bucket of the report (both breakdowns, every comparison)
    assert np.allclose(tested["q_value"], multipletests(tested["p_value"], method="fdr_bh")[1], rtol=1e-12)
    for r in tested.itertuples():   # each bucket's own test is the headline's paired t over seeds
        name = r.breakdown
        a, b = r.comparison.split(" − ")
        ya = [fx.val_breakdown(a, s)["breakdowns"][name] for s in fx.SEEDS]
        yb = [fx.val_breakdown(b, s)["breakdowns"][name] for s in fx.SEEDS]
        va = [x["nats"][r.bucket] / x["tokens"][r.bucket] for x in ya]
        vb = [x["nats"][r.bucket] / x["tokens"][r.bucket] for x in yb]
        assert math.isclose(r.p_value, sps.ttest_rel(va, vb).pvalue, rel_tol=1e-9)
    assert "verdict" not in rows   # exploratory: no bucket has a verdict
    section = (out / "report.md").read_text().split("## Where the gap lives")[1].split("\n## ")[0]
    assert f"over all {len(tested)} tested buckets of this report" in section and "none is a finding" in section


# ---------------------------------------------------------------- computed once, from one reading


def test_results_json_is_read_once_per_job_and_each_estimate_computed_once(breakdown, tmp_path, monkeypatch,
                                                                        unrendered):
    """The probe and sample readers take a job's identity from the run reader's row; compare,
    summarize and the gap curves run once per report, the figures recompute none of them."""
    sweep, _ = breakdown
    for job in sorted(sweep.glob("input=*"))[:2]:   # samples.json for two jobs (read only where present)
        results = json.loads((job / "results.json").read_text())
        (job / "samples.json").write_text(json.dumps({"subject": {
            "job_fingerprint": (results.get("fingerprint") or {}).get("sha"),
            "job_finished_at": results.get("finished_at")}, "prompts": []}))
    reads: dict[str, int] = {}
    real = Path.read_text

    def counting(self, *args, **kwargs):
        if self.name == "results.json":
            reads[str(self.parent)] = reads.get(str(self.parent), 0) + 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    profile = cProfile.Profile()
    profile.enable()
    write_report(load_run_dirs([sweep]), tmp_path / "report")
    profile.disable()
    assert len(reads) == 9 and set(reads.values()) == {1}
    calls = {func: nc for (file, _, func), (_, nc, *_) in pstats.Stats(profile).stats.items()
             if "fixedcode_study/analysis/stats" in file}
    assert calls["compare"] == 1 and calls["comparison_rows"] == 1 and calls["compare_buckets"] == 1
    assert calls["summarize"] == 2   # the tables' seed summaries and those of the compared metric, once each
    assert calls.get("paired_curve_gap", 0) == 0   # no metrics.csv here: no curve to pair


# ---------------------------------------------------------------- a report a reader can read


def _reports(root: Path) -> dict[str, Path]:
    """One report of each fixture shape: main (Welch, downstream, reference=true), controls (10 arms with
    curves), tuning, two sizes (a table per context), output heads, the loss breakdown."""
    from test_analysis_heads import build_heads_sweep

    sweeps = {"main": (fx.build_main_sweep(root / "main"), ["reference=true"]),
              "controls": (fx.build_controls_sweep(root / "controls"), []),
              "tuned": (fx.build_tuned_sweep(root / "tuned"), []),
              "sizes": (fx.build_model_flops_sweep(root / "sizes"), []),
              "heads": (build_heads_sweep(root / "heads"), []),
              "breakdown": (fx.build_breakdown_sweep(root / "breakdown"), [])}
    out = {}
    for name, (sweep, extra) in sweeps.items():
        out[name] = root / f"report_{name}"
        assert cli_main([str(sweep), f"out={out[name]}", *extra]) == 0, name
    return out


@pytest.mark.slow
def test_no_report_passes_400_lines_and_each_opens_with_its_primary_rows(tmp_path, unrendered):
    for name, out in _reports(tmp_path).items():
        text = (out / "report.md").read_text()
        lines = text.splitlines()
        assert len(lines) <= MAX_LINES, (name, len(lines))
        first = text.split("## Findings\n")[0]
        assert len(first.splitlines()) <= 60, name   # one screen: title, question, primary rows, their figure
        assert "## Primary comparisons" in first, name
        if (out / "tables" / "primary.md").exists():
            assert (out / "tables" / "primary.md").read_text() in first and "figures/primary_comparisons.png" in first
        # every number still traces to a run directory: every table's runs are rows of jobs.csv
        jobs = set(pd.read_csv(out / "tables" / "jobs.csv")["run"])
        for csv in (out / "tables").glob("*.csv"):
            frame = pd.read_csv(csv)
            for column in [c for c in frame.columns if c in ("runs", "runs_a", "runs_b", "run")]:
                runs = {r for cell in frame[column].dropna() for r in str(cell).split(";")}
                assert runs <= jobs, (name, csv.name, column)


def test_report_files_are_written_atomically(breakdown, tmp_path, monkeypatch, unrendered):
    """A report that fails half-way leaves the previous report.md and no half-written or temporary file."""
    from fixedcode_study.analysis.tables import render

    sweep, _ = breakdown
    out = tmp_path / "report"
    write_report(load_run_dirs([sweep]), out)
    before = (out / "report.md").read_text()
    real, calls = render.to_latex, []

    def failing(table):
        calls.append(table.name)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(table)

    monkeypatch.setattr(render, "to_latex", failing)
    with pytest.raises(OSError, match="disk full"):
        write_report(load_run_dirs([sweep]), out, ReportOptions(command="second"))
    assert (out / "report.md").read_text() == before
    assert not [p for p in out.rglob("*") if p.name.startswith(".") and p.suffix == ".tmp"]
