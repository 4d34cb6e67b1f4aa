"""The plan of a training run: how one optimizer step is split, how many steps, what it costs.

The study fixes the *global* batch (tokens per optimizer step); the world size and the
per-device micro-batch only decide how it is computed. So:
  tokens per step = micro-batch x seq_len x grad_accum x world size
and with `train.global_batch_tokens` set, grad_accum is derived from it (it must divide exactly).
Which tokens each micro-step trains on is data/batches.py's business (world-size invariant).
A pure function of the settings and the ModelSpec (a flop-matched input trains fewer tokens).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..build import ModelSpec, resolve_input_references, resolve_model
from ..config import resolve_output_references
from ..errors import ConfigError

__all__ = ["BatchPlan", "plan_batch", "world_size"]


def world_size(trainer_cfg: Mapping[str, Any]) -> int:
    """Number of training processes the trainer config asks for (devices per node x nodes)."""
    # devices, accelerator and num_nodes are Lightning Trainer arguments; a conf/trainer file that
    # leaves one out gets Lightning's own default, which these .get defaults repeat.
    devices = trainer_cfg.get("devices", 1)
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    if isinstance(devices, (list, tuple)) or (hasattr(devices, "__len__") and not isinstance(devices, str)):
        n = len(devices)
    elif isinstance(devices, int) and devices > 0:
        n = devices
    else:  # "auto" / -1: every visible GPU for GPU trainers, one process on CPU (Lightning's rule)
        accel = str(trainer_cfg.get("accelerator", "auto"))
        n = torch.cuda.device_count() if accel in ("gpu", "cuda", "auto") and torch.cuda.is_available() else 1
    return max(1, n) * int(trainer_cfg.get("num_nodes", 1))


@dataclass(frozen=True)
class BatchPlan:
    micro_batch: int        # sequences per device per micro-step
    seq_len: int
    grad_accum: int         # micro-steps per optimizer step
    world: int              # processes (devices x nodes)
    max_steps: int          # optimizer steps for the token budget

    @property
    def tokens_per_step(self) -> int:
        return self.micro_batch * self.seq_len * self.grad_accum * self.world

    @property
    def tokens(self) -> int:
        """Tokens trained: the budget rounded up to whole steps."""
        return self.max_steps * self.tokens_per_step

    def identity(self) -> dict[str, int]:
        """What the plan fixes about the computation whatever the device count (for the fingerprint)."""
        return {"tokens_per_step": self.tokens_per_step, "max_steps": self.max_steps}

    def as_record(self) -> dict[str, int]:
        return {"tokens_per_step": self.tokens_per_step, "max_steps": self.max_steps,
                "micro_batch": self.micro_batch, "grad_accum": self.grad_accum, "world_size": self.world}


def plan_batch(cfg: Mapping[str, Any], model: ModelSpec | None = None) -> BatchPlan:
    """Tokens per step, accumulation and step count from `train` and `trainer` settings.

    `model` is the job's ModelSpec (spec/job.py passes the one it resolved); without it the
    config's model and input are resolved here (sweep planning, tests).
    """
    t = cfg["train"]
    if int(t["tokens"]) <= 0:
        raise ConfigError("train.tokens", f"budget {t['tokens']} is not positive", "set train.tokens to a positive count")
    micro, seq_len, world = int(t["batch_size"]), int(t["seq_len"]), world_size(cfg["trainer"])
    for field, value in (("train.batch_size", micro), ("train.seq_len", seq_len)):
        if value <= 0:
            raise ConfigError(field, f"{value} is not positive", f"set {field} to a positive number")
    per_micro_step = micro * seq_len * world  # tokens one accumulation micro-step adds, all ranks
    global_tokens = t["global_batch_tokens"]
    if global_tokens is None:
        grad_accum = int(t["grad_accum"])
    else:
        global_tokens = int(global_tokens)
        if global_tokens <= 0 or global_tokens % per_micro_step:
            raise ConfigError(
                "train.global_batch_tokens",
                f"{global_tokens} is not a positive multiple of batch_size x seq_len x world size = "
                f"{micro} x {seq_len} x {world} = {per_micro_step}",
                "choose a global batch divisible by that, or change train.batch_size / trainer.devices")
        grad_accum = global_tokens // per_micro_step
    if grad_accum < 1:
        raise ConfigError("train.grad_accum", f"{grad_accum} is below 1", "use grad_accum >= 1")
    tokens_per_step = per_micro_step * grad_accum
    if model is None:
        model = resolve_model(cfg["model"], resolve_input_references(cfg["input"]),
                              resolve_output_references(cfg.get("output")))
    # flop_match: learned (the controls' *_isoflop arms) trains on the budget with learned's training FLOPs
    tokens = model.flop_matched_tokens(int(t["tokens"]), seq_len)
    return BatchPlan(micro, seq_len, grad_accum, world, max(1, math.ceil(tokens / tokens_per_step)))
