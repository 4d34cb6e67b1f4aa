"""A study of compositions end to end on tiny models: `fixedcode compose study=<file>` composes the pairs
the file declares from the jobs `fixedcode sweep` would train (studies/pairs.py), and `fixedcode analyze`
reads the records into the report's composition section (analysis/read/compose.py, results/composition.py).

The study: learned and binary16 x seeds 1-6 on test_micro (4 steps), pairs 1+2, 3+4, 5+6 per arm. Seeds
1-4 are trained (each planned job run as `fixedcode sweep` would run it), 5 and 6 are not, so two pairs
compose and one waits per arm. The runner skips a pair already composed from the same weights under the
same settings and composes it again when a declared setting changes; the section's numbers are the
records' (one measure recomputed here from the records with numpy and scipy), and a report without
compose records has no such section.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.cli import fixedcode

pytestmark = pytest.mark.slow  # trains and composes a study end to end

STUDY = """name: tinycompose
description: two arms x seeds 1-6, composed in pairs
jobs: {{cpu: 12, paper: 12}}
primary:
  question: Do two binary16 models combine differently from two learned ones?
  comparisons: [binary16 - learned, gf2 - learned]
  measures: [ensemble_gain, stitch_cost_identity, stitch_cost_affine, barrier]
pairs:
  arms: [learned, binary16]
  seeds: [[1, 2], [3, 4], [5, 6]]
  settings: {{{settings}}}
grids:
  - input: [learned, binary16]
    seed: [1, 2, 3, 4, 5, 6]
"""
SETTINGS = "stitch_tokens: 512, stitch_batch_size: 4"
READY = ["learned,seeds=1+2", "learned,seeds=3+4", "binary16,seeds=1+2", "binary16,seeds=3+4"]
WAITING = ["learned,seeds=5+6", "binary16,seeds=5+6"]


# The module's corpus (its own cache) holds out one scene (7,140 tokens), under half of SMALL_VAL's split: every
# measure of a pair (ensemble, each stitch, each point of the barrier) is a pass over that split, and the
# tests read the records and what the runner and the report make of them, not the measures' precision.
VAL = "data.val_fraction=0.002"


def job_overrides(root: Path, out: Path | None = None) -> list[str]:
    """What `fixedcode sweep` and `fixedcode compose study=` are both given (test-sized jobs: 4 steps)."""
    return ["model=test_micro", "logger=csv", "train.tokens=2048", "train.batch_size=8", "train.val_points=2",
            VAL, f"data.cache_dir={root / 'cache'}", f"out_root={out or root / 'out'}"]


def write_study(folder: Path, settings: str = SETTINGS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tinycompose.yaml"   # the study's name is its file's
    path.write_text(STUDY.format(settings=settings))
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compose_study")


@pytest.fixture(scope="module")
def study_file(root) -> Path:
    return write_study(root / "study")


@pytest.fixture(scope="module")
def jobs(root, study_file):
    """The study's planned jobs (as `fixedcode sweep` plans them); seeds 1-4 trained, 5 and 6 not."""
    from fixedcode_study.cli.sweep import plan
    from fixedcode_study.studies.study import load_study
    from fixedcode_study.training.job import run_job

    planned = plan(load_study(str(study_file)), "cpu", job_overrides(root))
    for job in planned:
        if job.spec.seed <= 4:
            assert run_job(job.spec, job.job_dir, job.overrides).record["status"] == "completed"
    return planned


@pytest.fixture(scope="module")
def composed(root, study_file, jobs):
    run = fixedcode(["compose", f"study={study_file}", *job_overrides(root)], cwd=root)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def study_dir(root: Path) -> Path:
    return root / "out" / "multirun" / "tinycompose"


def records(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("compose/*/compose.json"))}


# ---------------------------------------------------------------- the runner


def test_each_ready_pair_is_composed_beside_the_jobs_and_each_waiting_one_is_named(root, jobs, composed):
    found = records(study_dir(root))
    assert sorted(found) == sorted(READY)   # the pairs of seeds 5 and 6 wait for their jobs
    by_name = {(j.spec.input_name, j.spec.seed): j for j in jobs}
    for name, record in found.items():
        arm, seeds = name.split(",seeds=")
        a, b = (int(s) for s in seeds.split("+"))
        assert record["a"]["job"] == str(by_name[arm, a].job_dir) and record["b"]["job"] == str(by_name[arm, b].job_dir)
        assert record["settings"]["stitch_tokens"] == 512 and record["settings"]["stitch_batch_size"] == 4
        assert {"ensemble", "stitch", "barrier"} <= set(record)
    out = composed.stdout
    for name in WAITING:
        assert f"[compose] {name}: waiting for its jobs (" in out
    assert "input=learned,model=test_micro,seed=5" in out and "not trained yet" in out
    assert "[compose] 4 composed, 0 already done, 2 waiting for their jobs, of 6 pairs" in out
    assert f"not composed: {', '.join(WAITING)}" in out


def test_a_rerun_skips_what_is_done_and_composes_again_under_changed_settings(root, composed, tmp_path):
    """On a copy of the study (the records the section reads stay as they are)."""
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    copy_dir = out / "multirun" / "tinycompose"
    before = records(copy_dir)
    again = fixedcode(["compose", f"study={write_study(tmp_path / 'same')}", *job_overrides(root, out)], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("already composed under these settings; skipping") == 4
    assert "[compose] 0 composed, 4 already done, 2 waiting" in again.stdout
    assert records(copy_dir) == before   # nothing rewritten

    changed = write_study(tmp_path / "changed", "measures: ensemble, stitch_tokens: 256, stitch_batch_size: 4")
    dry = fixedcode(["compose", f"study={changed}", "dry_run=true", *job_overrides(root, out)], cwd=tmp_path)
    assert dry.returncode == 0 and dry.stdout.count("would compose (its record was computed under other settings "
                                                    "(measures, stitch_tokens))") == 4
    assert records(copy_dir) == before   # a dry run composes nothing
    run = fixedcode(["compose", f"study={changed}", *job_overrides(root, out)], cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "[compose] 4 composed, 0 already done, 2 waiting" in run.stdout
    after = records(copy_dir)
    assert sorted(after) == sorted(READY)
    for name, record in after.items():
        assert record["settings"]["measures"] == ["ensemble"] and record["settings"]["stitch_tokens"] == 256
        assert "stitch" not in record and record["a"]["weights_sha256"] == before[name]["a"]["weights_sha256"]


@pytest.mark.parametrize(("argv", "field"), [
    (["study=STUDY", "a=somewhere"], "a"),
    (["study=STUDY", "stitch_tokens=5"], "stitch_tokens"),
    (["study=STUDY", "out=x.json"], "out"),
    (["a=x", "b=y", "dry_run=true"], "dry_run"),
    (["a=x", "b=y", "model=test_micro"], "model"),
    (["b=y"], "a"),
], ids=["pair-and-study", "setting-with-study", "out-with-study", "dry-run-without-study", "override-without-study",
        "no-a"])
def test_a_setting_of_the_other_mode_is_one_line(tmp_path, argv, field):
    study = write_study(tmp_path)
    run = fixedcode(["compose", *(a.replace("STUDY", str(study)) for a in argv)], cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.startswith(f"error: {field}: ") and run.stderr.count("\n") == 1, run.stderr


def test_a_declared_arm_the_grids_do_not_train_is_one_line_naming_pairs(tmp_path):
    study = write_study(tmp_path)
    study.write_text(study.read_text().replace("arms: [learned, binary16]", "arms: [learned, gf2]"))
    run = fixedcode(["compose", f"study={study}", *job_overrides(tmp_path)], cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("error: tinycompose.yaml:pairs.arms: gf2 at seed 1 is 0 jobs of this plan")


# ---------------------------------------------------------------- the report


def analyze(run_dir: Path, out: Path, study_file: Path) -> str:
    from fixedcode_study.cli.analyze import main as analyze_main

    assert analyze_main([str(run_dir), f"out={out}", f"study={study_file}"]) == 0
    return (out / "report.md").read_text()


@pytest.fixture(scope="module")
def report(root, study_file, composed) -> Path:
    out = root / "report"
    analyze(study_dir(root), out, study_file)
    return out


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out here (the report's comes from statsmodels)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_the_sections_numbers_are_the_records_and_the_primary_rows_are_paired_over_pairs(root, report):
    import numpy as np
    import pandas as pd
    from scipy import stats as sps

    found = records(study_dir(root))
    pairs = pd.read_csv(report / "tables" / "composition_pairs.csv")
    assert len(pairs) == 4 and pairs["variant"].tolist() == ["learned", "learned", "binary16", "binary16"]
    for row in pairs.itertuples(index=False):
        record = found[f"{row.variant},seeds={row.seed}"]
        mean_loss = (record["members"]["a"]["val_loss"] + record["members"]["b"]["val_loss"]) / 2
        assert row.ensemble_gain == record["ensemble"]["logits"]["gain_over_better"]
        assert row.barrier == record["barrier"]["barrier"]
        for kind in ("identity", "affine"):   # the mean over k = 1..n_layer of stitched minus the members' mean
            inside = [r["val_loss"] - mean_loss for r in record["stitch"][kind] if r["k"] >= 1]
            assert getattr(row, f"stitch_cost_{kind}") == pytest.approx(np.mean(inside), abs=1e-12)

    # each arm's barrier: mean and t interval over its pairs, recomputed from the records
    arms = pd.read_csv(report / "tables" / "composition_arms.csv").set_index(["variant", "metric"])
    barriers = {}
    for arm in ("learned", "binary16"):
        values = np.array([found[f"{arm},seeds={s}"]["barrier"]["barrier"] for s in ("1+2", "3+4")])
        barriers[arm] = values
        half = sps.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
        row = arms.loc[(arm, "barrier")]
        assert row["n"] == 2 and row["mean"] == pytest.approx(values.mean(), abs=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((values.mean() - half, values.mean() + half), abs=1e-12)

    # binary16 − learned on the barrier: pair i of one arm against pair i of the other (the same seeds, CRN)
    rows = pd.read_csv(report / "tables" / "comparisons.csv")
    primary = rows[rows["family"] == "primary"]
    assert sorted(primary["metric"]) == sorted(["ensemble_gain", "stitch_cost_identity", "stitch_cost_affine", "barrier"])
    assert set(primary["comparison"]) == {"binary16 − learned"}   # gf2 − learned is declared, but gf2 did not run
    barrier = primary.set_index("metric").loc["barrier"]
    assert barrier["test"] == "paired" and barrier["n_pairs"] == 2
    assert barrier["delta"] == pytest.approx((barriers["binary16"] - barriers["learned"]).mean(), abs=1e-12)
    assert barrier["p_value"] == pytest.approx(sps.ttest_rel(barriers["binary16"], barriers["learned"]).pvalue)
    adjusted = dict(zip(primary["metric"], holm(primary["p_value"].tolist()), strict=True))
    assert barrier["p_holm"] == pytest.approx(adjusted["barrier"])
    assert rows.loc[rows["metric"] == "val_bpb", "family"].eq("exploratory").all()   # not this study's question
    assert {"stitch_cost_identity_k0", "stitch_cost_affine_k2", "ensemble_mixture_gain"} <= set(
        rows.loc[rows["family"] == "exploratory", "metric"])


def test_the_report_states_the_primary_rows_in_their_verdicts_words_and_regenerates_from_its_tables(report):
    from fixedcode_study.analysis.summaries import blocks, expected_report_blocks

    text = (report / "report.md").read_text()
    assert "## Composing pairs of models" in text and "declared primary comparison gf2 − learned not made" in text
    assert "on each composition measure of the arms' pairs of models" in text
    present = blocks(text)
    assert "binary16 − learned" in present["composition"] and "paired over 2 pairs of models" in present["composition"]
    expected = expected_report_blocks(report)   # rewritten from tables/comparisons.csv alone
    assert "\n".join(expected["composition"]) + "\n" == present["composition"]
    assert "\n".join(expected["findings"]) + "\n" == present["findings"]
    for stem in ("composition_stitch", "composition_barrier"):
        assert (report / "figures" / f"{stem}.png").is_file() and (report / "figures" / f"{stem}.pdf").is_file()


def test_a_record_the_study_does_not_pool_is_left_out_with_a_note(root, study_file, composed, tmp_path):
    """A second record of one arm and seeds counts once; one under other settings than the study declares
    is left out; the rest of the section is as before."""
    runs = tmp_path / "runs"
    shutil.copytree(study_dir(root), runs, ignore=shutil.ignore_patterns("checkpoints"))
    record = json.loads((runs / "compose" / "learned,seeds=1+2" / "compose.json").read_text())
    (runs / "compose" / "again").mkdir()
    (runs / "compose" / "again" / "compose.json").write_text(json.dumps(record))
    record["settings"]["stitch_tokens"] = 1
    (runs / "compose" / "other").mkdir()
    (runs / "compose" / "other" / "compose.json").write_text(json.dumps(record))
    text = analyze(runs, tmp_path / "report", study_file)
    assert "compose/other/compose.json left out: computed under other settings than the study declares " \
           "(stitch_tokens: 1 -> 512)" in text
    repeat = next(line for line in text.splitlines() if "(same arm and seeds): counted once" in line)
    assert "compose/learned,seeds=1+2/compose.json" in repeat and "compose/again/compose.json" in repeat
    assert (tmp_path / "report" / "tables" / "composition_pairs.csv").read_text().count("compose.json") == 4


def test_without_compose_records_the_report_has_no_composition(root, study_file, composed, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(study_dir(root), runs, ignore=shutil.ignore_patterns("checkpoints", "compose"))
    text = analyze(runs, tmp_path / "report", study_file)
    assert "Composing pairs" not in text and "generated:composition" not in text
    assert not list((tmp_path / "report").rglob("composition_*"))
    import pandas as pd

    rows = pd.read_csv(tmp_path / "report" / "tables" / "comparisons.csv")
    assert set(rows["metric"]) == {"val_bpb"} and not (rows["family"] == "primary").any()
