"""The terminal a researcher reads: one bar and one result line per job; library noise in the job's log.

The real CLI runs in a subprocess from a folder outside any git checkout (where lm-eval's
`git describe` says "fatal: not a git repository"), with W&B's banner not silenced (the session
env sets WANDB_SILENT; a user's shell does not).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SMALL_VAL

from fixedcode_study.record.jobdir import JOB_LOG_FILE
from fixedcode_study.console import VERBOSE_ENV, take_verbose_flag

TINY = ["model=test_micro", "train.tokens=2048", "train.batch_size=8", "train.val_points=3", "logger=wandb", SMALL_VAL]
NOISE = ["💡 Tip", "GPU available", "TPU available", "wandb:", "DeprecationWarning", "UserWarning", "is deprecated",
         "fatal: not a git repository", "Run history", "lm_eval", "Validation", "Epoch 0"]


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SILENT", VERBOSE_ENV)}
    env["WANDB_MODE"] = "offline"
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study.run", *args], cwd=cwd, env=env,
                          capture_output=True, timeout=300)
    # bytes, decoded here: text=True would turn a progress bar's \r redraws into line breaks
    proc.stdout, proc.stderr = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    return proc


def screen_lines(text: str) -> list[str]:
    """What a terminal shows: the last redraw of each line (progress bars redraw with \\r)."""
    return [ln.split("\r")[-1] for ln in text.split("\n") if ln.split("\r")[-1].strip()]


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("console")
    if subprocess.run(["git", "rev-parse"], cwd=where, capture_output=True).returncode == 0:
        pytest.skip(f"{where} lies inside a git checkout")
    return where


@pytest.mark.slow
def test_terminal_shows_a_bar_and_a_result_line_and_the_log_holds_the_rest(outside):
    # (bootstrap_iters=0: lm-eval's bootstrap Pool can hang at its terminate() under the job's SIGTERM handler)
    evaluation = ["eval=builtin", "eval.limit=16", "eval.bootstrap_iters=0"]
    proc = run_cli(["-m", *TINY, *evaluation, f"out_root={outside}", "name=quiet"], outside)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown[-3000:]
    [job] = [p.parent for p in (outside / "multirun" / "quiet").glob("*/results.json")]
    log = (job / JOB_LOG_FILE).read_text()
    assert [n for n in NOISE if n in shown] == [], shown[-3000:]
    lines = screen_lines(shown)
    # ours (and Hydra's job header) only: data preparation, one bar, one result line
    assert [ln for ln in lines if not ln.startswith(("[data]", "[run]", "train:")) and "[HYDRA]" not in ln] == [], lines
    bars = [ln for ln in lines if ln.startswith("train:")]
    assert len(bars) == 1 and "100%" in bars[0] and "val_ppl=" in bars[0], lines
    assert len([ln for ln in lines if ln.startswith(f"[run] {job.name}: val_loss=")]) == 1, lines
    # the noise is kept, in the job's log
    for routed in ("GPU available", "wandb: Tracking run", "wandb: Run history", "fatal: not a git repository",
                   "[lm_eval.evaluator]"):
        assert routed in log, (routed, log[-3000:])
    assert f"[run] {job.name}: val_loss=" in log  # our lines are copied there too, in order


@pytest.mark.slow
def test_verbose_brings_the_noise_back(outside):
    proc = run_cli(["-v", "-m", *TINY, f"out_root={outside}", "name=loud", "reuse=false"], outside)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown[-3000:]
    for noise in ("GPU available", "wandb: Tracking run", "wandb: Run history"):
        assert noise in shown, (noise, shown[-3000:])
    assert "[run] " in shown and len([ln for ln in screen_lines(shown) if ln.startswith("train:")]) == 1
    [job] = [p.parent for p in (outside / "multirun" / "loud").glob("*/results.json")]
    assert "GPU available" in (job / JOB_LOG_FILE).read_text()  # logging records reach the log as well


def test_verbose_flag_is_taken_off_the_command_line(monkeypatch):
    # setenv first, so monkeypatch records the variable and removes what take_verbose_flag sets (a bare
    # delenv of an absent variable records nothing: every later test ran verbose)
    monkeypatch.setenv(VERBOSE_ENV, "0")
    monkeypatch.delenv(VERBOSE_ENV)
    assert take_verbose_flag(["-m", "seed=1"]) == ["-m", "seed=1"] and VERBOSE_ENV not in os.environ
    assert take_verbose_flag(["-m", "--verbose", "seed=1", "-v"]) == ["-m", "seed=1"]
    assert os.environ[VERBOSE_ENV] == "1"
