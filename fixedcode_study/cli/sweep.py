"""`fixedcode sweep <study> [--scale cpu|paper] [--dry-run] [overrides]`: run one study of sweeps/.

    fixedcode sweep --list                          # studies, job counts, one-line aims
    fixedcode sweep main --dry-run                  # validate every job, list them, estimate the cost
    fixedcode sweep main                            # run it; re-running resumes it (completed jobs are skipped)
    fixedcode sweep main --scale paper --dry-run    # the same study at paper scale (scale=paper works too)
    python -m fixedcode_study.sweep main ...        # the same command

A study is a file sweeps/<study>.yaml (its format: fixedcode_study/studies/study.py): a union of
grids, each launched as one plain `python -m fixedcode_study.run -m name=<study> key=v1,v2 ...`
command (printed before it runs). Every job is composed and its model built (shapes only) before
any job launches, so a bad combination stops the study in seconds, and the cost is printed
(studies/cost.py). Overrides replace a grid key of the same name (`seed=1`, `model=test_micro`) or
are added to every job (`train.tokens=65536 logger=csv`).

`-v` / `--verbose` keeps every job's library output (Lightning, W&B, lm-eval) on the terminal;
without it each job shows a progress bar (or a start line when jobs run side by side) and a result
line, the rest going to <job>/run.log (fixedcode_study/console.py). A preempted study exits 143
(studies/grids.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from ..config import compose, plain
from ..console import VERBOSE_ENV, take_verbose_flag
from ..record.jobdir import JOB_LOG_FILE
from ..errors import ConfigError
from ..studies.cost import CPU_GFLOPS, GPU_MFU, GPU_PEAK_TFLOPS, Rates, describe_plan, job_facts
from ..studies.progress import COMPLETED, job_progress
from ..studies.grids import run_grids
from ..spec import JobSpec
from ..studies.study import SCALES, Job, Study, available_studies, distinct_jobs, in_job, job_overrides, load_study
from ..training.resume import PREEMPT_EXIT_CODE
from .args import Command, Key, exit_with, run_command

COMMAND = Command("sweep", __doc__, overrides=True, keys=(
    Key("study", None, "a study of sweeps/ (or a path to a .yaml)", positional=True, kind=str),
    Key("scale", "cpu", "cpu = the config defaults; paper = the study's paper scale", flag="--scale",
        choices=SCALES),
    Key("dry_run", False, "validate and list the jobs and their cost; train nothing", flag="--dry-run"),
    Key("list", False, "list the studies", flag="--list"),
    Key("verbose", False, f"-v: keep library output on the terminal, not in each job's {JOB_LOG_FILE}",
        flag="--verbose"),
    Key("mfu", GPU_MFU, "GPU model-FLOPs utilisation the GPU-hours assume", flag="--mfu"),
    Key("peak_tflops", GPU_PEAK_TFLOPS, "GPU peak TFLOP/s the GPU-hours assume", flag="--peak-tflops"),
    Key("cpu_gflops", CPU_GFLOPS, "effective CPU training GFLOP/s the CPU-hours assume", flag="--cpu-gflops"),
))


def plan(study: Study, scale: str = "cpu", extra: Sequence[str] | None = None) -> list[Job]:
    """Every job of the study, composed as Hydra will compose it (its directory and launcher from
    the Hydra config) and resolved into its JobSpec."""
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


def side_by_side(jobs: list[Job], progress) -> int:
    """How many of the jobs left the launcher runs at once (studies/planning.plan_workers)."""
    from ..studies.planning import plan_workers

    left = [job.spec.composed for job, p in zip(jobs, progress) if p.state != COMPLETED]
    launcher = jobs[0].launcher
    if not left or "n_jobs" not in launcher:
        return 1  # hydra/launcher=basic: one after another
    try:
        return plan_workers(left, launcher.get("n_jobs"), launcher.get("threads_per_job"))[0]
    except ConfigError:
        return 1


def list_studies() -> int:
    for name in available_studies():
        study = load_study(name)
        print(f"{name:<16} {study.jobs} jobs  {study.description.splitlines()[0]}")
    return 0


def run_sweep(values: dict[str, Any], overrides: list[str]) -> int:
    if values["verbose"]:
        os.environ[VERBOSE_ENV] = "1"  # inherited by every grid's `run -m` process
    if values["list"] or not values["study"]:
        return list_studies()
    study, scale = load_study(values["study"]), values["scale"]
    jobs = plan(study, scale, overrides)
    facts = job_facts(jobs)  # builds every job's model: a bad combination stops here, naming the job
    rates = Rates(values["peak_tflops"], values["mfu"], values["cpu_gflops"])
    progress = job_progress(jobs, facts)  # what the job directories hold: completed, stale, partial
    print(describe_plan(study, scale, jobs, facts, overrides, rates, per_job=values["dry_run"],
                        progress=progress, side_by_side=side_by_side(jobs, progress)), flush=True)
    if values["dry_run"]:
        return 0
    outcome = run_grids(study, scale, overrides)
    if outcome.preempted:
        return PREEMPT_EXIT_CODE
    print(f"[sweep] {study.name}: results in {jobs[0].job_dir.parent}"
          + (f"; {outcome.failed} grid(s) had failed jobs (see above)" if outcome.failed else ""))
    return 1 if outcome.failed else 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_command(COMMAND, take_verbose_flag(args), run_sweep)  # -v: the one short flag


if __name__ == "__main__":
    exit_with(main())
