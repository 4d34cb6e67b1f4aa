"""What a study has done already, read from its job directories before anything launches, and what
the rest will take at the speed its own completed jobs ran (`sweep dry_run=true`; issue 25).

The FLOPs rate of cost.py is a calibration on one preset, and at other widths it is far off (the
compute ladder's jobs ran 6-10x slower than it says: per-step overhead and the V x d head dominate
small models). A study that is resumed has a better measure on disk: the training seconds and
tokens its completed jobs recorded. So each job is put in one of four states, with the decision
`run` itself will make (training/job.py), and the jobs left are timed from completed jobs of the
same model and training settings where there are any:

  completed   results.json says completed, the final weights exist and the fingerprint equals the
              job's today: a launch skips it
  stale       trained, or holding a resume checkpoint, under another fingerprint (settings or the
              training source changed): a launch refuses it (force=true retrains)
  partial     trained but not completed (W&B catch-up or evaluation left), or stopped with a
              last.ckpt to resume from: timed as a whole job (an upper bound)
  new         nothing on disk yet

A job's speed key is what decides its speed on one machine: the model settings, the window, the
batch, the precision and compile. The input variant is left out: on the ladder the three arms of
one size ran within the spread of one arm over seeds (about 20%).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..record.fingerprint import differences
from ..record.jobdir import JobDir
from ..spec import JobSpec
from ..training.resume import checkpoint_fingerprint
from ..errors import ConfigError
from .study import Job, in_job

__all__ = ["COMPLETED", "NEW", "PARTIAL", "STALE", "JobProgress", "Remaining", "job_progress", "job_state", "remaining"]

COMPLETED, STALE, PARTIAL, NEW = "completed", "stale", "partial", "new"


@dataclass(frozen=True)
class JobProgress:
    job: str
    state: str
    speed_key: str
    tokens: int                          # the tokens the job trains (its plan)
    flops: float                         # its training FLOPs (cost.job_facts)
    train_seconds: float | None = None   # completed jobs: as recorded
    wall_seconds: float | None = None
    why: str = ""                        # stale: the first difference


def speed_key(spec: JobSpec) -> str:
    train = spec.train
    return json.dumps([spec.model.preset.to_dict(), dict(spec.model.output), train.seq_len, train.batch_size,
                       train.global_batch_tokens, spec.trainer.precision, str(train.compile)],
                      sort_keys=True, default=str)


def job_state(job: Job) -> tuple[str, str, dict[str, Any] | None]:
    """(state, the first difference when stale, its results.json) of one job on disk (module docstring)."""
    jd = JobDir(job.job_dir)
    record = jd.read_results() if job.job_dir.is_dir() else None
    trained = bool(record) and jd.is_trained(record)
    resumable = not trained and jd.resume_point() is not None if job.job_dir.is_dir() else False
    if not trained and not resumable:
        return NEW, "", record
    current = job.spec.fingerprint  # the resolved spec's fingerprint is the one `run` compares
    stored = record.get("fingerprint") if trained else checkpoint_fingerprint(jd.last_checkpoint)
    diffs = differences(stored or {}, current) if stored else ["recorded without a fingerprint"]
    if diffs:
        return STALE, diffs[0], record
    if record.get("status") == COMPLETED and trained:
        return COMPLETED, "", record
    return PARTIAL, "", record


def job_progress(jobs: Sequence[Job], facts: Sequence[dict[str, Any]]) -> list[JobProgress]:
    """Each job's state on disk (see the module docstring), in the order of `jobs`."""
    out = []
    for job, fact in zip(jobs, facts, strict=True):
        base = {"job": job.job_dir.name, "speed_key": speed_key(job.spec), "tokens": int(fact["tokens"]),
                "flops": float(fact["flops"])}
        state, why, record = job_state(job)
        if state == COMPLETED:
            out.append(JobProgress(state=COMPLETED, train_seconds=_seconds(record, "train_seconds"),
                                   wall_seconds=_seconds(record, "wall_seconds"), **base))
        else:
            out.append(JobProgress(state=state, why=why, **base))
    return out


def _seconds(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


@dataclass(frozen=True)
class Remaining:
    jobs: int                  # not completed (stale ones included: force=true would train them)
    measured_jobs: int         # timed from completed jobs of the same speed key
    measured_seconds: float    # their job-seconds (one job's wall time each, summed)
    unmeasured_flops: float    # the rest, for the FLOPs rate
    references: int            # completed jobs the measured times come from
    tokens_per_second: float   # median over those references (NaN without any)


def remaining(progress: Sequence[JobProgress]) -> Remaining:
    """The jobs left, timed per job as overhead + tokens / speed, with the median speed and the median
    overhead (wall - train seconds: start, validation, checkpoint) of the completed jobs that share
    its speed key; jobs without such a reference are left to the FLOPs rate."""
    refs: dict[str, list[JobProgress]] = {}
    for p in progress:
        if p.state == COMPLETED and p.train_seconds:
            refs.setdefault(p.speed_key, []).append(p)
    left = [p for p in progress if p.state != COMPLETED]
    seconds, measured, flops, used = 0.0, 0, 0.0, set()
    for p in left:
        same = refs.get(p.speed_key)
        if not same:
            flops += p.flops
            continue
        speed = statistics.median(r.tokens / r.train_seconds for r in same)
        overhead = statistics.median(max(0.0, (r.wall_seconds or r.train_seconds) - r.train_seconds) for r in same)
        seconds += overhead + p.tokens / speed
        measured += 1
        used.add(p.speed_key)
    speeds = [r.tokens / r.train_seconds for key in used for r in refs[key]]
    return Remaining(len(left), measured, seconds, flops, sum(len(refs[k]) for k in used),
                     statistics.median(speeds) if speeds else float("nan"))


def require_devices(jobs: Sequence[Job], progress: Sequence[JobProgress]) -> None:
    """Every job still to train has the device it asks for. A GPU study on a CPU machine stops here in
    one line naming the job, not once per job after each has started; a completed job only evaluates,
    which needs none."""
    from ..training.job import require_device  # the training stack: only when a sweep launches

    for job, state in zip(jobs, progress, strict=True):
        if state.state != COMPLETED:
            try:
                require_device(job.spec)
            except ConfigError as err:
                raise in_job(err, job.job_dir) from None
