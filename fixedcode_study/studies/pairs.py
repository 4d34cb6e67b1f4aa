"""A study's declared compositions (its `pairs:` block, composition/declared.py) run against its jobs:
the work of `fixedcode compose study=<study>` (cli/compose.py plans the jobs as `fixedcode sweep` does).

    planned = plan_pairs(study, jobs)                  # each declared pair with its two jobs
    outcome = compose_study(planned, settings, out_dir, say=print)

The records go beside the jobs, <study dir>/compose/<arm>,seeds=<a>+<b>/compose.json (the study dir is
${out_root}/multirun/<study>), so `fixedcode analyze <study dir>` reads them with the jobs. Each pair is
in one state (`pair_state`):

  waiting   a member's job is not completed under today's settings (not trained yet, partial, or
            trained under other settings: studies/progress.py's states); `fixedcode sweep <study>`
            with the same overrides trains it. The pair is named with the job and its state.
  done      its compose.json was computed from these two members (their fingerprints and the hashes
            of their final weights) under these settings: skipped.
  to run    no record yet, or one computed from other members or under other settings: (re)composed,
            the record replaced atomically, so a record never stands for a result of other settings.

Composing a pair is composition/run.py's `compose_pair` on the two jobs' final checkpoints; a pair that
cannot be composed (members that do not match) stops the run in one line naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..composition.declared import DeclaredPair
from ..composition.settings import ComposeSettings
from ..errors import ConfigError
from ..evaluation.harness import file_sha256
from ..record import atomic
from ..record.checkpoint import weights_file
from ..record.jobdir import COMPOSE_DIR, COMPOSE_FILE, JobDir
from .progress import COMPLETED, NEW, PARTIAL, STALE, job_state
from .study import Job, Study

__all__ = ["COMPOSE_DIR", "COMPOSE_FILE", "DONE", "TO_RUN", "WAITING", "Outcome", "PlannedPair", "compose_study",
           "pair_state", "plan_pairs"]

DONE, TO_RUN, WAITING = "done", "to run", "waiting"
# a job's state (studies/progress.py) as the waiting line says it
JOB_STATES = {NEW: "not trained yet", PARTIAL: "not completed yet", STALE: "trained under other settings"}


@dataclass(frozen=True)
class PlannedPair:
    declared: DeclaredPair
    a: Job
    b: Job

    @property
    def name(self) -> str:
        return self.declared.name

    def record_path(self, out_dir: Path) -> Path:
        return out_dir / self.name / COMPOSE_FILE


@dataclass
class Outcome:
    composed: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)   # the pairs whose jobs are not completed
    planned: int = 0

    def lines(self, study: str, out_dir: Path) -> list[str]:
        """The closing lines: what was composed, and every pair still waiting for its jobs, by name."""
        lines = [f"[compose] {len(self.composed)} composed, {len(self.done)} already done, {len(self.waiting)} "
                 f"waiting for their jobs, of {self.planned} pairs -> {out_dir}"]
        if self.waiting:
            lines.append(f"[compose] not composed: {', '.join(self.waiting)}: their jobs (named above) are not "
                         f"completed; train them with `fixedcode sweep {study}` and the same overrides, then run this "
                         "again")
        return lines


def plan_pairs(study: Study, jobs: Sequence[Job]) -> list[PlannedPair]:
    """Each declared pair with the study's job of its arm at each of its two seeds (the job's input name
    and seed); a declared arm and seed the grids train not exactly once is one line naming pairs:."""
    if study.pairs is None:
        raise ConfigError("study", f"{study.name} declares no pairs to compose",
                          "add a pairs: block to its file (sweeps/README.md) or pass a= and b=")
    where = f"{study.path.name if study.path else study.name}:pairs"

    def job_of(arm: str, seed: int) -> Job:
        found = [j for j in jobs if j.spec.input_name == arm and j.spec.seed == seed]
        if len(found) != 1:
            names = ", ".join(j.job_dir.name for j in found[:3])
            raise ConfigError(f"{where}.arms", f"{arm} at seed {seed} is {len(found)} jobs of this plan"
                              + (f" ({names})" if found else ""),
                              "declare arms and seeds the study's grids train once each (and give `fixedcode "
                              "compose` the overrides given to `fixedcode sweep`)")
        return found[0]

    return [PlannedPair(p, job_of(p.arm, p.a), job_of(p.arm, p.b)) for p in study.pairs.pairs]


def _members_key(planned: PlannedPair) -> dict[str, Any]:
    """What a record of this pair must have been computed from: each member's fingerprint and weights."""
    key = {}
    for role, job in (("a", planned.a), ("b", planned.b)):
        final = JobDir(job.job_dir).final_checkpoint
        key[role] = {"fingerprint": job.spec.fingerprint["sha"], "weights_sha256": file_sha256(weights_file(final))}
    return key


def _record_key(record: dict[str, Any]) -> dict[str, Any]:
    """The same of a record: each member's fingerprint (the checkpoint's, a sha) and weights hash."""
    return {role: {"fingerprint": (record.get(role) or {}).get("fingerprint"),
                   "weights_sha256": (record.get(role) or {}).get("weights_sha256")} for role in ("a", "b")}


def pair_state(planned: PlannedPair, settings: ComposeSettings, out_dir: Path) -> tuple[str, str]:
    """(state, why) of one pair (module docstring); `why` names a waiting job or what a stale record differs in."""
    waiting = []
    for job in (planned.a, planned.b):
        state, why, _ = job_state(job)
        if state != COMPLETED:
            waiting.append(f"{job.job_dir.name} {JOB_STATES.get(state, state)}" + (f" ({why})" if why else ""))
    if waiting:
        return WAITING, "; ".join(waiting)
    path = planned.record_path(out_dir)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return TO_RUN, "no record yet" if not path.exists() else "its record is unreadable"
    if record.get("settings") != settings.record():
        changed = sorted(k for k, v in settings.record().items() if (record.get("settings") or {}).get(k) != v)
        return TO_RUN, f"its record was computed under other settings ({', '.join(changed)})"
    if _record_key(record) != _members_key(planned):
        return TO_RUN, "its record was computed from other weights of its members (retrained since)"
    return DONE, ""


def compose_study(planned: Sequence[PlannedPair], settings: ComposeSettings, out_dir: Path, dry_run: bool = False,
                  say: Callable[[str], None] = print) -> Outcome:
    """Compose every pair that is ready and not done (module docstring); dry_run: only say which."""
    from ..composition.run import compose_pair, summary  # torch and Lightning: only when pairs are composed

    outcome = Outcome(planned=len(planned))
    for pair in planned:
        state, why = pair_state(pair, settings, out_dir)
        if state == WAITING:
            outcome.waiting.append(pair.name)
            say(f"[compose] {pair.name}: waiting for its jobs ({why})")
            continue
        if state == DONE:
            outcome.done.append(pair.name)
            say(f"[compose] {pair.name}: already composed under these settings; skipping")
            continue
        say(f"[compose] {pair.name}: {'would compose' if dry_run else 'composing'} ({why}): "
            f"a = {pair.a.job_dir.name}, b = {pair.b.job_dir.name}")
        if dry_run:
            continue
        record = compose_pair(*(JobDir(j.job_dir).final_checkpoint for j in (pair.a, pair.b)), settings, say=say)
        path = pair.record_path(out_dir)
        atomic.write_json(path, record)
        for line in summary(record):
            say(f"[compose]   {line}")
        say(f"[compose] {pair.name} -> {path} ({record['seconds']:.1f}s)")
        outcome.composed.append(pair.name)
    return outcome
