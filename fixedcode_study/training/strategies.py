"""Distributed strategies that a Hydra yaml cannot spell directly (it cannot name a class object)."""

from __future__ import annotations

from typing import Any


def fsdp_strategy(**kwargs: Any):
    """Lightning FSDPStrategy that shards per decoder block (the unit FSDP gathers at a time).

    Every other FSDPStrategy argument passes through (sharding_strategy, state_dict_type,
    activation_checkpointing, ...); `activation_checkpointing_blocks: true` recomputes each block.
    """
    from lightning.pytorch.strategies import FSDPStrategy

    from ..model import Block

    kwargs.setdefault("auto_wrap_policy", {Block})
    if kwargs.pop("activation_checkpointing_blocks", False):
        kwargs.setdefault("activation_checkpointing_policy", {Block})
    return FSDPStrategy(**kwargs)
