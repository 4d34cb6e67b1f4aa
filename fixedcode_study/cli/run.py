"""`fixedcode run [-m] [overrides]`: train one job, or (-m) a Hydra multirun of jobs.

Also `python -m fixedcode_study.run [-m] [overrides]`, the study's own command. The command line is
Hydra's own (overrides of conf/, -m, --cfg job, --info, ...), plus `-v`.

Thin by design: Hydra composes the config (once per job), `spec.JobSpec.from_cfg` resolves and
validates it once (a bad setting: one line naming the field, exit 2), and `training.job.run_job`
decides under the job lock: completed jobs are skipped, interrupted ones resume, trained ones only
redo a missing evaluation, and a job stored under other settings is refused by name. In a sweep (-m)
a failing job is recorded and the sweep goes on; exit 1 when any job failed or is `eval_failed`,
143 when preempted (SIGTERM/USR1/USR2); a bad option or override is one line and exit 2
(cli/run_line.py).

The terminal shows one progress bar and one result line per job; what the libraries print and a
failed job's traceback go to <job>/run.log (console.py); `-v` (or FIXEDCODE_VERBOSE=1) keeps it
all on the terminal. A sweep's jobs run side by side on a CPU machine (hydra/launcher=parallel, the
default; studies/launcher.py) or one by one (hydra/launcher=basic); each returns a `JobResult`, and
`main` prints the summary from what the launch returns.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from ..config import CONFIG_DIR
from ..errors import ConfigError, WriteFailed
from ..record.jobdir import JobBusy, JobDir
from ..studies.results import JobResult, summary_lines
from .args import exit_with, wants_help, with_argv
from .run_line import check_flags, launch


def say(message: str, err: bool = False, log: bool = True) -> None:  # the terminal, also inside a job
    from ..console import say as tell

    # Ranks > 0 of a distributed job run this too; one voice is enough. A process that has not
    # loaded Lightning runs no rank (a sweep's own process): it is not imported for this (5 s).
    rank_zero = sys.modules.get("lightning.fabric.utilities.rank_zero")
    if rank_zero is None or rank_zero.rank_zero_only.rank == 0:
        tell(message, err=err, log=log)


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def job(cfg: DictConfig) -> JobResult:
    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    log = JobDir(job_dir).log_file
    # The training stack loads here, in the job: `fixedcode run --help` and a bad option answer without it.
    from ..console import job_console
    from ..spec import JobSpec
    from ..studies.results import job_result
    from ..training.job import run_job
    from ..training.resume import Preempted

    try:
        with job_console(log):
            outcome = run_job(JobSpec.from_cfg(cfg), job_dir, list(hc.overrides.task))
            return job_result(job_dir, outcome, say)  # inside: the result line goes to the log as well
    except (JobBusy, WriteFailed) as busy:  # each says it all in one line; exit 1
        say(f"[run] job {job_dir.name}: {busy}", err=True)
        if not multirun:
            sys.exit(1)
        return JobResult(str(job_dir), "failed", why=str(busy))
    except Preempted as stop:
        say(f"[run] job {job_dir.name} {stop}", err=True)
        raise  # exits 143; a sweep stops here too (its allocation is going away)
    except ConfigError as err:
        if not multirun:
            say(f"error: {err}", err=True)
            sys.exit(2)
        say(f"[run] job {job_dir.name} failed: {err}", err=True)
        return JobResult(str(job_dir), "failed", why=str(err))
    except Exception as err:
        if not multirun:
            raise
        why = " ".join(f"{type(err).__name__}: {err}".split())  # one line, however the library wraps it
        say(f"[run] job {job_dir.name} failed: {why} (traceback in {log})", err=True)
        return JobResult(str(job_dir), "failed", why=why)


def main(argv: list[str] | None = None) -> int:
    """The jobs of this command line (default: sys.argv's); the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not wants_help(args):  # the help answers before the training stack (and the console) loads
        from ..console import take_verbose_flag

        args = take_verbose_flag(args)  # -v is ours, not Hydra's: FIXEDCODE_VERBOSE=1
    # Hydra reads sys.argv itself. As a process's own command line, argv[0] stays: Lightning's ddp
    # re-executes `python -m fixedcode_study.run` from it in every rank.
    return with_argv(sys.argv[0] if argv is None else "fixedcode run", args, lambda: run_jobs(args))


def run_jobs(args: list[str]) -> int:
    if not check_flags(args, __doc__):  # a bad option: one line, exit 2
        job()  # --help, --cfg, --info, ...: Hydra's own
        return 0
    from ..studies.launcher import register_with_hydra

    register_with_hydra()  # hydra/launcher=parallel (conf/hydra/launcher/parallel.yaml)
    results = [r for r in launch(job.__wrapped__, CONFIG_DIR) if isinstance(r, JobResult)]
    lines, failed = summary_lines(results)
    for line in lines:
        say(line)
    if failed:
        say(failed, err=True)
        return 1
    return 0


if __name__ == "__main__":
    exit_with(main())
