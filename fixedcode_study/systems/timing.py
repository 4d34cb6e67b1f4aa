"""The benchmark's passes over the models: which settings run, in which order the fits are timed,
the peak-memory pass after them, and N jobs side by side.

Settings (`settings=`): how each model is run, side by side in the same process --
  fp32           trainer.precision=32-true, eager
  fp32_compiled  32-true, torch.compile (training/speed.py: the whole model, and the loss)
  bf16           bf16-mixed (Lightning's autocast plugin), eager
  bf16_compiled  bf16-mixed, compiled
  fp32_compiled_input, bf16_compiled_input
                 compiled with our input layer compiled too (`run` keeps it eager: training/speed.py);
                 the HF reference has no such split, it runs once per precision and compile
`default` is what `run` uses for the job (its trainer precision and resolved train.compile) and
`all` is the four.

Timing order (schedule "abba"): each model gets its own Trainer.fit (systems/fit.py), so steps of
different models cannot alternate; instead the timed steps are split over two passes, the models in
order (A B C D) and then reversed (D C B A), each fit from a fresh build with its own warm-up steps,
and the median is taken over both passes. A load change that drifts linearly over the run then hits
every model alike (each one's two fits sit symmetrically around the middle of the run); medians
damp the rest. Schedule "sequential": one pass, all steps of each model in one fit.

Memory: after all timing (the CPU meter makes small allocations slower), each model built fresh and
alone (the HF model without the model it is converted from), under systems.meters.PeakMemory.

Single calls (`interleaved_calls`, the head bench): when each timed unit is one function call, not a
fit, the calls of all subjects alternate within one process: an untimed warm-up call of each, then
`repeats` rounds in order and reversed in turn (A B C, C B A, ...), so load drift hits all alike.

Jobs side by side (`jobs=N`, CPU): N spawned processes with cores/N threads each, started
together, each timing its own fit of the same model; their tokens/s summed is what a parallel sweep
gets (hydra/launcher=parallel).
"""

from __future__ import annotations

import gc
import os
import queue
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..spec import JobSpec
from .fit import DEFAULT_ALL, REFERENCE, SETTINGS, Setting, fit_steps
from .meters import PeakMemory, PeakMeters, checkpoint_bytes

SCHEDULES = ("abba", "sequential")


# -- which settings, which order -------------------------------------------------------------------

def default_setting(spec: JobSpec, device: torch.device) -> Setting:
    """The setting `run` uses for this job (its trainer precision; train.compile as its spec decided
    it, from the model it builds)."""
    precision = "bf16-mixed" if device.type == "cuda" else spec.trainer.precision
    compiled = spec.runtime.compile
    named = [s for s in SETTINGS.values() if s.precision == precision and s.compile == compiled and s.input_eager]
    return named[0] if named else Setting(f"{precision}{'_compiled' if compiled else ''}", precision, compiled)


def check_settings(spec: str) -> list[str]:
    """The parts of a `settings=` value, each `default`, `all` or a SETTINGS name."""
    parts = [p for p in spec.split(",") if p]
    for part in parts:
        if part not in ("all", "default") and part not in SETTINGS:
            raise ConfigError("settings", f"unknown setting {part!r}", f"use default, all or {', '.join(SETTINGS)}")
    if not parts:
        raise ConfigError("settings", "no setting given", "use default, all or a list such as fp32,bf16_compiled")
    return parts


def resolve_settings(names: str, spec: JobSpec, device: torch.device) -> list[Setting]:
    """`default`, `all`, or a comma-separated list of SETTINGS names (and `default`)."""
    out: list[Setting] = []
    for part in check_settings(names):
        if part == "all":
            chosen = [SETTINGS[name] for name in DEFAULT_ALL]  # the *_input settings are asked by name
        elif part == "default":
            chosen = [default_setting(spec, device)]
        else:
            chosen = [SETTINGS[part]]
        out += [s for s in chosen if s not in out]
    return out


def resolve_schedule(schedule: str, steps: int) -> str:
    """"auto" and the former name "interleaved" mean abba; one timed step cannot be split, so it is sequential."""
    schedule = {"auto": "abba", "interleaved": "abba"}.get(schedule, schedule)
    if schedule not in SCHEDULES:
        raise ConfigError("schedule", f"unknown schedule {schedule!r}", f"use one of auto, {', '.join(SCHEDULES)}")
    return "sequential" if steps < 2 else schedule


def pass_plan(names: list[str], steps: int, schedule: str) -> list[tuple[list[str], int]]:
    """(model order, timed steps per model) of each pass: abba splits the steps over an in-order and
    a reversed pass (the first gets the odd one); sequential is one in-order pass."""
    if schedule == "sequential":
        return [(list(names), steps)]
    first = (steps + 1) // 2
    return [(list(names), first), (list(names)[::-1], steps - first)]


def subject_key(name: str, setting: Setting, several: bool) -> str:
    """The row name: `learned`, or `learned@bf16_compiled` when several settings are compared."""
    return f"{name}@{setting.name}" if several else name


@dataclass(frozen=True)
class Subject:
    """One row of the benchmark: a model (input variant or REFERENCE) in one setting, with its job's spec."""

    key: str
    name: str
    setting: Setting
    spec: JobSpec


def subjects(specs: dict[str, JobSpec], reference: JobSpec | None, settings: list[Setting]) -> list[Subject]:
    """Every model in every setting, settings outermost; the reference (if any) last in each, once
    per precision and compile: input_eager is a choice of our Decoder's, and the reference is
    compiled whole either way (fit.compile_subject), so a _input setting next to its plain twin
    would only time the same HF model again."""
    several = len(settings) > 1
    rows, reference_runs = [], set()
    for st in settings:
        rows += [Subject(subject_key(name, st, several), name, st, spec) for name, spec in specs.items()]
        if reference is not None and (st.precision, st.compile) not in reference_runs:
            reference_runs.add((st.precision, st.compile))
            rows.append(Subject(subject_key(REFERENCE, st, several), REFERENCE, st, reference))
    return rows


# -- the passes ------------------------------------------------------------------------------------

def timed_passes(chosen: list[Subject], plan: list[tuple[list[str], int]], warmup: int, device: torch.device,
                 batch: torch.Tensor, workdir: Path, peaks: PeakMeters) -> dict[str, dict[str, Any]]:
    """Per row key: its timed steps' wall and CPU seconds, first losses and first-step times over all
    passes, and (from its first fit) the live state, checkpoint size, optimizer groups, task type
    and the architecture of the model built."""
    by_key = {s.key: s for s in chosen}
    results: dict[str, dict[str, Any]] = {k: {"wall": [], "cpu": [], "first_losses": [], "first_step": []}
                                          for k in by_key}
    for order, timed_steps in plan:
        for k in order:
            s = by_key[k]
            peaks.sample()
            fit = fit_steps(s.name, s.spec, device, batch, warmup + timed_steps, workdir, setting=s.setting)
            r, rec = results[k], fit.record
            r["wall"] += rec.wall[warmup:]
            r["cpu"] += rec.cpu[warmup:]
            r["first_losses"].append(rec.first_loss)
            r["first_step"].append(rec.wall[0])
            if "state" not in r:  # measured once, on the live model after its first fit
                r.update(state=rec.state, checkpoint=checkpoint_bytes(s.name, fit.task.model, s.spec, workdir),
                         optimizer_groups=rec.optimizer_groups,
                         trainable_params=sum(rec.optimizer_groups.values()),
                         lightning_module=f"{rec.module_type.__module__}.{rec.module_type.__qualname__}",
                         architecture=fit.config)
            del fit, rec
            gc.collect()
    return results


def memory_pass(chosen: list[Subject], device: torch.device, batch: torch.Tensor, memory_steps: int,
                workdir: Path) -> tuple[str, dict[str, int]]:
    """(the meter's kind, peak bytes per row key): each model built fresh and alone, after all timing."""
    meter = PeakMemory(device)
    peaks: dict[str, int] = {}
    for s in chosen:
        meter.start()
        fit = fit_steps(s.name, s.spec, device, batch, max(1, memory_steps), workdir, same_weights=False,
                        setting=s.setting)
        peaks[s.key] = meter.peak()
        del fit
        gc.collect()
    return meter.kind, peaks


def interleaved_calls(calls: Mapping[str, Callable[[], dict[str, float]]], repeats: int, warmup: int = 1
                      ) -> dict[str, dict[str, list[float]]]:
    """Per subject, per phase: the seconds of each timed call. Each call times its own phases and
    returns {phase: seconds}; `warmup` untimed calls of every subject first (first-use allocations,
    the optimizer's moments), then `repeats` rounds alternating the order (abba over calls)."""
    names = list(calls)
    for _ in range(warmup):
        for name in names:
            calls[name]()
    times: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    for r in range(repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            for phase, seconds in calls[name]().items():
                times[name].setdefault(phase, []).append(seconds)
    return times


# -- jobs side by side -----------------------------------------------------------------------------

def _side_by_side_worker(args: tuple, barrier: Any, results: Any) -> None:
    """One of N spawned jobs: set its threads, build its model, wait for the others, time its fit."""
    name, setting_name, spec, steps, warmup, threads = args
    torch.set_num_threads(threads)
    B, T = spec.train.batch_size, spec.train.seq_len
    g = torch.Generator().manual_seed(spec.seed)
    batch = torch.randint(0, spec.model.preset.vocab_size, (B, T + 1), generator=g)
    workdir = Path(tempfile.mkdtemp(prefix="fixedcode-bench-job-"))
    try:
        barrier.wait()
        fit = fit_steps(name, spec, torch.device("cpu"), batch, warmup + steps, workdir, setting=SETTINGS[setting_name])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results.put({"median_s": statistics.median(fit.record.wall[warmup:]), "tokens_per_step": B * T})


def parallel_row(subject: Subject, jobs: int, steps: int, warmup: int) -> dict[str, Any]:
    """`jobs` fits of the same model run at once, cores/jobs threads each: aggregate tokens/s. Each job
    gets the subject's resolved spec (a spawned process composes and resolves nothing itself)."""
    import multiprocessing as mp

    setting = subject.setting
    cores = os.cpu_count() or 1
    threads = max(1, cores // jobs)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(jobs), ctx.Queue()
    args = (subject.name, setting.name, subject.spec, steps, warmup, threads)
    procs = [ctx.Process(target=_side_by_side_worker, args=(args, barrier, results)) for _ in range(jobs)]
    for proc in procs:
        proc.start()
    out: list[dict[str, Any]] = []
    while len(out) < jobs:
        try:
            out.append(results.get(timeout=5))
        except queue.Empty:  # a job that died sends nothing: stop the others (waiting at the barrier) too
            if failed := [proc.exitcode for proc in procs if proc.exitcode]:
                for proc in procs:
                    proc.terminate()
                raise RuntimeError(f"bench: a side-by-side job exited with {failed[0]}") from None
    for proc in procs:
        proc.join()
        if proc.exitcode:
            raise RuntimeError(f"bench: a side-by-side job exited with {proc.exitcode}")
    tps = sum(o["tokens_per_step"] / o["median_s"] for o in out)
    return {"name": f"{subject.name}@{setting.name} x{jobs} jobs", "model_name": subject.name, "setting": setting.name,
            "precision": setting.precision, "compiled": setting.compile, "kind": "side_by_side", "jobs": jobs,
            "threads_per_job": threads, "tokens_per_s": tps,
            "per_job_step_ms_median": [o["median_s"] * 1e3 for o in out]}
