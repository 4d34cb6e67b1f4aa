"""The output head's interface: final hidden states (…, d_model) -> logits over the vocabulary.

Every head returns, from `forward`, logits whose log-softmax is the head's log-probability of each
of the V token IDs, so validation, lm-eval, generation and the Hugging Face export read any head
the same way. A head whose normalised probabilities cost less to evaluate for one known target than
for all V (`teacher_forced = True`, the bit chain) also has `nll(h, targets)`, which training and
validation call instead of forming (…, V) logits.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn


class OutputHead(nn.Module):
    kind: str = "base"
    teacher_forced: bool = False  # True: nll(h, targets) is the training / validation path

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model

    # -- from shapes alone (describe, size matching, the FLOPs formula) --------------------------
    @classmethod
    def trainable_count(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int, code_width: int) -> int:
        """Trainable parameters this head owns (a tied head owns none: the table is the input's)."""
        raise NotImplementedError

    @classmethod
    def training_flops(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int, code_width: int) -> int:
        """Training FLOPs per token of the head (forward + backward): 2 per multiply-add forward,
        4 backward for a trainable matrix (input and weight gradients), 2 for a fixed one (input only)."""
        raise NotImplementedError

    @classmethod
    def token_specific(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int, code_width: int) -> int:
        """Trainable parameters with a dimension of size V (one row or column per token)."""
        return 0

    # -- the module ------------------------------------------------------------------------------
    def reset_parameters(self, generator: torch.Generator | None, std: float) -> None:
        """Draw the head's random initial values from the Decoder's `head` stream (model.py)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h (…, d) -> logits (…, V)."""
        raise NotImplementedError

    def nll(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """h (…, d), targets (…) -> per-token NLL (…) in fp32 (teacher-forced heads only)."""
        raise NotImplementedError

    def properties(self) -> dict[str, Any]:
        """results.json["output"]: what the head is (type, code, rank bound, counts)."""
        return {"type": self.kind, "vocab_size": self.vocab_size, "d_model": self.d_model}
