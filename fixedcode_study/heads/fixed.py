"""A table-free head through a fixed code: logits = C (P h).

C is a fixed V x K code, built from any fixed input code (binary16, gf2 with its matrix, wide, a
Gaussian table; `output.code` names a conf/input variant or gives its settings) and never trained
(a buffer); P is a trainable K x d_model projection. No trainable parameter has a dimension of size
V. The logits have rank <= K over the vocabulary (the softmax bottleneck, Yang et al. 2018): at
K = 16 every context's logit vector lies in a 16-dimensional subspace fixed before training. A
Gaussian C with K = d_model (`fixed_gaussian`) removes that bound beyond the untied head's own
(rank <= d_model), in the spirit of fixed classifiers (Hoffer et al. 2018).

Scale. `scale: match_head` (the default) scales C so that the mean squared row norm is 1: with P
drawn like every matrix (N(0, init_std^2)) and h of unit RMS after the final norm, the logits then
start with the untied head's variance (d_model * init_std^2). A number scales the raw code instead.

Cost per training token: 6 K d (P: forward, input and weight gradients) + 4 V K (C: forward and the
input gradient only), against the untied head's 6 V d.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..inputs import FixedCode, init_normal_
from .base import OutputHead


def parse_head_scale(scale: Any) -> float | None:
    """None for match_head, else the number (nonzero, finite)."""
    if isinstance(scale, str) and scale.strip().lower() == "match_head":
        return None
    try:
        value = float(scale)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(scale, bool) or not math.isfinite(value) or value == 0.0:
        raise ConfigError("output.scale", f"{scale!r} is neither match_head nor a nonzero number",
                          "set output.scale=match_head or a number like 0.4")
    return value


class FixedCodeHead(OutputHead):
    kind = "fixed"

    def __init__(self, vocab_size: int, d_model: int, code: FixedCode, code_label: str, scale: Any = "match_head"):
        super().__init__(vocab_size, d_model)
        raw = code.code_values(code.all_ids()).detach().to("cpu", torch.float64)  # (V, K) unscaled
        self.code_width = int(raw.shape[1])
        fixed_scale = parse_head_scale(scale)
        mean_row_norm2 = float((raw**2).sum(dim=1).mean())
        if mean_row_norm2 == 0.0:
            raise ConfigError("output.code", f"the code {code_label!r} is zero everywhere", "use another code")
        self.scale_mode = "match_head" if fixed_scale is None else "fixed"
        self.scale = 1.0 / math.sqrt(mean_row_norm2) if fixed_scale is None else fixed_scale
        self.code_label = code_label
        # Kept for its statistics (constant bits, Hamming distances), not as a submodule: its own
        # constants would otherwise enter the state_dict a second time.
        object.__setattr__(self, "_code", code)
        self.register_buffer("code", (raw * self.scale).to(torch.float32))  # (V, K), saved with checkpoints
        self.proj = nn.Parameter(torch.empty(self.code_width, d_model))  # (K, d)

    @classmethod
    def trainable_count(cls, settings, vocab_size, d_model, code_width) -> int:
        return code_width * d_model

    @classmethod
    def training_flops(cls, settings, vocab_size, d_model, code_width) -> int:
        return 6 * code_width * d_model + 4 * vocab_size * code_width

    def reset_parameters(self, generator: torch.Generator | None, std: float) -> None:
        init_normal_(self.proj, std, generator)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(h, self.proj), self.code)  # (…, d) -> (…, K) -> (…, V)

    def properties(self) -> dict[str, Any]:
        code = self.code.double().cpu()
        rank = int(torch.linalg.matrix_rank(code.T @ code))  # rank C = rank C^T C, a K x K problem
        return {**super().properties(), "code": self.code_label, "code_type": self._code.kind,
                "code_width": self.code_width, "scale_mode": self.scale_mode, "scale": self.scale,
                "code_rank": rank, "logit_rank_bound": min(rank, self.d_model),
                "code_statistics": self._code.code_statistics()}
