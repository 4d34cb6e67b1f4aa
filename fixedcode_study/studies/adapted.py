"""A study's adaptations (its `adapt:` settings, adaptation/settings.py) run against its jobs: the work
of `fixedcode adapt study=<study>` (cli/adapt.py plans the jobs as `fixedcode sweep` does).

    outcome = adapt_study(jobs, settings, out_dir, say=print)

One record per job, beside the jobs: <study dir>/adapt/<job_key>/adapt.json, so `fixedcode analyze
<study dir>` finds them with the jobs. Each job is in one state, as a composed pair is (studies/pairs.py):
  waiting   the job is not completed under today's settings; `fixedcode sweep <study>` trains it;
  done      its adapt.json was computed from this job's weights (fingerprint and weights hash) under
            these settings: skipped;
  to run    no record yet, or one from other weights or settings: (re)adapted, replaced atomically.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..adaptation.settings import AdaptSettings
from ..evaluation.harness import file_sha256
from ..record import atomic
from ..record.checkpoint import weights_file
from ..record.jobdir import ADAPT_FILE, JobDir
from .pairs import DONE, JOB_STATES, TO_RUN, WAITING
from .progress import COMPLETED, job_state
from .study import Job


def record_path(job: Job, out_dir: Path) -> Path:
    return out_dir / job.job_dir.name / ADAPT_FILE


def adapt_state(job: Job, settings: AdaptSettings, out_dir: Path) -> tuple[str, str]:
    """(state, why) of one job's adaptation (module docstring)."""
    state, why, _ = job_state(job)
    if state != COMPLETED:
        return WAITING, f"{JOB_STATES.get(state, state)}" + (f" ({why})" if why else "")
    path = record_path(job, out_dir)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return TO_RUN, "no record yet" if not path.exists() else "its record is unreadable"
    if record.get("settings") != settings.record():
        changed = sorted(k for k, v in settings.record().items() if (record.get("settings") or {}).get(k) != v)
        return TO_RUN, f"its record was computed under other settings ({', '.join(changed)})"
    model = record.get("model") or {}
    final = JobDir(job.job_dir).final_checkpoint
    if model.get("fingerprint") != job.spec.fingerprint["sha"] or \
            model.get("weights_sha256") != file_sha256(weights_file(final)):
        return TO_RUN, "its record was computed from other weights of the job (retrained since)"
    return DONE, ""


@dataclass
class Outcome:
    adapted: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    planned: int = 0

    def lines(self, study: str, out_dir: Path) -> list[str]:
        lines = [f"[adapt] {len(self.adapted)} adapted, {len(self.done)} already done, {len(self.waiting)} waiting "
                 f"for their jobs, of {self.planned} jobs -> {out_dir}"]
        if self.waiting:
            lines.append(f"[adapt] not adapted: {', '.join(self.waiting)}: train them with `fixedcode sweep {study}` "
                         "and the same overrides, then run this again")
        return lines


def adapt_study(jobs: Sequence[Job], settings: AdaptSettings, out_dir: Path, dry_run: bool = False,
                say: Callable[[str], None] = print) -> Outcome:
    """Adapt every completed job whose record is missing or stale (module docstring); dry_run: only say which."""
    from ..adaptation.run import adapt_checkpoint  # torch and Lightning: only when jobs are adapted

    outcome = Outcome(planned=len(jobs))
    for job in jobs:
        name = job.job_dir.name
        state, why = adapt_state(job, settings, out_dir)
        if state == WAITING:
            outcome.waiting.append(name)
            say(f"[adapt] {name}: waiting for its job ({why})")
            continue
        if state == DONE:
            outcome.done.append(name)
            say(f"[adapt] {name}: already adapted under these settings; skipping")
            continue
        say(f"[adapt] {name}: {'would adapt' if dry_run else 'adapting'} ({why})")
        if dry_run:
            continue
        record = adapt_checkpoint(JobDir(job.job_dir).final_checkpoint, settings, say=say)
        path = record_path(job, out_dir)
        atomic.write_json(path, record)
        say(f"[adapt] {name} -> {path} ({record['seconds']:.1f}s)")
        outcome.adapted.append(name)
    return outcome
