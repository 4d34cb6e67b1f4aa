"""Study-specific parts of the report (issue 12): tuned learning-rate arms, code properties and the
constant-bit warning, the paper's reference rows, many-arm figures, and the gap vs model size."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import analysis as fx
from helpers.analysis import md_rows

from fixedcode_study.cli.analyze import main as cli_main
from fixedcode_study.analysis.figures.style import style_context
from fixedcode_study.analysis.figures.curves import (
    _curve_figure,
    included_curve,
    variant_order,
    variant_styles,
)
from fixedcode_study.analysis.read.runs import load_run_dirs
from fixedcode_study.analysis.results import compute
from fixedcode_study.analysis.sections import results_tables, summary
from fixedcode_study.analysis.tables.code import bit_ranges
from fixedcode_study.analysis.stats.tuning import grid as tuning_grid

PM = "±"



# ---------------------------------------------------------------- tuned arms


@pytest.fixture(scope="module")
def tuned_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("tuned")
    sweep = fx.build_tuned_sweep(root)
    out = root / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    return sweep, out


def best_lr(name: str) -> float:
    return min(fx.LRS, key=lambda lr: fx.TUNED_LOSS[(name, lr)])


def test_tuning_is_detected_and_each_arm_gets_its_best_lr(tuned_report):
    sweep, out = tuned_report
    study = load_run_dirs([sweep])
    assert {"learned (lr=0.001)", "binary16 (lr=0.01)", "gf2 (lr=0.003)"} <= set(study.jobs["variant"])
    grid, notes = tuning_grid(study)
    assert not notes and grid.attrs["select"] == "val_loss_select"
    chosen = grid[grid["chosen"]].set_index("arm")
    for name in ("learned", "binary16", "gf2"):
        assert chosen.loc[name, "optim.lr"] == best_lr(name)
        # the choice is the lowest mean over seeds of the selection metric
        per_lr = grid[grid["arm"] == name].set_index("optim.lr")["val_loss_select|mean"]
        assert per_lr.idxmin() == best_lr(name)
    rows = md_rows(out / "tables" / "tuned_lr.md")
    assert len(rows) == 9 and [r[0] for r in rows if r[-1] == "**best**"] == ["**learned**", "**binary16**", "**gf2**"]
    # the learning rate names the rows, so it is not reported as a confounding setting difference
    assert "differ in settings other than the input variant" not in (out / "report.md").read_text()


def test_tuned_arms_are_compared_best_vs_best_on_the_report_half(tuned_report):
    sweep, out = tuned_report
    diffs = pd.read_csv(out / "tables" / "comparisons.csv")
    assert diffs["comparison"].tolist() == ["binary16 (lr=0.01) − learned (lr=0.003)",
                                            "gf2 (lr=0.003) − learned (lr=0.003)",
                                            "gf2 (lr=0.003) − binary16 (lr=0.01)"]
    assert (diffs["metric"] == "val_bpb_report").all() and (diffs["test"] == "paired").all()
    study = load_run_dirs([sweep])
    finals = study.long[(study.long["kind"] == "final") & (study.long["metric"] == "val_bpb_report")]
    for row in diffs.itertuples():
        a = finals[finals["variant"] == row.variant_a].sort_values("seed")["value"].to_numpy()
        b = finals[finals["variant"] == row.variant_b].sort_values("seed")["value"].to_numpy()
        assert math.isclose(row.p_value, sps.ttest_rel(a, b).pvalue, rel_tol=1e-9)
    assert (out / "figures" / "tuned_lr.png").stat().st_size > 10_000


def test_tuning_without_a_held_out_split_says_so(tmp_path):
    study = load_run_dirs([fx.build_tuned_sweep(tmp_path, split=False)])
    results = compute(study)
    assert results.tuned_grid.attrs["select"] == "val_loss"
    assert any("selected and reported on the same validation loss" in n for n in results.notes)


# ---------------------------------------------------------------- code properties


def test_code_properties_table_and_constant_bit_warning(tmp_path):
    sweep = tmp_path / "multirun" / "main"
    for name in ("learned", "binary16", "gf2"):
        for seed in (1, 2):
            fx.write_job(sweep, name, seed, val_ppl=60.0 + seed, val_bpb=1.9 + 0.01 * seed, curves=False,
                         props_extra=fx.code_props(name) if name != "gf2" else {"code_rms": 0.5},
                         results_extra={"flops_per_token": {"total": 1.2e7}})
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    rows = {r[0]: r for r in md_rows(out / "tables" / "code_properties.md")}
    assert rows["binary16"][1:5] == ["16", "12", "4 (12–15)", "0.75"]
    assert rows["binary16"][-1] == "1.200e+07"
    assert rows["gf2"][2:4] == ["—", "—"] and rows["gf2"][8] == "0.5"  # missing keys show as —
    assert rows["learned"][1] == "—"
    report = (out / "report.md").read_text()
    warning = next(ln for ln in report.splitlines() if ln.startswith("> **Warning:**"))
    assert "**binary16**" in warning and "4 constant input bits (12–15) at V=4,096" in warning
    assert report.index("> **Warning:**") < report.index("## Primary comparisons")  # seen before any number
    assert bit_ranges([0, 1, 2, 5, 7, 8]) == "0–2, 5, 7–8"


def test_no_code_property_table_for_records_without_the_keys(tmp_path):
    study = load_run_dirs([fx.build_single_seed(tmp_path)])
    results = compute(study)
    assert "code_properties" not in results_tables.made_tables(results)
    assert "> **Warning:**" not in "\n".join(summary.build(results, tmp_path).lines)


# ---------------------------------------------------------------- the paper's numbers as reference rows


PAPER_EVAL = {"hellaswag": ("acc_norm", 0.26), "piqa": ("acc", 0.58), "lambada_openai": ("acc", 0.10),
              "arc_easy": ("acc_norm", 0.40), "wikitext": ("word_perplexity", 900.0), "commonsense_qa": ("acc", 0.2),
              "mmlu": ("acc", 0.24)}


def test_paper_and_chance_rows_in_the_eval_table_never_in_statistics(tmp_path):
    sweep = tmp_path / "multirun" / "paper_suite"
    for name in ("learned", "binary16", "gf2"):
        for seed in (1, 2):
            tasks = {t: {m: v + 0.01 * seed} for t, (m, v) in PAPER_EVAL.items()}
            fx.write_job(sweep, name, seed, val_ppl=60.0 + seed, val_bpb=1.9, curves=False,
                         results_extra={"eval": {"tasks": tasks, "headline": {t: {m: None} for t, (m, _) in
                                                                            PAPER_EVAL.items()}}})
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    header = (out / "tables" / "eval_results.md").read_text().splitlines()[0]
    columns = [c.strip() for c in header.strip("|").split(" | ")]
    rows = {r[0]: dict(zip(columns, r, strict=True)) for r in md_rows(out / "tables" / "eval_results.md")}
    paper_learned = rows["*paper · learned (reference)*"]
    assert paper_learned["hellaswag/acc_norm ↑"] == "0.5779" and paper_learned["piqa/acc ↑"] == "0.7269"
    assert paper_learned["wikitext/word_perplexity ↓"] == "16.50"
    assert rows["*paper · gf2 (reference)*"]["arc_easy/acc_norm ↑"] == "0.6073"
    assert paper_learned["commonsense_qa/acc ↑"] == "≈0.20" and paper_learned["mmlu/acc ↑"] == "≈0.25–0.26"
    chance = rows["*chance (reference)*"]
    assert chance["hellaswag/acc_norm ↑"] == "0.25" and chance["piqa/acc ↑"] == "0.50"
    assert chance["arc_easy/acc_norm ↑"] == "≈0.25" and chance["lambada_openai/acc ↑"] == "n/a"
    assert chance["wikitext/word_perplexity ↓"] == "—"
    data = pd.read_csv(out / "tables" / "eval_results.csv")
    assert set(data["provenance"]) == {"this study", "reference, not produced here"}
    diffs = pd.read_csv(out / "tables" / "comparisons.csv")
    runs = {r for col in ("runs_a", "runs_b") for cell in diffs[col] for r in cell.split(";")}
    assert len(runs) == 6 and all((Path(r) / "results.json").is_file() for r in runs)  # only our runs
    assert set(diffs["variant_a"]) | set(diffs["variant_b"]) == {"learned", "binary16", "gf2"}
    assert (diffs["n_a"] == 2).all() and (diffs["n_b"] == 2).all()  # the references never add an observation
    report = (out / "report.md").read_text()
    assert "hollow bars: the paper's own results" in report and "chance level (reference)" in report


# ---------------------------------------------------------------- many arms stay legible


def _lab(color: str) -> np.ndarray:
    rgb = np.array(to_rgb(color))
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ lin
    f = np.cbrt(xyz / np.array([0.95047, 1.0, 1.08883]))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_controls_arms_are_ordered_by_meaning_and_distinguishable(tmp_path):
    study = load_run_dirs([fx.build_controls_sweep(tmp_path)])
    order = variant_order(study)
    # baseline, fixed code, then controls by family, as sweeps/controls.yaml lists them
    assert order == fx.CONTROL_INPUTS
    styles = variant_styles(study)
    assert styles["learned"]["color"] == "#000000"  # the baseline is black
    assert len({styles[v]["color"] for v in order}) == len({styles[v]["marker"] for v in order}) == len(order)
    assert styles["binary16_sizematched"]["linestyle"] != styles["binary16"]["linestyle"]  # family in the dash
    with style_context():
        fig = _curve_figure(study, included_curve(study, "val/ppl"), "validation perplexity", True, False)
        fig.canvas.draw()
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert len(axes) == 4  # small multiples: one panel per control family, the baseline in each
        panels = [[ln.get_label() for ln in ax.get_lines()] for ax in axes]
        assert all(p[0] == "learned" for p in panels) and sorted(a for p in panels for a in p[1:]) == sorted(order[1:])
        for arms in panels:  # no two arms in one panel share a near-identical colour (CIELAB distance;
            colors = [styles[a]["color"] for a in arms]  # Okabe-Ito's orange vs vermillion is 33)
            assert min(np.linalg.norm(_lab(a) - _lab(b)) for a, b in itertools.combinations(colors, 2)) >= 40
        assert all(ax.get_legend() is None for ax in axes) and len(fig.legends) == 1
        legend_box = fig.legends[0].get_window_extent()
        assert not any(legend_box.overlaps(ax.get_window_extent()) for ax in axes)  # legend off the data
        assert [t.get_text() for t in fig.legends[0].get_texts()] == order
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---------------------------------------------------------------- gap vs model size / compute


def test_gap_vs_model_size_uses_paired_differences_and_flops(tmp_path):
    sweep = fx.build_model_flops_sweep(tmp_path)
    study = load_run_dirs([sweep])
    points = compute(study).size_gaps  # the report's own comparison rows with the sizes and FLOPs
    assert (points["family"] == "primary").all()  # sweeps/model_size.yaml declares them
    assert set(points["model"]) == {"cpu_tiny", "cpu_30m"}
    gf2 = points[(points["variant_a"] == "gf2")].set_index("model")
    assert (gf2["test"] == "paired").all()  # binary16's gap is the same at every seed: exact, no test
    for model, gap in (("cpu_tiny", 0.08), ("cpu_30m", 0.04)):
        diffs = np.array([gap + 0.002 * s for s in fx.SEEDS])
        assert math.isclose(gf2.loc[model, "delta"], diffs.mean(), rel_tol=1e-9)
        half = sps.t.ppf(0.975, 2) * diffs.std(ddof=1) / math.sqrt(3)
        assert math.isclose(gf2.loc[model, "ci_high"] - gf2.loc[model, "delta"], half, rel_tol=1e-6)
    flops = {"cpu_tiny": 1.0e7, "cpu_30m": 2.0e8}
    for model, row in gf2.iterrows():
        assert math.isclose(row["train_flops"], flops[model] * 409_600)
    out = tmp_path / "report"
    assert cli_main([str(sweep), f"out={out}"]) == 0
    assert "against the baseline's trainable parameters and training FLOPs" in (out / "report.md").read_text()
