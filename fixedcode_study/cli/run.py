"""Hydra entry point: `python -m fixedcode_study.run [-m] [overrides]`.

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
`cli` prints the summary from what the launch returns.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning.fabric.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from ..config import CONFIG_DIR
from ..errors import ConfigError, WriteFailed
from ..console import job_console, say as tell, take_verbose_flag
from ..record.jobdir import JobBusy, JobDir
from ..spec import JobSpec
from ..studies.launcher import register_with_hydra
from ..studies.results import JobResult, summary_lines
from ..training.job import JobOutcome, run_job
from ..training.resume import Preempted
from .run_line import check_flags, launch

register_with_hydra()  # hydra/launcher=parallel (conf/hydra/launcher/parallel.yaml)


def say(message: str, err: bool = False, log: bool = True) -> None:  # the terminal, also inside a job
    if rank_zero_only.rank == 0:  # ranks > 0 of a distributed job run this too; one voice is enough
        tell(message, err=err, log=log)


def _report(job_dir: Path, outcome: JobOutcome) -> JobResult:
    record = outcome.record
    final = record.get("final") or {}
    if outcome.action == "skipped":
        say(f"[run] {job_dir} already completed; skipping (force=true retrains it)", log=False)  # untouched
        return JobResult(str(job_dir), "skipped", record.get("status", ""), val_loss=final.get("val_loss"))
    if not outcome.ok:
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


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> JobResult:
    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    log = JobDir(job_dir).log_file
    try:
        with job_console(log):
            outcome = run_job(JobSpec.from_cfg(cfg), job_dir, list(hc.overrides.task))
            return _report(job_dir, outcome)  # inside: the result line goes to the log as well
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


def cli() -> None:
    sys.argv[1:] = take_verbose_flag(sys.argv[1:])  # -v is ours, not Hydra's: FIXEDCODE_VERBOSE=1
    if not check_flags(sys.argv[1:], __doc__):  # a bad option: one line, exit 2
        main()  # --help, --cfg, --info, ...: Hydra's own
        return
    results = [r for r in launch(main.__wrapped__, CONFIG_DIR) if isinstance(r, JobResult)]
    lines, failed = summary_lines(results)
    for line in lines:
        say(line)
    if failed:
        say(failed, err=True)
        sys.exit(1)


if __name__ == "__main__":
    cli()
