"""A job's W&B run as W&B holds it (issue 42.2 and 42.3), read back with wandb's own reader
(`wandb leet inspect`, training/loggers.py wandb_records) from real offline runs:

- live: every logged step reaches W&B as it is logged, so `_runtime` grows with the step instead of
  jumping at each checkpoint; a killed attempt's steps past its checkpoint are rewound, so W&B still
  equals metrics.csv point for point;
- the run config is the resolved run (threads, train.compile, the W&B mode, runtime.*), and the
  recorded program is the job's own command, not the sweep's loky worker with the sweep's arguments.
"""

from __future__ import annotations

import csv
import os
import signal
import statistics
import time

import pytest
from helpers import SMALL_VAL
from helpers.analysis import write_job
from helpers.distributed import TINY, cli, only_job, results, start

from fixedcode_study.record.jobdir import JobDir
from fixedcode_study.spec import WandbSpec
from fixedcode_study.training.loggers import (LongCSVLogger, WandbMirror, log_records, read_wandb_log, wandb_logs,
                                              wandb_records)

# One sweep job (run -m, the parallel launcher: a loky worker) that logs every 2 steps and checkpoints
# every 8: before live logging, W&B got its rows in bursts at steps 8, 16, 24 and at the end.
SWEEP = ["-m", "seed=1", "model=test_micro", "logger=wandb", "train.tokens=32768", "train.batch_size=8",
         "train.global_batch_tokens=1024", "train.val_points=2", "train.log_every=2", "train.val_batch_size=128",
         "checkpoint.every_steps=8", SMALL_VAL, "hydra/launcher=parallel"]
INTERNAL = {"_step", "_runtime", "_timestamp", "tokens", "trainer/global_step"}


@pytest.fixture(scope="module")
def sweep_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("wandb_run")
    proc = cli([*SWEEP, f"out_root={out}"], cwd=out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    job = only_job(out)
    return job, results(job)


def _points(history: list[dict]) -> list[tuple[tuple[int, str], float]]:
    return [((int(row["_step"]), k), float(v)) for row in history for k, v in row.items()
            if k not in INTERNAL and not k.startswith("_")]


def _csv_points(job) -> dict[tuple[int, str], float]:
    with open(job / "metrics.csv", newline="") as fh:
        return {(int(r["step"]), r["metric"]): float(r["value"]) for r in csv.DictReader(fh)}


def _run_config(job, run_id: str) -> dict:
    """The run config W&B ends with: the run record's, then every config record applied in order."""
    config: dict = {}
    for record in wandb_records(job / "wandb", run_id):
        if record.get("type") in ("run", "config"):
            update = record["run"]["config"] if record["type"] == "run" else record["config"]
            config.update(update.get("update") or {})
    return config


def test_history_reaches_wandb_as_it_is_logged(sweep_job):
    job, res = sweep_job
    history, _ = read_wandb_log(job / "wandb", res["wandb_id"])
    rows = [r for r in history if "train/loss" in r]
    assert len(rows) == 16   # every 2 steps of 32
    runtime = [float(r["_runtime"]) for r in rows]
    assert runtime == sorted(runtime)
    gaps = [b - a for a, b in zip(runtime, runtime[1:])]
    # each row carries the time it was logged: consecutive rows are a logging interval apart, not
    # the milliseconds between rows sent in one burst at a checkpoint
    assert statistics.median(gaps) >= 0.25 * res["train_seconds"] / len(rows), (runtime, res["train_seconds"])
    assert runtime[-1] - runtime[0] >= 0.5 * res["train_seconds"], (runtime, res["train_seconds"])
    points = _points(history)
    assert len(points) == len(dict(points)) and dict(points) == _csv_points(job)   # and still metrics.csv's


def test_run_config_is_the_resolved_run_and_its_program_the_jobs_own_command(sweep_job):
    job, res = sweep_job
    config = _run_config(job, res["wandb_id"])
    runtime = res["runtime"]
    assert isinstance(runtime["threads"], int) and isinstance(runtime["compile"], bool)
    assert config["threads"] == runtime["threads"]            # not `auto`
    assert config["train"]["compile"] == runtime["compile"]   # not `auto`
    assert config["logger"]["wandb"]["mode"] == "offline"     # resolved (WANDB_MODE=offline), not `auto`
    assert config["runtime"] == runtime
    env = next(r["environment"] for r in wandb_records(job / "wandb", res["wandb_id"])
               if r.get("type") == "environment" and "program" in r["environment"])
    # the command that re-runs this job alone into its directory, not joblib's loky worker
    assert env["program"] == "-m fixedcode_study.run"
    assert env["args"] == ["-m", *res["overrides"]]
    assert "seed=1" in env["args"] and not any("loky" in a for a in env["args"])


def test_a_killed_attempts_steps_past_its_checkpoint_are_rewound(tmp_path):
    """Attempt 1 logged steps 1-20 live and was cut off; the resume trims metrics.csv to its checkpoint
    (step 12) and trains 13-20 again, to other values: W&B ends with the second attempt's, once each."""
    job_dir = write_job(tmp_path / "multirun" / "main", "gf2", 1, val_ppl=61.0, val_bpb=1.93, curves=False)
    job, spec = JobDir(job_dir), WandbSpec("fixedcode-study", None, "offline")

    def attempt(steps, loss) -> None:
        mirror = WandbMirror(spec, job, run_id="rewind0001", run_name="main/x", group="main", job_type="gf2",
                             tags=[], config={"seed": 1})
        mirror.sync_history(min(steps) - 1)   # what the checkpoint covers (training/procedure.py)
        logger = LongCSVLogger(job.metrics)
        for step in steps:
            logger.log_metrics({"train/loss": loss(step), "tokens": 128.0 * step}, step=step)
        mirror.finish(False)

    attempt(range(1, 21), lambda s: 10.0 / s)
    with open(job.metrics, newline="") as fh:   # resume.trim_metrics to the step-12 checkpoint
        kept = [r for r in csv.reader(fh) if r[0] == "step" or int(r[0]) <= 12]
    with open(job.metrics, "w", newline="") as fh:
        csv.writer(fh).writerows(kept)
    attempt(range(13, 31), lambda s: 20.0 / s)
    assert len(wandb_logs(job.wandb_dir, "rewind0001")) == 2   # one run, one log per attempt
    history, _ = read_wandb_log(job.wandb_dir, "rewind0001")
    points = _points(history)
    assert len(points) == len(dict(points))   # one point per (step, metric) over both attempts
    assert dict(points) == _csv_points(job_dir)
    assert dict(points)[(13, "train/loss")] == 20.0 / 13 and dict(points)[(12, "train/loss")] == 10.0 / 12


def _logged_steps(root) -> set[int]:
    """History steps W&B has written to the job's transaction log so far (read while it runs)."""
    from wandb.proto import wandb_internal_pb2 as pb

    steps = set()
    for log in root.glob("**/wandb/*/run-*.wandb"):
        for _, raw in log_records(log.read_bytes()):
            record = pb.Record()
            record.ParseFromString(raw)
            if record.WhichOneof("record_type") == "history":
                steps.add(record.history.step.num)
    return steps


@pytest.mark.slow
def test_sigkill_after_wandb_got_past_the_checkpoint_is_rewound_on_resume(tmp_path):
    """A real kill -9 once W&B holds steps past the last checkpoint: the re-run rewinds them, and W&B
    ends equal to metrics.csv, each point once, in one run."""
    args = [a for a in TINY if a not in ("logger=csv", "train.log_every=2")] + [
        "logger=wandb", "train.log_every=1", "checkpoint.every_steps=8", "checkpoint.keep_every_steps=8",
        f"out_root={tmp_path}"]
    proc = start(args, tmp_path, tmp_path / "attempt1.log")
    deadline = time.monotonic() + 300

    def checkpointed() -> int:
        return max((int(p.stem.split("-")[1]) for p in tmp_path.glob("**/checkpoints/step-*.ckpt")), default=0)

    while not (0 < checkpointed() < max(_logged_steps(tmp_path), default=0) - 1):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "attempt1.log").read_text()[-2000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the job and W&B's service: W&B holds steps the checkpoint does not
    proc.wait(timeout=60)
    final = cli(args, cwd=tmp_path)
    assert final.returncode == 0, final.stderr[-2000:]
    job = only_job(tmp_path)
    res = results(job)
    assert res["status"] == "completed" and res["attempts"] == 2
    assert "rewound to step" in (job / "run.log").read_text()
    assert len(wandb_logs(job / "wandb", res["wandb_id"])) == 2
    history, _ = read_wandb_log(job / "wandb", res["wandb_id"])
    points = _points(history)
    assert len(points) == len(dict(points)) and dict(points) == _csv_points(job)
