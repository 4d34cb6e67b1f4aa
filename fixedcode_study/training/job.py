"""One job, start to finish, under its lock: decide -> (train | evaluate | skip) -> results.json.

`run_job` is what the Hydra app calls per job (`train_job` is the same, returning the record); it
is plain Python so tests and other launchers can call it with a composed config or a JobSpec. It

  0. takes the job's resolved spec (spec/job.py: every setting validated, the model as built, the
     batch plan, the validation schedule, the runtime decisions and the fingerprint), resolved
     once before the job directory is touched; nothing here reads the raw config again;
  1. takes the job lock (rank 0), then decides from the record on disk:
       - trained before under another fingerprint, or a last.ckpt from other settings: refused,
         naming the keys that differ (force=true retrains from scratch);
       - completed, and any requested evaluation recorded with today's settings: skipped;
       - trained (final weights saved) but not completed, or a new evaluation is asked: the
         remaining work only (W&B catch-up, evaluation), never a second training;
       - otherwise: train, resuming from last.ckpt when a previous attempt left one;
  2. training: seed, batch plan, model, W&B run, data, trainer, fit, final validation, final
     weights, then the optional lm-eval suite; `completed` only when all of it succeeded, and
     `eval_failed` (non-zero exit) when only the evaluation did not.

SIGTERM/SIGUSR1/SIGUSR2 at any phase leave status `preempted` and exit 143 (training/resume.py).
A write that finds no room (full disk, quota, file size limit, read-only filesystem) leaves status
`failed` and raises errors.WriteFailed: one line naming the path and where a re-run resumes.
Distributed runs execute this on every rank; only global rank 0 writes the record (results.json,
config.yaml, metrics.csv, W&B; layout in record/jobdir.py).
"""

from __future__ import annotations

import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.fabric.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from ..accounting import parameter_groups
from ..build import build_decoder
from ..data.batches import TokenDataModule
from ..data.prepare import prepare
from ..errors import WRITE_REMEDIES, ConfigError, WriteFailed
from ..record import atomic
from ..record.checkpoint import save_checkpoint
from ..record.fingerprint import differences
from ..record.reuse import adopt_completed
from ..record.jobdir import (
    COMPLETED,
    EVAL_FAILED,
    FAILED,
    PREEMPTED,
    RUNNING,
    SCHEMA_VERSION,
    JobDir,
    versions,
)
from ..console import JobProgressBar, attempt_header, say, terminal_stdout
from ..spec import JobSpec
from ..spec.evaluation import EVAL_IDENTITY
from ..spec.plan import BatchPlan
from ..spec.runtime import device_kind
from .loggers import LongCSVLogger, WandbMirror
from .resume import (
    PREEMPT_EXIT_CODE,
    PreemptionGuard,
    Preempted,
    ResumableCheckpoint,
    checkpoint_fingerprint,
    checkpoint_step,
    trim_metrics,
)
from .schedule import ValidationSchedule
from .breakdown import build_breakdown
from .speed import apply_threads, compile_model
from .task import BREAKDOWN_SUMS, BREAKDOWN_TOTAL, LanguageModelTask

__all__ = ["JobOutcome", "base_record", "compiles", "evaluate_into", "job_fingerprint", "run_job", "train_job",
           "wants_eval"]


@dataclass
class JobOutcome:
    action: str              # "trained" | "evaluated" | "skipped" | "reused"
    record: dict[str, Any]   # the job's results.json as it now stands

    @property
    def ok(self) -> bool:
        return self.record.get("status") == COMPLETED


def base_record(spec: JobSpec, job: JobDir, overrides: list[str]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "status": RUNNING,
        "error": None,
        "sweep": spec.name,
        "job_key": job.name,
        "job_dir": str(job.path.resolve()),
        "input": spec.input_name,
        "output": spec.output_name,
        "seed": spec.seed,
        "model": spec.model_name,
        "code_width": spec.code_width,
        "overrides": list(overrides),
        "config": spec.record_config(),
        "versions": versions(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


class Recorder:
    """results.json and its W&B mirror, written together (rank 0 only; a no-op elsewhere)."""

    def __init__(self, job: JobDir, record: dict[str, Any], is_zero: bool):
        self.job, self.record, self.is_zero = job, record, is_zero
        self.mirror: WandbMirror | None = None

    def write(self, **updates: Any) -> None:
        self.record.update(updates)
        if not self.is_zero:
            return
        self.job.write_results(self.record)
        self._mirror("sync_record", self.record)

    def _mirror(self, method: str, *args: Any) -> None:
        """W&B is a copy: when its service is gone (it gets the same SIGTERM as the job), say so
        and go on; results.json stays the truth and the next sync or re-run catches up."""
        if self.mirror is None:
            return
        try:
            getattr(self.mirror, method)(*args)
        except Exception as err:  # noqa: BLE001 - a preemption (SystemExit) still propagates
            why = f"{type(err).__name__}: {err}".splitlines()[0]
            say(f"[wandb] {method} failed ({why}); the record on disk is unaffected")

    def open_mirror(self, spec: JobSpec, config: dict[str, Any]) -> None:
        """The job's W&B run (id from the record), when the logger settings ask for one."""
        if not (self.is_zero and spec.wandb):
            return
        self.mirror = WandbMirror(
            spec.wandb, self.job, run_id=self.record["wandb_id"], run_name=f"{spec.name}/{self.job.name}",
            group=spec.name, job_type=spec.input_name,
            tags=[f"input:{spec.input_name}", f"seed:{spec.seed}", f"model:{spec.model_name}"],
            config=config)

    def sync_history(self, upto: int | None = None) -> None:
        self._mirror("sync_history", upto)

    def close(self) -> None:
        self._mirror("finish", self.record.get("status") == COMPLETED)
        self.mirror = None

    def stopped(self, err: BaseException) -> None:
        """Record why the job stopped: a signal is `preempted`, anything else `failed`."""
        # Under ddp_spawn a preempted worker reaches us as torch's ProcessExitedException carrying
        # the preemption exit status: it is still a preemption (checkpoint written), not a failure.
        preempted = isinstance(err, Preempted) or getattr(err, "exit_code", None) == PREEMPT_EXIT_CODE
        try:
            self.write(status=PREEMPTED if preempted else FAILED, error=f"{type(err).__name__}: {err}".splitlines()[0],
                       finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        except WriteFailed:
            pass  # the disk is still full: the job's own error (about to be raised) says so


def _write_failure(err: BaseException, job: JobDir) -> WriteFailed | None:
    """A write that found no room, as the one line the job records and the terminal shows: the path,
    the reason, and what a re-run after the fix does. None for any other error."""
    if not isinstance(err, OSError) or err.errno not in WRITE_REMEDIES:
        return None
    path = err.filename or job.path  # a bare OSError (an append to metrics.csv): the job directory
    if job.is_trained():
        again = "re-run to finish its record"
    else:
        resume = job.resume_point()
        try:
            step = checkpoint_step(resume) if resume is not None else None
        except Exception:  # noqa: BLE001 - an unreadable last.ckpt: the re-run will say so itself
            step = None
        again = (f"re-run to resume from step {step}" if step is not None
                 else "re-run (no checkpoint was saved: it starts from step 0)")
    return WriteFailed(err.errno, path, f"{WRITE_REMEDIES[err.errno]} and {again}")


@contextmanager
def job_lock(job: JobDir) -> Iterator[None]:
    """The job directory's lock, held by rank 0 only (other ranks of a distributed job follow it)."""
    if rank_zero_only.rank != 0:
        yield
        return
    with job.lock():
        yield


def job_fingerprint(cfg: DictConfig, plan: BatchPlan | None = None) -> dict[str, Any]:
    """The fingerprint of a composed config's job (JobSpec.fingerprint). `plan` is accepted for
    older callers; the spec derives the same plan from the same config."""
    return dict(JobSpec.from_cfg(cfg).fingerprint)


def compiles(cfg: DictConfig, plan: BatchPlan | None = None) -> bool:
    """Whether a composed config's job trains a compiled model (JobSpec.runtime.compile: train.compile,
    `auto` by the built model's training FLOPs). `plan`: as in job_fingerprint."""
    return JobSpec.from_cfg(cfg).runtime.compile


def refuse_stale(job: JobDir, previous: Mapping[str, Any] | None, current: Mapping[str, Any], resume: bool) -> None:
    """Stop before reusing anything computed under another fingerprint: trained weights, or the
    checkpoint a resume would continue from. Nothing reused, nothing to refuse."""
    fix = "re-run with force=true to retrain it from scratch, or pass another name= to keep both"
    if previous and job.is_trained(previous):
        what, stored = "trained model", previous.get("fingerprint")
    elif resume and job.resume_point() is not None:
        what, stored = "resume checkpoint", checkpoint_fingerprint(job.last_checkpoint)
    else:
        return
    if stored is None:
        raise ConfigError("force", f"{job.path} holds a {what} recorded without a fingerprint (an older version)", fix)
    diffs = differences(stored, current)
    if diffs:
        raise ConfigError("force", f"{job.path} holds a {what} computed under other settings: {'; '.join(diffs)}", fix)


def wants_eval(spec: JobSpec) -> bool:
    return spec.eval is not None


def needs_eval(record: Mapping[str, Any], spec: JobSpec) -> bool:
    """The requested evaluation is missing, failed, or was run with other settings."""
    done = record.get("eval") or {}
    if "error" in done or done.get("name") != spec.eval_name:
        return True
    wanted, have = spec.eval, done.get("settings", {})
    return (sorted(wanted["tasks"]) != sorted(done.get("tasks", {}))
            or any(wanted.get(k) != have.get(k) for k in EVAL_IDENTITY))


def evaluate_into(ckpt: Path, spec: JobSpec, prepared_root: Path | None) -> dict[str, Any]:
    """Run the configured lm-eval suite on the final weights; the record for results.json "eval".

    An evaluation error does not undo a finished training run: it is recorded as {"error": ...},
    the job becomes `eval_failed`, and a re-run of the same command retries only the evaluation.
    A preemption is not an evaluation error: it propagates.
    """
    from ..evaluation.harness import evaluate_checkpoint

    try:
        result = evaluate_checkpoint(ckpt, spec.eval, prepared_root=prepared_root)
    except Exception as err:  # noqa: BLE001 - keep the trained model and its validation numbers
        say(f"[eval] {spec.eval_name} failed on {ckpt}: {type(err).__name__}: {err}".splitlines()[0])
        return {"name": spec.eval_name, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    result["name"] = spec.eval_name
    return result


def _eval_status(record: Mapping[str, Any]) -> str:
    return EVAL_FAILED if "error" in (record.get("eval") or {}) else COMPLETED


def run_job(cfg: DictConfig | JobSpec, job_dir: str | Path, overrides: list[str] | None = None) -> JobOutcome:
    """Lock, decide and do one job (see the module docstring); a composed config is resolved first."""
    job = JobDir(job_dir)
    # Bad input stops here, before anything in the job directory is touched: every setting, the batch
    # plan, the validation schedule, the model's shapes and input, the eval suite (spec/job.py).
    spec = cfg if isinstance(cfg, JobSpec) else JobSpec.from_cfg(cfg)
    current = dict(spec.fingerprint)
    with job_lock(job), PreemptionGuard(spec.checkpoint.preempt_signals) as guard:
        previous = job.read_results()
        fresh = spec.force
        if not fresh:
            refuse_stale(job, previous, current, resume=spec.checkpoint.resume)
        try:
            if not fresh and previous and job.is_trained(previous):
                return _finish_trained(spec, job, dict(previous))
            # A completed job of another study with this very fingerprint (settings and training
            # source): linked in, not retrained (record/reuse.py); W&B and evaluation then follow.
            adopted = None if fresh or previous else adopt_completed(job, spec.config_node(), overrides or [], current)
            if adopted is not None:
                return JobOutcome("reused", _finish_trained(spec, job, adopted).record)
            _require_device(spec)  # before the record says `running`: nothing was trained or written
            return JobOutcome("trained", _train(spec, job, overrides or [], spec.plan, current, previous, fresh))
        except Preempted as stop:
            guard.chain(stop.signum)  # e.g. submitit's requeue, now that the record says `preempted`
            raise


def _require_device(spec: JobSpec) -> None:
    """A GPU trainer (trainer=gpu, ddp, fsdp) on a machine torch sees no CUDA device on: one line here,
    not Lightning's exception from inside the Trainer's construction after the record was opened. Only
    where training starts: `sweep --dry-run` and a finished job's evaluation still work on a CPU box."""
    if device_kind(spec.runtime.accelerator) == "cuda" and not torch.cuda.is_available():
        raise ConfigError("trainer.accelerator", f"{spec.runtime.accelerator} asks for a CUDA GPU and torch sees "
                          "none on this machine", "train on a GPU machine, or use trainer=cpu (the default here)")


def train_job(cfg: DictConfig | JobSpec, job_dir: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """`run_job`, returning the job's record (results.json)."""
    return run_job(cfg, job_dir, overrides).record


def _finish_trained(spec: JobSpec, job: JobDir, record: dict[str, Any]) -> JobOutcome:
    """A trained job: skip it, or do only what is left (W&B catch-up, evaluation)."""
    wanted = wants_eval(spec) and needs_eval(record, spec)
    if record.get("status") == COMPLETED and not wanted:
        return JobOutcome("skipped", record)
    is_zero = rank_zero_only.rank == 0
    if not is_zero:
        return JobOutcome("skipped", record)  # evaluation and the record are rank 0's
    rec = Recorder(job, record, is_zero)
    rec.write(status=RUNNING, error=None)
    attempt_header(f"job {job.name}: already trained; " + ("evaluating" if wanted else "finishing its record"))
    try:
        if wanted:  # the evaluation asked for now: the record's config (and W&B's) says what ran
            rec.record["config"] = {**(record.get("config") or {}), "eval": spec.record_config().get("eval")}
        # The run config as training gives it (a reused job opens a new W&B run here).
        rec.open_mirror(spec, {**(rec.record.get("config") or {}), "input_props": record.get("input_props"),
                              "params": record.get("params"), "fingerprint": (record.get("fingerprint") or {}).get("sha")})
        rec.sync_history()  # a stop between the final save and the end left curves unsent
        if wanted:
            say(f"[run] {job.name} already trained; running eval={spec.eval_name} on its final checkpoint")
            rec.record["eval"] = evaluate_into(job.path / record["checkpoint"], spec, prepared_root=None)
        elif not wants_eval(spec) and "error" in (record.get("eval") or {}):
            rec.record.pop("eval")  # the failed evaluation is no longer asked for
        if not spec.checkpoint.keep_last:
            job.drop_resume_state()
        rec.write(status=_eval_status(rec.record), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        return JobOutcome("evaluated" if wanted else "trained", rec.record)
    except BaseException as err:
        failed = _write_failure(err, job)
        rec.stopped(failed or err)
        if failed is not None:
            raise failed from err
        raise
    finally:
        rec.close()


def _train(spec: JobSpec, job: JobDir, overrides: list[str], plan: BatchPlan, current: dict[str, Any],
           previous: Mapping[str, Any] | None, fresh: bool) -> dict[str, Any]:
    """Train one model (resuming when last.ckpt allows); returns the record."""
    # Rank from the launcher's environment (RANK / LOCAL_RANK / SLURM_PROCID); confirmed by the
    # trainer below. Every file write in this function is rank 0's.
    is_zero = rank_zero_only.rank == 0
    ckpt_spec = spec.checkpoint
    # Every rank decides the same way: force=true never resumes, whatever rank 0 has deleted yet.
    ckpt_path = job.resume_point() if ckpt_spec.resume and not fresh else None
    record = base_record(spec, job, overrides)
    record.update(fingerprint=current, plan=plan.as_record())
    rec = Recorder(job, record, is_zero)
    try:
        if is_zero:
            job.path.mkdir(parents=True, exist_ok=True)
            # A new W&B run only when this attempt starts from step 0 over curves W&B already holds.
            old_id = (previous or {}).get("wandb_id")
            new_life = fresh or (ckpt_path is None and bool(old_id) and spec.wandb is not None
                                 and WandbMirror.has_history(job, old_id))
            job.start_attempt(record, previous, new_life=new_life)
        rec.write()  # the new record first: a stop from here on leaves it, never the old life's
        attempt_header(f"job {job.name}: training, attempt {record.get('attempts', '?')}")
        if fresh and is_zero:  # force=true: nothing of an earlier life is kept as resume state or weights
            shutil.rmtree(job.checkpoints, ignore_errors=True)
        # 1. seed and batch plan (resolved before the lock), CPU threads (speed.py)
        apply_threads(spec.runtime.threads)
        rec.write(runtime=spec.runtime.record())
        L.seed_everything(spec.seed, workers=True, verbose=False)
        # 2. model, the one build of this process (after seeding: init depends on the seed only;
        #    built before the data so a bad model fails in seconds rather than after tokenizing a corpus)
        model = build_decoder(spec.model, seed=spec.seed)  # per-group generators (CRN)
        props = model.input.properties()
        params = parameter_groups(model)
        rec.write(input_props=props, output_props=model.head.properties(), params=params,
                  code_width=props.get("code_width"), init=model.init_record(),
                  flops_per_token=spec.model.flops_per_token(plan.seq_len))
        if is_zero:
            if ckpt_path is not None:
                rec.record["resumed_from_step"] = checkpoint_step(ckpt_path)
                trim_metrics(job.metrics, rec.record["resumed_from_step"])
                before = ((previous or {}).get("runtime") or {}).get("threads")
                if before is not None and before != spec.runtime.threads:
                    say(f"[run] {job.name}: resuming at {spec.runtime.threads} threads a run that trained at {before}: "
                        "bitwise equality with an uninterrupted run holds at one thread count only")
                if not spec.runtime.deterministic["bitwise"]:
                    say(f"[run] {job.name}: resuming from step {rec.record['resumed_from_step']}; this runtime is "
                        f"not bitwise deterministic ({spec.runtime.deterministic['reason']}), so the continuation "
                        "equals an uninterrupted run to float tolerance only")
            else:  # an attempt that died before its first checkpoint: keep its curves aside
                job.set_aside_metrics()
            rec.open_mirror(spec, {**record["config"], "input_props": props, "params": params,
                                  "fingerprint": current["sha"]})
            if ckpt_path is not None:
                rec.sync_history(rec.record["resumed_from_step"])  # what the checkpoint covers, once
        # 3. data (its [data] lines, printed only while a corpus is prepared, are ours: on the terminal)
        with terminal_stdout():
            prepared = prepare(spec.data)
        stored_key = ((previous or {}).get("data") or {}).get("cache_key")
        if ckpt_path is not None and stored_key and stored_key != prepared.meta["cache_key"]:
            raise ConfigError("data", f"the checkpoint was trained on data cache {stored_key}, this machine prepared "
                              f"{prepared.meta['cache_key']} (a tokenizer or dataset changed)",
                              "re-run with force=true to retrain on today's data")
        rec.write(data={"name": spec.data["name"], **{k: prepared.meta[k] for k in (
            "vocab_size", "tokenizer_vocab_size", "train_tokens", "val_tokens", "val_bytes",
            "unigram_val_ppl", "split", "cache_key")}})
        # the final validation's loss per bucket (breakdown.py): tables from the uncompiled input
        counts, counted = prepared.train_token_counts()
        breakdown = build_breakdown(counts, counted, counts.size, plan.seq_len, model.input)
        compiled = bool(rec.record["runtime"]["compile"])
        if compiled:  # per block under FSDP (the unit it wraps and gathers), else the whole decoder
            compile_model(model, per_block=spec.runtime.compile_per_block)

        # 4. trainer, and who this process is
        checkpointer = ResumableCheckpoint(
            job, every_steps=ckpt_spec.every_steps, grad_accum=plan.grad_accum,
            keep_every_steps=ckpt_spec.keep_every_steps, preempt_signals=ckpt_spec.preempt_signals,
            fingerprint=current, after_save=rec.sync_history)
        trainer = build_trainer(spec, job.path, [checkpointer])
        _refuse_reexec_in_sweep(trainer)
        is_zero = trainer.is_global_zero
        if _spawns_workers(trainer):
            # Spawned workers cannot reach this process's W&B run: it gets the curves after fit.
            checkpointer.after_save = None

        # 5. config files and the local metrics logger: rank 0 only
        if is_zero:
            if hasattr(model.input, "matrix_record"):
                atomic.write_json(job.gf2_matrix, model.input.matrix_record())
            atomic.write_text(job.config, spec.config_yaml())
        trainer.loggers = [LongCSVLogger(job.metrics)] if is_zero else []

        # 6. fit, resuming from the last checkpoint when a previous attempt left one
        dm = TokenDataModule(prepared, plan.seq_len, plan.micro_batch, spec.seed, spec.val_batch_size,
                             grad_accum=plan.grad_accum)
        task = LanguageModelTask(model, spec.optim, plan.max_steps, plan.tokens_per_step,
                                 torch.from_numpy(prepared.token_bytes()), spec.log_every,
                                 compiled_loss=compiled, breakdown=breakdown)
        t0 = time.time()
        trainer.fit(task, datamodule=dm, ckpt_path=str(ckpt_path) if ckpt_path else None, weights_only=True)
        fit = _summary(trainer)  # via callback_metrics: also right when ranks ran in spawned processes
        steps = int(fit["global_step"])
        if checkpointer.preempt_signum is not None:  # the signal came during the last step
            raise Preempted(None, checkpointer.preempt_signum)
        if trainer.interrupted or steps != plan.max_steps:  # e.g. trainer.max_time: not what was asked
            raise RuntimeError(f"training stopped at step {steps} of {plan.max_steps}; the job is not complete")

        # 7. final validation unless the budget ended on a validation step, which gave the breakdown
        #    too; a run resumed at its last step validates again for the breakdown (the same numbers,
        #    whose curve points metrics.csv already holds: not logged twice)
        if int(fit["last_val_step"]) != steps:
            trainer.validate(task, datamodule=dm, verbose=False)
        elif BREAKDOWN_SUMS not in trainer.callback_metrics:
            task.log_validation = False
            trainer.validate(task, datamodule=dm, verbose=False)
        val = _summary(trainer)
        val_breakdown = breakdown.record(trainer.callback_metrics[BREAKDOWN_SUMS],
                                         trainer.callback_metrics[BREAKDOWN_TOTAL], steps)
        wall = time.time() - t0

        # 8. final weights, then the record says "trained" (a later stop never retrains it)
        final_model = _final_weights(trainer, task, spec)
        tokens_seen = steps * plan.tokens_per_step
        final = {"val_loss": val["val_loss"], "val_ppl": val["val_ppl"], "val_bpb": val["val_bpb"],
                 "val_tokens": int(val["val_tokens"])}
        final.update({k: v for k, v in val.items() if k.startswith("val_") and k not in final})
        if is_zero:
            # the configs as composed (an input naming another keeps the name): a load re-resolves them
            ckpt = save_checkpoint(job.final_checkpoint, final_model, spec.config["model"], spec.config["input"],
                                   prepared.tokenizer_path,
                                   extra={"output": spec.config.get("output"), "data": rec.record["data"],
                                          "data_config": spec.record_config()["data"],
                                          "seed": spec.seed, "sweep": spec.name, "fingerprint": current["sha"]})
            rec.write(final=final, val_breakdown=val_breakdown, tokens_seen=tokens_seen, steps=steps,
                      checkpoint=str(ckpt.relative_to(job.path)),
                      train_seconds=round(fit["train_seconds"], 3), wall_seconds=round(wall, 3),
                      tokens_per_second=tokens_seen / max(fit["train_seconds"], 1e-9))
            rec.sync_history()  # every curve point: the weights that produced them are saved
            if wants_eval(spec):  # 8b. downstream tasks through lm-evaluation-harness
                rec.record["eval"] = evaluate_into(ckpt, spec, prepared.root)
            if not ckpt_spec.keep_last:  # the resume state is not needed once trained
                job.drop_resume_state()
            rec.write(status=_eval_status(rec.record), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        return rec.record
    except BaseException as err:
        # A failed save removed its temporary file first (record/atomic.py, resume.py), so the
        # disk has room again for the record that says `failed`.
        failed = _write_failure(err, job)
        rec.stopped(failed or err)
        if failed is not None:
            raise failed from err
        if getattr(err, "exit_code", None) == PREEMPT_EXIT_CODE and not isinstance(err, Preempted):
            raise SystemExit(PREEMPT_EXIT_CODE) from err  # stop the sweep too: the allocation is going
        raise
    finally:
        rec.close()

def build_trainer(spec: JobSpec, job_dir: Path, callbacks: list[Any]) -> L.Trainer:
    plan, val_steps = spec.plan, list(spec.validation_steps)
    # One bar per job (console.py) instead of Lightning's bar per epoch and per validation.
    bar = [JobProgressBar()] if spec.runtime.progress_bar else []
    trainer: L.Trainer = instantiate(
        dict(spec.trainer), max_steps=plan.max_steps, max_epochs=-1, logger=False,
        callbacks=[*callbacks, ValidationSchedule(val_steps, plan.grad_accum), *bar],
        default_root_dir=str(job_dir), check_val_every_n_epoch=None,
        # Validation runs at the scheduled optimizer steps (training/schedule.py): the callback
        # re-aims Lightning's micro-batch cadence at the next one; this is the first.
        val_check_interval=val_steps[0] * plan.grad_accum,
        accumulate_grad_batches=plan.grad_accum, log_every_n_steps=spec.log_every,
        # Validation windows are already sharded by rank (batches.ValidationWindows); a
        # DistributedSampler on top would shard twice and pad with duplicates.
        use_distributed_sampler=False,
    )
    if trainer.world_size != plan.world:
        raise ConfigError("trainer.devices", f"the trainer runs {trainer.world_size} processes but the batch plan "
                          f"assumed {plan.world}", "set trainer.devices / trainer.num_nodes to explicit numbers")
    return trainer


def _refuse_reexec_in_sweep(trainer: L.Trainer) -> None:
    """Lightning's `ddp` launches ranks by re-running the command line; under `-m` that re-runs the
    whole sweep in every rank. Sweeps need one process per job (ddp_spawn, or a cluster launcher
    that starts the ranks itself)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from lightning.pytorch.strategies.launchers.subprocess_script import (
        _SubprocessScriptLauncher,
    )

    if (HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
            and isinstance(trainer.strategy.launcher, _SubprocessScriptLauncher)):
        raise ConfigError("trainer", "strategy=ddp re-executes the command line per rank, which re-runs the "
                          "whole -m sweep in each rank", "use trainer=ddp_spawn for sweeps on one machine, "
                          "hydra/launcher=slurm_gpu on a cluster, or run jobs one command at a time")


def _final_weights(trainer: L.Trainer, task: LanguageModelTask, spec: JobSpec) -> torch.nn.Module | None:
    """The trained Decoder as a plain module on rank 0 (gathered from shards under FSDP)."""
    from lightning.pytorch.strategies import FSDPStrategy

    if not isinstance(trainer.strategy, FSDPStrategy):
        return task.model if trainer.is_global_zero else None
    full = trainer.strategy.lightning_module_state_dict()  # collective; full dict on rank 0 only
    if not trainer.is_global_zero:
        return None
    model = build_decoder(spec.model)  # a second build, rank 0 only: the trained one is sharded
    model.load_state_dict({k.removeprefix("model."): v for k, v in full.items() if k.startswith("model.")})
    return model


def _spawns_workers(trainer: L.Trainer) -> bool:
    from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher

    return isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)


def _summary(trainer: L.Trainer) -> dict[str, float]:
    return {k.split("/", 1)[1]: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("summary/")}
