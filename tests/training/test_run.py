"""End to end: the Hydra app trains real (tiny) models and writes complete, reproducible results.

The README's sweep (`python -m fixedcode_study.run -m input=learned,binary16,gf2 ...`, the default
parallel launcher) and one bad setting run as a user runs them, in a subprocess; the other command
lines run in this process (helpers.cli), which gives the same exit code, output and job directory.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SMALL_VAL
from helpers.cli import run_cli

from fixedcode_study.config import compose as compose_config
from fixedcode_study.config import job_key
from fixedcode_study.spec import JobSpec
from fixedcode_study.training.job import run_job

TINY = ["model=test_micro", "train.tokens=16384", "train.val_points=3", "train.log_every=2", "train.val_batch_size=64",
        SMALL_VAL]
REQUIRED = ["input", "seed", "model", "code_width", "params", "final", "tokens_seen", "train_seconds",
            "tokens_per_second", "status", "overrides", "config", "input_props", "data", "checkpoint"]


def run_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixedcode_study.run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def metric_rows(job: Path, metric: str) -> list[float]:
    with open(job / "metrics.csv") as fh:
        return [float(r["value"]) for r in csv.DictReader(fh) if r["metric"] == metric]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep")
    proc = run_process(["-m", "input=learned,binary16,gf2", *TINY, f"out_root={out}", "name=e2e"], cwd=out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "multirun" / "e2e"


@pytest.mark.slow
def test_multirun_writes_one_complete_result_per_job(sweep):
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    # directories are keyed by the sorted override set, not by time or job number (past 120
    # characters: its first 100 and a hash)
    keys = [",".join(sorted([f"input={i}", *TINY])) for i in ("binary16", "gf2", "learned")]
    assert [j.name[:100] for j in jobs] == [k[:100] for k in keys]
    assert [j.name for j in jobs] == [job_key(k.split(",")) for k in keys]
    for job in jobs:
        res = json.loads((job / "results.json").read_text())
        assert res["status"] == "completed", res.get("error")
        missing = [k for k in REQUIRED if k not in res]
        assert not missing, missing
        assert set(res["params"]) >= {"total", "trainable", "input_trainable", "body", "head"}
        assert set(res["final"]) >= {"val_loss", "val_ppl", "val_bpb"}
        assert res["tokens_seen"] == 16384 and res["model"] == "test_micro" and res["seed"] == 1
        assert math.isclose(res["final"]["val_ppl"], math.exp(res["final"]["val_loss"]), rel_tol=1e-9)
        assert res["params"]["input_trainable"] == (512 * 64 if res["input"] == "learned" else 0)
        assert res["code_width"] == (None if res["input"] == "learned" else 16)
        assert res["overrides"][0] == f"input={res['input']}" and job.name == res["job_key"]
        ckpt = job / res["checkpoint"]
        assert (ckpt / "model.safetensors").stat().st_size > 0 and (ckpt / "tokenizer.json").exists()
        assert json.loads((ckpt / "config.json").read_text())["input"]["name"] == res["input"]
    assert len(list(sweep.glob("*input=gf2,*/gf2_matrix.json"))) == 1


@pytest.mark.slow
def test_training_reduces_loss_for_every_input(sweep):
    for job in sweep.iterdir():
        if not job.is_dir():
            continue
        train = metric_rows(job, "train/loss")
        val = metric_rows(job, "val/loss")
        assert len(train) >= 4 and len(val) >= 2
        assert train[-1] < train[0] - 0.5, (job.name, train)
        assert val[-1] < math.log(512) - 0.5, (job.name, val)


@pytest.mark.slow
def test_each_job_gets_its_own_offline_wandb_run(sweep):
    run_ids = set()
    for job in (p for p in sweep.iterdir() if p.is_dir()):
        runs = list((job / "wandb").glob("offline-run-*"))
        assert len(runs) == 1, (job.name, runs)
        assert list(runs[0].glob("*.wandb")), "no offline W&B log written"
        run_ids.add(runs[0].name.rsplit("-", 1)[-1])
    assert len(run_ids) == 3


def train_in_process(tmp_path: Path, seed: int, name: str) -> dict:
    cfg = compose_config([*TINY, "logger=csv", f"seed={seed}", "input=gf2", "train.tokens=8192"])
    return run_job(JobSpec.from_cfg(cfg), tmp_path / name).record


def test_same_seed_same_numbers_different_seed_different(tmp_path):
    a = train_in_process(tmp_path, 0, "a")  # seed 0 is a real seed, not "unset"
    b = train_in_process(tmp_path, 0, "b")
    c = train_in_process(tmp_path, 1, "c")
    assert a["seed"] == 0 and a["config"]["seed"] == 0
    assert a["final"] == b["final"]
    assert metric_rows(tmp_path / "a", "train/loss") == metric_rows(tmp_path / "b", "train/loss")
    assert a["final"]["val_loss"] != c["final"]["val_loss"]


@pytest.mark.parametrize(
    "override, field",
    [("input.type=embedding", "input.type"), ("input.code_width=4", "input.code_width"),
     ("model.d_model=8", "model.d_model")],
)
def test_bad_configuration_stops_with_one_line(tmp_path, override, field):
    proc = run_cli(["input=binary16", *TINY, "logger=csv", f"out_root={tmp_path}", override], cwd=tmp_path)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert lines[-1].startswith(f"error: {field}:"), proc.stderr[-2000:]
    assert sum(ln.startswith("error:") for ln in lines) == 1


@pytest.mark.slow
def test_bad_configuration_from_the_real_command_line_is_one_line_and_exit_2(tmp_path):
    """The process itself: nothing else on stderr (no warning, no traceback), exit status 2, no record."""
    proc = run_process(["input=binary16", *TINY, "logger=csv", f"out_root={tmp_path}", "optim.lr=nan"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: optim.lr:"), proc.stderr[-2000:]
    assert not list(tmp_path.glob("**/results.json"))


def test_eval_after_training_and_on_a_finished_job(tmp_path):
    """eval= runs lm-eval on the final weights; adding it to a finished job evaluates without retraining."""
    shorter = [a for a in TINY if not a.startswith("train.tokens=")] + ["train.tokens=4096"]  # size is not the point
    common = ["input=gf2", *shorter, "logger=csv", f"out_root={tmp_path}", "name=evaljob"]
    assert run_cli(common, cwd=tmp_path).returncode == 0
    job = next((tmp_path / "runs" / "evaljob").iterdir())
    before = (job / "metrics.csv").read_text()
    trained = json.loads((job / "results.json").read_text())
    assert "eval" not in trained
    proc = run_cli([*common, "eval=builtin", "eval.limit=4"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "running eval=builtin on its final checkpoint" in proc.stdout
    res = json.loads((job / "results.json").read_text())
    assert (job / "metrics.csv").read_text() == before and res["final"] == trained["final"]  # no retraining
    tasks = res["eval"]["tasks"]
    assert res["eval"]["name"] == "builtin" and "error" not in res["eval"]
    assert tasks["fixedcode_heldout_ppl"]["word_perplexity"] > 1
    assert 0 <= tasks["fixedcode_heldout_lastword"]["acc"] <= 1
    again = run_cli([*common, "eval=builtin", "eval.limit=4"], cwd=tmp_path)
    assert "already completed; skipping" in again.stdout


def test_a_job_from_the_command_line_composes_once_resolves_once_and_is_evaluated_in_memory(tmp_path, monkeypatch):
    """`run` with eval=: Hydra's compose is the only compose, the JobSpec is resolved once (gaussian16
    names binary16: conf/input/binary16.yaml is read once, by that resolution), and the trained model
    is evaluated as it is in memory: no weights file is read back during the job. Counted by wrapping
    the real functions (each still runs)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    from fixedcode_study import config
    from fixedcode_study.record import checkpoint

    calls: dict[str, int] = {}

    def counted(owner, name, key):
        real = getattr(owner, name)

        def spy(*args, **kwargs):
            calls[key] = calls.get(key, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(owner, name, spy)

    counted(ConfigLoaderImpl, "load_configuration", "hydra compose")
    counted(config, "compose", "config.compose")
    counted(config, "load_option", "conf/ option read")
    counted(checkpoint, "load_file", "weights read from disk")
    real_from_cfg = JobSpec.from_cfg.__func__
    monkeypatch.setattr(JobSpec, "from_cfg", classmethod(lambda cls, cfg: (
        calls.__setitem__("JobSpec.from_cfg", calls.get("JobSpec.from_cfg", 0) + 1), real_from_cfg(cls, cfg))[1]))
    shorter = [a for a in TINY if not a.startswith("train.tokens=")] + ["train.tokens=2048"]
    proc = run_cli(["input=gaussian16", *shorter, "logger=csv", f"out_root={tmp_path}", "eval=builtin", "eval.limit=2",
                    "eval.bootstrap_iters=0"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert calls == {"hydra compose": 1, "JobSpec.from_cfg": 1, "conf/ option read": 1}, calls
    (job,) = (tmp_path / "runs" / "main").iterdir()
    res = json.loads((job / "results.json").read_text())
    assert res["status"] == "completed" and res["eval"]["model_spec"] == "stored"
    assert JobSpec.from_json(res["spec"]).fingerprint == res["fingerprint"]  # the resolved spec is the record's
    assert res["spec"]["model"]["input"]["rms_reference"]["name"] == "binary16"  # stored resolved, not by name
    assert res["config"]["input"]["rms_reference"] == "binary16"  # the config as composed


def test_job_key_ignores_settings_that_do_not_change_the_computation():
    from fixedcode_study.config import job_key

    ignore = compose_config([]).job_key_ignore
    base = job_key(["seed=1", "input=gf2"], ignore)
    assert base == "input=gf2,seed=1"
    noisy = ["input=gf2", "eval=paper", "eval.dtype=bfloat16", "eval.limit=5", "checkpoint.every_steps=8",
             "logger=csv", "hydra/launcher=slurm_gpu", "name=x", "seed=1"]
    assert job_key(noisy, ignore) == base
    assert job_key(["input=gf2", "seed=1", "evaluation_seed=3"], ignore) != base  # a prefix, not a substring
    assert job_key([], ignore) == "defaults"
    long = job_key([f"data.paths=[/very/long/path/{i}]" for i in range(10)], ignore)
    assert "/" not in long and len(long) <= 111


def test_a_job_locked_by_another_process_is_not_started(tmp_path):
    import fcntl

    from fixedcode_study.record.jobdir import JobBusy, JobDir

    job = JobDir(tmp_path / "job")
    lock_file = job.path / ".lock"
    with job.lock():
        with open(lock_file) as other:  # a second open file description, as another process has
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with job.lock():  # released on exit: the next attempt gets it
        pass
    holder = open(lock_file, "a+")
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        with pytest.raises(JobBusy, match="running in another process"):
            with job.lock():
                pass
    finally:
        holder.close()
