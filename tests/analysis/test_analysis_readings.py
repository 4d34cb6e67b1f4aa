"""The tested readings wired into a report (issue 40 point 1): each reading a report may word is a row
of a stated Holm family, recomputed here from the fixture's own numbers, and worded only as its test
allows.

- Bucket trends over an ordered breakdown: the per-seed weighted slope, t over seeds; a planted
  slope is read, none is read where none was planted; the end buckets carry TOST.
- Points of the gap curve: the paired gap at the first, middle and last shared validation.
- The input side against the output side: a paired linear contrast per seed.
- Probe contrasts: only arms at equal input RMS, Welch over seeds.
- Rows of exploratory comparisons are never worded; the sentences read back from readings.csv are
  the report's own.
"""

from __future__ import annotations

import json
import math
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
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.results import ReportOptions, compute
from fixedcode_study.analysis.sections.readings import HERE
from fixedcode_study.analysis.summaries import blocks, expected_report_blocks
from fixedcode_study.analysis.tables.readings import EXPLORATORY, STATED, read_readings, reading_lines, sentence


@pytest.fixture(scope="module")
def breakdown(tmp_path_factory):
    root = tmp_path_factory.mktemp("readings")
    sweep = fx.build_breakdown_sweep(root)   # sweep "main": sweeps/main.yaml declares the three comparisons
    out = root / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    return sweep, out, pd.read_csv(out / "tables" / "readings.csv")


def per_bucket(arm: str, seed: int, name: str, tested: list[int]) -> np.ndarray:
    block = fx.val_breakdown(arm, seed)["breakdowns"][name]
    return np.array([block["nats"][b] / block["tokens"][b] for b in tested])


def test_a_planted_trend_is_read_and_none_is_read_where_none_was_planted(breakdown):
    _, _, rows = breakdown
    trends = rows[rows["kind"] == "trend"].set_index(["comparison", "breakdown"])
    tested = {"input_id_weight": [1, 2, 3], "position": [0, 1, 2]}   # bucket 0 of the id weight: 40 tokens
    tokens = {"input_id_weight": fx.ID_WEIGHT_TOKENS, "position": fx.POSITION_TOKENS}
    p_values = []
    for (comparison, name), row in trends.iterrows():
        a, b = comparison.split(" − ")
        x = np.arange(len(tested[name]), dtype=float)
        w = np.array([tokens[name][i] for i in tested[name]], dtype=float)
        slopes = [np.polyfit(x, per_bucket(a, s, name, tested[name]) - per_bucket(b, s, name, tested[name]), 1,
                             w=np.sqrt(w))[0] for s in fx.SEEDS]
        assert row.estimate == pytest.approx(np.mean(slopes), rel=1e-9)
        assert row.p_value == pytest.approx(sps.ttest_1samp(slopes, 0.0).pvalue, rel=1e-9)
        p_values.append(row.p_value)
    assert (trends["role"] == STATED).all() and (trends["family_size"] == len(trends)).all()
    assert np.allclose(trends["p_adjusted"], multipletests(p_values, method="holm")[1])
    # the fixed codes' gap grows by 0.05 nats per id-weight bucket and 0.02 per position bucket; gf2 − binary16 has none
    assert trends.loc[("binary16 − learned", "input_id_weight"), "reading"] in ("increases", "linear trend, not monotone")
    assert trends.loc[("binary16 − learned", "input_id_weight"), "estimate"] == pytest.approx(0.05, abs=0.01)
    assert trends.loc[("gf2 − binary16", "input_id_weight"), "reading"] == "not shown"


def test_an_end_bucket_is_read_against_the_rest_with_tost_for_an_absence(breakdown):
    _, out, rows = breakdown
    ends = rows[rows["kind"] == "end"]
    assert set(ends["end"]) == {"first", "last"}
    row = ends[(ends["comparison"] == "binary16 − learned") & (ends["breakdown"] == "position")
               & (ends["end"] == "first")].iloc[0]
    w = np.array(fx.POSITION_TOKENS[1:], dtype=float)
    diffs = []
    for s in fx.SEEDS:
        gap = per_bucket("binary16", s, "position", [0, 1, 2]) - per_bucket("learned", s, "position", [0, 1, 2])
        diffs.append(gap[0] - np.sum(gap[1:] * w) / w.sum())
    assert row.estimate == pytest.approx(np.mean(diffs), rel=1e-9)
    assert row.p_value == pytest.approx(sps.ttest_1samp(diffs, 0.0).pvalue, rel=1e-9)
    assert math.isfinite(row.tost_p) and row.margin == 0.02
    # an absence is read only from TOST: "equivalent" needs its Holm p, anything else not shown
    for r in ends.itertuples():
        if r.reading == "equivalent":
            assert r.tost_p_adjusted < 0.05
        elif r.reading == "not shown":
            assert not (r.p_adjusted < 0.05) and not (r.tost_p_adjusted < 0.05)
    text = (out / "report.md").read_text()
    assert "is not shown" in text.split("## Tested readings")[1] and "no excess" not in text


def test_the_report_blocks_read_back_from_the_csv_are_the_reports_own(breakdown):
    _, out, _ = breakdown
    have = blocks((out / "report.md").read_text())
    for key, lines in expected_report_blocks(out).items():
        assert have[key] == "\n".join(lines) + "\n", key
    assert {"findings", "readings", "table:primary"} <= set(have)
    frame = read_readings(out / "tables" / "readings.csv")
    assert reading_lines(frame, HERE) == have["readings"].rstrip("\n").splitlines()


def test_rows_of_exploratory_comparisons_are_never_worded(tmp_path):
    """A study without a declaration: every reading row is exploratory, with raw and Holm p, and no sentence."""
    sweep = fx.build_breakdown_sweep(tmp_path, name="undeclared")
    results = compute(load_run_dirs([sweep]))
    rows = results.readings
    assert len(rows) and (rows["role"] == EXPLORATORY).all()
    assert rows["p_adjusted"].notna().all() and rows["reading"].eq("").all()
    assert all(sentence(r) == "" for r in rows.itertuples(index=False))
    assert reading_lines(rows) == []


def test_points_of_the_gap_curve_are_paired_tests_at_logged_validations(tmp_path):
    sweep = fx.build_crn_sweep(tmp_path)
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}", "primary=binary16:learned"]) == 0
    rows = pd.read_csv(out / "tables" / "readings.csv")
    points = rows[(rows["kind"] == "point") & (rows["role"] == STATED)]
    tokens = [s * 2048 for s in fx.LOG_STEPS]
    assert len(points) == 3   # the first, middle and last validation both arms' runs share
    assert points["bucket"].iloc[0] == f"{tokens[0]:,} tokens" and points["bucket"].iloc[-1] == f"{tokens[-1]:,} tokens"
    first = points.iloc[0]
    a = [fx.crn_bpb("binary16", s, fx.LOG_STEPS[0]) for s in fx.CRN_SEEDS]
    b = [fx.crn_bpb("learned", s, fx.LOG_STEPS[0]) for s in fx.CRN_SEEDS]
    assert first.estimate == pytest.approx(np.mean(np.subtract(a, b)), abs=1e-6)   # metrics.csv keeps 6 decimals
    assert first.p_value == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-3)
    assert first.reading == "up"   # SHIFT: binary16 sits 0.05 bpb above learned at every step
    change = rows[(rows["kind"] == "change") & (rows["role"] == STATED)].iloc[0]
    assert change.bucket == f"{tokens[-2]:,} to {tokens[-1]:,} tokens"
    # the other comparisons are exploratory: in the CSV, not worded
    assert set(rows.loc[rows["role"] == EXPLORATORY, "comparison"]) == {"gf2 − learned", "gf2 − binary16"}


SIDE_BPB = {("learned", "untied"): [1.90, 1.92, 1.91], ("binary16", "untied"): [1.96, 1.99, 1.97],
            ("learned", "fixed"): [2.60, 2.63, 2.59]}


def test_the_input_side_against_the_output_side_is_a_paired_contrast(tmp_path):
    sweep = tmp_path / "multirun" / "output_side"
    for (name, output), values in SIDE_BPB.items():
        for seed, bpb in zip(fx.SEEDS, values, strict=True):
            fx.write_job(sweep, name, seed, val_ppl=2 ** (4 * bpb), val_bpb=bpb, crn=True, curves=False,
                         extra_key=f",output={output}", config_extra={"output": {"name": output, "type": output}},
                         results_extra={"output": output, "output_props": {"type": output}})
    results = compute(load_run_dirs([sweep]))
    sides = results.readings[results.readings["kind"] == "sides"]
    assert len(sides) == 1
    row = sides.iloc[0]
    per_seed = [(b - a) - (f - a) for a, b, f in zip(SIDE_BPB[("learned", "untied")], SIDE_BPB[("binary16", "untied")],
                                                    SIDE_BPB[("learned", "fixed")], strict=True)]
    assert row.comparison == ("(binary16 (output=untied) − learned (output=untied)) − "
                              "(learned (output=fixed) − learned (output=untied))")
    assert row.estimate == pytest.approx(np.mean(per_seed)) and row.p_value == pytest.approx(
        sps.ttest_1samp(per_seed, 0.0).pvalue)
    assert row.reading == "down" and row.role == STATED
    assert "the input-side gap binary16 (output=untied) − learned (output=untied) is smaller than the output-side gap" \
        in sentence(row)


def test_probes_are_compared_only_at_equal_input_rms(tmp_path):
    from test_analysis_probes import IDENTITY, build_probed_study, fresh_seeds, identity

    sweep = build_probed_study(tmp_path)
    rms = {"learned": 0.02, "binary16": 0.0201, "gf2": 0.707}   # learned and binary16 within 5%; gf2 alone
    for path in sweep.glob("input=*/results.json"):
        record = json.loads(path.read_text())
        if record.get("status") == "completed" and record["input"] in rms:
            record["input_props"]["code_rms"] = rms[record["input"]]
            path.write_text(json.dumps(record))
    results = compute(load_run_dirs([sweep]), ReportOptions())
    probes = results.readings[results.readings["kind"] == "probe"]
    assert probes["comparison"].tolist() == ["learned − binary16"]   # gf2 has no arm at its RMS
    row = probes.iloc[0]
    last = 3   # final_norm, the layer the head reads
    a = [identity("learned", s, last, 0, "final") for s in fresh_seeds("learned")]
    b = [identity("binary16", s, last, 0, "final") for s in fresh_seeds("binary16")]
    assert row.bucket == "final_norm" and row.estimate == pytest.approx(np.mean(a) - np.mean(b))
    assert row.p_value == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)
    assert IDENTITY["learned"] < IDENTITY["binary16"] and row.family_size == 1
