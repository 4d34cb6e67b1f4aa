"""Summaries generated, not written, and the committed reports as the analysis makes them.

The checkout's own blocks and prose are checked by `.ci/run` (`fixedcode regenerate check=true`); here
the check itself is shown to work:
- a stale generated block fails, in a copy of the repo;
- No sentence outside the blocks pairs an arm or comparison with a verdict or trend word; a planted one
  fails, in README.md, a doc and a report.md, and the same sentence inside a block is a stale block.
- Records are copied as results.json, metrics.csv and config.yaml (+ probes) only.
- No committed report.md that the analysis regenerates passes 400 lines.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from fixedcode_study.analysis import regenerate, summaries
from fixedcode_study.analysis.summaries import REPO_ROOT as PROJECT_ROOT

MAX_LINES = 400
PLANTED = "Across the ladder binary16 is worse than learned, and the gap narrows with compute."


def repo_copy(tmp_path: Path) -> Path:
    """README.md, docs/ (tables and reports, no figures or records: one results.json marks a report's
    records) and conf/input, conf/output (the arm names) of the checkout, under tmp_path."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(PROJECT_ROOT / "README.md", root / "README.md")
    shutil.copytree(PROJECT_ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("runs", "figures", "*.png"))
    for report in summaries.report_dirs(PROJECT_ROOT):
        if summaries.has_records(report):
            marker = root / report.relative_to(PROJECT_ROOT) / "runs" / "job" / "results.json"
            marker.parent.mkdir(parents=True)
            marker.write_text("{}")
    for folder in ("input", "output"):
        shutil.copytree(PROJECT_ROOT / "conf" / folder, root / "conf" / folder)
    return root


@pytest.mark.slow
def test_a_stale_block_fails(tmp_path):
    root = repo_copy(tmp_path)
    assert summaries.stale(root) == []
    readme = root / "README.md"
    text = readme.read_text()
    body = summaries.blocks(text)["results"]
    readme.write_text(text.replace(body, body.replace("Holm p", "Holm-adjusted p", 1)))
    assert summaries.stale(root) == ["README.md: block results"]
    # a report's Findings block, edited by hand, no longer matches its comparisons.csv
    report = root / "docs" / "reports" / "main" / "report.md"
    text = report.read_text()
    report.write_text(text.replace(summaries.blocks(text)["findings"],
                                   summaries.blocks(text)["findings"] + f"- {PLANTED}\n"))
    assert "docs/reports/main/report.md: block findings" in summaries.stale(root)
    summaries.write(root)
    assert summaries.stale(root) == [] and PLANTED not in report.read_text()


@pytest.mark.parametrize("where", ["README.md", "docs/running.md", "docs/reports/main/report.md",
                                   "docs/reports/README.md"])
def test_a_planted_claim_outside_the_blocks_fails_the_lint(tmp_path, where):
    root = repo_copy(tmp_path)
    assert summaries.lint(root) == []
    path = root / where
    path.write_text(path.read_text() + f"\nSome context first. {PLANTED}\n")
    found = summaries.lint(root)
    assert len(found) == 1 and found[0].startswith(f"{where}:") and PLANTED[:40] in found[0]


@pytest.mark.parametrize("sentence, claim", [
    ("The gap of gf2 − binary16 shrinks with more seeds.", True),
    ("| binary16 − learned | +0.137 | worse |", True),
    ("Readability follows the input's scale: frozen_codestats keeps the token.", True),
    ("binary16 has 4 constant input bits at V = 4,096.", False),     # what an arm is
    ("Does the fixed-code gap close with model size?", False),       # a question claims nothing
    ("Lower is better for perplexity and bits per byte.", False),    # no arm, no comparison
])
def test_the_lint_reads_claims_not_descriptions(sentence, claim):
    arms = summaries._arm_words(PROJECT_ROOT)
    assert bool(summaries.claims(f"Intro.\n\n{sentence}\n", arms)) == claim
    assert not summaries.claims("\n".join(summaries.wrap("x", [sentence])), arms)   # inside a block: generated


def test_copying_records_takes_the_record_files_only(tmp_path):
    source = tmp_path / "multirun"
    for sweep, name in (("main", "input=learned,seed=1"), ("probe_arms", "input=frozen_learned,seed=1"),
                        ("controls", "input=gaussian16,seed=1")):
        job = source / sweep / name
        (job / "checkpoints" / "final").mkdir(parents=True)
        (job / "wandb").mkdir()
        (job / "results.json").write_text(json.dumps({"sweep": sweep}))
        for extra in ("metrics.csv", "config.yaml", "probes.json", "run.log", "checkpoints/final/model.pt"):
            (job / extra).write_text("x")
    (source / "probes_cross.json").write_text("{}")
    root = tmp_path / "repo"
    copied = regenerate.copy_records(regenerate.committed("main"), [source / "main", source / "probe_arms"], root)
    assert copied == {"docs/reports/main/runs/main": 1, "docs/reports/main/runs/probe_arms": 1}
    runs = root / "docs" / "reports" / "main" / "runs"
    files = sorted(p.relative_to(runs).as_posix() for p in runs.rglob("*") if p.is_file())
    assert files == ["main/input=learned,seed=1/config.yaml", "main/input=learned,seed=1/metrics.csv",
                     "main/input=learned,seed=1/probes.json", "main/input=learned,seed=1/results.json",
                     "probe_arms/input=frozen_learned,seed=1/config.yaml",
                     "probe_arms/input=frozen_learned,seed=1/metrics.csv",
                     "probe_arms/input=frozen_learned,seed=1/probes.json",
                     "probe_arms/input=frozen_learned,seed=1/results.json", "probes_cross.json"]
    # a report that reads no probes gets no probes.json; a job of another sweep is never copied
    copied = regenerate.copy_records(regenerate.committed("controls"), [source], root)
    assert copied == {"docs/reports/controls/runs": 1}
    assert sorted(p.name for p in (root / "docs" / "reports" / "controls" / "runs").rglob("*") if p.is_file()) == \
        ["config.yaml", "metrics.csv", "results.json"]


def test_a_composition_report_copies_its_compose_records_beside_the_jobs(tmp_path):
    source = tmp_path / "multirun" / "composition"
    job = source / "input=gf2,seed=1"
    job.mkdir(parents=True)
    (job / "results.json").write_text(json.dumps({"sweep": "composition"}))
    for pair in ("gf2,seeds=1+2", "learned,seeds=1+2"):
        (source / "compose" / pair).mkdir(parents=True)
        (source / "compose" / pair / "compose.json").write_text("{}")
    root = tmp_path / "repo"
    report = regenerate.Committed("composition", compose=True)
    assert regenerate.copy_records(report, [source], root) == {"docs/reports/composition/runs": 1}
    runs = root / report.runs
    assert sorted(p.relative_to(runs).as_posix() for p in runs.rglob("*.json")) == [
        "compose/gf2,seeds=1+2/compose.json", "compose/learned,seeds=1+2/compose.json", "input=gf2,seed=1/results.json"]
    shutil.rmtree(root)   # a report that reads none gets none
    regenerate.copy_records(regenerate.Committed("composition"), [source], root)
    assert not (root / report.runs / "compose").exists()


def test_every_committed_report_has_a_regeneration_and_its_records_are_the_record_files():
    names = {r.name for r in summaries.report_dirs(PROJECT_ROOT)}
    assert names == set(regenerate.BY_NAME)
    allowed = set(regenerate.RECORD_FILES + regenerate.PROBE_FILES + regenerate.COMPOSE_FILES
                  + regenerate.ADAPT_FILES)
    for report in summaries.report_dirs(PROJECT_ROOT):
        for path in (report / "runs").rglob("*") if (report / "runs").is_dir() else ():
            if path.is_file():
                assert path.name in allowed or path.match(regenerate.CROSS_GLOB), path


def test_no_regenerated_report_passes_400_lines():
    reports = [r for r in summaries.report_dirs(PROJECT_ROOT) if summaries.has_records(r)]
    assert {r.name for r in reports} >= {"main", "compute_ladder"}
    for report in reports:
        lines = (report / "report.md").read_text().splitlines()
        assert len(lines) <= MAX_LINES, (report.name, len(lines))


def test_a_report_without_records_is_marked_unrecorded_once(tmp_path):
    root = repo_copy(tmp_path)
    report = regenerate.committed("controls")
    shutil.rmtree(root / report.runs)  # its records gone: the report can no longer be recomputed
    assert str(report.report / "report.md") in regenerate.unmarked(root)
    assert regenerate.regenerate(report, root) == 0
    text = (root / report.report / "report.md").read_text()
    assert text.startswith("# ") and text.splitlines()[2] == "<!-- generated:unrecorded:begin -->"
    assert "Not regenerated: its job records are not committed" in text
    assert str(report.report / "report.md") not in regenerate.unmarked(root)
    assert regenerate.regenerate(report, root) == 0  # marking again changes nothing
    assert (root / report.report / "report.md").read_text() == text
    # a reader's edit of the banner is found, and the next regenerate restores it
    (root / report.report / "report.md").write_text(text.replace("not committed", "lost"))
    assert str(report.report / "report.md") in regenerate.unmarked(root)
    regenerate.regenerate(report, root)
    assert (root / report.report / "report.md").read_text() == text


ABSOLUTE_PATH = re.compile(r"(?:^|[\s`(,\"])(/[A-Za-z_][\w.-]*/[\w.-]+/\S*)")


def test_a_regenerated_report_names_no_path_of_the_machine_that_made_it():
    """A report made from committed records names them (and probes_cross.json) relative to the
    checkout; an absolute path would name the analysing machine's folders. jobs.csv is left out: its
    reused_from is the record's own history, as results.json says it."""
    found = []
    for report in summaries.report_dirs(PROJECT_ROOT):
        if not (report / "runs").is_dir():
            continue  # an unrecorded report is marked as such and cannot be regenerated here
        for path in [report / "report.md", *sorted((report / "tables").glob("*.md")),
                     *sorted((report / "tables").glob("*.csv"))]:
            if path.name.startswith("jobs."):
                continue
            found += [f"{path.relative_to(PROJECT_ROOT)}: {m}" for m in ABSOLUTE_PATH.findall(path.read_text())[:1]]
    assert found == [], "regenerate them from the checkout's root: fixedcode regenerate"
