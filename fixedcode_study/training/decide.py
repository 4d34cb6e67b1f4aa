"""What a job does next, decided from its spec and what its directory holds, before anything is written.

  refused  trained before under another fingerprint, or a last.ckpt from other settings: ConfigError
           naming the keys that differ (force=true retrains from scratch)
  skip     completed, and any requested evaluation recorded with today's settings
  finish   trained (final weights saved) but not completed, or a new evaluation is asked: only the
           remaining work (W&B catch-up, evaluation), never a second training
  reuse    no record yet, and a completed job of another study has this very fingerprint (settings
           and training source): linked in, not retrained (record/reuse.py; `reuse=false` turns it off).
           Not for a job that keeps snapshots (checkpoint.keep_every_steps > 0): a reuse links the
           final weights only, and such a job would be `completed` without what it was asked to keep
  train    otherwise: from step 0, or from last.ckpt when a previous attempt left one

`decide` reads results.json, last.ckpt's fingerprint and (for reuse) the study roots' records; it
writes nothing, so `sweep --dry-run` (studies/progress.py) can ask the same questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from ..record.fingerprint import differences
from ..record.jobdir import COMPLETED, JobDir
from ..record.reuse import completed_sources
from ..spec import JobSpec
from ..spec.evaluation import EVAL_IDENTITY
from .resume import checkpoint_fingerprint

__all__ = ["FINISH", "REUSE", "SKIP", "TRAIN", "Decision", "decide", "needs_eval", "refuse_stale"]

SKIP, FINISH, REUSE, TRAIN = "skip", "finish", "reuse", "train"


@dataclass(frozen=True)
class Decision:
    action: str                           # skip | finish | reuse | train
    previous: dict[str, Any] | None       # results.json as found (None: no record)
    evaluate: bool = False                # finish: the requested evaluation is missing or stale
    resume_from: Path | None = None       # train: the last.ckpt it continues
    sources: tuple[Any, ...] = ()         # reuse: the completed twins, best first (record/reuse.completed_sources)


def decide(spec: JobSpec, job: JobDir) -> Decision:
    """The next action of `spec`'s job in `job` (see the module docstring)."""
    previous = job.read_results()
    if spec.force:
        return Decision(TRAIN, previous)  # from scratch: nothing of an earlier life is resumed
    refuse_stale(job, previous, spec.fingerprint, resume=spec.checkpoint.resume)
    if previous and job.is_trained(previous):
        wanted = spec.eval is not None and needs_eval(previous, spec)
        return Decision(SKIP if previous.get("status") == COMPLETED and not wanted else FINISH, previous, wanted)
    if not previous and spec.reuse and not spec.checkpoint.keep_every_steps:
        sources = completed_sources(Path(spec.out_root), str(spec.fingerprint["sha"]), exclude=job.path.resolve())
        if sources:
            return Decision(REUSE, previous, sources=tuple(sources))
    return Decision(TRAIN, previous, resume_from=job.resume_point() if spec.checkpoint.resume else None)


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


def needs_eval(record: Mapping[str, Any], spec: JobSpec) -> bool:
    """The requested evaluation is missing, failed, or was run with other settings."""
    done = record.get("eval") or {}
    if "error" in done or done.get("name") != spec.eval_name:
        return True
    wanted, have = spec.eval.record(), done.get("settings", {})
    return (sorted(wanted["tasks"]) != sorted(done.get("tasks", {}))
            or any(wanted.get(k) != have.get(k) for k in EVAL_IDENTITY))
