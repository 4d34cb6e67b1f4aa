"""A job's record while it runs: results.json and its W&B mirror, written by one writer.

`Recorder` holds the record of one attempt in memory; `note(**facts)` adds to it, `write(**facts)`
adds and writes results.json (atomically: record/jobdir.py -> record/atomic.py) and copies it to
the job's W&B run. The job's life writes at its boundaries only (training/job.py): the attempt's
start (`running`), what it trains with just before the fit, the trained model's numbers (the job is
`trained` from then on and is never trained again), the end (`completed` / `eval_failed`), and why
it stopped (`stopped`: `preempted` or `failed`, with everything noted so far). Only global rank 0
writes; on the other ranks every call is a no-op on disk.

`recording(rec, job)` wraps a phase of the job: whatever stops it is recorded before it goes on,
a write that found no room becomes one line (errors.WriteFailed: the path, the reason and where a
re-run resumes), and the W&B run is closed.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from ..console import say
from ..errors import WRITE_REMEDIES, WriteFailed
from ..record.jobdir import COMPLETED, FAILED, PREEMPTED, RUNNING, SCHEMA_VERSION, JobDir, versions
from ..spec import JobSpec
from .loggers import WandbMirror
from .resume import PREEMPT_EXIT_CODE, Preempted, checkpoint_step, trim_metrics

__all__ = ["Recorder", "base_record", "now", "recording"]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def base_record(spec: JobSpec, job: JobDir, overrides: list[str]) -> dict[str, Any]:
    """A new attempt's record: who the job is and what it was asked (docs/results-schema.md)."""
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
        "spec": spec.to_json(),
        "versions": versions(),
        "started_at": now(),
    }


class Recorder:
    """results.json and its W&B mirror, written together (rank 0 only; a no-op elsewhere)."""

    def __init__(self, job: JobDir, record: dict[str, Any], is_zero: bool):
        self.job, self.record, self.is_zero = job, record, is_zero
        self.mirror: WandbMirror | None = None

    def note(self, **facts: Any) -> None:
        """Add to the record in memory; the next write (or `stopped`) puts it on disk."""
        self.record.update(facts)

    def write(self, **facts: Any) -> None:
        self.record.update(facts)
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

    def open_mirror(self, spec: JobSpec, run_config: Mapping[str, Any]) -> None:
        """The job's W&B run (id from the record), when the logger settings ask for one."""
        if not (self.is_zero and spec.logging.wandb):
            return
        self.mirror = WandbMirror(
            spec.logging.wandb, self.job, run_id=self.record["wandb_id"], run_name=f"{spec.name}/{self.job.name}",
            group=spec.name, job_type=spec.input_name,
            tags=[f"input:{spec.input_name}", f"seed:{spec.seed}", f"model:{spec.model_name}"],
            config=dict(run_config))

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
                       finished_at=now())
        except WriteFailed:
            pass  # the disk is still full: the job's own error (about to be raised) says so

    # -- the attempt's own files ------------------------------------------------------------------
    def resume_files(self, spec: JobSpec, resume_from: Any, previous: Mapping[str, Any] | None) -> None:
        """metrics.csv for this attempt: trimmed to the step it resumes from (rows the killed attempt
        logged after it go), or, for an attempt from step 0, set aside when an earlier one left curves."""
        if not self.is_zero:
            return
        if resume_from is None:
            self.job.set_aside_metrics()
            return
        step = self.record["resumed_from_step"] = checkpoint_step(resume_from)
        trim_metrics(self.job.metrics, step)
        before = ((previous or {}).get("runtime") or {}).get("threads")
        if before is not None and before != spec.runtime.threads:
            say(f"[run] {self.job.name}: resuming at {spec.runtime.threads} threads a run that trained at {before}: "
                "bitwise equality with an uninterrupted run holds at one thread count only")
        if not spec.runtime.deterministic["bitwise"]:
            say(f"[run] {self.job.name}: resuming from step {step}; this runtime is not bitwise deterministic "
                f"({spec.runtime.deterministic['reason']}), so the continuation equals an uninterrupted run "
                "to float tolerance only")


def write_failure(err: BaseException, job: JobDir) -> WriteFailed | None:
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
def recording(rec: Recorder, job: JobDir) -> Iterator[Recorder]:
    """Run a phase of the job; record whatever stops it (see the module docstring), close W&B."""
    try:
        yield rec
    except BaseException as err:
        # A failed save removed its temporary file first (record/atomic.py, resume.py), so the
        # disk has room again for the record that says `failed`.
        failed = write_failure(err, job)
        rec.stopped(failed or err)
        if failed is not None:
            raise failed from err
        if getattr(err, "exit_code", None) == PREEMPT_EXIT_CODE and not isinstance(err, Preempted):
            raise SystemExit(PREEMPT_EXIT_CODE) from err  # stop the sweep too: the allocation is going
        raise
    finally:
        rec.close()
