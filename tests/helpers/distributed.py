"""Shared by test_ddp / test_resume / test_sweep_resume: run the CLI in a subprocess, read job dirs.

Training runs in subprocesses (as users run it): Lightning's ddp re-executes the command line,
and kills/signals must hit a real process. The cache location comes from conftest's
FIXEDCODE_CACHE, inherited by the subprocesses.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import SMALL_VAL

# 32 optimizer steps of 1024 tokens: batch_size 8 x seq_len 64 x (grad_accum 2 | 2 ranks).
TINY = ["model=test_micro", "logger=csv", "train.tokens=32768", "train.batch_size=8",
        "train.global_batch_tokens=1024", "train.val_points=2", "train.log_every=2", "train.val_batch_size=128",
        SMALL_VAL]

_REFERENCE: dict[str, Path] = {}


def cli(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixedcode_study.run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def start(args: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    fh = open(log, "w")
    return subprocess.Popen([sys.executable, "-m", "fixedcode_study.run", *args], cwd=cwd,
                            stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(path_glob: str, root: Path, proc: subprocess.Popen, timeout: float = 300) -> Path:
    """Poll until a file matching the glob exists under root (the process must still be running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hits = list(root.glob(path_glob))
        if hits:
            return hits[0]
        assert proc.poll() is None, f"process exited with {proc.returncode} before {path_glob} appeared"
        time.sleep(0.02)
    raise TimeoutError(path_glob)


def stop(proc: subprocess.Popen, sig: int) -> int:
    os.kill(proc.pid, sig)
    return proc.wait(timeout=120)


def only_job(root: Path) -> Path:
    jobs = [p.parent for p in root.glob("**/.hydra")]
    assert len(jobs) == 1, jobs
    return jobs[0]


def results(job: Path) -> dict:
    return json.loads((job / "results.json").read_text())


def metric_rows(job: Path, skip: tuple[str, ...] = ("train/tokens_per_second",)) -> list[tuple[str, str, str, str]]:
    """(step, tokens, metric, value) rows as written, minus timing metrics (never reproducible)."""
    with open(job / "metrics.csv", newline="") as fh:
        return [tuple(r) for r in list(csv.reader(fh))[1:] if r[2] not in skip]


def reference_run(tmp_path_factory) -> Path:
    """One uninterrupted single-process run of TINY, shared by the ddp and resume tests."""
    if "single" not in _REFERENCE:
        out = tmp_path_factory.mktemp("reference")
        proc = cli([*TINY, f"out_root={out}"], cwd=out)
        assert proc.returncode == 0, proc.stderr[-3000:]
        _REFERENCE["single"] = only_job(out)
    return _REFERENCE["single"]


__all__ = ["TINY", "cli", "metric_rows", "only_job", "reference_run", "results", "signal", "start", "stop", "wait_for"]
