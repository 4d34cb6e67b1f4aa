"""A study of compositions end to end on tiny models: `fixedcode compose study=<file>` composes the pairs
the file declares from the jobs `fixedcode sweep` would train (studies/pairs.py), and `fixedcode analyze`
reads the records into the report's composition section (analysis/read/compose.py, results/composition.py).

The study: learned and binary16 x seeds 1-6 on test_micro (16 steps), pairs 1+2, 3+4, 5+6 per arm. Seeds
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

from helpers import SMALL_VAL
from helpers.cli import fixedcode

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


def job_overrides(root: Path, out: Path | None = None) -> list[str]:
    """What `fixedcode sweep` and `fixedcode compose study=` are both given (test-sized jobs)."""
    return ["model=test_micro", "logger=csv", "train.tokens=8192", "train.batch_size=8", "train.val_points=2",
            SMALL_VAL, f"data.cache_dir={root / 'cache'}", f"out_root={out or root / 'out'}"]


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
