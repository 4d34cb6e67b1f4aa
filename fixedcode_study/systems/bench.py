"""Systems cost of each input interface (the library behind `fixedcode bench`).

For one model preset and each input variant it measures, in one process and with identical shapes:
  training step time and tokens/s   one optimizer step exactly as `run` takes it (systems/fit.py: a
                                    Lightning Trainer.fit of training.task.LanguageModelTask on a
                                    fixed random batch, every step timed); median after warm-up, over
                                    the passes of systems/timing.py (abba or sequential)
  peak memory, state bytes,         systems/meters.py
  checkpoint size, peak FLOP/s
  MFU                               systems/bench_report.py: each row over its own model's FLOPs
and the same for the reference: Hugging Face LlamaForCausalLM with identical dimensions (untied head,
same vocabulary, SDPA attention), converted from our learned model by systems.hf.to_hf_llama so both
start from the same weights (their first losses agree), and trained through the same task and
optimizer code behind systems.hf.HFCausalLM. Every model runs in each chosen setting (fp32, bf16,
eager, compiled: systems/timing.py); compiled, ours is compiled as `run` compiles it (input layer
eager) and the reference as HF users compile theirs, the whole LlamaForCausalLM
(systems/fit.py compile_subject). The first step of a compiled fit includes compiling and is
reported apart (compile_s: first-step time minus the median step). On CPU the per-step process CPU
time is recorded too: a second view, robust to load from other processes.

This module takes the composed configs (one per input variant, and the learned one the reference is
converted from; the command composes them: cli/bench.py) and the options (`BenchOptions`), and puts
the pieces together: validate, measure the peaks, time, measure memory, report.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch

from .. import accounting
from ..errors import ConfigError
from ..model import require_gated_mlp
from ..spec import JobSpec
from ..training.speed import keep_freed_memory
from .bench_report import BENCH_VERSION, compare_with_reference, side_by_side_mfu, state_only, variant_rows
from .fit import STEP, Setting
from .meters import PeakMeters
from .options import BenchOptions
from .timing import memory_pass, parallel_row, pass_plan, resolve_schedule, resolve_settings, subjects, timed_passes


def pick_device(arg: str) -> torch.device:
    if arg == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if arg == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "cuda was asked for but torch sees no CUDA device", "use device=cpu or auto")
    return torch.device(arg)


def warn_about_load(device: torch.device, log: Callable[[str], None]) -> tuple[float, float, float]:
    load = os.getloadavg()
    if device.type == "cpu" and torch.get_num_threads() > 1 and load[0] > (os.cpu_count() or 1):
        log(f"note: load average {load[0]:.1f} exceeds {os.cpu_count()} cores; with "
            f"{torch.get_num_threads()} threads each step waits on descheduled workers, so absolute "
            "timings are unreliable (threads=1 is steadier on a shared machine)")
    return load


def preflight(specs: dict[str, JobSpec], options: BenchOptions, reference_spec: JobSpec | None
              ) -> tuple[torch.device, list[Setting], JobSpec | None, str]:
    """What the options mean for these jobs, checked before anything is built: (device, settings,
    the reference's spec or None, schedule). Each spec checked its own settings when it was resolved
    (train.seq_len <= model.max_seq_len among them)."""
    first = next(iter(specs.values()))
    device = pick_device(options.device)
    if options.jobs > 1 and device.type != "cpu":
        raise ConfigError("jobs", f"got {options.jobs} on {device.type}", "use jobs >= 1, and > 1 only on CPU")
    chosen = resolve_settings(options.settings, first, device)
    if any(s.compile for s in chosen) and options.warmup < 1:
        raise ConfigError("warmup", "0 with a compiled setting: the compile would be timed as a step",
                          "pass warmup>=1")
    reference = None
    if options.reference:
        reference = reference_spec if reference_spec is not None else specs.get("learned")
        if reference is None:
            raise ConfigError("reference_config", "the HF reference is converted from the learned config",
                              "pass the learned config (cli/bench.py composes it) or reference=false")
        head = reference.model.output.get("type", "untied")  # absent: the untied head
        if head != "untied":  # LlamaForCausalLM's lm_head is a V x d matrix: only the untied head maps onto it
            raise ConfigError("output", f"the HF LlamaForCausalLM reference has an untied head, not output={head}",
                              "bench other heads with reference=false, or compare heads with bench-output")
        require_gated_mlp(reference.model.preset, "the HF LlamaForCausalLM reference",
                          "bench a GELU model with reference=false")
    if device.type == "cpu":
        require_memory_for_state(specs, options.jobs)
    return device, chosen, reference, resolve_schedule(options.schedule, options.steps)


def _available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (what can be allocated without swapping), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def require_memory_for_state(specs: Mapping[str, JobSpec], jobs: int) -> None:
    """A CPU bench whose AdamW training state alone (weights, gradients, two moments: a meta-device
    count, bench_report.state_only) outgrows this machine's available memory stops here in one line.
    Without it `bench model=paper_1p7b` on a 24 GiB CPU box was killed by the kernel minutes in."""
    available = _available_memory_bytes()
    if available is None:
        return
    accounting_ = state_only(dict(specs))
    name, largest = max(((n, a["total_bytes"]) for n, a in accounting_.items()), key=lambda item: item[1])
    needed = largest * max(1, jobs)
    if needed > available:
        gib = 2**30
        raise ConfigError("model", f"{specs[name].model_name}: the AdamW training state of input={name} alone "
                          f"is {needed / gib:.1f} GiB{f' for {jobs} jobs' if jobs > 1 else ''}, more than the "
                          f"{available / gib:.1f} GiB this machine has available",
                          "bench it on a GPU machine (device=cuda), a smaller model=, or count it without "
                          "running: state_only=true")


def run_bench(specs: Mapping[str, JobSpec], options: BenchOptions = BenchOptions(), *,
              reference_spec: JobSpec | None = None, overrides: Sequence[str] = (),
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """The benchmark of `specs` (input variant -> the job's resolved spec, in row order); the reference
    is converted from `reference_spec` (the learned job of the same overrides; specs["learned"] when
    absent). `overrides` are recorded in the report as given."""
    specs = dict(specs)
    device, chosen, reference, schedule = preflight(specs, options, reference_spec)
    kept = keep_freed_memory()  # as every job does (training/speed.py); process-wide, so the reference too
    first = next(iter(specs.values()))
    mcfg = first.model.preset
    B, T = first.train.batch_size, first.train.seq_len
    rows = subjects(specs, reference, chosen)
    plan = pass_plan([s.key for s in rows], options.steps, schedule)
    load_start = warn_about_load(device, log)

    peaks = PeakMeters(device, [st.dtype for st in chosen])
    g = torch.Generator().manual_seed(first.seed)
    batch = torch.randint(0, mcfg.vocab_size, (B, T + 1), generator=g).to(device)  # (B, T+1)
    log(f"bench: model={first.model_name} B={B} T={T} device={device} settings={','.join(s.name for s in chosen)} "
        f"schedule={schedule} threads={torch.get_num_threads()} steps={options.steps} warmup={options.warmup} per fit")
    workdir = Path(tempfile.mkdtemp(prefix="fixedcode-bench-"))
    try:
        results = timed_passes(rows, plan, options.warmup, device, batch, workdir, peaks)
        memory_kind, memory = memory_pass(rows, device, batch, options.memory_steps, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    peak_table = peaks.finish()
    first_name = next(iter(specs))
    side_by_side = [parallel_row(next(s for s in rows if s.name == first_name and s.setting == st),
                                 options.jobs, options.steps, options.warmup) for st in chosen] if options.jobs > 1 else []
    load_end = os.getloadavg()

    variants = variant_rows(rows, results, memory, peak_table, B * T, T, cpu=device.type == "cpu")
    side_by_side_mfu(side_by_side, variants, peak_table)
    compare_with_reference(variants, side_by_side)
    fpt = accounting.flops_per_token(mcfg, T)
    return {
        "bench_version": BENCH_VERSION,
        "overrides": list(overrides),
        "model": first.model_name,
        "architecture": mcfg.to_dict(),  # the preset; a size-matched row's own model: its flops_per_token
        "device": {"type": device.type, "name": next(iter(peak_table.values()))["device_name"],
                   "threads": torch.get_num_threads(), "cores": os.cpu_count(), "keep_freed_memory": kept,
                   "torch": torch.__version__, "lightning": L.__version__, "python": platform.python_version()},
        "settings": [vars(st) for st in chosen],
        "precision": ",".join(dict.fromkeys(st.precision for st in chosen)),
        "batch_size": B, "seq_len": T, "tokens_per_step": B * T,
        "steps": options.steps, "warmup": options.warmup, "schedule": schedule,
        "passes": [{"order": order, "timed_steps": k, "warmup": options.warmup} for order, k in plan if k > 0],
        "step": STEP,
        "peaks": peak_table,
        "peak_flops": peak_table[str(chosen[0].dtype)]["flops"],
        "peak_flops_source": peak_table[str(chosen[0].dtype)]["source"],
        "flops_per_token": fpt["total"], "flops_per_token_terms": fpt,
        "flops_formula": accounting.FLOPS_FORMULA,
        "memory_kind": memory_kind,
        "load_average": {"start": load_start, "end": load_end},
        "variants": variants,
        "side_by_side": side_by_side,
        "state_accounting": state_only(specs),
    }

