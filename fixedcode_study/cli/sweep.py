"""`python -m fixedcode_study.sweep <study> [--scale cpu|paper] [--dry-run] [overrides]`: run one study.

A study is a file sweeps/<study>.yaml:
  name         the study; every job runs with name=<study>, so results land in
               ${out_root}/multirun/<study>/<job_key>/ (one directory analysis reads)
  description  what it measures
  jobs         {cpu: N, paper: M}: how many jobs each scale launches (checked by the tests)
  grids        list of {override key: [values]}; each grid is one Hydra multirun (a Cartesian
               product), and the study is the union of its grids
  scales       {paper: {key: value or [values]}}: overrides for a named scale; cpu = the defaults
  cost         notes on the cost; `--dry-run` recomputes it from the composed configs

Why a launcher over Hydra-native `hydra.sweeper.params` configs: Hydra's basic sweeper only takes
one Cartesian product per launch, and most studies are unions of products (a learned reference
plus a grid over one input's settings: code widths do not apply to the learned table). The
launcher keeps each grid a plain `python -m fixedcode_study.run -m name=<study> key=v1,v2 ...`
command (printed before it runs, so any grid can be re-run by hand), validates every job before
launching any (compose + shapes-only build, so a bad combination stops the study in seconds, not
after the first hour), counts jobs with Hydra's own BasicSweeper expansion, and prints the cost.

`-v` / `--verbose` keeps every job's library output (Lightning, W&B, lm-eval) on the terminal;
without it each job shows a progress bar (or a start line when jobs run side by side) and a result line, the rest going to <job>/run.log
(training/console.py).

Extra overrides replace a grid key of the same name (`seed=1`, `model=test_micro`) or are added
to every job (`train.tokens=65536 logger=csv`). Jobs that already completed are skipped by the
run app itself, so an interrupted study is resumed by re-running the same command.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from ..accounting import flops_per_token, parameter_groups
from ..build import build_model
from ..config import SWEEPS_DIR, compose, override_key
from ..errors import ConfigError
from ..record.jobdir import JOB_LOG_FILE
from ..console import VERBOSE_ENV
from ..training.plan import plan_batch
from ..training.resume import PREEMPT_EXIT_CODE

SCALES = ("cpu", "paper")

# Cost assumptions, stated once (overridable on the command line).
GPU_PEAK_TFLOPS = 989.0   # H100 SXM dense bf16
GPU_MFU = 0.40
# Effective training FLOP/s on a 2-core CPU box: FLOPs (accounting.flops_per_token, PaLM's 6N + 12 L H D T)
# over wall time at the CPU default (bf16-mixed + compile, two jobs side by side): sweeps/model_size's
# 9.37e14 FLOPs took 3,188 s on 2 idle AMX cores (2026-12-01), ~300 GFLOP/s after the per-job overhead
# below. fp32 eager one job at a time was ~108. A calibration, not a peak: override with --cpu-gflops.
CPU_GFLOPS = 300.0
CPU_JOB_OVERHEAD_S = 10.0  # W&B and trainer start, validation passes, checkpoint (measured ~7 s)


@dataclass
class Study:
    name: str
    description: str
    jobs: dict[str, int]
    grids: list[dict[str, list[Any]]]
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost: str = ""
    path: Path | None = None


def available_studies() -> list[str]:
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def load_study(name: str) -> Study:
    path = Path(name) if name.endswith(".yaml") else SWEEPS_DIR / f"{name}.yaml"
    if not path.exists():
        raise ConfigError("study", f"no sweep file {path}", f"use one of {', '.join(available_studies())}")
    raw = yaml.safe_load(path.read_text())
    missing = [k for k in ("name", "description", "jobs", "grids") if k not in raw]
    if missing:
        raise ConfigError(f"{path.name}:{missing[0]}", "required key is missing", "see fixedcode_study/sweep.py")
    if raw["name"] != path.stem:
        raise ConfigError(f"{path.name}:name", f"name {raw['name']!r} differs from the file name",
                          f"set name: {path.stem}")
    grids = [{k: v if isinstance(v, list) else [v] for k, v in grid.items()} for grid in raw["grids"]]
    return Study(raw["name"], raw["description"].strip(), dict(raw["jobs"]), grids,
                 dict(raw.get("scales") or {}), str(raw.get("cost", "")).strip(), path)


# -- turning a study into Hydra overrides ---------------------------------------------------------
def format_value(value: Any) -> str:
    """One sweep value as Hydra override text; strings that would parse as numbers/bools get quotes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        try:
            float(value)
            return f"'{value}'"
        except ValueError:
            return f"'{value}'" if value.lower() in ("true", "false", "null") else value
    return str(value)


def grid_overrides(grid: dict[str, list[Any]], replacements: list[str]) -> list[str]:
    """Overrides for one grid: `key=v1,v2` per key, then replacements (same key wins, new keys appended)."""
    out = {override_key(r): r for r in replacements if override_key(r) == "name"}  # name first, for reading
    out.update({key: f"{key}={','.join(format_value(v) for v in values)}" for key, values in grid.items()})
    for override in replacements:
        out[override_key(override)] = override
    return list(out.values())


def scale_overrides(study: Study, scale: str) -> list[str]:
    if scale not in SCALES:
        raise ConfigError("--scale", f"unknown scale {scale!r}", f"use one of {', '.join(SCALES)}")
    values = study.scales.get(scale) or {}
    return [f"{k}={','.join(format_value(v) for v in (vs if isinstance(vs, list) else [vs]))}"
            for k, vs in values.items()]


def launch_overrides(study: Study, scale: str = "cpu", extra: list[str] | None = None) -> list[list[str]]:
    """Per grid, the override list given to `run -m` (name=<study> first)."""
    replacements = [f"name={study.name}", *scale_overrides(study, scale), *(extra or [])]
    return [grid_overrides(grid, replacements) for grid in study.grids]


def expand(overrides: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper launches for these overrides (same code path as `run -m`)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return BasicSweeper.split_arguments(parsed, max_batch_size=None)[0]


@dataclass
class Job:
    overrides: list[str]
    job_dir: Path
    cfg: DictConfig


def compose_job(overrides: list[str]) -> DictConfig:
    return compose(overrides, return_hydra_config=True)


def plan(study: Study, scale: str = "cpu", extra: list[str] | None = None) -> list[Job]:
    """Every job of the study, composed as Hydra will (job directory included); duplicates are an error."""
    jobs, seen = [], {}
    for grid in launch_overrides(study, scale, extra):
        for job_overrides in expand(grid):
            cfg = compose_job(job_overrides)
            job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
            if job_dir in seen:
                raise ConfigError(f"{study.name}.grids", f"two grids launch the same job {job_dir.name}",
                                  "remove the overlap from one grid")
            seen[job_dir] = True
            jobs.append(Job(job_overrides, job_dir, cfg))
    return jobs


# -- validation and cost ----------------------------------------------------------------------------
def job_facts(jobs: list[Job]) -> list[dict[str, Any]]:
    """Build every job's model on the meta device (catches invalid combinations) and compute its cost."""
    cache: dict[str, tuple[dict[str, int], dict[str, Any]]] = {}
    facts = []
    for job in jobs:
        model_cfg = OmegaConf.to_container(job.cfg.model, resolve=True)
        input_cfg = OmegaConf.to_container(job.cfg.input, resolve=True)
        key = json.dumps([model_cfg, input_cfg], sort_keys=True, default=str)
        if key not in cache:
            try:
                with torch.device("meta"):
                    model = build_model(model_cfg, input_cfg)
            except ConfigError as err:  # name the job, keep the one-line "field: problem; fix" form
                problem, _, fix = str(err)[len(err.field) + 2:].partition("; ")
                raise ConfigError(err.field, f"{problem} (in job {job.job_dir.name})", fix) from None
            cache[key] = (parameter_groups(model), model.config)
        params, arch = cache[key]
        plan = plan_batch(job.cfg)  # the tokens the job trains: whole steps, flop-matched arms scaled
        tokens = plan.max_steps * plan.tokens_per_step
        facts.append({"job": job.job_dir.name, "model": job.cfg.model.name, "input": job.cfg.input.name,
                      "trainable": params["trainable"], "tokens": tokens,
                      "flops": tokens * flops_per_token(arch, int(job.cfg.train.seq_len))["total"]})
    return facts


def cost_summary(facts: list[dict[str, Any]], peak_tflops: float = GPU_PEAK_TFLOPS, mfu: float = GPU_MFU,
                 cpu_gflops: float = CPU_GFLOPS) -> dict[str, float]:
    flops = sum(f["flops"] for f in facts)
    return {
        "jobs": len(facts),
        "total_flops": flops,
        "gpu_hours": flops / (peak_tflops * 1e12 * mfu) / 3600.0,
        "cpu_hours": (flops / (cpu_gflops * 1e9) + CPU_JOB_OVERHEAD_S * len(facts)) / 3600.0,
    }


def describe_plan(study: Study, scale: str, jobs: list[Job], facts: list[dict[str, Any]], args,
                  per_job: bool = True) -> str:
    """The study, its commands, each job's size (per_job; a launch prints each command as it
    starts instead) and the total cost."""
    cost = cost_summary(facts, args.peak_tflops, args.mfu, args.cpu_gflops)
    lines = [f"study {study.name} (scale {scale}): {len(jobs)} jobs -> {jobs[0].job_dir.parent}",
             f"  {study.description.splitlines()[0]}"]
    for grid in launch_overrides(study, scale, args.overrides) if per_job else []:
        lines.append("  $ python -m fixedcode_study.run -m " + " ".join(grid))
    for f in facts if per_job else []:
        lines.append(f"    {f['job']:<60} {f['model']:<14} trainable={f['trainable']:>14,} "
                     f"tokens={f['tokens']:.3g} flops={f['flops']:.3g}")
    gpu = (f"{cost['gpu_hours']:.3g} GPU-hours at {args.mfu:.0%} MFU of {args.peak_tflops:g} TFLOP/s "
           f"(H100 bf16 dense)")
    cpu = (f"~{cost['cpu_hours']:.3g} CPU-hours at {args.cpu_gflops:g} GFLOP/s "
           f"+ {CPU_JOB_OVERHEAD_S:g} s/job overhead")
    lines.append(f"  total {cost['total_flops']:.3g} training FLOPs (6N + 12 L H D T, PaLM) = "
                 + (f"{cpu} (or {gpu})" if scale == "cpu" else gpu))
    return "\n".join(lines)


# -- running -----------------------------------------------------------------------------------------
def run_study(study: Study, scale: str, extra: list[str]) -> int:
    """Launch every grid as its own `run -m` process; returns the number of grids that reported failures.

    A preemption stops the study: a grid that exits 143 (its job saved a checkpoint and recorded
    `preempted`), or a preemption signal sent to this launcher (forwarded to the running grid,
    which then stops the same way), ends the sweep with exit status 143, so a scheduler requeues
    the same command and every job resumes where it stopped.
    """
    failed = 0
    child: subprocess.Popen | None = None
    stop: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        stop.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    names = ("SIGTERM", "SIGUSR1", "SIGUSR2")
    prior = {getattr(signal, n): signal.getsignal(getattr(signal, n)) for n in names if hasattr(signal, n)}
    for signum in prior:
        signal.signal(signum, forward)
    try:
        for grid in launch_overrides(study, scale, extra):
            if stop:
                break
            cmd = [sys.executable, "-m", "fixedcode_study.run", "-m", *grid]
            print("[sweep] $ python -m fixedcode_study.run -m " + " ".join(grid), flush=True)
            child = subprocess.Popen(cmd)
            if stop:  # a signal that came between the check above and the launch
                child.send_signal(stop[-1])
            code = child.wait()
            # 143 from the job's own handler; -N when the signal's default action killed the grid
            # (between jobs of -m, or before the job installed its handler)
            if code == PREEMPT_EXIT_CODE or -code in prior or stop:
                print(f"[sweep] {study.name}: preempted; re-run the same command to resume", file=sys.stderr, flush=True)
                sys.exit(PREEMPT_EXIT_CODE)
            if code != 0:
                failed += 1
    finally:
        for signum, handler in prior.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    return failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fixedcode_study.sweep", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", nargs="?", help=f"one of: {', '.join(available_studies())}")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every job (replace grid keys of the same name)")
    parser.add_argument("--scale", default="cpu", choices=SCALES, help="cpu = config defaults; paper = the study's paper scale")
    parser.add_argument("--dry-run", action="store_true", help="validate and list the jobs and their cost; train nothing")
    parser.add_argument("--list", action="store_true", help="list the studies")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help=f"keep library output (Lightning, W&B, lm-eval) on the terminal, not in each job's "
                             f"{JOB_LOG_FILE}")
    parser.add_argument("--mfu", type=float, default=GPU_MFU)
    parser.add_argument("--peak-tflops", type=float, default=GPU_PEAK_TFLOPS)
    parser.add_argument("--cpu-gflops", type=float, default=CPU_GFLOPS)
    args = parser.parse_intermixed_args(argv)  # flags may follow the overrides, or sit between them
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"  # inherited by every grid's `run -m` process
    if args.list or not args.study:
        for name in available_studies():
            s = load_study(name)
            print(f"{name:<16} {s.jobs} jobs  {s.description.splitlines()[0]}")
        return
    try:
        study = load_study(args.study)
        jobs = plan(study, args.scale, args.overrides)
        facts = job_facts(jobs)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(describe_plan(study, args.scale, jobs, facts, args, per_job=args.dry_run), flush=True)
    if args.dry_run:
        return
    failed = run_study(study, args.scale, args.overrides)
    print(f"[sweep] {study.name}: results in {jobs[0].job_dir.parent}"
          + (f"; {failed} grid(s) had failed jobs (see above)" if failed else ""))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
