"""What a study costs, before any job runs: each job's size and FLOPs from the model it builds, the
study's total in FLOPs, CPU hours and GPU hours, and the plan printed with it (`fixedcode sweep <study> dry_run=true`).

Every job's model is built on the meta device (shapes only: instant even for the 1.7B preset) from
its resolved spec (`build.build_decoder` of spec.model, the build training uses, size matching
included), so an invalid combination stops the study before anything launches and the FLOPs per
token are those of the model the job trains, not of its preset. Tokens are the job's training plan
(spec.plan: whole optimizer steps, flop-matched arms scaled). FLOPs = tokens x `accounting.flops_per_token`
(PaLM's 6N + 12 L H D T).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch

from ..accounting import parameter_groups
from ..build import build_decoder
from ..errors import ConfigError
from .progress import COMPLETED, NEW, PARTIAL, STALE, JobProgress, remaining
from .rates import CPU_GFLOPS, GPU_MFU, GPU_PEAK_TFLOPS, Rates
from .study import Job, Study, in_job, launch_overrides

__all__ = ["CPU_GFLOPS", "CPU_JOB_OVERHEAD_S", "GPU_MFU", "GPU_PEAK_TFLOPS", "Rates", "cost_summary",
           "describe_plan", "job_facts"]

CPU_JOB_OVERHEAD_S = 10.0  # W&B and trainer start, validation passes, checkpoint (measured ~7 s)


def job_facts(jobs: list[Job]) -> list[dict[str, Any]]:
    """Build every job's model on the meta device (catches invalid combinations) and compute its cost."""
    cache: dict[str, dict[str, int]] = {}  # one build per distinct model as built
    facts = []
    for job in jobs:
        spec = job.spec
        key = json.dumps(spec.model.to_json(), sort_keys=True, default=str)
        if key not in cache:
            try:
                with torch.device("meta"):
                    model = build_decoder(spec.model)
            except ConfigError as err:  # name the job, keep the one-line "field: problem; fix" form
                raise in_job(err, job.job_dir) from None
            cache[key] = parameter_groups(model)
        plan = spec.plan  # the tokens the job trains: whole steps, flop-matched arms scaled
        facts.append({"job": job.job_dir.name, "model": spec.model_name, "input": spec.input_name,
                      "output": spec.output_name, "trainable": cache[key]["trainable"], "tokens": plan.tokens,
                      "flops": plan.tokens * spec.model.flops_per_token(plan.seq_len)})
    return facts


def cost_summary(facts: list[dict[str, Any]], rates: Rates = Rates()) -> dict[str, float]:
    flops = sum(f["flops"] for f in facts)
    return {
        "jobs": len(facts),
        "total_flops": flops,
        "gpu_hours": flops / (rates.peak_tflops * 1e12 * rates.mfu) / 3600.0,
        "cpu_hours": (flops / (rates.cpu_gflops * 1e9) + CPU_JOB_OVERHEAD_S * len(facts)) / 3600.0,
    }


def describe_plan(study: Study, scale: str, jobs: list[Job], facts: list[dict[str, Any]],
                  extra: Sequence[str] = (), rates: Rates = Rates(), per_job: bool = True,
                  progress: Sequence[JobProgress] | None = None, side_by_side: int = 1) -> str:
    """The study, its commands, each job's size (per_job; a launch prints each command as it
    starts instead), the total cost and, where its jobs already hold records (progress), what is
    done and what the rest takes at the speed the completed jobs ran."""
    cost = cost_summary(facts, rates)
    lines = [f"study {study.name} (scale {scale}): {len(jobs)} jobs -> {jobs[0].job_dir.parent}",
             f"  {study.description.splitlines()[0]}"]
    for grid in launch_overrides(study, scale, list(extra)) if per_job else []:
        lines.append("  $ python -m fixedcode_study.run -m " + " ".join(grid))
    states = {p.job: p for p in progress or []}
    for f in facts if per_job else []:
        state = states.get(f["job"])
        lines.append(f"    {f['job']:<60} {f['model']:<14} trainable={f['trainable']:>14,} "
                     f"tokens={f['tokens']:.3g} flops={f['flops']:.3g}"
                     + (f"  [{state.state}]" if state and state.state != NEW else ""))
    gpu = (f"{cost['gpu_hours']:.3g} GPU-hours at {rates.mfu:.0%} MFU of {rates.peak_tflops:g} TFLOP/s "
           f"(H100 bf16 dense)")
    cpu = (f"~{cost['cpu_hours']:.3g} CPU-hours at {rates.cpu_gflops:g} GFLOP/s "
           f"+ {CPU_JOB_OVERHEAD_S:g} s/job overhead")
    lines.append(f"  total {cost['total_flops']:.3g} training FLOPs (6N + 12 L H D T, PaLM) = "
                 + (f"{cpu} (or {gpu})" if scale == "cpu" else gpu))
    if progress and any(p.state != NEW for p in progress):
        lines += progress_lines(progress, rates, side_by_side)
    return "\n".join(lines)


def _jobs(n: int) -> str:
    return f"{n} job" + ("" if n == 1 else "s")


def progress_lines(progress: Sequence[JobProgress], rates: Rates, side_by_side: int) -> list[str]:
    """What is on disk, and the time left measured from the completed jobs (studies/progress.py)."""
    count = {state: sum(p.state == state for p in progress) for state in (COMPLETED, PARTIAL, STALE)}
    done = [f"{count[COMPLETED]} of {len(progress)} jobs completed under these settings (a launch skips them)"]
    if count[PARTIAL]:
        done.append(f"{count[PARTIAL]} started but not finished (running now, or a launch resumes them)")
    if count[STALE]:
        first = next(p for p in progress if p.state == STALE)
        done.append(f"{count[STALE]} trained under other settings (a launch refuses them; force=true retrains): "
                     f"{first.job}: {first.why}")
    lines = ["  on disk: " + "; ".join(done)]
    left = remaining(progress)
    if not left.jobs:
        return lines + ["  left: nothing: every job is completed"]
    parts, wall = [], 0.0
    if left.measured_jobs:
        hours = left.measured_seconds / 3600.0
        wall += hours / max(1, side_by_side)
        parts.append(f"{left.measured_jobs} at the speed {left.references} completed job(s) of the same model and "
                     f"training settings ran (median {left.tokens_per_second:,.0f} tokens/s a job): "
                     f"{hours:.3g} job-hours")
    unmeasured = left.jobs - left.measured_jobs
    if unmeasured:
        hours = (left.unmeasured_flops / (rates.cpu_gflops * 1e9) + CPU_JOB_OVERHEAD_S * unmeasured) / 3600.0
        wall += hours
        parts.append(f"{unmeasured} with no such completed job, at {rates.cpu_gflops:g} GFLOP/s: ~{hours:.3g} CPU-hours")
    together = f"{side_by_side} jobs side by side" if side_by_side > 1 else "one job at a time"
    return lines + [f"  left: {_jobs(left.jobs)}: " + "; ".join(parts) + f"; ~{wall:.3g} h of wall time, {together}"]
