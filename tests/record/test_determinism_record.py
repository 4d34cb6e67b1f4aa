"""What the record says about repeatability (issue 26): runtime.deterministic, and resume and reuse
repeating it when bitwise equality does not hold.

A CPU job is bitwise repeatable at its thread count (tests/systems/test_speed.py checks that, slow); these
tests check what the record and the console say where it is not: a job trained on a GPU (its record
states it, as spec.runtime.determinism writes it for CUDA) that another study reuses, and a resume at
another thread count than the attempt it continues."""

from __future__ import annotations

import json
import signal

import pytest
import torch
from helpers import SMALL_VAL
from helpers.distributed import only_job, start, stop, wait_for

from fixedcode_study.config import compose, job_key
from fixedcode_study.record.jobdir import JobDir
from fixedcode_study.spec.runtime import determinism
from fixedcode_study.spec import JobSpec
from fixedcode_study.training.job import run_job

ARGS = ["model=test_micro", "seed=1", "train.tokens=8192", "train.batch_size=8", "train.val_points=2",
        "train.val_batch_size=128", "trainer.precision=32-true", "logger=csv", SMALL_VAL]


def job_in(root, study, extra=()):
    overrides = [*ARGS, *extra, f"name={study}", f"out_root={root}"]
    cfg = compose(overrides)
    return cfg, JobDir(root / "multirun" / study / job_key(overrides, cfg.job_key_ignore))


def test_reusing_a_job_whose_runtime_was_not_bitwise_says_so(tmp_path, capsys):
    cfg, source = job_in(tmp_path, "a")
    assert run_job(JobSpec.from_cfg(cfg), source.path).record["runtime"]["deterministic"]["bitwise"] is True
    # The same job trained on a GPU machine into the shared out_root records this:
    record = json.loads(source.results.read_text())
    record["runtime"]["deterministic"] = determinism("gpu", compiled=False, threads=1, world=1)
    source.results.write_text(json.dumps(record))
    capsys.readouterr()
    cfg, job = job_in(tmp_path, "b")
    adopted = run_job(JobSpec.from_cfg(cfg), job.path)
    said = capsys.readouterr()
    out = said.out + said.err
    assert adopted.record["reused_from"]["job_dir"] == str(source.path.resolve())
    assert "reusing the completed job" in out and "its runtime is not bitwise deterministic (CUDA:" in out
    assert adopted.record["runtime"]["deterministic"]["bitwise"] is False  # the source's, as its numbers are


@pytest.mark.slow  # a subprocess killed mid-training, then a resume: ~40 s for one console line
def test_a_resume_at_another_thread_count_says_it_is_not_bitwise(tmp_path, capsys):
    args = [*ARGS, "train.tokens=32768", "checkpoint.every_steps=4", "checkpoint.keep_every_steps=8", "threads=1",
            f"out_root={tmp_path}"]
    proc = start(args, tmp_path, tmp_path / "attempt1.log")
    wait_for("**/checkpoints/step-0000008.ckpt", tmp_path, proc)
    assert stop(proc, signal.SIGKILL) == -signal.SIGKILL
    job = only_job(tmp_path)
    capsys.readouterr()
    before = torch.get_num_threads()
    try:
        outcome = run_job(JobSpec.from_cfg(compose([*args[:-2], "threads=2", f"out_root={tmp_path}"])), job)
    finally:
        torch.set_num_threads(before)
    said = capsys.readouterr()
    assert outcome.record["status"] == "completed" and outcome.record["resumed_from_step"] >= 8
    assert "resuming at 2 threads a run that trained at 1" in said.out + said.err
