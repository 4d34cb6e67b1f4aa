"""How many jobs of a sweep run at once on this machine, and with how many threads each.

  n_jobs            `auto`: on a CPU trainer (one process per job) min(jobs in the sweep,
                    cores // threads_per_job); 1 when any job's trainer uses a GPU, several devices
                    or nodes (they bring their own parallelism; ddp_spawn spawns its ranks). An
                    integer wins. Cores: the CPUs this process may run on (os.sched_getaffinity: a
                    SLURM or taskset allocation), else os.cpu_count().
  threads_per_job   `auto`: 1 on machines with <= 3 cores, else 2, or an integer; a sweep whose jobs
                    set `threads=N` themselves counts N.

The jobs are given as plain composed configs (config.job_config); only their `threads` and
`trainer` groups are read (the trainer as spec/parts.TrainerSpec reads it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..spec.parts import TrainerSpec

__all__ = ["available_cores", "one_cpu_process", "plan_workers"]


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def one_cpu_process(trainer: Mapping[str, Any]) -> bool:
    """A job that runs as one CPU process: it can share the machine's cores with other jobs."""
    try:
        spec = TrainerSpec.of(trainer)
    except ConfigError:
        return False  # the job refuses its trainer itself, in one line; planned as one at a time
    accelerator = spec.accelerator.lower()
    if accelerator == "auto":
        import torch

        accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    return (accelerator == "cpu" and str(spec.devices) in ("1", "auto", "None")
            and str(spec.num_nodes) in ("1", "None"))


def _setting(value: Any, name: str) -> int | None:
    if value in (None, "auto"):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value == 0:
        raise ConfigError(f"hydra.launcher.{name}", f"got {value!r}", "use auto or a positive number")
    return value


def plan_workers(configs: Sequence[Mapping[str, Any]], n_jobs: Any = "auto", threads_per_job: Any = "auto",
                 cores: int | None = None) -> tuple[int, int]:
    """(jobs at once, threads per job) for these composed job configs."""
    cores = cores or available_cores()
    threads = _setting(threads_per_job, "threads_per_job")
    if threads is not None and threads < 0:
        raise ConfigError("hydra.launcher.threads_per_job", f"got {threads}", "use auto or a positive number")
    if threads is None:
        threads = 1 if cores <= 3 else 2
        own = [c["threads"] for c in configs]
        own = [t for t in own if isinstance(t, int) and not isinstance(t, bool) and t > 0]
        threads = max([threads, *own]) if own else threads
    explicit = _setting(n_jobs, "n_jobs")
    if explicit is not None:
        jobs = explicit if explicit > 0 else max(1, cores + 1 + explicit)  # joblib's -1 = every core
    elif all(one_cpu_process(c["trainer"]) for c in configs):
        jobs = max(1, cores // threads)
    else:
        jobs = 1
    return max(1, min(jobs, len(configs))), threads


def side_by_side(jobs: Sequence[Any], progress: Sequence[Any]) -> int:
    """How many of a study's jobs (studies.study.Job) not yet completed (studies.progress) the
    launcher runs at once: plan_workers over their composed configs, 1 for hydra/launcher=basic."""
    from .progress import COMPLETED

    left = [job.spec.composed for job, p in zip(jobs, progress) if p.state != COMPLETED]
    launcher = jobs[0].launcher
    if not left or "n_jobs" not in launcher:
        return 1  # hydra/launcher=basic: one after another
    try:
        return plan_workers(left, launcher.get("n_jobs"), launcher.get("threads_per_job"))[0]
    except ConfigError:
        return 1
