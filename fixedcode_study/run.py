"""Hydra entry point: `python -m fixedcode_study.run [-m] [overrides]`.

Thin by design: compose the config, skip jobs that already completed, call `train_job`.
Re-running a command is always safe: completed jobs are skipped, interrupted ones resume from
their last checkpoint, missing ones run. In a sweep (-m) a failing job is recorded as failed and
the sweep goes on; at the end a summary lists every job's outcome and the process exits 1 when
any failed. A bad setting stops with one line naming the field. A preempted job (SIGTERM) saves
a checkpoint and exits 143 at once, so a scheduler can requeue the same command.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.fabric.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from .config import CONFIG_DIR
from .errors import ConfigError
from .record.jobdir import JobBusy, JobDir
from .training.job import evaluate_into, train_job, wants_eval
from .training.resume import Preempted

COMPLETED: list[str] = []
FAILED: list[tuple[str, str]] = []
SKIPPED: list[str] = []


def say(message: str, err: bool = False) -> None:
    if rank_zero_only.rank == 0:  # ranks > 0 of a distributed job run this too; one voice is enough
        print(message, file=sys.stderr if err else sys.stdout, flush=True)


@contextmanager
def job_lock(job: JobDir):
    """The job directory's lock, held by rank 0 only (other ranks of a distributed job follow it)."""
    if rank_zero_only.rank != 0:
        yield
        return
    with job.lock():
        yield


# Evaluation settings that change the numbers; a stored result with other values is stale.
_EVAL_IDENTITY = ("num_fewshot", "limit", "data_dir", "dtype")


def _needs_eval(record: dict, cfg: DictConfig) -> bool:
    from .evaluation.harness import eval_settings

    done = record.get("eval") or {}
    if "error" in done or done.get("name") != cfg.eval.name:
        return True
    wanted, have = eval_settings(cfg.eval), done.get("settings", {})
    return (sorted(wanted["tasks"]) != sorted(done.get("tasks", {}))
            or any(wanted.get(k) != have.get(k) for k in _EVAL_IDENTITY))


def _evaluate_completed(job: JobDir, record: dict, cfg: DictConfig) -> float:
    """A finished job asked for an evaluation it lacks: evaluate its final weights, no retraining."""
    say(f"[run] {job.name} already trained; running eval={cfg.eval.name} on its final checkpoint")
    record["eval"] = evaluate_into(job.path / record["checkpoint"], cfg, prepared_root=None)
    job.write_results(record)
    if "error" in record["eval"]:
        FAILED.append((str(job.path), f"eval: {record['eval']['error']}"))
    else:
        COMPLETED.append(str(job.path))
    return record["final"]["val_loss"]


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    job = JobDir(hc.runtime.output_dir)
    job_dir = job.path
    multirun = hc.mode == RunMode.MULTIRUN
    if job.is_completed() and not cfg.force:
        record = job.read_results()
        if wants_eval(cfg) and _needs_eval(record, cfg):
            return _evaluate_completed(job, record, cfg)
        say(f"[run] {job_dir} already completed; skipping (force=true re-runs it)")
        SKIPPED.append(str(job_dir))
        return record["final"]["val_loss"]
    try:
        with job_lock(job):
            record = train_job(cfg, job_dir, list(hc.overrides.task))
    except JobBusy as busy:
        FAILED.append((str(job_dir), str(busy)))
        say(f"[run] job {job_dir.name}: {busy}", err=True)
        if not multirun:
            sys.exit(1)
        return None
    except Preempted as stop:
        say(f"[run] job {job_dir.name} {stop}", err=True)
        raise  # exits 143; a sweep stops here too (its allocation is going away)
    except ConfigError as err:
        if not multirun:
            say(f"error: {err}", err=True)
            sys.exit(2)
        FAILED.append((str(job_dir), str(err)))
        say(f"[run] job {job_dir.name} failed: {err}", err=True)
        return None
    except Exception as err:
        if not multirun:
            raise
        FAILED.append((str(job_dir), f"{type(err).__name__}: {err}".splitlines()[0]))
        say(f"[run] job {job_dir.name} failed: {type(err).__name__}: {err}", err=True)
        return None
    COMPLETED.append(str(job_dir))
    final = record["final"]
    resumed = f", resumed from step {record['resumed_from_step']}" if record.get("resumed_from_step") else ""
    say(f"[run] {job_dir.name}: val_loss={final['val_loss']:.4f} val_ppl={final['val_ppl']:.2f} "
        f"val_bpb={final['val_bpb']:.4f} ({record['tokens_per_second']:.0f} tokens/s{resumed}) -> {job_dir}")
    return final["val_loss"]


def cli() -> None:
    main()
    if SKIPPED:
        say(f"[run] {len(SKIPPED)} job(s) were already complete and skipped")
    if len(COMPLETED) + len(SKIPPED) + len(FAILED) > 1:
        say(f"[run] summary: {len(COMPLETED)} ran, {len(SKIPPED)} skipped as complete, {len(FAILED)} failed")
    if FAILED:
        say(f"[run] {len(FAILED)} job(s) failed:", err=True)
        for job, why in FAILED:
            say(f"  {job}: {why}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    cli()
