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
from dataclasses import dataclass

import torch

from ..build import ModelSpec
from ..errors import ConfigError
from .parts import TrainerSpec, TrainSpec

__all__ = ["BatchPlan", "plan_batch", "world_size"]


def world_size(trainer: TrainerSpec) -> int:
    """Number of training processes a TrainerSpec asks for (devices per node x nodes)."""
    devices = trainer.devices
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    if isinstance(devices, (list, tuple)):
        n = len(devices)
    elif isinstance(devices, int) and devices > 0:
        n = devices
    else:  # "auto" / -1: every visible GPU for GPU trainers, one process on CPU (Lightning's rule)
        accel = trainer.accelerator
        n = torch.cuda.device_count() if accel in ("gpu", "cuda", "auto") and torch.cuda.is_available() else 1
    return max(1, n) * int(trainer.num_nodes)


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


def plan_batch(train: TrainSpec, trainer: TrainerSpec, model: ModelSpec) -> BatchPlan:
    """Tokens per step, accumulation and step count of a job: its TrainSpec and TrainerSpec
    (spec/parts.py) and the ModelSpec it builds (a flop-matched input trains fewer tokens)."""
    micro, seq_len, world = train.batch_size, train.seq_len, world_size(trainer)
    per_micro_step = micro * seq_len * world  # tokens one accumulation micro-step adds, all ranks
    if train.global_batch_tokens is None:
        grad_accum = train.grad_accum
    else:
        global_tokens = train.global_batch_tokens
        if global_tokens % per_micro_step:
            raise ConfigError(
                "train.global_batch_tokens",
                f"{global_tokens} is not a positive multiple of batch_size x seq_len x world size = "
                f"{micro} x {seq_len} x {world} = {per_micro_step}",
                "choose a global batch divisible by that, or change train.batch_size / trainer.devices")
        grad_accum = global_tokens // per_micro_step
    if grad_accum < 1:
        raise ConfigError("train.grad_accum", f"{grad_accum} is below 1", "use grad_accum >= 1")
    tokens_per_step = per_micro_step * grad_accum
    # flop_match: learned (the controls' *_isoflop arms) trains on the budget with learned's training FLOPs
    tokens = model.flop_matched_tokens(train.tokens, seq_len)
    return BatchPlan(micro, seq_len, grad_accum, world, max(1, math.ceil(tokens / tokens_per_step)))
