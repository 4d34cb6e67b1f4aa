"""What each job of a run or sweep tells the command, and the summary the command prints.

`run`'s task function returns a `JobResult` per job (cli/run.py); the launcher hands back those of
the jobs it ran in worker processes as their Hydra return values (studies/launcher.py), and the
command summarises the list the launch returns (`summary_lines`). Nothing is kept between runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the training stack is not loaded to name it: cli/run.py reads JobResult before any job
    from ..training.job import JobOutcome

__all__ = ["NOT_STARTED", "JobResult", "job_result", "summary_lines"]

NOT_STARTED = "not_started"
ACTIONS = ("skipped", "reused", "trained", "evaluated")


@dataclass(frozen=True)
class JobResult:
    """One job's outcome, as the Hydra job's return value (crosses process boundaries by pickle)."""

    job_dir: str
    action: str              # trained | evaluated | reused | skipped | failed | preempted | not_started
    status: str = ""         # the record's status (completed, eval_failed, failed, preempted); "" when none
    why: str = ""            # one line: what went wrong
    val_loss: float | None = None

    @property
    def name(self) -> str:
        return Path(self.job_dir).name

    @property
    def failed(self) -> bool:
        return self.action == "failed" or (self.action not in ("preempted", NOT_STARTED) and self.status != "completed")


def job_result(job_dir: Path, outcome: JobOutcome, say: Callable[..., None]) -> JobResult:
    """A job's outcome (training/job.py) as its JobResult; its one result line goes to `say` (the
    terminal, and the job's log)."""
    record = outcome.record
    final = record.get("final") or {}
    if outcome.action == "skipped":
        say(f"[run] {job_dir} already completed; skipping (force=true retrains it)", log=False)  # untouched
        return JobResult(str(job_dir), "skipped", record.get("status", ""), val_loss=final.get("val_loss"))
    if not outcome.ok:
        from ..record.jobdir import JobDir

        error = (record.get("eval") or {}).get("error") or record.get("error")
        say(f"[run] job {job_dir.name} {record['status']}: the trained weights are kept; re-running retries "
            f"the evaluation ({(record.get('eval') or {}).get('error')}; details in {JobDir(job_dir).log_file})",
            err=True)
        return JobResult(str(job_dir), outcome.action, record["status"], f"{record['status']}: {error}",
                         final.get("val_loss"))
    numbers = f"val_loss={final['val_loss']:.4f} val_ppl={final['val_ppl']:.2f}"
    if outcome.action == "reused":
        say(f"[run] {job_dir.name}: reused {(record.get('reused_from') or {}).get('job_dir')} ({numbers})")
    else:
        resumed = f", resumed from step {record['resumed_from_step']}" if record.get("resumed_from_step") else ""
        what = "evaluated" if outcome.action == "evaluated" else f"{record['tokens_per_second']:.0f} tokens/s{resumed}"
        say(f"[run] {job_dir.name}: {numbers} val_bpb={final['val_bpb']:.4f} ({what}) -> {job_dir}")
    return JobResult(str(job_dir), outcome.action, record["status"], val_loss=final.get("val_loss"))


def summary_lines(results: Sequence[JobResult]) -> tuple[list[str], str | None]:
    """(the summary's lines, the failed jobs' paragraph or None) of a run's results, in launch order."""
    failed = [r for r in results if r.failed]
    n = {a: sum(r.action == a and not r.failed for r in results) for a in ACTIONS}
    lines = []
    if n["skipped"]:
        lines.append(f"[run] {n['skipped']} job(s) were already complete and skipped")
    if sum(n.values()) + len(failed) > 1:  # an evaluation of a trained job is not called training
        lines.append(f"[run] summary: {n['trained']} trained, " + "".join(f"{n[a]} {what}, " for a, what in (
            ("evaluated", "evaluated only (already trained)"), ("reused", "reused")) if n[a])
            + f"{n['skipped']} skipped as complete, {len(failed)} failed")
    if not failed:
        return lines, None
    return lines, "\n".join([f"[run] {len(failed)} job(s) failed:", *(f"  {r.job_dir}: {r.why}" for r in failed)])
