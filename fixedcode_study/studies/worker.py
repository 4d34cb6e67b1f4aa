"""The worker side of hydra/launcher=parallel: one job of a sweep in a loky worker process.

  terminal    no progress bars in workers (two bars would interleave): one start line per job that
              trains (console.py attempt_header) and its result line.
  preemption  a preemption signal to a worker is remembered, so no further job starts there, and
              stops a job that is still setting up; inside a job its own handlers take over
              (training/resume.py) and call this one once the record says `preempted`.
  orphans     a worker whose parent died (kill -9) sends itself SIGTERM: its job checkpoints and
              records `preempted`, then the worker exits (143) instead of training on, or waiting
              for jobs, forever.

Each worker runs its jobs with FIXEDCODE_THREADS_PER_JOB (training/speed.py applies it under
`threads: auto`) and OMP/MKL/OpenBLAS thread variables set to it, so jobs do not fight over cores.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from hydra.core.utils import JobReturn, JobStatus

from .results import NOT_STARTED, JobResult

__all__ = ["PREEMPT_EXIT", "SIGNALS", "init_worker", "job_dir", "run_in_worker"]

PREEMPT_EXIT = 143           # = training.resume.PREEMPT_EXIT_CODE (imported lazily: it pulls in Lightning)
SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")   # = training.resume.PREEMPT_SIGNALS


def job_dir(cfg: Any) -> Path:
    """Where Hydra puts a composed sweep job (its hydra.sweep.dir / subdir)."""
    return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


class _Worker:
    parent_pid: int | None = None
    pid: int | None = None
    stop: int | None = None      # a preemption signal this worker received
    in_task = False
    raised = False


def _worker_signal(signum: int, frame: Any) -> None:
    """A worker's handler outside a job's own (PreemptionGuard / ResumableCheckpoint replace it while
    they run and call it, with frame=None, once the record says `preempted`): remember the signal so
    no further job starts here, and stop a job that is still setting up."""
    if _Worker.pid is not None and os.getpid() != _Worker.pid:  # a process forked from the job: as
        signal.signal(signum, signal.SIG_DFL)                     # resume.in_forked_child, without
        os.kill(os.getpid(), signum)                               # importing Lightning in a handler
        return
    _Worker.stop = _Worker.stop or signum
    if frame is not None and _Worker.in_task and not _Worker.raised:
        from ..training.resume import Preempted  # imported by then: the job's modules are loaded

        _Worker.raised = True
        raise Preempted(None, signum)


def _orphaned() -> bool:
    return _Worker.parent_pid is not None and os.getppid() != _Worker.parent_pid


def _watch_parent() -> None:
    while not _orphaned():
        time.sleep(1.0)
    if not _Worker.in_task:
        os._exit(PREEMPT_EXIT)  # nothing running: nothing to save
    os.kill(os.getpid(), signal.SIGTERM)  # the job checkpoints and stops; run_in_worker then exits


def init_worker(threads: int, parent_pid: int, signals: Sequence[str], env: dict[str, str]) -> None:
    _Worker.parent_pid, _Worker.pid = parent_pid, os.getpid()
    for name in signals:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _worker_signal)
    os.environ.update(env)
    threading.Thread(target=_watch_parent, name="fixedcode-parent-watch", daemon=True).start()
    import torch

    torch.set_num_threads(threads)


def run_in_worker(idx: int, overrides: Sequence[str], hydra_context: Any, config: Any, task_function: Any,
                  singleton_state: dict[Any, Any]) -> tuple[int, JobReturn]:
    """One job in a worker: hydra_joblib_launcher's execute_job, plus preemption as a result."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals

    from ..config import number_job

    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = number_job(hydra_context.config_loader.load_sweep_config(config, list(overrides)), idx)
    HydraConfig.instance().set_config(sweep_config)
    where = str(job_dir(sweep_config).resolve())
    if _Worker.stop is not None:  # the sweep is stopping: start nothing new
        return idx, _returned(overrides, JobResult(where, NOT_STARTED, why="the sweep was preempted first"))
    _Worker.in_task, _Worker.raised = True, False
    try:
        ret = run_job(hydra_context=hydra_context, config=sweep_config, task_function=task_function,
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as stop:  # Preempted (exit 143), or a job that exited on its own
        preempted = stop.code == PREEMPT_EXIT
        ret = _returned(overrides, JobResult(where, "preempted" if preempted else "failed",
                                             "preempted" if preempted else "", str(stop) or f"exit {stop.code}"))
    finally:
        _Worker.in_task = False
    if _orphaned():
        os._exit(PREEMPT_EXIT)
    return idx, ret


def _returned(overrides: Sequence[str], result: JobResult) -> JobReturn:
    return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=result)
