"""The input continuum section (issue 43): the gap to learned against trainable input parameters, and the
study's three questions read from the primary rows.

Synthetic records of the study's ten arms at two model contexts, with the token-specific / shared split
of the trainable input recorded as accounting.input_split writes it, and known gaps. The section appears
with those records and not with records from before the split; its table holds the comparison rows'
own numbers; the reading's words for a question follow the verdict a constructed row gets; the reading
is rewritten from the committed tables alone; and the loss breakdown compares every arm with learned.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.analysis import build_crn_sweep, write_job

from fixedcode_study.analysis import summaries
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.report import write_report
from fixedcode_study.analysis.results import ReportOptions, compute
from fixedcode_study.analysis.stats.comparisons import parse_pairs
from fixedcode_study.analysis.stats.equivalence import (
    BETTER,
    INCONCLUSIVE,
    PRIMARY,
    WORSE,
)
from fixedcode_study.analysis.tables.continuum import continuum_table
from fixedcode_study.analysis.tables.continuum_reading import continuum_reading

VOCAB = 4096
MODELS = {"cpu_tiny": ("shakespeare", 128), "ladder_d64": ("gutenberg", 64)}   # model -> (data, d_model)
SEEDS = (1, 2, 3, 4, 5)
SEED_EFFECT = {1: 0.0, 2: 0.04, 3: -0.03, 4: 0.02, 5: -0.01}   # shared by every arm at a seed (CRN)
NOISE = 0.0015                                                 # sd of each run's own noise
# val bpb above learned: binary16's gap, maps over it that close part of it, low-rank tables near learned
SHIFT = {"learned": 0.0, "binary16": 0.10, "binary16_linear": 0.08, "binary16_mlp": 0.05, "binary16_mlp_wide": 0.04,
         "learned_lowrank4": 0.03, "learned_lowrank": 0.01, "learned_lowdim": 0.002, "spelling": 0.08,
         "spelling_mlp": 0.03}
ARMS = list(SHIFT)
# the study file's family (sweeps/input_continuum.yaml), kept here so the test does not follow edits of it
DECLARED = ["binary16 - learned"] + [f"{a} - {b}" for a in ARMS[2:] for b in ("binary16", "learned")]


def split(arm: str, d: int) -> tuple[int, int]:
    """(token-specific, shared) trainable input parameters of an arm, as the interfaces count them."""
    mlp = {"binary16_mlp": 64, "binary16_mlp_wide": 256, "spelling_mlp": 64}
    if arm in mlp:
        h, width = mlp[arm], 60 if arm.startswith("spelling") else 16
        return 0, width * h + h + h * d + d
    return {"learned": (VOCAB * d, 0), "binary16_linear": (0, 16 * d), "learned_lowrank4": (VOCAB * 4, 4 * d),
            "learned_lowrank": (VOCAB * 16, 16 * d), "learned_lowdim": (VOCAB * 16, 0)}.get(arm, (0, 0))


def params(arm: str, d: int, with_split: bool = True) -> dict:
    specific, shared = split(arm, d)
    out = {"total": 10_000 + specific + shared, "trainable": 10_000 + specific + shared,
           "input_trainable": specific + shared, "body": 10_000, "head": VOCAB * d}
    return out | ({"input_token_specific_trainable": specific, "input_shared_trainable": shared} if with_split else {})


def build_continuum(root: Path, shift: dict | None = None, noise: dict | None = None, with_split: bool = True,
                    arms: list[str] = ARMS, breakdown: bool = False) -> Path:
    """The study's arms x SEEDS at both model contexts (CRN); `noise` scales an arm's per-run noise."""
    shift, noise = SHIFT | (shift or {}), noise or {}
    sweep = root / "multirun" / "input_continuum"
    for model, (data, d) in MODELS.items():
        for k, arm in enumerate(arms):
            for i, seed in enumerate(SEEDS):
                wobble = np.random.default_rng([k, i]).normal(0.0, NOISE) * noise.get(arm, 1.0)
                bpb = 1.9 + SEED_EFFECT[seed] + shift[arm] + wobble
                extra = {"params": params(arm, d, with_split),
                         "data": {"name": data, "vocab_size": VOCAB, "train_tokens": 1_200_000, "val_tokens": 40_000,
                                  "val_bytes": 150_000, "unigram_val_ppl": 520.0, "cache_key": data}}
                if breakdown:
                    extra["val_breakdown"] = frequency_breakdown(bpb)
                write_job(sweep, arm, seed, val_ppl=float(np.exp(bpb * 4 * np.log(2))), val_bpb=bpb, model=model,
                          extra_key=f",model={model}", curves=False, crn=True, results_extra=extra)
    return sweep


def frequency_breakdown(bpb: float) -> dict:
    """A target-frequency breakdown of 1,000 tokens whose mean loss is the run's own (4 bytes per token)."""
    tokens = [100, 300, 600]
    loss = bpb * 4 * math.log(2)
    nats = [t * loss for t in tokens]
    return {"step": 100, "total": {"nats": sum(nats), "tokens": sum(tokens), "bytes": 4 * sum(tokens)},
            "train_counts": {"counted_tokens": 1000, "train_tokens": 1000, "source": "all tokens"},
            "breakdowns": {"target_frequency": {"of": "target", "kind": "log2", "definition": "target_frequency",
                                                "lower": [0, 1, 2], "upper": [0, 1, 3], "labels": ["0", "1", "2-3"],
                                                "nats": nats, "tokens": tokens, "bytes": [4 * t for t in tokens]}}}


def options(root: Path, **extra) -> ReportOptions:
    """The report's options with the study's declared family (a study file: arms a run lacks are notes)."""
    path = root / "input_continuum_study.yaml"
    path.write_text(yaml.safe_dump({"primary": {"question": "Which part of the gap does a trainable input close?",
                                                "comparisons": DECLARED}}))
    return ReportOptions(study=path, **extra)


def results_of(root: Path, **build) -> object:
    return compute(load_run_dirs([build_continuum(root, **build)]), options(root))


def section(text: str) -> str:
    """The continuum section of a report.md."""
    start = text.index("## The input continuum")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def arm_line(lines: list[str], arm: str, model: str) -> str:
    """The reading's line for one arm under one context."""
    here = False
    for line in lines:
        if line.startswith("  - **"):
            here = model in line
        elif here and line.startswith(f"    - {arm} ("):
            return line
    raise AssertionError(f"no line for {arm} at {model}")


# ------------------------------------------------------------------------------------ when the section appears


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("continuum")
    out = root / "report"
    write_report(load_run_dirs([build_continuum(root)]), out, options(root))
    return out


def test_section_appears_with_the_continuum_arms(report):
    text = (report / "report.md").read_text()
    part = section(text)
    assert (report / "figures" / "input_continuum.png").is_file() and (report / "figures" / "input_continuum.pdf").is_file()
    assert "![Figure 2](figures/input_continuum.png)" in part   # the primary comparisons are Figure 1
    table = pd.read_csv(report / "tables" / "input_continuum.csv")
    assert len(table) == len(ARMS) * len(MODELS) and table["reference"].sum() == len(MODELS)
    assert "<!-- generated:continuum:begin -->" in part and "[`.csv`](tables/input_continuum.csv)" in part
    assert len(text.splitlines()) <= 400   # the whole study's report stays one a reader can take in
    # no hand-written sentence of the section pairs an arm with a verdict word (summaries.lint's rule)
    outside = re.sub(r"<!-- generated:([\w:.-]+):begin -->.*?<!-- generated:\1:end -->", "", part, flags=re.DOTALL)
    assert summaries.claims(outside, summaries._arm_words(summaries.REPO_ROOT)) == []


@pytest.mark.slow
def test_section_is_absent_without_the_split_or_without_arms_that_differ(tmp_path):
    old = load_run_dirs([build_continuum(tmp_path / "old", with_split=False)])   # records from before the split
    same = load_run_dirs([build_continuum(tmp_path / "same", arms=["binary16", "spelling"])])   # both 0 parameters
    crn = load_run_dirs([build_crn_sweep(tmp_path / "crn")])
    for study, name in ((old, "old"), (same, "same"), (crn, "crn")):
        out = write_report(study, tmp_path / f"report_{name}", options(tmp_path) if name != "crn" else None)
        assert "## The input continuum" not in out.report.read_text(), name
        assert not (tmp_path / f"report_{name}" / "tables" / "input_continuum.csv").exists(), name
        assert not (tmp_path / f"report_{name}" / "figures" / "input_continuum.png").exists(), name


# ------------------------------------------------------------------------------------ the table is the rows


def test_table_numbers_are_the_comparison_rows(tmp_path):
    results = results_of(tmp_path)
    frame, rows = results.continuum, results.comparisons
    tested = frame[~frame["reference"].astype(bool)]
    assert len(tested) == (len(ARMS) - 1) * len(MODELS)
    for r in tested.itertuples(index=False):
        row = rows[(rows["model"] == r.model) & (rows["variant_a"] == r.variant) & (rows["variant_b"] == "learned")
                   & (rows["metric"] == "val_bpb")]
        assert len(row) == 1
        row = row.iloc[0]
        for column in ("delta", "ci_low", "ci_high", "p_holm", "tost_p_holm", "verdict", "family", "n"):
            assert getattr(r, column) == row[column], column   # copied, not recomputed: equal to the bit
        assert (r.token_specific, r.shared) == split(r.variant, MODELS[r.model][1])
        assert r.input_trainable == sum(split(r.variant, MODELS[r.model][1]))
    reference = frame[frame["reference"].astype(bool)]
    assert set(reference["variant"]) == {"learned"} and (reference["delta"] == 0.0).all()
    assert reference["ci_low"].isna().all()
    # the displayed cells are the rows': Δ and CI at the comparisons' precision, the verdict where primary
    table = continuum_table(frame, ["data", "model"], "learned")
    shown = {(c[1], c[2]): c for c in table.rows}
    mlp = shown[("cpu_tiny", "binary16_mlp")]
    row = tested[(tested["model"] == "cpu_tiny") & (tested["variant"] == "binary16_mlp")].iloc[0]
    decimals = int(row["decimals"])
    assert mlp[6] == f"{row['delta']:+.{decimals}f}" and mlp[-1] == row["verdict"] == WORSE
    assert mlp[3] == "0" and mlp[4] == f"{split('binary16_mlp', 128)[1]:,}"


# ------------------------------------------------------------------------------------ the reading follows the rows


@pytest.mark.parametrize(("shift", "noise", "verdict", "words"), [
    (0.05, 1.0, BETTER, "closes part of binary16's gap"),
    (0.15, 1.0, WORSE, "adds to binary16's gap"),
    (0.08, 40.0, INCONCLUSIVE, "closing part of binary16's gap is not shown"),
])
def test_reading_words_follow_the_rows_verdict(tmp_path, shift, noise, verdict, words):
    results = results_of(tmp_path, shift={"binary16_mlp": shift}, noise={"binary16_mlp": noise})
    rows = results.comparisons
    row = rows[(rows["model"] == "cpu_tiny") & (rows["comparison"] == "binary16_mlp − binary16")].iloc[0]
    assert row["family"] == PRIMARY and row["verdict"] == verdict    # the construction got the verdict it wants
    lines = continuum_reading(rows, results.continuum)
    line = arm_line(lines, "binary16_mlp", "cpu_tiny")
    assert f"against binary16 *{verdict}*" in line and words in line
    assert f"{row['delta']:+.{int(row['decimals'])}f}" in line    # the row's own numbers
    if verdict == INCONCLUSIVE:   # an inconclusive row never gets a direction word
        assert not re.search(r"\b(better|worse|closes)\b", line.split("; against learned")[0])
    else:
        assert "Holm p" in line
    # the other arms keep their words: binary16_linear closes part of the gap at every noise
    assert "closes part of binary16's gap" in arm_line(lines, "binary16_linear", "cpu_tiny")


def test_reading_answers_each_question_per_context_from_primary_rows(tmp_path):
    results = results_of(tmp_path)
    lines = continuum_reading(results.comparisons, results.continuum)
    text = "\n".join(lines)
    assert text.count("- **Does a shared trainable map") == 1 and "- **Do token-specific parameters" in text
    assert "- **Does a code that spells the token" in text
    for model in MODELS:   # each question is answered per context
        assert len(re.findall(rf"^  - \*\*\w+, {model}\*\*", text, flags=re.MULTILINE)) == 4   # the gap and 3 questions
    assert "a gap to learned remains" in arm_line(lines, "learned_lowrank4", "ladder_d64")
    assert "spelling_mlp − binary16_mlp" in text and "not a declared comparison" in text
    assert "(0 token-specific, 2,048 shared trainable input parameters)" in arm_line(lines, "binary16_linear",
                                                                                      "cpu_tiny")
    # exploratory rows are never read: without a declared family there is no reading
    plain = compute(results.study, ReportOptions(primary=parse_pairs(["binary16:learned"])))
    assert continuum_reading(plain.comparisons, plain.continuum) == []


def test_a_question_appears_only_with_its_arms(tmp_path):
    results = results_of(tmp_path, arms=["learned", "binary16", "learned_lowrank", "learned_lowdim"])
    assert not results.continuum.empty
    text = "\n".join(continuum_reading(results.comparisons, results.continuum))
    assert "- **Do token-specific parameters" in text
    assert "shared trainable map" not in text and "spells the token" not in text and "spelling_mlp" not in text


def test_reading_is_rewritten_from_the_committed_tables(report):
    text = (report / "report.md").read_text()
    block = summaries.blocks(text)["continuum"]
    expected = summaries.expected_report_blocks(report)["continuum"]
    assert block == "\n".join(expected) + "\n"


# ------------------------------------------------------------------------------------ loss by target frequency


@pytest.mark.slow
def test_the_breakdown_compares_every_arm_with_learned_by_target_frequency(tmp_path):
    study = load_run_dirs([build_continuum(tmp_path, breakdown=True)])
    results = compute(study, options(tmp_path, min_bucket_tokens=0))
    rows = results.buckets
    frequency = rows[rows["breakdown"] == "target_frequency"]
    for model in MODELS:
        here = set(frequency.loc[frequency["model"] == model, "comparison"])
        assert {f"{arm} − learned" for arm in ARMS[1:]} <= here
    # each arm's bucket gaps add up to its own gap in total val loss
    assert np.allclose(frequency["whole_gap"], frequency["total_gap"], rtol=1e-9)
    from fixedcode_study.analysis.sections.continuum import frequency_lines
    assert any("tables/loss_breakdown_target_frequency.csv" in line for line in frequency_lines(results))

