"""Jobs of a `-m` sweep side by side on one machine, and what every job tells the sweep's summary.

`hydra/launcher=parallel` (conf/hydra/launcher/parallel.yaml; the default in conf/config.yaml) is
Hydra's joblib launcher (hydra-joblib-launcher: loky worker processes, Hydra's own per-job setup in
each worker) with what a training sweep needs on top. `hydra/launcher=basic` runs the jobs one
after another in the sweep's process, as before.

  n_jobs            `auto`: on a CPU trainer (one process per job) min(jobs in the sweep,
                    cores // threads_per_job); 1 when any job's trainer uses a GPU, several devices
                    or nodes (they bring their own parallelism; ddp_spawn spawns its ranks). An
                    integer wins. With 1 the jobs run one after another in this process, exactly as
                    under hydra/launcher=basic (progress bars included). Cores: the CPUs this
                    process may run on (os.sched_getaffinity: a SLURM or taskset allocation), else
                    os.cpu_count().
  threads_per_job   `auto`: 1 on machines with <= 3 cores, else 2, or an integer; a sweep whose jobs
                    set `threads=N` themselves counts N. Each worker runs its jobs with
                    FIXEDCODE_THREADS_PER_JOB (training/speed.py applies it under `threads: auto`)
                    and OMP/MKL/OpenBLAS thread variables set to it, so jobs do not fight over cores.
  data              every job's config is composed here first and `data.prepare` runs once per
                    distinct data config before any job starts (not for jobs already trained), so
                    workers find the token cache ready instead of tokenizing the corpus side by side.
  terminal          no progress bars in workers (two bars would interleave): one start line per job
                    that trains (console.py attempt_header) and its result line.
  summary           `run.main` returns a `JobResult` (picklable) per job; jobs that run in this
                    process record it themselves (`collect`), the parallel launcher records the ones
                    its workers return. `run.cli` prints the summary from `RESULTS`.
  preemption        SIGTERM/SIGUSR1/SIGUSR2 to the sweep's process are forwarded to the workers: each
                    running job saves last.ckpt at its next step and records `preempted`, no further
                    job starts, and the sweep exits 143 once they have stopped. A job preempted on
                    its own (its worker got the signal) stops the sweep the same way. Before the
                    jobs fan out (data preparation) the sweep stops at once with 143.
  orphans           a worker whose parent died (kill -9) sends itself SIGTERM: its job checkpoints
                    and records `preempted`, then the worker exits (143) instead of training on, or
                    waiting for jobs, forever. Re-running the same command resumes those jobs from
                    last.ckpt and skips completed ones: job directories and resume semantics are the
                    sequential launcher's (Hydra composes the same job keys).

Numbers: a job's thread count can move the last bits of a CPU matmul, like the device count of a
GPU run. It is recorded (results.json "runtime.threads") and, like trainer.devices, kept out of the
job key and the fingerprint, so a job resumes or is reused under either launcher; bitwise equality
holds at equal thread counts.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

__all__ = ["JobResult", "ParallelLauncher", "RESULTS", "collect", "plan_workers"]

log = logging.getLogger(__name__)

PREEMPT_EXIT = 143           # = training.resume.PREEMPT_EXIT_CODE (imported lazily: it pulls in Lightning)
SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")   # = training.resume.PREEMPT_SIGNALS
NOT_STARTED = "not_started"


# -- what a job tells the sweep ---------------------------------------------------------------------
@dataclass(frozen=True)
class JobResult:
    """One job's outcome, as the Hydra job's return value (crosses process boundaries by pickle)."""

    job_dir: str
    action: str              # trained | evaluated | reused | skipped | failed | preempted | not_started
    status: str = ""         # the record's status (completed, eval_failed, failed, preempted); "" when none
    why: str = ""            # one line: what went wrong
    val_loss: float | None = None

    @property
    def name(self) -> str:
        return Path(self.job_dir).name

    @property
    def failed(self) -> bool:
        return self.action == "failed" or (self.action not in ("preempted", NOT_STARTED) and self.status != "completed")


RESULTS: list[JobResult] = []  # this process's sweep, in launch order; run.cli summarises it


def collect(result: JobResult) -> JobResult:
    RESULTS.append(result)
    return result


# -- how many jobs at once ------------------------------------------------------------------------
def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _one_cpu_process(trainer: Any) -> bool:
    """A job that runs as one CPU process: it can share the machine's cores with other jobs."""
    accelerator = str(trainer.get("accelerator", "auto")).lower()
    if accelerator == "auto":
        import torch

        accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    devices, nodes = trainer.get("devices", 1), trainer.get("num_nodes", 1)
    return accelerator == "cpu" and str(devices) in ("1", "auto", "None") and str(nodes) in ("1", "None")


def _setting(value: Any, name: str) -> int | None:
    if value in (None, "auto"):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value == 0:
        from ..errors import ConfigError

        raise ConfigError(f"hydra.launcher.{name}", f"got {value!r}", "use auto or a positive number")
    return value


def plan_workers(cfgs: Sequence[Any], n_jobs: Any = "auto", threads_per_job: Any = "auto",
                 cores: int | None = None) -> tuple[int, int]:
    """(jobs at once, threads per job) for these composed job configs."""
    cores = cores or available_cores()
    threads = _setting(threads_per_job, "threads_per_job")
    if threads is not None and threads < 0:
        from ..errors import ConfigError

        raise ConfigError("hydra.launcher.threads_per_job", f"got {threads}", "use auto or a positive number")
    if threads is None:
        threads = 1 if cores <= 3 else 2
        own = [c.get("threads") for c in cfgs]
        own = [t for t in own if isinstance(t, int) and not isinstance(t, bool) and t > 0]
        threads = max([threads, *own]) if own else threads
    explicit = _setting(n_jobs, "n_jobs")
    if explicit is not None:
        jobs = explicit if explicit > 0 else max(1, cores + 1 + explicit)  # joblib's -1 = every core
    elif all(_one_cpu_process(c.trainer) for c in cfgs):
        jobs = max(1, cores // threads)
    else:
        jobs = 1
    return max(1, min(jobs, len(cfgs))), threads


# -- data, prepared once in the sweep's process ---------------------------------------------------
def _job_dir(cfg: Any) -> Path:
    return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


def prepare_data_once(cfgs: Sequence[Any]) -> int:
    """data.prepare once per distinct data config among the jobs that still train; returns how many.
    A config that fails here is left to its job, which reports the error as its own."""
    from omegaconf import OmegaConf

    from ..data.prepare import prepare
    from ..record.jobdir import JobDir

    seen: set[str] = set()
    for cfg in cfgs:
        try:
            if not cfg.get("force") and JobDir(_job_dir(cfg)).is_trained():
                continue  # skipped or evaluated only: no tokens needed
            key = json.dumps(OmegaConf.to_container(cfg.data, resolve=True), sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            prepare(cfg.data)
        except Exception as err:  # noqa: BLE001 - the job meets it again and reports it
            log.debug("data preparation left to the job: %s", err)
    return len(seen)


# -- the worker side ------------------------------------------------------------------------------
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


def _init_worker(threads: int, parent_pid: int, signals: Sequence[str], env: dict[str, str]) -> None:
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
    from omegaconf import open_dict

    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    job_dir = str(_job_dir(sweep_config).resolve())
    if _Worker.stop is not None:  # the sweep is stopping: start nothing new
        return idx, _returned(overrides, JobResult(job_dir, NOT_STARTED, why="the sweep was preempted first"))
    _Worker.in_task, _Worker.raised = True, False
    try:
        ret = run_job(hydra_context=hydra_context, config=sweep_config, task_function=task_function,
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as stop:  # Preempted (exit 143), or a job that exited on its own
        preempted = stop.code == PREEMPT_EXIT
        ret = _returned(overrides, JobResult(job_dir, "preempted" if preempted else "failed",
                                             "preempted" if preempted else "", str(stop) or f"exit {stop.code}"))
    finally:
        _Worker.in_task = False
    if _orphaned():
        os._exit(PREEMPT_EXIT)
    return idx, ret


def _returned(overrides: Sequence[str], result: JobResult) -> JobReturn:
    return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=result)


# -- the launcher ---------------------------------------------------------------------------------
class ParallelLauncher(JoblibLauncher):
    """Hydra's joblib launcher with n_jobs/threads_per_job `auto`, data prepared once, preemption
    forwarded to the workers and every job's `JobResult` collected here (module docstring)."""

    def __init__(self, n_jobs: Any = "auto", threads_per_job: Any = "auto", **joblib: Any) -> None:
        super().__init__(**joblib)
        self.n_jobs, self.threads_per_job = n_jobs, threads_per_job
        self._stop: int | None = None
        self._fanning_out = False
        self._parallel: Any = None
        self._pid = os.getpid()

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher
        from hydra.core.utils import configure_log, filter_overrides, setup_globals

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        loader = self.hydra_context.config_loader
        cfgs = [loader.load_sweep_config(self.config, list(o)) for o in job_overrides]
        n_jobs, threads = plan_workers(cfgs, self.n_jobs, self.threads_per_job)
        if n_jobs == 1:  # one after another in this process: hydra/launcher=basic exactly
            if len(cfgs) > 1:
                log.info("One job at a time (hydra.launcher.n_jobs=%s resolved to 1: %s)", self.n_jobs,
                         "set explicitly" if self.n_jobs not in (None, "auto") else
                         "a GPU or multi-device trainer" if cfgs and not all(_one_cpu_process(c.trainer) for c in cfgs)
                         else "too few cores for two")
            return BasicLauncher.launch(self, job_overrides, initial_job_idx)  # type: ignore[arg-type]

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs, {n_jobs} at a time with {threads} thread(s) each "
                 f"(hydra.launcher.n_jobs / threads_per_job; hydra/launcher=basic runs them one by one)")
        for idx, overrides in enumerate(job_overrides):
            log.info(f"\t#{initial_job_idx + idx} : {' '.join(filter_overrides(overrides))}")

        prior = self._catch_signals()
        try:
            prepare_data_once(cfgs)  # a signal here stops the sweep at once (Preempted, exit 143)
            returns = self._fan_out(job_overrides, initial_job_idx, n_jobs, threads)
        finally:
            self._fanning_out = False
            for signum, handler in prior.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

        ordered = [returns[i] for i in sorted(returns)]
        results = [r._return_value for r in ordered if r.status == JobStatus.COMPLETED]
        for result in results:
            if isinstance(result, JobResult) and result.action != NOT_STARTED:
                collect(result)
        if self._stop is not None:
            from ..console import say

            stopped = sum(isinstance(r, JobResult) and r.action == "preempted" for r in results)
            waiting = len(job_overrides) - len(returns) + sum(
                isinstance(r, JobResult) and r.action == NOT_STARTED for r in results)
            say(f"[run] sweep preempted by {signal.Signals(self._stop).name}: {stopped} running job(s) preempted, "
                f"{waiting} not started; re-run the same command to resume", err=True)
            raise SystemExit(PREEMPT_EXIT)
        return ordered

    def _fan_out(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, n_jobs: int,
                 threads: int) -> dict[int, JobReturn]:
        from hydra.core.singleton import Singleton
        from joblib import Parallel, delayed

        from ..console import BARS_ENV
        from ..training.speed import THREADS_ENV

        singleton_state = Singleton.get_state()
        options = {k: v for k, v in self.joblib.items() if k not in ("backend", "n_jobs")}
        env = {THREADS_ENV: str(threads), BARS_ENV: "0"}
        self._parallel = Parallel(
            **options, n_jobs=n_jobs, backend="loky", return_as="generator_unordered",
            batch_size=1, pre_dispatch="n_jobs",  # one job per task, the next dispatched when one ends
            inner_max_num_threads=threads,        # OMP/MKL/OpenBLAS/... thread variables of the workers
            initializer=_init_worker, initargs=(threads, self._pid, SIGNALS, env))

        def jobs() -> Iterator[Any]:
            for idx, overrides in enumerate(job_overrides):
                if self._stop is not None:
                    return  # preempted: no further job starts
                yield delayed(run_in_worker)(initial_job_idx + idx, overrides, self.hydra_context, self.config,
                                             self.task_function, singleton_state)

        returns: dict[int, JobReturn] = {}
        self._fanning_out = True
        try:
            for idx, ret in self._parallel(jobs()):
                returns[idx - initial_job_idx] = ret
                result = ret._return_value if ret.status == JobStatus.COMPLETED else None
                if isinstance(result, JobResult) and result.action == "preempted" and self._stop is None:
                    self._stop = signal.SIGTERM  # a job preempted on its own: the sweep stops, as in sequence
                    self._forward(signal.SIGTERM)
        except Exception as err:
            if self._stop is None:
                raise  # e.g. a worker killed from outside (out of memory): joblib stops the sweep
            # A worker that was still starting when the signal came died of it (joblib then stops
            # the others): still a preemption; records and checkpoints are atomic, re-run resumes.
            log.warning("while stopping: %s: %s", type(err).__name__, str(err).splitlines()[0] if str(err) else "")
        return returns

    # -- signals ------------------------------------------------------------------------------------
    def _catch_signals(self) -> dict[int, Any]:
        prior: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return prior
        for name in SIGNALS:
            if hasattr(signal, name):
                signum = getattr(signal, name)
                prior[signum] = signal.getsignal(signum)
                signal.signal(signum, self._on_signal)
        return prior

    def _on_signal(self, signum: int, frame: Any) -> None:
        from ..training.resume import Preempted, in_forked_child

        if in_forked_child(self._pid, signum):
            return
        first = self._stop is None
        self._stop = self._stop or signum
        if not self._fanning_out:
            if first:
                raise Preempted(None, signum)  # before any job started: stop at once
            return
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        for pid in self._worker_pids():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _worker_pids(self) -> list[int]:
        executor = getattr(getattr(self._parallel, "_backend", None), "_workers", None)
        if executor is None:
            from joblib.externals.loky import reusable_executor

            executor = reusable_executor._executor
        return list(getattr(executor, "_processes", None) or {})


# -- registration with Hydra ----------------------------------------------------------------------
# Hydra instantiates a launcher only from a class registered under the `hydra_plugins` namespace
# (the plugins it scans, or one registered by hand with Plugins.register) and importable by that
# name. This project installs no hydra_plugins folder (setup.py ships fixedcode_study and analysis
# only), so the run app registers the launcher by hand before Hydra starts (fixedcode_study/run.py
# calls `register_with_hydra` at import), under the name conf/hydra/launcher/parallel.yaml gives as
# `_target_`: hydra_plugins.fixedcode_study.ParallelLauncher, a module that lives in sys.modules only.
PLUGIN_MODULE = "hydra_plugins.fixedcode_study"


class HydraParallelLauncher(ParallelLauncher):
    """ParallelLauncher under the plugin name Hydra accepts (hydra_plugins.fixedcode_study.ParallelLauncher)."""


HydraParallelLauncher.__module__ = PLUGIN_MODULE
HydraParallelLauncher.__name__ = HydraParallelLauncher.__qualname__ = "ParallelLauncher"


def register_with_hydra() -> None:
    import sys
    import types

    from hydra.core.plugins import Plugins

    if PLUGIN_MODULE not in sys.modules:
        module = types.ModuleType(PLUGIN_MODULE, "fixedcode_study's Hydra launcher (studies/launcher.py)")
        module.ParallelLauncher = HydraParallelLauncher  # type: ignore[attr-defined]
        sys.modules[PLUGIN_MODULE] = module
    Plugins.instance().register(HydraParallelLauncher)
