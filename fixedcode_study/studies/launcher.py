"""Jobs of a `-m` sweep side by side on one machine: hydra/launcher=parallel.

`hydra/launcher=parallel` (conf/hydra/launcher/parallel.yaml; the default in conf/config.yaml) is
Hydra's joblib launcher (hydra-joblib-launcher: loky worker processes, Hydra's own per-job setup in
each worker) with what a training sweep needs on top. `hydra/launcher=basic` runs the jobs one
after another in the sweep's process, as before. The parts live beside it:

  planning.py  how many jobs at once, with how many threads (`n_jobs`, `threads_per_job`: auto).
               With 1 the jobs run one after another in this process, exactly as under
               hydra/launcher=basic (progress bars included).
  data.py      every job's config is composed here first and its data prepared once per distinct
               data config before any job starts, so workers find the token cache ready.
  worker.py    one job in a worker: start and result lines instead of bars, preemption, orphans.
  results.py   what each job returns (`JobResult`): `launch` returns them as the jobs' Hydra return
               values, in launch order, and `run`'s command summarises what the launch returns.

Preemption: SIGTERM/SIGUSR1/SIGUSR2 to the sweep's process are forwarded to the workers: each
running job saves last.ckpt at its next step and records `preempted`, no further job starts, and
the sweep exits 143 once they have stopped. A job preempted on its own (its worker got the signal)
stops the sweep the same way. Before the jobs fan out (data preparation) the sweep stops at once
with 143. Re-running the same command resumes those jobs from last.ckpt and skips completed ones:
job directories and resume semantics are the sequential launcher's (Hydra composes the same job keys).

Numbers: a job's thread count can move the last bits of a CPU matmul, like the device count of a
GPU run. It is recorded (results.json "runtime.threads") and, like trainer.devices, kept out of the
job key and the fingerprint, so a job resumes or is reused under either launcher; bitwise equality
holds at equal thread counts.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

from ..config import job_config
from .data import prepare_data_once
from .planning import one_cpu_process, plan_workers
from .results import NOT_STARTED, JobResult
from .worker import PREEMPT_EXIT, SIGNALS, init_worker, job_dir, run_in_worker

__all__ = ["HydraParallelLauncher", "ParallelLauncher", "register_with_hydra"]

log = logging.getLogger(__name__)


class ParallelLauncher(JoblibLauncher):
    """Hydra's joblib launcher with n_jobs/threads_per_job `auto`, data prepared once, preemption
    forwarded to the workers and every job's `JobResult` returned, in launch order (module docstring)."""

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
        composed = [loader.load_sweep_config(self.config, list(o)) for o in job_overrides]
        jobs = [(job_dir(c), job_config(c)) for c in composed]  # each job's config as plain data
        configs = [config for _, config in jobs]
        n_jobs, threads = plan_workers(configs, self.n_jobs, self.threads_per_job)
        if n_jobs == 1:  # one after another in this process: hydra/launcher=basic exactly
            if len(configs) > 1:
                log.info("One job at a time (hydra.launcher.n_jobs=%s resolved to 1: %s)", self.n_jobs,
                         "set explicitly" if self.n_jobs not in (None, "auto") else
                         "a GPU or multi-device trainer" if not all(one_cpu_process(c["trainer"]) for c in configs)
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
            prepare_data_once(jobs)  # a signal here stops the sweep at once (Preempted, exit 143)
            returns = self._fan_out(job_overrides, initial_job_idx, n_jobs, threads)
        finally:
            self._fanning_out = False
            for signum, handler in prior.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

        ordered = [returns[i] for i in sorted(returns)]  # the jobs' returns, in launch order: the sweep's results
        results = [r._return_value for r in ordered if r.status == JobStatus.COMPLETED]
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
            initializer=init_worker, initargs=(threads, self._pid, SIGNALS, env))

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
