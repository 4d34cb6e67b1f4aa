"""How one optimizer step is spread over devices, nodes and accumulation micro-steps.

The study fixes the *global* batch (tokens per optimizer step); the world size and the
per-device micro-batch only decide how it is computed. So:
  tokens per step = micro-batch x seq_len x grad_accum x world size
and with `train.global_batch_tokens` set, grad_accum is derived from it (it must divide exactly).

Data order does not depend on that split either: the global batch of optimizer step g is made
of `grad_accum x world` micro-batch *slots*; slot j holds the windows drawn from
default_rng([seed, g, j]) (batches.RandomWindowBatches' `batch(g)` with rank=j). Rank r, at its
accumulation micro-step a, trains on slot a*world + r. One process accumulating two micro-batches
and two processes with one each therefore train on identical tokens, and with grad_accum=1 the
slots are just the ranks (the original batches.py order, unchanged).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from .batches import RandomWindowBatches, TokenDataModule
from .errors import ConfigError


def world_size(trainer_cfg: Mapping[str, Any]) -> int:
    """Number of training processes the trainer config asks for (devices per node x nodes)."""
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

    def as_record(self) -> dict[str, int]:
        return {"tokens_per_step": self.tokens_per_step, "max_steps": self.max_steps,
                "micro_batch": self.micro_batch, "grad_accum": self.grad_accum, "world_size": self.world}


def plan_batch(cfg: Mapping[str, Any]) -> BatchPlan:
    """Tokens per step, accumulation and step count from `train` and `trainer` settings."""
    t = cfg["train"]
    if int(t["tokens"]) <= 0:
        raise ConfigError("train.tokens", f"budget {t['tokens']} is not positive", "set train.tokens to a positive count")
    micro, seq_len, world = int(t["batch_size"]), int(t["seq_len"]), world_size(cfg["trainer"])
    for field, value in (("train.batch_size", micro), ("train.seq_len", seq_len)):
        if value <= 0:
            raise ConfigError(field, f"{value} is not positive", f"set {field} to a positive number")
    per_micro_step = micro * seq_len * world  # tokens one accumulation micro-step adds, all ranks
    global_tokens = t.get("global_batch_tokens")
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
    return BatchPlan(micro, seq_len, grad_accum, world, max(1, math.ceil(int(t["tokens"]) / tokens_per_step)))


class GlobalBatchOrder(IterableDataset):
    """This rank's micro-batches: micro-step m is slot (m % A)*W + r of optimizer step m // A.

    `start_step` is the first micro-step to yield (set from the checkpoint on resume).
    """

    def __init__(self, windows: RandomWindowBatches, rank: int, world: int, grad_accum: int, start_step: int = 0):
        self.rank, self.world, self.grad_accum, self.start_step = rank, world, grad_accum, start_step
        # One view of the window sampler per accumulation slot this rank owns; `batch(g)` of the
        # view with rank=j is slot j of step g.
        self.slots = []
        for a in range(grad_accum):
            view = copy.copy(windows)
            view.rank = a * world + rank
            self.slots.append(view)

    def __iter__(self) -> Iterator[torch.Tensor]:
        m = self.start_step
        while True:
            step, a = divmod(m, self.grad_accum)
            yield self.slots[a].batch(step)  # (B, T+1)
            m += 1


class StepAlignedDataModule(TokenDataModule):
    """TokenDataModule whose training order is GlobalBatchOrder (world-size invariant, resumable)."""

    def __init__(self, *args: Any, grad_accum: int = 1, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.grad_accum = grad_accum

    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)
        rank = self.trainer.global_rank if self.trainer else 0
        world = self.trainer.world_size if self.trainer else 1
        self.train_set = GlobalBatchOrder(self.train_set, rank, world, self.grad_accum,
                                          start_step=getattr(self, "start_step", 0))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=None, num_workers=0)


def fsdp_strategy(**kwargs: Any):
    """Lightning FSDPStrategy that shards per decoder block (the unit FSDP gathers at a time).

    Built here because a Hydra yaml cannot name a class object; every other FSDPStrategy
    argument passes through (sharding_strategy, state_dict_type, activation_checkpointing, ...).
    """
    from lightning.pytorch.strategies import FSDPStrategy

    from .model import Block

    kwargs.setdefault("auto_wrap_policy", {Block})
    if kwargs.pop("activation_checkpointing_blocks", False):
        kwargs.setdefault("activation_checkpointing_policy", {Block})
    return FSDPStrategy(**kwargs)
