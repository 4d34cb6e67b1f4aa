"""Inputs between a fixed code and a full table (the input continuum, sweeps/input_continuum.yaml).

- `code_map`        a fixed code (binary16, spelling, any conf/input fixed code named by `code:`),
                    then a trainable map shared by every token: `map: linear` (K x d_model, no bias)
                    or `map: mlp` (K -> hidden -> d_model: a biased hidden layer, an activation, an
                    unbiased output layer). No parameter belongs to one token: it asks whether
                    *trainability* of the input map, without token-specific freedom, closes the gap.
- `learned_lowrank` a trainable V x r table times a trainable r x d_model map: token-specific
                    freedom at rank r (V r token-specific + r d shared parameters).

Initialisation (drawn from the Decoder's `input` generator, so body and head stay common random
numbers across arms). The last layer's weights are drawn N(0, 1) and then rescaled so that the
input RMS over the whole vocabulary (every ID once, every d_model coordinate) equals the target
*exactly*, not in expectation:
  code_map         `init_rms: code`  the fixed code's own tiled input RMS (the map starts at the
                                     magnitude binary16 feeds the body), or
                   `init_rms: table` model.init_std (the learned table's RMS at init).
                   The mlp's hidden layer is N(0, 1 / sum_k E[c_k^2]) (unit pre-activation RMS over
                   the vocabulary, in expectation) with a zero bias.
  learned_lowrank  the V x r table N(0, init_std^2), as learned_lowdim's; the r x d map rescaled so
                   the product's RMS is init_std, the learned table's.
Every trainable input parameter sits in the optimizer's `input` group (accounting.optimizer_group):
it is trained like the learned table (its weight decay is optim.weight_decay_input).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .base import FixedCode, InputInterface, init_normal_
from .stats import STAT_KEYS

ACTIVATIONS = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu}
MAPS = ("linear", "mlp")
INIT_RMS = ("code", "table")
_RMS_CHUNK = 4096  # IDs per chunk when the init measures the RMS over the vocabulary


def _rescale_to_rms(weight: torch.Tensor, outputs, vocab_size: int, target: float) -> None:
    """Multiply `weight` (the map's last, linear layer) so the RMS of `outputs(ids)` over every ID
    equals `target`. Exact because the output is linear in that weight."""
    with torch.no_grad():
        total, count = 0.0, 0
        for start in range(0, vocab_size, _RMS_CHUNK):
            ids = torch.arange(start, min(start + _RMS_CHUNK, vocab_size))
            out = outputs(ids).double()
            total += float((out**2).sum())
            count += out.numel()
        rms = (total / count) ** 0.5
        if rms == 0.0:
            raise ConfigError("input.init_rms", "the map's output is zero for every ID at init", "use another seed")
        weight.mul_(target / rms)


class CodeMap(InputInterface):
    """A fixed code followed by a trainable shared map (module docstring). `code` is the built fixed
    code (build_input builds it from the `code:` settings); its buffers are this module's."""

    kind = "code_map"

    def __init__(self, vocab_size: int, d_model: int, code: FixedCode, map: str = "linear",
                 hidden: int | None = None, activation: str = "gelu", init_rms: str = "code",
                 init_std: float = 0.02):
        super().__init__(vocab_size, d_model)
        self.check(map, hidden, activation, init_rms)
        if not isinstance(code, FixedCode):
            raise ConfigError("input.code", f"{type(code).__name__} is not a fixed code",
                              "name a fixed code in input.code (binary16, gf2, spelling, ...)")
        self.code = code
        self.map_kind, self.activation, self.init_rms_mode, self.init_std = map, activation, init_rms, float(init_std)
        k = code.code_width
        self.code_width = k
        if map == "linear":
            self.hidden = None
            self.proj = nn.Linear(k, d_model, bias=False)
        else:
            self.hidden = int(hidden)
            self.fc_in = nn.Linear(k, self.hidden, bias=True)
            self.proj = nn.Linear(self.hidden, d_model, bias=False)
        self.reset_parameters()

    @staticmethod
    def check(map: str, hidden: Any, activation: str, init_rms: str) -> None:
        if map not in MAPS:
            raise ConfigError("input.map", f"unknown map {map!r}", f"use one of {', '.join(MAPS)}")
        if map == "mlp" and not (isinstance(hidden, int) and not isinstance(hidden, bool) and hidden >= 1):
            raise ConfigError("input.hidden", f"{hidden!r} is not a positive width", "set input.hidden, e.g. 64")
        if map == "linear" and hidden is not None:
            raise ConfigError("input.hidden", "a linear map has no hidden layer", "drop input.hidden or use input.map=mlp")
        if activation not in ACTIVATIONS:
            raise ConfigError("input.activation", f"unknown activation {activation!r}",
                              f"use one of {', '.join(ACTIVATIONS)}")
        if init_rms not in INIT_RMS:
            raise ConfigError("input.init_rms", f"unknown target {init_rms!r}", f"use one of {', '.join(INIT_RMS)}")

    @classmethod
    def trainable_count(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
        return sum(cls.trainable_split(settings, vocab_size, d_model).values())

    @classmethod
    def trainable_split(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> dict[str, int]:
        from . import (
            build_input,  # the code itself (no trainable part, cheap) says its width
        )
        code_cfg = settings.get("code")
        if not isinstance(code_cfg, Mapping):
            raise ConfigError("input.code", f"{code_cfg!r} is not resolved to a fixed code's settings",
                              "build through build.build_model, which resolves conf/input names")
        with torch.random.fork_rng(devices=[]):
            k = build_input(code_cfg, vocab_size, d_model).code_width
        kind = settings.get("map", "linear")
        if kind == "linear":
            return {"token_specific": 0, "shared": k * d_model}
        h = int(settings["hidden"])
        return {"token_specific": 0, "shared": k * h + h + h * d_model}

    def token_specific_names(self) -> set[str]:
        return set()  # every parameter is shared by all tokens, whatever its shape

    def target_rms(self) -> float:
        return self.code.input_rms() if self.init_rms_mode == "code" else self.init_std

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        if self.proj.weight.device.type == "meta":
            return
        if self.map_kind == "mlp":
            mean_square = float(np.sum(self.code.code_mean_squares())) * self.code.scale**2  # sum_k E[c_k^2]
            init_normal_(self.fc_in.weight, (1.0 / mean_square) ** 0.5, generator)
            with torch.no_grad():
                self.fc_in.bias.zero_()
        init_normal_(self.proj.weight, 1.0, generator)
        _rescale_to_rms(self.proj.weight, self.forward, self.vocab_size, self.target_rms())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        code = self.code.scaled_code(idx)  # (B, T, K) fixed values, never trained
        if self.map_kind == "mlp":
            code = ACTIVATIONS[self.activation](self.fc_in(code.to(self.fc_in.weight.dtype)))  # (B, T, hidden)
        return self.proj(code.to(self.proj.weight.dtype))  # (B, T, d)

    def properties(self) -> dict[str, Any]:
        code = self.code.properties()
        return {
            **super().properties(),
            "code_width": self.code_width,
            "code_type": code["type"],
            "map": self.map_kind,
            "hidden": self.hidden,
            "activation": self.activation if self.map_kind == "mlp" else None,
            "values": "real",
            "injective": None,  # a trained map can merge or keep what the code tells apart
            "code_injective": code.get("injective"),
            "init_rms": self.init_rms_mode,
            "code_rms": self.target_rms(),  # the input RMS at init, exactly (module docstring)
            **{k: code.get(k) for k in STAT_KEYS},  # the fixed code's statistics: what the map reads
            **{f"code_{k}": code[k] for k in ("code_sha256", "matrix_sha256", "scale") if k in code},
        }


class LearnedLowRank(InputInterface):
    """A trainable V x r table times a trainable r x d_model map (module docstring)."""

    kind = "learned_lowrank"

    def __init__(self, vocab_size: int, d_model: int, rank: int = 16, init_std: float = 0.02, trainable: bool = True):
        super().__init__(vocab_size, d_model)
        self.rank = self.checked_rank(rank, d_model)
        self.init_std = float(init_std)
        self.trainable = bool(trainable)
        self.table = nn.Embedding(vocab_size, self.rank)
        self.proj = nn.Linear(self.rank, d_model, bias=False)
        self.reset_parameters()
        for p in self.parameters():
            p.requires_grad_(self.trainable)

    @staticmethod
    def checked_rank(rank: Any, d_model: int) -> int:
        if not (isinstance(rank, int) and not isinstance(rank, bool) and 1 <= rank <= d_model):
            raise ConfigError("input.rank", f"{rank!r} is not a rank in 1..d_model={d_model}",
                              f"set input.rank to an integer in 1..{d_model}")
        return rank

    @classmethod
    def trainable_split(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> dict[str, int]:
        r = cls.checked_rank(settings.get("rank", 16), d_model)
        if not bool(settings.get("trainable", True)):
            return {"token_specific": 0, "shared": 0}
        return {"token_specific": vocab_size * r, "shared": r * d_model}

    @classmethod
    def trainable_count(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
        return sum(cls.trainable_split(settings, vocab_size, d_model).values())

    def token_specific_names(self) -> set[str]:
        return {"table.weight"}

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        if self.table.weight.device.type == "meta":
            return
        init_normal_(self.table.weight, self.init_std, generator)
        init_normal_(self.proj.weight, 1.0, generator)
        _rescale_to_rms(self.proj.weight, self.forward, self.vocab_size, self.init_std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.proj(self.table(idx))  # (B, T, r) -> (B, T, d)

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            "code_width": None,
            "rank": self.rank,
            "values": "real",
            "init_std": self.init_std,
            "injective": None,
            "trainable": self.trainable,
            "code_rms": self.init_std,  # exact at init (module docstring)
            **dict.fromkeys(STAT_KEYS),
        }


__all__ = ["CodeMap", "LearnedLowRank"]
