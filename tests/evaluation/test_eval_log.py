"""`fixedcode evaluate` keeps lm-eval's output off the terminal (issue 42, point 7).

lm-eval shells out to `git describe` for a commit hash (git says "fatal: not a git repository"
outside a checkout, straight to file descriptor 2), logs and draws bars of its own, prints
"bootstrapping for stddev", and an eval.device=cuda on a machine without CUDA is answered with a
warning. As in a training job, all of it goes to the job's run.log; the terminal shows our lines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
from helpers.eval import trained_checkpoint

from fixedcode_study.record.jobdir import JobDir

GIT_NOISE = "not a git repository"
CUDA_NOTICE = "requested but CUDA is not available"


@pytest.mark.slow
def test_evaluate_outside_a_git_checkout_leaves_lm_evals_output_in_the_jobs_log(tmp_path):
    ckpt, prepared = trained_checkpoint("learned")
    job = JobDir(tmp_path / "job")
    shutil.copytree(ckpt.parent.parent, job.path, ignore=shutil.ignore_patterns("wandb", "last.ckpt*", "*.log"))
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    # git looks no higher than tmp_path for a repository: the command runs outside any checkout
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "fixedcode_study", "evaluate", f"checkpoint={job.path}", "eval=builtin",
         "eval.limit=2", "eval.device=cuda:0", f"eval.prepared_root={prepared}"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    terminal = proc.stdout + proc.stderr
    assert proc.returncode == 0, terminal[-3000:]
    assert GIT_NOISE not in terminal and CUDA_NOTICE not in terminal, f"library output on the terminal:\n{terminal}"
    assert "bootstrapping for stddev" not in terminal and "Overwriting default num_fewshot" not in terminal, terminal
    assert proc.stderr.strip() == "", proc.stderr
    assert "[eval] builtin on" in proc.stdout and "fixedcode_heldout_ppl: word_perplexity=" in proc.stdout

    log = job.log_file.read_text(encoding="utf-8")
    if shutil.which("git"):
        assert GIT_NOISE in log
    if not torch.cuda.is_available():
        assert CUDA_NOTICE in log
    assert "bootstrapping for stddev" in log
