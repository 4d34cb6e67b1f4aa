"""The report's Scaling section (issue 25): a compute ladder's sizes and budgets become comparison
contexts, the fits' tables and readings trace to run directories and say no more than their
intervals, the paper's points and its WikiText gap are the published numbers, and other studies get
no such section. The slow test trains a real tiny ladder with the `run` command."""

from __future__ import annotations

import json
import math
import re
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import SHARED_DATA
from helpers import analysis as fx

from fixedcode_study.cli.analyze import main as cli_main
from fixedcode_study.analysis.read.ladder import ladder_order
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.stats.scaling import orders
from fixedcode_study.analysis.results import scaling as rs
from fixedcode_study.analysis.tables import scaling as ts
from fixedcode_study.analysis.tables.scaling_points import (
    EARLIER_POINT,
    PAPER_POINT,
    WIKITEXT_BYTES,
    WIKITEXT_WORDS,
    paper_wikitext_gaps,
    wikitext_bpb,
)

REPO = Path(__file__).resolve().parents[2]
V = 4096
SIZES = {"ladder_d32": (32, 40_000), "ladder_d48": (48, 90_000), "ladder_d64": (64, 160_000)}
BUDGETS = (2 ** 19, 2 ** 21, 2 ** 23)
TRAIN_SPLIT = 1_200_000      # fx.write_job's data.train_tokens
# bpb = E + A/N^alpha + B/D^beta per arm (N: trainable parameters)
LAW = {"learned": (1.2, 30.0, 0.35, 120.0, 0.32), "binary16": (1.25, 30.0, 0.33, 120.0, 0.31)}


def write_ladder(root: Path, seeds=(1, 2, 3), noise=0.003) -> Path:
    sweep = root / "multirun" / "ladder"
    for name, (e, a, alpha, b, beta) in LAW.items():
        for model, (d_model, body) in SIZES.items():
            table = V * d_model if name == "learned" else 0
            trainable = body + V * d_model + table
            params = {"total": trainable, "trainable": trainable, "input_total": table, "input_trainable": table,
                      "body": body, "head": V * d_model}
            for tokens in BUDGETS:
                for seed in seeds:
                    rng = np.random.default_rng(zlib.crc32(f"{name},{model},{tokens},{seed}".encode()))
                    value = (e + a / trainable ** alpha + b / tokens ** beta) * math.exp(rng.normal(0, noise))
                    fx.write_job(sweep, name, seed, val_ppl=float(2 ** (4 * value)), val_bpb=value, model=model,
                                 extra_key=f",model={model},train.tokens={tokens}", body=body, crn=True, curves=False,
                                 config_extra={"train": {"tokens": tokens}, "model": {"name": model, "d_model": d_model}},
                                 results_extra={"params": params, "tokens_seen": tokens,
                                                "flops_per_token": 6 * (body + V * d_model)})
    return sweep


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    """The ladder's report, and what its gap-vs-size figure was drawn from and drew (the report's own call
    of figures/gap.py, run as it is, its arguments, result and figure kept for the figure's test)."""
    from fixedcode_study.analysis.figures import gap

    root = tmp_path_factory.mktemp("ladder")
    sweep = write_ladder(root)
    out = root / "report"
    drawn = {}
    real_figure, real_save = gap.gap_vs_size_figure, gap.save

    def keep_figure(fig, *args, **kwargs):  # the real save, with the figure kept for its axes
        drawn["fig"] = fig
        return real_save(fig, *args, **kwargs)

    def size_figure(study, points, out_dir, baseline):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(gap, "save", keep_figure)
            made = real_figure(study, points, out_dir, baseline)
        drawn.update(study=study, points=points, baseline=baseline, made=made)
        return made

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gap, "gap_vs_size_figure", size_figure)
        # the ladder's gap is read only for a declared comparison (an undeclared one is exploratory)
        assert cli_main([str(sweep), f"out={out}", "primary=binary16:learned"]) == 0
    return sweep, out, drawn


@pytest.fixture(scope="module")
def ladder_report(ladder_run):
    sweep, out, _ = ladder_run
    return sweep, out


def section(report: str, title: str) -> str:
    start = report.index(f"## {title}\n")
    end = report.find("\n## ", start + 1)
    return report[start:end if end > 0 else None]


# ---------------------------------------------------------------- reading a ladder


def test_sizes_and_budgets_are_contexts_so_no_job_is_taken_for_a_repeated_seed(ladder_report):
    sweep, _ = ladder_report
    study = load_run_dirs([sweep])
    assert len(study.included_jobs) == 2 * 3 * 3 * 3 and study.excluded_jobs.empty
    assert study.included_jobs["model"].nunique() == 9
    assert "ladder_d32 @ 2^19 tokens" in set(study.jobs["model"])
    assert set(study.jobs["model_size"]) == set(SIZES) and set(study.jobs["train_budget"]) == set(BUDGETS)
    assert set(study.jobs["variant"]) == {"learned", "binary16"}


def test_tables_list_a_ladder_by_size_then_budget_not_by_run_directory_name(ladder_report):
    # Run directories sort by name (train.tokens=2097152 before 524288): the tables must not follow them.
    _, out = ladder_report
    expected = [f"{model} @ 2^{round(math.log2(t))} tokens" for model in SIZES for t in BUDGETS]
    comparisons = pd.read_csv(out / "tables" / "comparisons.csv")
    assert list(dict.fromkeys(comparisons["model"])) == expected
    report = (out / "report.md").read_text()
    compared = section(report, "What was compared")
    learned_rows = [line.split(" | ")[0].lstrip("| ") for line in compared.splitlines()
                    if line.startswith("| ladder_") and " | learned | " in line]
    assert learned_rows == expected


def test_the_gap_vs_size_figure_never_joins_points_of_another_budget_or_size(ladder_run):
    # Against parameters each line holds one budget; against FLOPs one model size (read/ladder.py's columns).
    # The figure is the report's own: drawn from the report's comparison rows (results.size_gaps, with the
    # sizes and FLOPs) while the fixture's report was written, so nothing is computed again here.
    import matplotlib.pyplot as plt

    _, out, drawn = ladder_run
    points, made = drawn["points"], drawn["made"]
    assert drawn["baseline"] == "learned" and set(drawn["study"].included_jobs["model_size"]) == set(SIZES)
    assert {f.parent for f in made.files} == {out / "figures"}
    params_ax, flops_ax = drawn["fig"].axes[:2]
    for ax, held, varied in ((params_ax, "train_budget", "params.trainable"), (flops_ax, "model_size", "train_flops")):
        series = ax.containers  # one errorbar container per drawn line
        assert len(series) == 3  # binary16 at each of 3 budgets, or at each of 3 sizes
        for container in series:
            xs, ys = container.lines[0].get_data()
            assert len(xs) == 3
            rows = [points[np.isclose(points[varied], x) & np.isclose(points["delta"], y)] for x, y in zip(xs, ys)]
            assert all(len(row) == 1 for row in rows)
            assert pd.concat(rows)[held].nunique() == 1, container.get_label()
    assert "no line joins points that differ in both" in made.caption
    assert "no line joins" in (out / "report.md").read_text()
    plt.close(drawn["fig"])


def test_a_preset_split_by_a_width_override_is_named_by_it(tmp_path):
    sweep = tmp_path / "multirun" / "widths"
    for d_model in (32, 64):
        for seed in (1, 2):
            fx.write_job(sweep, "learned", seed, val_ppl=60.0, val_bpb=1.9, model="test_micro", curves=False,
                         extra_key=f",model.d_model={d_model}", config_extra={"model": {"name": "test_micro",
                                                                                         "d_model": d_model}})
    study = load_run_dirs([sweep])
    assert sorted(study.included_jobs["model"].unique()) == ["test_micro (d_model=32)", "test_micro (d_model=64)"]
    assert len(study.included_jobs) == 4


def test_widths_are_ordered_as_numbers():
    jobs = pd.DataFrame({"model_size": ["m (d_model=128)", "m (d_model=64)", "m (d_model=128)"],
                         "train_budget": [2.0 ** 20, 2.0 ** 20, 2.0 ** 19], "run": ["a", "b", "c"]})
    assert list(ladder_order(jobs)["run"]) == ["b", "c", "a"]


# ---------------------------------------------------------------- the section


def test_a_ladder_report_has_a_scaling_section_with_tables_readings_and_a_figure(ladder_report):
    _, out = ladder_report
    report = (out / "report.md").read_text()
    text = section(report, "Scaling")
    for title in ("Readings", "Sizes, budgets and epochs", "The law per arm", "The gap on cell means", "Predictions"):
        assert f"### {title}" in text
    assert "WikiText" in text and "not our validation text" in text
    assert (out / "figures" / "scaling_gap_vs_compute.png").is_file()
    for name in ts.NAMES:
        assert (out / "tables" / f"{name}.csv").is_file()
    laws = pd.read_csv(out / "tables" / "scaling_laws.csv")
    assert set(zip(laws["variant"], laws["convention"], strict=True)) == {
        (v, c) for v in LAW for c in ("chinchilla", "kaplan")}
    assert (laws["sizes"] == 3).all() and (laws["budgets"] == 3).all() and (laws["seeds"] == 3).all()
    # 3 seeds: 10 distinct resamples; the table says the interval is coarse
    assert laws["flags"].str.contains("coarse interval").all()


def test_every_point_traces_to_a_run_and_epochs_are_tokens_over_the_split(ladder_report):
    sweep, out = ladder_report
    jobs = pd.read_csv(out / "tables" / "scaling_jobs.csv")
    assert len(jobs) == 54
    for row in jobs.itertuples():
        results = json.loads((Path(row.run) / "results.json").read_text())
        assert results["final"]["val_bpb"] == pytest.approx(row.val_bpb)
        assert results["tokens_seen"] == row.tokens and results["params"]["body"] == row.n_kaplan
        assert row.epochs == pytest.approx(results["tokens_seen"] / results["data"]["train_tokens"])
    budgets = pd.read_csv(out / "tables" / "scaling_budgets.csv")
    assert budgets.set_index("train_budget")["epochs_max"].to_dict() == pytest.approx(
        {b: b / TRAIN_SPLIT for b in BUDGETS})
    assert "6.991" in section((out / "report.md").read_text(), "Scaling")   # 2^23 / 1.2M epochs, shown


def test_predictions_at_the_paper_and_earlier_points_state_interval_and_extrapolation(ladder_report):
    _, out = ladder_report
    pred = pd.read_csv(out / "tables" / "scaling_predictions.csv").fillna({"convention": ""})
    assert set(pred["target"]) == {"paper", "earlier"}
    assert set(pred["method"]) == {rs.GAP_LINE, rs.TWO_FACTOR, "law L(N, D)"}
    jobs = pd.read_csv(out / "tables" / "scaling_jobs.csv")
    max_c = (jobs["flops_per_token"] * jobs["tokens"]).max()
    paper = pred[pred["target"] == "paper"]
    assert paper["orders_compute"].to_numpy() == pytest.approx(math.log10(PAPER_POINT.compute / max_c))
    assert paper["orders_tokens"].to_numpy() == pytest.approx(math.log10(1e11 / 2 ** 23))
    law = paper[paper["convention"] == "chinchilla"].iloc[0]
    assert (law.n_variant, law.n_baseline) == (1_711_376_384, 1_812_039_680)
    assert paper.loc[paper["convention"] == "kaplan", "n_variant"].iloc[0] == 1_610_713_088
    # the two-factor fit predicts at the paper's body size and tokens, labelled with both distances
    two = paper[paper["method"] == rs.TWO_FACTOR].iloc[0]
    n_orders = math.log10(1_610_713_088 / max(b for _, b in SIZES.values()))
    assert two.n_variant == 1_610_713_088 and f"N {n_orders:.1f}, D 4.1 orders of magnitude" in two.label
    assert paper["measured_wikitext_gap_bpb"].to_numpy() == pytest.approx(wikitext_bpb(18.58) - wikitext_bpb(16.50))
    assert (pred["low"] <= pred["gap"]).all() and (pred["gap"] <= pred["high"]).all()
    readings = section((out / "report.md").read_text(), "Scaling").split("### Readings")[1].split("###")[0]
    for row in pred.itertuples():
        expected = "lies above 0" if row.low > 0 else "lies below 0" if row.high < 0 else "contains 0"
        if row.method == "law L(N, D)":
            line = next(ln for ln in readings.splitlines() if ln.startswith(f"- {row.variant} − learned")
                        and f" {ts._method_label(row)} fit" in ln and row.target_label in ln)
            if ts.unreadable_law(row.flags):   # a law not identified: not read
                assert "are not read: " in line and "better" not in line and "worse" not in line
                continue
            assert f"{row.orders_compute:.1f} orders of magnitude in compute" in line
            assert f"[{row.low:.3f}, {row.high:.3f}]" in line and expected in line
            continue
        # the cell-mean fits: a labelled extrapolation with its interval and the sign its interval allows
        line = next(ln for ln in readings.splitlines()
                    if f"{row.variant} − learned at {row.target_label}: the {row.method} predicts" in ln)
        assert row.label in line and f"[{row.low:+.3f}, {row.high:+.3f}]" in line
        assert f"the interval {expected}, and that interval takes the fitted form as true" in line
    assert "closes" not in readings


def test_a_trend_with_compute_is_read_only_where_the_cell_mean_interval_excludes_0(ladder_report):
    """The compute trend is read from the random-cell row, in its stated family, never from the seed-only
    or bootstrap rows beside it."""
    _, out = ladder_report
    rows = pd.read_csv(out / "tables" / "readings.csv")
    slopes = rows[(rows["kind"] == "ladder") & (rows["name"] == "gap slope per decade of compute")]
    stated = slopes[slopes["role"] == "stated"]
    assert len(stated) == 1 and stated["family_size"].iloc[0] == 1
    assert stated["method"].iloc[0].startswith("random-cell model")
    beside = slopes[slopes["role"] == "beside"]
    assert len(beside) == 2 and beside["method"].str.startswith("seed-only").sum() == 1
    row = stated.iloc[0]
    shown = bool(row.p_adjusted < 0.05 and (row.ci_high < 0 or row.ci_low > 0))
    readings = section((out / "report.md").read_text(), "Scaling").split("### Readings")[1].split("###")[0]
    line = next(ln for ln in readings.splitlines() if "binary16 − learned: " in ln and "with compute" in ln)
    assert ("the gap decreases with compute" in line or "the gap increases with compute" in line) == shown
    assert ("a trend with compute is not shown" in line) == (not shown)


def test_other_studies_get_no_scaling_section(tmp_path):
    for build in (fx.build_main_sweep, fx.build_model_sweep):
        sweep = build(tmp_path / build.__name__)
        study = load_run_dirs([sweep])
        assert not rs.applies(study, "learned")
        assert rs.build(study, "learned") is None
        assert set(study.jobs["model"]) == set(study.jobs["model_preset"])   # contexts unchanged


# ---------------------------------------------------------------- the paper's points


def test_the_paper_point_matches_the_issue_and_accounting():
    assert PAPER_POINT.params("chinchilla", learned=True) == 1_812_039_680
    assert PAPER_POINT.params("chinchilla", learned=False) == 1_711_376_384
    assert PAPER_POINT.shape.table == 49_152 * 2_048 == 100_663_296
    assert PAPER_POINT.params("kaplan", learned=True) == 1_711_376_384 - 100_663_296
    from fixedcode_study.accounting import flops_per_token
    from fixedcode_study.model import ModelConfig

    preset = ModelConfig.from_mapping(yaml.safe_load((REPO / "conf" / "model" / "paper_1p7b.yaml").read_text()))
    assert PAPER_POINT.shape.flops_per_token == flops_per_token(preset, 2048)["total"]
    assert PAPER_POINT.tokens == 1e11
    assert "assumed" in EARLIER_POINT.assumed and EARLIER_POINT.shape.vocab_size == 65_536
    assert EARLIER_POINT.shape.n_layer == 32 and EARLIER_POINT.shape.d_model == 1024


@pytest.mark.parametrize("point", [PAPER_POINT, EARLIER_POINT], ids=lambda p: p.key)
def test_the_stated_counts_are_accountings_on_the_stated_shape(point):
    from types import SimpleNamespace

    from fixedcode_study.accounting import body_params, flops_per_token

    shape = point.shape
    # accounting counts the model's own MLP (model.mlp: 3 d d_ff for SwiGLU, 2 d d_ff for GELU)
    model = SimpleNamespace(n_layer=shape.n_layer, d_model=shape.d_model, n_head=shape.n_head, kv_heads=shape.n_head,
                            head_dim=shape.d_model // shape.n_head, d_ff=shape.d_ff, vocab_size=shape.vocab_size,
                            mlp=shape.mlp)
    assert shape.body == body_params(model)
    assert shape.flops_per_token == flops_per_token(model, shape.seq_len)["total"]


def test_the_paper_wikitext_gap_in_bits_per_byte():
    gaps = paper_wikitext_gaps()
    assert gaps["learned"]["word_ppl"] == 16.50 and gaps["gf2"]["word_ppl"] == 19.03
    assert gaps["learned"]["bpb"] == pytest.approx(math.log(16.50) * 241_335 / (1_290_527 * math.log(2)))
    assert gaps["binary16"]["gap_bpb"] == pytest.approx(0.03203, abs=1e-5)
    assert gaps["gf2"]["gap_bpb"] == pytest.approx(0.03849, abs=1e-5)


@pytest.mark.skipif(not (SHARED_DATA / "eval" / "wikitext" / "test.jsonl").is_file(),
                    reason="../shared/data/eval/wikitext/test.jsonl is not on this machine")
def test_the_wikitext_words_and_bytes_are_lm_evals_counts_of_the_shared_test_split():
    from lm_eval.tasks.wikitext import preprocess_wikitext

    words = bytes_ = 0
    for line in (SHARED_DATA / "eval" / "wikitext" / "test.jsonl").read_text().splitlines():
        counts = preprocess_wikitext.process_results(json.loads(line), [0.0])   # lm-eval's own counting
        words += counts["word_perplexity"][1]
        bytes_ += counts["bits_per_byte"][1]
    assert (words, bytes_) == (WIKITEXT_WORDS, WIKITEXT_BYTES)


# ---------------------------------------------------------------- a real tiny ladder


@pytest.mark.slow
def test_a_real_tiny_ladder_trained_with_run_gets_a_scaling_section(tmp_path):
    from helpers import SMALL_VAL
    from helpers.cli import run_cli

    # 2 widths x 2 budgets x 2 inputs, one seed: what the section reads of a real run (parameters, tokens
    # seen, FLOPs per token, the width override as a size) does not need a second seed. 2 and 4 steps; the
    # jobs one after another in this process, on one thread (launcher and threads are out of the job key).
    proc = run_cli(["-m", "model=test_micro", "input=learned,binary16", "seed=1", "model.d_model=32,64",
                    "train.tokens=1024,2048", "train.batch_size=8", "train.val_points=2", "logger=csv", SMALL_VAL,
                    "hydra/launcher=basic", "threads=1", "name=tiny_ladder", f"out_root={tmp_path}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sweep = tmp_path / "multirun" / "tiny_ladder"
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    text = section((out / "report.md").read_text(), "Scaling")
    laws = pd.read_csv(out / "tables" / "scaling_laws.csv")
    assert laws["flags"].str.startswith("not fitted: five parameters need at least 3").all()
    assert laws["flags"].str.contains("(here 2 x 2)", regex=False).all()   # the widths and budgets read as a ladder
    # a 2 x 2 ladder: no cell-mean fit (it needs 3 sizes and 3 budgets), and the caveats say why
    assert "no design-respecting gap fit (ladder gap: needs at least 3 sizes and 3 budgets" in \
        (out / "report.md").read_text()
    pred = pd.read_csv(out / "tables" / "scaling_predictions.csv")
    assert pred.loc[pred["method"] == rs.GAP_LINE, "flags"].str.startswith("not fitted").all()
    runs = set(pd.read_csv(out / "tables" / "scaling_jobs.csv")["run"])
    assert len(runs) == 8 and all((Path(r) / "results.json").is_file() for r in runs)
    assert "## Scaling" in text


def test_a_law_that_is_not_identified_is_not_read():
    """A prediction from a law at a bound, with E absorbed, or weakly identified stays in the table but
    out of the readings; flags that only say the interval is coarse do not stop a reading."""
    from fixedcode_study.analysis.tables.scaling import unreadable_law

    assert unreadable_law("binary16: at a bound: e (weakly identified); binary16: coarse interval") == \
        "binary16: at a bound: e (weakly identified)"
    assert unreadable_law("gf2: coarse interval: 3 seeds; learned: weakly identified: alpha = 3.99") == \
        "learned: weakly identified: alpha = 3.99"
    assert unreadable_law("binary16: E near 0: the irreducible loss is not identified by these points").startswith("binary16: E near 0")
    assert unreadable_law("coarse interval: 3 seeds give only 10 distinct resamples") is None
    assert unreadable_law("") is None and unreadable_law(None) is None
