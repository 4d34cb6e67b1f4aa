"""How a job runs, decided before it runs: CPU threads and whether it trains a compiled model.

training/speed.py's docstring explains both settings and carries out the decisions (sets the
threads, compiles the model); this module only decides, from the settings and the model that is
built (ModelSpec.config, size matching included), so the fingerprint, results.json's runtime and
the training itself read one decision.

  threads   `threads`: auto (the parallel launcher's FIXEDCODE_THREADS_PER_JOB, else torch's
            default) or a positive int.
  compile   `train.compile`: true | false | auto; auto compiles when the job's training FLOPs
            (the built model's FLOPs per token x the tokens it trains) reach `train.compile_min_flops`.
  deterministic  not a setting but a statement (results.json runtime.deterministic): whether the
            same config and seed give bitwise the same numbers under this runtime, within which scope,
            and why. resume and reuse repeat it when it is false; docs/record.md states the rule.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ..errors import ConfigError

THREADS_ENV = "FIXEDCODE_THREADS_PER_JOB"  # set by the parallel launcher for its workers
COMPILE_CHOICES = (True, False, "auto")


def resolve_threads(setting: Any) -> int:
    """The intra-op thread count a job runs with (`threads`: auto or a positive int)."""
    if setting in (None, "auto"):
        from_launcher = os.environ.get(THREADS_ENV)
        return int(from_launcher) if from_launcher else torch.get_num_threads()
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ConfigError("threads", f"got {setting!r}", "use auto or a positive number of threads")
    return setting


def device_kind(accelerator: str) -> str:
    """cpu | cuda | mps: what `trainer.accelerator` (cpu, gpu, cuda, mps, auto) trains on here."""
    accelerator = accelerator.lower()
    if accelerator == "cpu":
        return "cpu"
    if accelerator == "mps" or (accelerator == "auto" and not torch.cuda.is_available()
                                and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        return "mps"
    if accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available()):
        return "cuda"
    return "cpu"  # auto without an accelerator: Lightning falls back to the CPU


def determinism(accelerator: str, compiled: bool, threads: int, world: int,
                trainer_deterministic: Any = None) -> dict[str, Any]:
    """results.json runtime.deterministic: {bitwise, scope, reason}.

    bitwise  whether two runs of the same config and seed, and a killed-and-resumed run, give bitwise
             the same numbers (true) or equal numbers only to float tolerance (false);
    scope    what else must match for that: the thread count on CPU, the GPU model and count on CUDA;
    reason   why, in one sentence, with what to change when it is false.
    """
    kind = device_kind(accelerator)
    devices = f", {world} processes" if world > 1 else ""
    if kind == "cpu":
        how = ("compiled blocks, norm and head with the input layer left eager (compiled, a learned "
               "table's backward added its gradient with atomic adds across OpenMP threads: issue 26)"
               if compiled else "eager kernels")
        return {"bitwise": True, "scope": f"same config, seed and runtime.threads ({threads}){devices}",
                "reason": f"CPU: {how}, whose reductions run in a fixed order at a fixed thread count "
                          "(tested at 1 and 2 threads, fp32 and bf16-mixed, fresh and resumed after SIGKILL)"}
    if trainer_deterministic is True:
        return {"bitwise": True, "scope": f"same config, seed, {kind.upper()} device model{devices}",
                "reason": "trainer.deterministic=true: torch.use_deterministic_algorithms(True) and "
                          "CUBLAS_WORKSPACE_CONFIG=:4096:8 (set by Lightning; slower); requested, not tested "
                          "by this workbench's CI, which has no GPU"}
    return {"bitwise": False, "scope": f"same config, seed, {kind.upper()} device model{devices}",
            "reason": f"{kind.upper()}: attention and embedding backward kernels and split-K matmuls may add in "
                      "a varying order, so runs agree to float tolerance only; +trainer.deterministic=true asks "
                      "torch for deterministic algorithms (slower)"}


def check_strategy_device(strategy: Any, accelerator: str) -> None:
    """trainer=fsdp on CPU processes: Lightning's FSDPStrategy shards over CUDA devices only, and says
    so from deep inside the Trainer's construction; refuse it here, in one line, before any work."""
    if "fsdp" in str(strategy or "").lower() and device_kind(accelerator) == "cpu":
        raise ConfigError("trainer.accelerator", f"trainer=fsdp needs CUDA GPUs; this job runs on CPU "
                          f"(accelerator={accelerator})",
                          "use trainer=ddp_cpu for several CPU processes, or run trainer=fsdp on GPUs")


def resolve_compile(setting: Any, min_flops: Any, train_flops: float) -> bool:
    """train.compile (true | false | auto) for a job of `train_flops` training FLOPs; auto compiles
    from train.compile_min_flops (`min_flops`) up."""
    if setting not in COMPILE_CHOICES:
        raise ConfigError("train.compile", f"got {setting!r}", "use true, false or auto")
    if setting != "auto":
        return bool(setting)
    if isinstance(min_flops, bool) or not isinstance(min_flops, (int, float)) or min_flops < 0:
        raise ConfigError("train.compile_min_flops", f"got {min_flops!r}", "use a number of FLOPs >= 0, e.g. 1e12")
    return train_flops >= float(min_flops)
