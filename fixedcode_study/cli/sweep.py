"""`fixedcode sweep <study> [scale=cpu|paper] [dry_run=true] [overrides]`: run one study of sweeps/.

    fixedcode sweep list=true                       # studies, job counts, one-line aims
    fixedcode sweep main dry_run=true               # validate every job, list them, estimate the cost
    fixedcode sweep main                            # run it; re-running resumes it (completed jobs are skipped)
    fixedcode sweep main scale=paper dry_run=true   # the same study at paper scale

A study is a file sweeps/<study>.yaml (its format: fixedcode_study/studies/study.py): a union of
grids, each launched as one plain `python -m fixedcode_study.run -m name=<study> <key>=v1,v2 ...`
command (printed before it runs). Every job is composed and its model built (shapes only) before
any job launches, so a bad combination stops the study in seconds, and the cost is printed
(studies/cost.py). Overrides replace a grid key of the same name (`seed=1`, `model=test_micro`) or
are added to every job (`train.tokens=65536 logger=csv`).

`verbose=true` keeps every job's library output (Lightning, W&B, lm-eval) on the terminal; without
it each job shows a progress bar (a start line when jobs run side by side) and a result line, the rest
going to <job>/run.log (fixedcode_study/console.py). A preempted study exits 143 (studies/grids.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..record.jobdir import JOB_LOG_FILE
from ..studies.rates import Rates
from .args import POSITIONAL, Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    study: str | None = field(default=None, metadata=POSITIONAL)
    """a study of sweeps/ (or a path to a .yaml)"""
    scale: str = "cpu"
    """cpu = the config defaults; paper = the study's paper scale"""
    dry_run: bool = False
    """validate and list the jobs and their cost; train nothing"""
    list: bool = False
    """list the studies"""
    verbose: bool = field(default=False, metadata={
        "help": f"keep the libraries' output on the terminal, not in each job's {JOB_LOG_FILE}"})
    rates: Rates = field(default_factory=Rates)

    def __post_init__(self) -> None:
        from ..studies.study import SCALES

        if self.scale not in SCALES:
            raise ConfigError("scale", f"unknown scale {self.scale!r}", f"use one of {', '.join(SCALES)}")


COMMAND = Command("sweep", __doc__, SweepOptions, overrides=True)


def plan(study: Any, scale: str = "cpu", extra: Sequence[str] | None = None) -> list[Any]:
    """Every job (studies.study.Job) of the study, composed as Hydra will (directory, launcher), with its JobSpec."""
    from ..config import compose, plain
    from ..spec import JobSpec
    from ..studies.study import Job, distinct_jobs, in_job, job_overrides

    jobs = []
    for overrides in job_overrides(study, scale, extra):
        cfg = compose(overrides, return_hydra_config=True)
        job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        try:
            spec = JobSpec.from_cfg(cfg)
        except ConfigError as err:  # name the job, keep the one-line "field: problem; fix" form
            raise in_job(err, job_dir) from None
        jobs.append(Job(overrides, job_dir, spec, plain(cfg.hydra.get("launcher")) or {}))
    return distinct_jobs(study, jobs)


def run_sweep(options: SweepOptions, overrides: list[str]) -> int:
    from ..console import VERBOSE_ENV

    if options.verbose:
        os.environ[VERBOSE_ENV] = "1"  # inherited by every grid's `run -m` process
    if options.list or not options.study:
        if overrides:  # `fixedcode sweep seed=1`: the study was forgotten, not a listing asked for
            raise ConfigError("study", "missing", "pass the study first: fixedcode sweep <study> " + " ".join(overrides))
        from ..studies.study import study_listing
        print("\n".join(study_listing()))
        return 0
    from ..studies.cost import describe_plan, job_facts
    from ..studies.grids import run_grids
    from ..studies.planning import side_by_side
    from ..studies.progress import COMPLETED, job_progress, require_devices
    from ..studies.study import load_study
    from ..training.resume import PREEMPT_EXIT_CODE

    study, scale = load_study(options.study), options.scale
    jobs = plan(study, scale, overrides)
    facts = job_facts(jobs)  # builds every job's model: a bad combination stops here, naming the job
    progress = job_progress(jobs, facts)  # what the job directories hold: completed, stale, partial
    print(describe_plan(study, scale, jobs, facts, overrides, options.rates, per_job=options.dry_run,
                        progress=progress, side_by_side=side_by_side(jobs, progress)), flush=True)
    if options.dry_run:
        return 0
    if all(p.state == COMPLETED for p in progress) and not any(job.spec.force for job in jobs):
        print(f"[sweep] {study.name}: every job is already completed under these settings; nothing to launch "
              f"(force=true retrains them); results in {jobs[0].job_dir.parent}")  # no launcher just to skip
        return 0
    require_devices(jobs, progress)  # a GPU study on a CPU machine: one line, before any job starts
    outcome = run_grids(study, scale, overrides)
    if outcome.preempted:
        return PREEMPT_EXIT_CODE
    print(f"[sweep] {study.name}: results in {jobs[0].job_dir.parent}"
          + (f"; {outcome.failed} grid(s) had failed jobs (see above)" if outcome.failed else ""))
    return 1 if outcome.failed else 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, run_sweep)


if __name__ == "__main__":
    exit_with(main())
