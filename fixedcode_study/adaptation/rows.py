"""The new tokens' rows: what a model's held-out ids H start from when adaptation begins.

A learned input table (an nn.Embedding `input.table`, trainable) starts H's rows by one heuristic:
  random      N(0, init_std^2), the table's own init, drawn from the adaptation seed;
  mean        the mean of the table's rows outside H (Hewitt's "mean of the existing rows");
  parts_mean  the mean of the rows of the tokens each H token was spelled with in pretraining (its
              merge's parts, recursively until none is in H: data/heldout.spellings).
A fixed code needs none: its rows for H are the code's, as they always were ("code").
The head's rows for H start by one rule for every arm (settings.head_init):
  random      N(0, init_std^2) from the adaptation seed: the same rows, bit for bit, in every model
              of one seed (so the arms differ only where their inputs and bodies do);
  mean        the mean of the model's own head rows outside H.
H's rows existed during pretraining but never met their token (H was absent), so they hold only
their init and what weight decay and the softmax's push-down left: they are replaced, not kept.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

from ..errors import ConfigError
from ..heads.linear import UntiedHead
from ..inputs.base import init_normal_
from ..model import Decoder, init_generator

FIXED = "code"  # the init name of an input without a table: nothing to start


def input_table(model: Decoder) -> torch.Tensor | None:
    """The learned input table's weight (V, width), or None for an input without token-specific
    parameters; any other token-specific input is refused (no documented heuristic fits it)."""
    table = getattr(model.input, "table", None)
    if isinstance(table, nn.Embedding) and table.weight.requires_grad:
        return table.weight
    vocab = model.config.vocab_size
    specific = [name for name, p in model.input.named_parameters() if p.requires_grad and p.shape[:1] == (vocab,)]
    if specific:
        raise ConfigError("input", f"the input's {specific[0]} is token-specific but not a learned table",
                          "adapt a learned table (input=learned) or a fixed code")
    return None


def head_weight(model: Decoder) -> torch.Tensor:
    if not isinstance(model.head, UntiedHead):
        raise ConfigError("output", f"the {model.head.kind} head has no rows of its own to start for new tokens",
                          "adapt a model with the untied head (output=untied, the paper's)")
    return model.head.weight


def start_input_rows(model: Decoder, held: torch.Tensor, init: str, spelled: Mapping[int, tuple[int, ...]],
                     seed: int) -> None:
    """Set the learned table's rows for `held` by `init` (module docstring); nothing for a fixed code."""
    weight = input_table(model)
    if weight is None:
        if init != FIXED:
            raise ConfigError("inits", f"the {model.input.kind} input has no table to start rows of by {init!r}",
                              f"a fixed code adapts with init={FIXED}")
        return
    with torch.no_grad():
        if init == "random":
            draw = torch.empty(held.numel(), weight.shape[1])
            init_normal_(draw, float(model.input.init_std), init_generator(seed, "adapt.input"))
            weight[held] = draw.to(weight.dtype)
        elif init == "mean":
            weight[held] = mean_outside(weight, held)
        elif init == "parts_mean":
            for token in held.tolist():
                weight[token] = weight[list(spelled[token])].mean(dim=0)
        else:
            raise ConfigError("inits", f"{init!r} is not an init of a learned table", "use random, mean or parts_mean")


def start_head_rows(model: Decoder, held: torch.Tensor, head_init: str, seed: int) -> None:
    """Set the head's rows for `held` by `head_init` (module docstring)."""
    weight = head_weight(model)
    with torch.no_grad():
        if head_init == "random":
            draw = torch.empty(held.numel(), weight.shape[1])
            init_normal_(draw, float(model.config.init_std), init_generator(seed, "adapt.head"))
            weight[held] = draw.to(weight.dtype)
        else:
            weight[held] = mean_outside(weight, held)


def mean_outside(weight: torch.Tensor, held: torch.Tensor) -> torch.Tensor:
    """The mean of the rows not in `held` (float64 sum, cast back)."""
    keep = torch.ones(weight.shape[0], dtype=torch.bool)
    keep[held] = False
    return weight[keep].double().mean(dim=0).to(weight.dtype)
