"""One job's life, under its lock: decide -> (train | finish | reuse | skip) -> results.json.

`run_job(spec, job_dir, overrides)` is what the Hydra app calls per job, with the job's resolved
spec (spec/job.py: every setting validated, the model as built, the batch plan, the validation
schedule, the runtime decisions and the fingerprint; resolved once, before the job directory is
touched). It is plain Python, so tests and other launchers call it the same way. It

  1. takes the job lock (rank 0) and decides from the record on disk (training/decide.py):
     refused (stale), skip, finish, reuse or train;
  2. train: the procedure (training/procedure.py) trains the model and hands it back in memory;
     its final weights are saved and the record says `trained`, then the optional lm-eval suite
     evaluates that same model in memory (evaluation/harness.evaluate_model); `completed` only when
     all of it succeeded, `eval_failed` (non-zero exit) when only the evaluation did not;
  3. finish: a trained job's W&B catch-up and the evaluation asked now, on its saved checkpoint;
  4. reuse: a completed twin's weights linked in (record/reuse.py), then finished like (3).

results.json is written by the Recorder alone (training/recorder.py), at the boundaries of the
life. SIGTERM/SIGUSR1/SIGUSR2 at any phase leave status `preempted` and exit 143
(training/resume.py). A write that finds no room (full disk, quota, file size limit, read-only
filesystem) leaves status `failed` and raises errors.WriteFailed: one line naming the path and
where a re-run resumes. Distributed runs execute this on every rank; only global rank 0 writes the
record (results.json, config.yaml, metrics.csv, W&B; layout in record/jobdir.py).
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch
from lightning.fabric.utilities.rank_zero import rank_zero_only

from ..console import attempt_header, say
from ..errors import ConfigError
from ..model import Decoder
from ..record.checkpoint import STORED, load_checkpoint, load_tokenizer, save_checkpoint
from ..record.jobdir import COMPLETED, EVAL_FAILED, RUNNING, JobDir
from ..record.reuse import adopt_completed
from ..spec import JobSpec
from ..spec.runtime import device_kind
from .decide import FINISH, REUSE, SKIP, TRAIN, Decision, decide
from .loggers import WandbMirror
from .procedure import train
from .recorder import Recorder, base_record, now, recording
from .resume import PreemptionGuard, Preempted

__all__ = ["JobOutcome", "run_job"]


@dataclass
class JobOutcome:
    action: str              # "trained" | "evaluated" | "skipped" | "reused"
    record: dict[str, Any]   # the job's results.json as it now stands

    @property
    def ok(self) -> bool:
        return self.record.get("status") == COMPLETED


@contextmanager
def job_lock(job: JobDir) -> Iterator[None]:
    """The job directory's lock, held by rank 0 only (other ranks of a distributed job follow it)."""
    if rank_zero_only.rank != 0:
        yield
        return
    with job.lock():
        yield


def run_job(spec: JobSpec, job_dir: str | Path, overrides: list[str] | None = None) -> JobOutcome:
    """Lock, decide and do one job (see the module docstring)."""
    job, overrides = JobDir(job_dir), list(overrides or [])
    with job_lock(job), PreemptionGuard(spec.checkpoint.preempt_signals) as guard:
        try:
            decision = decide(spec, job)  # a stale job is refused here, naming what differs
            if decision.action == SKIP:
                return JobOutcome("skipped", dict(decision.previous or {}))
            if decision.action == FINISH:
                return _finish_trained(spec, job, dict(decision.previous or {}), decision.evaluate)
            if decision.action == REUSE:
                adopted = adopt_completed(job, decision.sources, _identity(spec, overrides), spec.config_yaml())
                if adopted is not None:  # W&B and the requested evaluation then follow, as for any trained job
                    outcome = _finish_trained(spec, job, adopted, spec.eval is not None)
                    return JobOutcome("reused", outcome.record)
                decision = Decision(TRAIN, None, resume_from=job.resume_point() if spec.checkpoint.resume else None)
            require_device(spec)  # before the record says `running`: nothing was trained or written
            return JobOutcome("trained", _train(spec, job, overrides, decision))
        except Preempted as stop:
            guard.chain(stop.signum)  # e.g. submitit's requeue, now that the record says `preempted`
            raise


def _identity(spec: JobSpec, overrides: list[str]) -> dict[str, Any]:
    """This job's own part of a record adopted from a twin (record/reuse.py)."""
    return {"sweep": spec.name, "overrides": overrides, "config": spec.record_config(), "spec": spec.to_json()}


def require_device(spec: JobSpec) -> None:
    """A GPU trainer (trainer=gpu, ddp, fsdp) on a machine torch sees no CUDA device on: one line here,
    not Lightning's exception from inside the Trainer's construction after the record was opened. Only
    where training starts: `sweep dry_run=true` and a finished job's evaluation still work on a CPU box;
    `sweep` asks it of every job it will train before it launches any."""
    if device_kind(spec.runtime.accelerator) == "cuda" and not torch.cuda.is_available():
        raise ConfigError("trainer.accelerator", f"{spec.runtime.accelerator} asks for a CUDA GPU and torch sees "
                          "none on this machine", "train on a GPU machine, or use trainer=cpu (the default here)")


def _train(spec: JobSpec, job: JobDir, overrides: list[str], decision: Decision) -> dict[str, Any]:
    """A new attempt: train (resuming when last.ckpt allows), save, record `trained`, evaluate, finish."""
    # Rank from the launcher's environment (RANK / LOCAL_RANK / SLURM_PROCID); every write is rank 0's.
    is_zero = rank_zero_only.rank == 0
    previous, resume_from = decision.previous, decision.resume_from
    rec = Recorder(job, {**base_record(spec, job, overrides), "fingerprint": dict(spec.fingerprint),
                         "plan": spec.plan.as_record()}, is_zero)
    with recording(rec, job):
        if is_zero:
            job.path.mkdir(parents=True, exist_ok=True)
            # A new W&B run only when this attempt starts from step 0 over curves W&B already holds.
            old_id = (previous or {}).get("wandb_id")
            new_life = spec.force or (resume_from is None and bool(old_id) and spec.logging.wandb is not None
                                      and WandbMirror.has_history(job, old_id))
            job.start_attempt(rec.record, previous, new_life=new_life)
        rec.write()  # the new record first: a stop from here on leaves it, never the old life's
        attempt_header(f"job {job.name}: training, attempt {rec.record.get('attempts', '?')}")
        if spec.force and is_zero:  # force=true: nothing of an earlier life is kept as resume state or weights
            shutil.rmtree(job.checkpoints, ignore_errors=True)
        trained = train(spec, job, rec, resume_from, previous)
        if trained.is_zero:
            # the final weights, then the record says "trained": a later stop never retrains it
            data = rec.record["data"]
            config = {**spec.checkpoint_config(), "data": data}
            ckpt = save_checkpoint(job.final_checkpoint, trained.model, config, trained.prepared.tokenizer_path)
            facts = trained.facts
            rec.write(final=trained.final, val_breakdown=facts["val_breakdown"], tokens_seen=facts["tokens_seen"],
                      steps=facts["steps"], checkpoint=str(ckpt.relative_to(job.path)),
                      train_seconds=facts["train_seconds"], wall_seconds=facts["wall_seconds"],
                      tokens_per_second=facts["tokens_per_second"])
            rec.sync_history()  # every curve point: the weights that produced them are saved
            if spec.eval is not None:  # downstream tasks through lm-evaluation-harness, on the model in memory
                tokenizer = load_tokenizer(trained.prepared.tokenizer_path)
                rec.note(eval=_evaluate(spec, ckpt, trained.model, tokenizer, config, trained.prepared.root))
            _finish(spec, job, rec)
        return rec.record


def _finish_trained(spec: JobSpec, job: JobDir, record: dict[str, Any], evaluate: bool) -> JobOutcome:
    """A trained job: do only what is left (W&B catch-up, the evaluation asked now)."""
    if rank_zero_only.rank != 0:
        return JobOutcome("skipped", record)  # evaluation and the record are rank 0's
    rec = Recorder(job, record, is_zero=True)
    with recording(rec, job):
        rec.write(status=RUNNING, error=None)
        attempt_header(f"job {job.name}: already trained; " + ("evaluating" if evaluate else "finishing its record"))
        if evaluate:  # the evaluation asked for now: the record's config and spec (and W&B's) say what ran
            stored = record.get("spec") or spec.to_json()  # a record from before the stored spec: today's (same fingerprint)
            rec.note(config={**(record.get("config") or {}), "eval": spec.record_config()["eval"]},
                     spec={**stored, "eval_name": spec.eval_name, "eval": spec.eval.to_json()})
        # The run config as training gives it (a reused job opens a new W&B run here).
        rec.open_mirror(spec, {**(rec.record.get("config") or {}), "input_props": record.get("input_props"),
                               "params": record.get("params"), "fingerprint": (record.get("fingerprint") or {}).get("sha")})
        rec.sync_history()  # a stop between the final save and the end left curves unsent
        if evaluate:
            say(f"[run] {job.name} already trained; running eval={spec.eval_name} on its final checkpoint")
            ckpt = load_checkpoint(job.path / record["checkpoint"])
            rec.note(eval=_evaluate(spec, ckpt.path, ckpt.model, ckpt.tokenizer, ckpt.config, None, ckpt.spec_note))
        elif spec.eval is None and "error" in (record.get("eval") or {}):
            rec.record.pop("eval")  # the failed evaluation is no longer asked for
        _finish(spec, job, rec)
        return JobOutcome("evaluated" if evaluate else "trained", rec.record)


def _evaluate(spec: JobSpec, ckpt: Path, model: Decoder, tokenizer: Any, config: Mapping[str, Any],
              prepared_root: Path | None, model_spec: str = STORED) -> dict[str, Any]:
    """The configured lm-eval suite on a trained model; the record for results.json "eval".

    An evaluation error does not undo a finished training run: it is recorded as {"error": ...},
    the job becomes `eval_failed`, and a re-run of the same command retries only the evaluation.
    A preemption is not an evaluation error: it propagates.
    """
    from ..evaluation.harness import evaluate_model

    try:
        result = evaluate_model(model, tokenizer, spec.eval, ckpt, config, prepared_root=prepared_root,
                                model_spec=model_spec)
    except Exception as err:  # noqa: BLE001 - keep the trained model and its validation numbers
        say(f"[eval] {spec.eval_name} failed on {ckpt}: {type(err).__name__}: {err}".splitlines()[0])
        return {"name": spec.eval_name, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    result["name"] = spec.eval_name
    return result


def _finish(spec: JobSpec, job: JobDir, rec: Recorder) -> None:
    """The end of a trained job: the resume state goes (unless kept), the record says how it ended."""
    if not spec.checkpoint.keep_last:
        job.drop_resume_state()
    status = EVAL_FAILED if "error" in (rec.record.get("eval") or {}) else COMPLETED
    rec.write(status=status, finished_at=now())
