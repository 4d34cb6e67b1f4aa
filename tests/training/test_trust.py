"""The record is the truth: no stale, failed or half-logged job passes as a result.

Each test is a scenario that used to let a wrong number through: a re-run after a default changed,
a resume from a checkpoint of other settings, a failed evaluation recorded as completed, W&B
history that drifts from metrics.csv after kills, a signal outside the training loop, a sweep
that went on after a preemption, and settings that ended in a traceback.

Kills and signals hit a real process (helpers.distributed.start); the command lines that only run
a job to its end (a re-run that resumes, a failed evaluation, a bad setting) run in this process
(helpers.cli.run_cli), with the exit code and output a subprocess would give.
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

import pytest
import torch
from helpers.cli import run_cli as cli
from helpers.distributed import TINY, only_job, results, start, wait_for

from fixedcode_study.config import compose, job_key
from fixedcode_study.errors import ConfigError
from fixedcode_study.record.fingerprint import differences
from fixedcode_study.spec import JobSpec
from fixedcode_study.training.job import run_job
from fixedcode_study.training.loggers import read_wandb_log, wandb_logs

# 16 optimizer steps of 512 tokens: a job of a few seconds.
SHORT = ["model=test_micro", "logger=csv", "train.tokens=8192", "train.batch_size=8", "train.val_points=2",
         "train.log_every=2", "train.val_batch_size=128"]


def fingerprint_of(overrides: list[str]) -> dict:
    return dict(JobSpec.from_cfg(compose(overrides)).fingerprint)


# -- identity -----------------------------------------------------------------------------------------
def test_device_and_node_counts_are_outside_the_job_key_and_the_fingerprint():
    ignore = compose([]).job_key_ignore
    assert job_key(["input=gf2", "trainer.devices=2", "trainer.num_nodes=4"], ignore) == "input=gf2"
    fixed_batch = ["train.global_batch_tokens=4096"]
    one = fingerprint_of(fixed_batch)
    assert fingerprint_of([*fixed_batch, "trainer.devices=2"])["sha"] == one["sha"]  # same computation
    assert fingerprint_of([*fixed_batch, "logger=csv", "eval=builtin", "checkpoint.every_steps=3"])["sha"] == one["sha"]
    # Without a fixed global batch, more devices means a bigger batch: a different computation, named.
    diff = differences(fingerprint_of([]), fingerprint_of(["trainer.devices=2"]))
    assert diff == ["plan.max_steps: 256 -> 128", "plan.tokens_per_step: 2048 -> 4096"]


def test_fingerprint_names_changed_settings_and_changed_code():
    base = fingerprint_of([])
    changed = fingerprint_of(["optim.lr=0.001", "model.d_ff=256"])
    assert differences(base, changed) == ["model.d_ff: 384 -> 256", "optim.lr: 0.003 -> 0.001"]
    other_code = {**base, "sha": "x", "code_sha": "y", "code": {"commit": "0123456789abcdef", "dirty": True}}
    assert differences(other_code, base)[-1].startswith("code: the training source changed (source y at commit 0123456789+dirty ->")
    assert len(base["sha"]) == 64 and base["settings"]["seed"] == 1 and "name" not in base["settings"]


def test_rerun_under_a_changed_default_is_refused_by_name_and_force_retrains(tmp_path):
    job_dir = tmp_path / "job"
    first = run_job(JobSpec.from_cfg(compose([*SHORT, f"out_root={tmp_path}"])), job_dir).record
    assert first["status"] == "completed" and first["fingerprint"]["settings"]["optim.lr"] == 0.003
    before = (job_dir / "results.json").read_bytes()
    # The same directory (same job key), a YAML default changed underneath it.
    changed = compose([*SHORT, f"out_root={tmp_path}", "optim.lr=0.001"])
    with pytest.raises(ConfigError) as refused:
        run_job(JobSpec.from_cfg(changed), job_dir)
    message = str(refused.value)
    assert "optim.lr: 0.003 -> 0.001" in message and "force=true" in message and "\n" not in message
    assert (job_dir / "results.json").read_bytes() == before  # refused before touching anything
    changed.force = True
    again = run_job(JobSpec.from_cfg(changed), job_dir).record
    assert again["status"] == "completed" and again["fingerprint"]["settings"]["optim.lr"] == 0.001
    assert again["final"]["val_loss"] != first["final"]["val_loss"] and again["attempts"] == 1


def test_checkpoint_of_other_settings_is_never_resumed(tmp_path):
    """SIGTERM mid-training saves last.ckpt, records `preempted` and exits 143; a re-run under other
    settings is refused by name, the same command resumes (test_resume's SIGTERM test, marked slow,
    is the same first half)."""
    args = [*TINY, "checkpoint.every_steps=0", "checkpoint.keep_every_steps=4", f"out_root={tmp_path}"]
    proc = start(args, tmp_path, tmp_path / "run.log")
    wait_for("**/checkpoints/step-0000004.ckpt", tmp_path, proc)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 143, (tmp_path / "run.log").read_text()[-3000:]
    job = only_job(tmp_path)
    res = results(job)
    assert res["status"] == "preempted" and "SIGTERM" in res["error"]
    assert 4 <= torch.load(job / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] < 32
    assert "re-run to resume" in (tmp_path / "run.log").read_text()
    changed = compose([*TINY, f"out_root={tmp_path}", "optim.weight_decay=0.0"])
    with pytest.raises(ConfigError, match=r"resume checkpoint computed under other settings: optim.weight_decay"):
        run_job(JobSpec.from_cfg(changed), job)
    rerun = cli(args, cwd=tmp_path)  # the same settings resume it
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    res = results(job)
    assert res["status"] == "completed" and res["resumed_from_step"] >= 4 and res["attempts"] == 2


# -- failure semantics -----------------------------------------------------------------------------------
def test_failed_evaluation_is_not_completed_exits_nonzero_and_reruns_only_the_evaluation(tmp_path):
    args = [*SHORT, f"out_root={tmp_path}", "eval=builtin", "eval.limit=4", "eval.bootstrap_iters=0"]
    failed = cli([*args, "eval.tasks=[no_such_task]"], cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr[-2000:]
    job = only_job(tmp_path)
    res = results(job)
    assert res["status"] == "eval_failed" and "no_such_task" in res["eval"]["error"]
    assert (job / res["checkpoint"] / "model.safetensors").exists()  # the trained weights stay
    assert "eval_failed" in failed.stderr
    again = cli(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    done = results(job)
    assert done["status"] == "completed" and "error" not in done["eval"]
    assert sorted(done["eval"]["tasks"]) == ["fixedcode_heldout_lastword", "fixedcode_heldout_lastword_choice", "fixedcode_heldout_ppl"]
    # evaluated, not retrained: the training numbers and their timing are the first attempt's
    assert done["final"] == res["final"] and done["train_seconds"] == res["train_seconds"]
    assert "already trained; running eval=builtin" in again.stdout


# -- W&B equals the record -----------------------------------------------------------------------------
def _csv_points(job: Path) -> dict[tuple[int, str], float]:
    with open(job / "metrics.csv", newline="") as fh:
        rows = [(int(r["step"]), r["metric"], float(r["value"])) for r in csv.DictReader(fh)]
    points = {(s, m): v for s, m, v in rows}
    assert len(points) == len(rows)  # one row per (step, metric)
    return points


def _wandb_points(history: list[dict]) -> list[tuple[tuple[int, str], float]]:
    internal = {"_step", "_runtime", "_timestamp", "tokens", "trainer/global_step"}
    return [((int(row["_step"]), k), float(v)) for row in history for k, v in row.items()
            if k not in internal and not k.startswith("_")]


def _wait_until(condition, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"process exited with {proc.returncode} first"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the job and W&B's service process: a node going away
    proc.wait(timeout=60)


@pytest.mark.slow
def test_wandb_history_equals_metrics_csv_after_two_sigkills(tmp_path):
    from fixedcode_study.analysis.read.wandb import results_from_wandb

    args = [a for a in TINY if a != "logger=csv"] + ["logger=wandb", "checkpoint.every_steps=4",
                                                      "checkpoint.keep_every_steps=4", f"out_root={tmp_path}"]
    assert os.environ.get("WANDB_MODE") == "offline"  # hermetic session (conftest)
    for attempt in (1, 2):
        seen = {p.name for p in tmp_path.glob("**/checkpoints/step-*.ckpt")}
        proc = start(args, tmp_path, tmp_path / f"attempt{attempt}.log")
        _wait_until(lambda: {p.name for p in tmp_path.glob("**/checkpoints/step-*.ckpt")} - seen, proc)
        _kill_group(proc)  # right after a checkpoint: mid-flush, or with uncovered rows in metrics.csv
    final = cli(args, cwd=tmp_path)
    assert final.returncode == 0, final.stderr[-2000:]
    job = only_job(tmp_path)
    res = results(job)
    assert res["status"] == "completed" and res["attempts"] == 3
    logs = wandb_logs(job / "wandb", res["wandb_id"])
    assert len(logs) == 3  # one W&B run (one id), one transaction log per attempt
    assert {f.name for f in (job / "wandb").glob("*/*.wandb")} == {f"run-{res['wandb_id']}.wandb"}
    history, summary = read_wandb_log(job / "wandb", res["wandb_id"])
    points = _wandb_points(history)
    assert len(points) == len(dict(points))  # exactly one point per (step, metric) over all attempts
    assert dict(points) == _csv_points(job)  # and the same points as metrics.csv, value for value
    # The summary holds the record: the W&B source of `analysis` rebuilds results.json from it.
    assert summary["results"] == json.loads(json.dumps({k: v for k, v in res.items() if k != "config"}))
    rebuilt = results_from_wandb(f"main/{job.name}", "main", "finished", res["config"], summary)
    assert rebuilt["final"] == res["final"] and rebuilt["data"] == res["data"] and rebuilt["plan"] == res["plan"]


# -- preemption at every phase ------------------------------------------------------------------------------
@pytest.mark.slow
def test_sigterm_outside_the_training_loop_records_preempted_and_exits_143(tmp_path):
    corpus = tmp_path / "corpus"  # a corpus of its own: tokenizer training takes a few seconds
    corpus.mkdir()
    words = [f"w{i}x{i * 7919 % 1013}" for i in range(20000)]
    for doc in range(300):  # one document per file
        (corpus / f"{doc:03d}.txt").write_text("\n".join(
            " ".join(words[(i * 37) % 19000:(i * 37) % 19000 + 200]) for i in range(doc * 10, doc * 10 + 10)))
    args = [*SHORT, "data=text_files", f"data.paths=[{corpus}/*.txt]", f"out_root={tmp_path}"]
    proc = start(args, tmp_path, tmp_path / "run.log")
    wait_for("**/results.json", tmp_path, proc)  # written before the model and the data
    os.kill(proc.pid, signal.SIGTERM)
    code = proc.wait(timeout=120)
    log = (tmp_path / "run.log").read_text()
    assert code == 143, log[-2000:]
    job = only_job(tmp_path)
    res = results(job)
    assert res["status"] == "preempted" and "outside the training loop" in res["error"], res["error"]
    rerun = cli(args, cwd=tmp_path)
    assert rerun.returncode == 0 and results(job)["status"] == "completed", rerun.stderr[-2000:]


@pytest.mark.slow
def test_sweep_stops_with_143_when_preempted(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "fixedcode_study", "sweep", "main", *SHORT, "hydra/launcher=basic", f"out_root={tmp_path}"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_until(lambda: len(list(tmp_path.glob("**/results.json"))) >= 2, proc)  # the second job started
    proc.send_signal(signal.SIGTERM)  # to the launcher only: it forwards to the running grid
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 143, out[-3000:]
    statuses = sorted(json.loads(p.read_text())["status"] for p in tmp_path.glob("**/results.json"))
    assert statuses == ["completed", "preempted"], statuses  # the sweep went no further


# -- bad settings -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("override", "field"), [
    ("optim.lr=nan", "optim.lr"), ("optim.lr=-0.001", "optim.lr"), ("train.seq_len=65", "train.seq_len"),
    ("optim.betas=[0.9,1.5]", "optim.betas[1]"), ("train.tokens=0", "train.tokens"),
    ("model.init_std=inf", "model.init_std"), ("seed=-1", "seed"),
])
def test_bad_setting_is_one_line_naming_the_field_and_writes_no_record(tmp_path, override, field):
    proc = cli([*SHORT, override, f"out_root={tmp_path}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), proc.stderr
    assert not list(tmp_path.glob("**/results.json"))


def test_seq_len_above_the_model_maximum_names_both_fields():
    with pytest.raises(ConfigError, match=r"train.seq_len: 65 exceeds model.max_seq_len=64"):
        run_job(JobSpec.from_cfg(compose([*SHORT, "train.seq_len=65"])), Path("/nonexistent/never-created"))


def test_truncated_weights_given_to_evaluate_are_one_line_not_a_traceback(tmp_path):
    import shutil

    from helpers.eval import untrained_checkpoint

    ckpt = tmp_path / "ckpt"
    shutil.copytree(untrained_checkpoint("binary16"), ckpt)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study", "evaluate", f"checkpoint={ckpt}", "eval=builtin"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: checkpoint:") and "Traceback" not in proc.stderr


def test_a_variant_that_names_another_is_fingerprinted_with_that_variants_settings():
    settings = fingerprint_of(["input=gaussian16"])["settings"]
    # editing conf/input/binary16.yaml changes gaussian16's numbers (its RMS reference): and its fingerprint
    assert settings["input.rms_reference.name"] == "binary16" and "input.rms_reference.type" in settings


def test_preemption_guard_raises_once_and_restores_the_prior_handler():
    from fixedcode_study.training.resume import PreemptionGuard, Preempted

    before = signal.getsignal(signal.SIGUSR1)
    with PreemptionGuard(("SIGUSR1",)) as guard:
        with pytest.raises(Preempted) as stop:
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(1)
        assert stop.value.code == 143 and stop.value.step is None
        os.kill(os.getpid(), signal.SIGUSR1)  # a second signal (e.g. forwarded by a sweep) is absorbed
        time.sleep(0.1)
        assert guard.fired
    assert signal.getsignal(signal.SIGUSR1) == before
