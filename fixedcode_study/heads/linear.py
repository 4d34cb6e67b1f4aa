"""The token-specific heads: a V x d_model matrix of logit weights, trained.

- `untied`  its own trainable V x d projection (the paper's head, the default in every study).
- `tied`    the learned input table itself is the head (SmolLM2's own choice): logits = E h.
            Only a trainable V x d_model input table can be tied; a fixed code has no table.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..inputs import InputInterface, LearnedEmbedding, init_normal_
from .base import OutputHead


class UntiedHead(OutputHead):
    """logits = W h, W (V, d) trainable, no bias. Its parameter is `head.weight`, as it always was."""

    kind = "untied"

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__(vocab_size, d_model)
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))

    @classmethod
    def trainable_count(cls, settings, vocab_size, d_model, code_width) -> int:
        return vocab_size * d_model

    @classmethod
    def training_flops(cls, settings, vocab_size, d_model, code_width) -> int:
        return 6 * vocab_size * d_model

    @classmethod
    def token_specific(cls, settings, vocab_size, d_model, code_width) -> int:
        return vocab_size * d_model

    def reset_parameters(self, generator: torch.Generator | None, std: float) -> None:
        init_normal_(self.weight, std, generator)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight)  # (…, d) -> (…, V)

    def properties(self) -> dict[str, Any]:
        return {**super().properties(), "logit_rank_bound": min(self.vocab_size, self.d_model)}


class TiedHead(OutputHead):
    """logits = E h with E the input's (V, d) table. The table stays a parameter of `input` only
    (counted and optimised once, in the input group); the head holds a reference, not a submodule,
    so the state_dict has no second copy."""

    kind = "tied"

    def __init__(self, vocab_size: int, d_model: int, input_layer: InputInterface):
        super().__init__(vocab_size, d_model)
        self.check(input_layer)
        object.__setattr__(self, "_input", input_layer)  # not registered: see the class docstring

    @staticmethod
    def check(input_layer: InputInterface | Mapping[str, Any]) -> None:
        kind = input_layer.kind if isinstance(input_layer, InputInterface) else input_layer.get("type")
        trainable = (input_layer.trainable if isinstance(input_layer, LearnedEmbedding)
                     else bool(input_layer.get("trainable", True)) if isinstance(input_layer, Mapping) else False)
        name = input_layer.get("name") if isinstance(input_layer, Mapping) else None
        if kind != "learned" or not trainable:
            what = [f"type {kind!r}"] if name and name != kind else []
            what += [] if trainable else ["frozen"]
            shown = f"input={name or kind}" + (f" ({', '.join(what)})" if what else "")
            raise ConfigError("output", f"output=tied needs a trainable V x d_model input table, and {shown} "
                              "has none to tie",
                              "use output=untied (or fixed / bitchain) with a fixed input, or input=learned")

    @classmethod
    def trainable_count(cls, settings, vocab_size, d_model, code_width) -> int:
        return 0

    @classmethod
    def training_flops(cls, settings, vocab_size, d_model, code_width) -> int:
        return 6 * vocab_size * d_model  # the same matmul; its weight gradient lands on the table

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self._input.table.weight)  # (…, d) -> (…, V)

    def properties(self) -> dict[str, Any]:
        return {**super().properties(), "tied_to": "input.table.weight",
                "logit_rank_bound": min(self.vocab_size, self.d_model)}
