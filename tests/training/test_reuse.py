"""Never train the same job twice: a completed job of another study with the same fingerprint is
linked into this study's job directory (record/reuse.py), never retrained.

One tiny source job is trained once per module (study `a`, in process, with W&B offline), and study
`b` reuses it through the command line (`run -m name=b`, run in this process: helpers.cli); every
other test reuses it in process with `run_job`, in the directory the command line would use.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers.cli import Completed, run_cli

from fixedcode_study.config import compose, job_key
from fixedcode_study.record.jobdir import JobDir
from fixedcode_study.record.reuse import adopt_completed, completed_sources
from fixedcode_study.spec import JobSpec
from fixedcode_study.training import job as job_module
from fixedcode_study.training.decide import REUSE, TRAIN, decide
from fixedcode_study.training.job import run_job
from fixedcode_study.training.loggers import read_wandb_log, wandb_logs
from helpers import SMALL_VAL

# 16 optimizer steps, two validations, fp32 (bf16 is emulated, and slow, on CPUs without it).
ARGS = ["model=test_micro", "seed=1", "train.tokens=8192", "train.batch_size=8", "train.val_points=2",
        "train.log_every=2", "train.val_batch_size=128", "trainer.precision=32-true", SMALL_VAL]


class WouldTrain(Exception):
    """Raised instead of training: the job was not reused."""


@pytest.fixture
def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise WouldTrain()

    monkeypatch.setattr(job_module, "_train", refuse)


def cli(args: list[str], cwd: Path) -> Completed:
    # hydra/launcher=basic: one job, in the app's own process (the parallel launcher's workers add seconds)
    return run_cli(["-m", "hydra/launcher=basic", *args], cwd=cwd)


def job_in(root: Path, study: str, extra: tuple[str, ...] = ()) -> tuple[object, JobDir]:
    """The composed config and job directory `run -m name=<study>` would use (Hydra's layout)."""
    logger = [] if any(e.startswith("logger=") for e in extra) else ["logger=csv"]
    overrides = [*ARGS, *extra, *logger, f"name={study}", f"out_root={root}"]
    cfg = compose(overrides)
    return cfg, JobDir(root / "multirun" / study / job_key(overrides, cfg.job_key_ignore))


def results(job: JobDir) -> dict:
    return json.loads(job.results.read_text())


def weights(job: JobDir) -> Path:
    return job.final_checkpoint / "model.safetensors"


def files_of(path: Path) -> dict[str, int]:
    """mtime of every file, except W&B's own debug logs (and their links in wandb/): wandb-core flushes
    them whenever its (separate) process gets to it, also after the job finished."""
    return {str(f.relative_to(path)): f.stat().st_mtime_ns for f in path.rglob("*")
            if f.is_file() and not (f.name.startswith("debug") and f.suffix == ".log")}


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """Study a trains the job (logger=wandb, offline); study b, the same job by another name, reuses it."""
    root = tmp_path_factory.mktemp("studies")
    cfg, source = job_in(root, "a", ("logger=wandb",))
    assert run_job(JobSpec.from_cfg(cfg), source.path).record["status"] == "completed"
    # wandb-core (its own process) may still append to the run's transaction log after finish()
    # returned; its teardown waits for that, so the snapshot is of the finished source.
    import wandb

    wandb.teardown()
    os.environ.pop("WANDB_SERVICE", None)
    before = files_of(source.path)
    reused = cli([*ARGS, "name=b", f"out_root={root}", "logger=csv"], cwd=root)
    assert reused.returncode == 0, reused.stderr[-3000:]
    (copy,) = [JobDir(p) for p in (root / "multirun" / "b").iterdir() if p.is_dir()]
    return {"root": root, "source": source, "reused": copy, "stdout": reused.stdout,
            "output": reused.stdout + reused.stderr, "source_files": before}


def test_a_completed_job_of_another_study_is_linked_not_retrained(studies):
    source, reused = studies["source"], studies["reused"]
    src, rec = results(source), results(reused)
    sha = src["fingerprint"]["sha"]
    assert f"[run] {reused.name}: reusing the completed job {source.path} (same fingerprint {sha[:12]}); " \
           "force=true retrains it" in studies["stdout"]
    assert "train:" not in studies["output"]  # no progress bar: nothing trained
    assert rec["status"] == "completed" and rec["sweep"] == "b" and rec["config"]["name"] == "b"
    assert rec["job_dir"] == str(reused.path.resolve()) and rec["job_key"] == reused.name
    assert rec["reused_from"] == {"job_dir": str(source.path.resolve()), "sweep": "a", "fingerprint": sha,
                                  "finished_at": src["finished_at"], "link": "hardlink"}
    # the trained model's facts are the source's; its identity and W&B run are this study's own
    for key in ("fingerprint", "final", "train_seconds", "tokens_per_second", "params", "input_props", "data",
                "runtime", "plan", "steps", "tokens_seen", "init"):
        assert rec[key] == src[key], key
    assert rec["wandb_id"] != src["wandb_id"] and rec["attempts"] == 1 and "eval" not in rec
    assert os.path.samefile(weights(reused), weights(source)) and weights(source).stat().st_nlink >= 2
    assert {f.name for f in reused.final_checkpoint.iterdir()} == {f.name for f in source.final_checkpoint.iterdir()}
    assert reused.metrics.read_bytes() == source.metrics.read_bytes()
    assert not reused.last_checkpoint.exists() and not reused.wandb_dir.exists()  # logger=csv here
    assert files_of(source.path) == studies["source_files"]  # nothing of the source was touched
    # The same command again: completed, skipped.
    cfg, job = job_in(studies["root"], "b")
    assert job.path == reused.path and run_job(JobSpec.from_cfg(cfg), job.path).action == "skipped"


def test_another_setting_is_not_reused(studies, no_training):
    for extra in (("seed=2",), ("train.tokens=4096",), ("optim.lr=0.001",)):
        cfg, job = job_in(studies["root"], "c", extra)
        with pytest.raises(WouldTrain):
            run_job(JobSpec.from_cfg(cfg), job.path)
        assert not job.results.exists()


def test_a_job_that_keeps_snapshots_is_trained_not_reused(studies, no_training):
    # keep_every_steps is not a setting that changes a number (same fingerprint), but a reuse links the
    # final weights only: the job would be `completed` without the snapshots it was asked to keep.
    cfg, job = job_in(studies["root"], "snapshots", ("checkpoint.keep_every_steps=4",))
    spec = JobSpec.from_cfg(cfg)
    assert spec.fingerprint["sha"] == results(studies["source"])["fingerprint"]["sha"]
    assert decide(spec, job).action == TRAIN
    with pytest.raises(WouldTrain):
        run_job(spec, job.path)
    assert not job.results.exists()


def test_reuse_false_and_force_true_train(studies, no_training):
    cfg, job = job_in(studies["root"], "d", ("reuse=false",))
    assert cfg.reuse is False and "reuse" not in job.name  # reuse= is out of the job key and the fingerprint
    with pytest.raises(WouldTrain):
        run_job(JobSpec.from_cfg(cfg), job.path)
    cfg, job = job_in(studies["root"], "d2", ("force=true",))
    with pytest.raises(WouldTrain):
        run_job(JobSpec.from_cfg(cfg), job.path)
    assert not job.results.exists() and not job.final_checkpoint.exists()


@pytest.mark.slow  # trains the job again: the decision is covered above, CPU determinism in test_run
def test_reuse_false_really_retrains_to_the_same_numbers(studies):
    cfg, job = job_in(studies["root"], "e", ("reuse=false",))
    outcome = run_job(JobSpec.from_cfg(cfg), job.path)
    rec = outcome.record
    assert outcome.action == "trained" and rec["status"] == "completed" and "reused_from" not in rec
    assert not os.path.samefile(weights(job), weights(studies["source"]))
    assert rec["final"] == results(studies["source"])["final"]  # CPU: the same computation, bit for bit


def test_only_completed_trained_sources_count(studies, tmp_path, no_training):
    source, sha = studies["source"], results(studies["source"])["fingerprint"]["sha"]
    for study, change in {"failed": {"status": "failed"}, "running": {"status": "running"},
                          "evalfailed": {"status": "eval_failed"}, "other": {"fingerprint": {"sha": "0" * 64}},
                          "noweights": {}}.items():
        copy = JobDir(tmp_path / "multirun" / study / source.name)
        shutil.copytree(source.path, copy.path)
        copy.write_results({**results(copy), **change})
        if study == "noweights":
            weights(copy).unlink()
    assert completed_sources(tmp_path, sha) == []
    cfg, job = job_in(tmp_path, "new")
    with pytest.raises(WouldTrain):
        run_job(JobSpec.from_cfg(cfg), job.path)
    # ... while a completed copy is found, also in the single-run layout (runs/<name>/<key>/)
    shutil.copytree(source.path, tmp_path / "runs" / "single" / source.name)
    assert [j.path for j, _, _ in completed_sources(tmp_path, sha)] == [(tmp_path / "runs" / "single" / source.name)]


def test_a_reuse_is_followed_to_its_original_and_outlives_it(studies, tmp_path):
    # in the module's tree: b is a reuse of a, so a third study links a
    cfg, job = job_in(studies["root"], "f")
    assert run_job(JobSpec.from_cfg(cfg), job.path).action == "reused"
    assert results(job)["reused_from"]["job_dir"] == str(studies["source"].path.resolve())
    # in a tree of its own: x trains (a copy), y reuses x, then x is deleted
    x = JobDir(tmp_path / "multirun" / "x" / studies["source"].name)
    shutil.copytree(studies["source"].path, x.path)
    cfg, y = job_in(tmp_path, "y")
    assert run_job(JobSpec.from_cfg(cfg), y.path).action == "reused"
    data = weights(y).read_bytes()
    shutil.rmtree(tmp_path / "multirun" / "x")
    assert y.is_completed() and weights(y).read_bytes() == data and weights(y).stat().st_nlink == 1
    assert run_job(JobSpec.from_cfg(cfg), y.path).action == "skipped"
    # with the original gone, the reuse itself is the source, and the record says where it came from
    cfg, z = job_in(tmp_path, "z")
    assert run_job(JobSpec.from_cfg(cfg), z.path).action == "reused"
    via = results(z)["reused_from"]
    assert via["job_dir"] == str(y.path.resolve()) and via["original"]["job_dir"] == str(x.path.resolve())
    assert os.path.samefile(weights(z), weights(y))


def test_a_kill_before_the_record_leaves_no_result_and_the_next_run_adopts(studies, tmp_path, monkeypatch):
    shutil.copytree(studies["source"].path, tmp_path / "multirun" / "a" / studies["source"].name)
    cfg, job = job_in(tmp_path, "k")

    class Killed(BaseException):
        pass

    def killed(self, record):
        raise Killed()

    with monkeypatch.context() as patch:
        patch.setattr(JobDir, "write_results", killed)
        with pytest.raises(Killed):
            run_job(JobSpec.from_cfg(cfg), job.path)
    assert weights(job).exists() and job.metrics.exists()  # placed, but no record: not a result
    assert not job.results.exists() and not job.is_completed()
    outcome = run_job(JobSpec.from_cfg(cfg), job.path)
    assert outcome.action == "reused" and job.is_completed()


def test_other_ranks_decide_the_same_without_touching_files(studies, tmp_path, monkeypatch):
    from fixedcode_study.record import reuse

    cfg, job = job_in(studies["root"], "rank1")
    spec = JobSpec.from_cfg(cfg)
    decision = decide(spec, job)
    assert decision.action == REUSE and decision.sources[0][0].path == studies["source"].path.resolve()
    monkeypatch.setattr(reuse.rank_zero_only, "rank", 1)
    identity = {"sweep": spec.name, "overrides": [], "config": spec.record_config(), "spec": spec.to_json()}
    record = adopt_completed(job, decision.sources, identity, spec.config_yaml())
    assert record["reused_from"]["job_dir"] == str(studies["source"].path.resolve())
    assert record["spec"] == spec.to_json() and record["config"] == spec.record_config()  # this job's, not the source's
    assert not job.path.exists()
    cfg.reuse = False
    assert decide(JobSpec.from_cfg(cfg), job).action == TRAIN  # reuse=false: trained here


def _csv_points(job: JobDir) -> dict[tuple[int, str], float]:
    with open(job.metrics, newline="") as fh:
        return {(int(r["step"]), r["metric"]): float(r["value"]) for r in csv.DictReader(fh)}


def test_a_reused_job_gets_its_own_wandb_run_with_the_curves(studies):
    source = studies["source"]
    src = results(source)
    source_runs = files_of(source.wandb_dir)
    cfg, job = job_in(studies["root"], "w", ("logger=wandb",))
    outcome = run_job(JobSpec.from_cfg(cfg), job.path)
    rec = outcome.record
    assert outcome.action == "reused" and rec["status"] == "completed" and rec["wandb_id"] != src["wandb_id"]
    assert len(wandb_logs(job.wandb_dir, rec["wandb_id"])) == 1
    history, summary = read_wandb_log(job.wandb_dir, rec["wandb_id"])
    internal = {"_step", "_runtime", "_timestamp", "tokens", "trainer/global_step"}
    points = {(int(row["_step"]), k): float(v) for row in history for k, v in row.items()
              if k not in internal and not k.startswith("_")}
    assert points == _csv_points(job) == _csv_points(source)
    assert summary["results"]["reused_from"]["job_dir"] == str(source.path.resolve())
    assert files_of(source.wandb_dir) == source_runs  # the source's W&B run is untouched


def test_eval_on_a_reused_job_evaluates_it_in_its_own_directory(studies):
    source = studies["source"]
    cfg, job = job_in(studies["root"], "ev", ("eval=builtin", "eval.limit=4", "eval.bootstrap_iters=0"))
    outcome = run_job(JobSpec.from_cfg(cfg), job.path)
    rec = outcome.record
    assert outcome.action == "reused" and rec["status"] == "completed", rec.get("eval")
    assert rec["reused_from"]["job_dir"] == str(source.path.resolve())
    assert Path(rec["eval"]["checkpoint"]) == job.final_checkpoint
    assert sorted(rec["eval"]["tasks"]) == ["fixedcode_heldout_lastword", "fixedcode_heldout_lastword_choice", "fixedcode_heldout_ppl"]
    assert (job.final_checkpoint / "eval-builtin.json").exists()
    assert not (source.final_checkpoint / "eval-builtin.json").exists() and "eval" not in results(source)
    assert os.path.samefile(weights(job), weights(source))


def test_analysis_counts_a_job_and_its_reuse_once(studies):
    from fixedcode_study.analysis.read.runs import load_run_dirs

    root = studies["root"] / "multirun"
    study = load_run_dirs([root / "a", root / "b"])
    included = study.included_jobs
    assert len(included) == 1 and included["sweep"].tolist() == ["a"]  # the job that trained is kept
    (excluded,) = study.excluded_jobs["reason"].tolist()
    assert "counted once" in excluded
    assert study.jobs.set_index("sweep").loc["b", "reused_from"] == str(studies["source"].path.resolve())
    alone = load_run_dirs([root / "b"])
    assert any("reuses a completed job" in note for note in alone.notes)


def _wandb_config(job: JobDir, run_id: str) -> dict:
    """The run config W&B holds for `run_id` (every attempt's config records, the last value wins)."""
    from fixedcode_study.training.loggers import wandb_records

    config: dict = {}
    for record in wandb_records(job.wandb_dir, run_id):  # `wandb leet inspect --json`: decoded values
        update = (record.get(record.get("type")) or {}).get("config", {}).get("update") \
            if record.get("type") == "run" else (record.get("config") or {}).get("update")
        config.update(update or {})
    return config


def test_evaluating_a_finished_job_puts_its_eval_settings_in_the_record_and_the_wandb_config(studies):
    cfg, job = job_in(studies["root"], "we", ("logger=wandb",))
    assert run_job(JobSpec.from_cfg(cfg), job.path).action == "reused" and results(job)["config"]["eval"]["name"] == "none"
    cfg, _ = job_in(studies["root"], "we", ("logger=wandb", "eval=builtin", "eval.limit=4", "eval.bootstrap_iters=0"))
    outcome = run_job(JobSpec.from_cfg(cfg), job.path)
    assert outcome.action == "evaluated" and outcome.record["status"] == "completed"
    rec = results(job)
    assert rec["config"]["eval"]["name"] == "builtin" and rec["config"]["eval"]["limit"] == 4
    assert rec["eval"]["settings"]["limit"] == 4  # the record's config and its eval say the same
    wandb_config = _wandb_config(job, rec["wandb_id"])
    assert wandb_config["eval"] == rec["config"]["eval"]  # W&B shows what results.json says
