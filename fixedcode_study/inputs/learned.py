"""The learned inputs: the V x d_model table (the control) and the low-dimensional V x K table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn

from ..errors import ConfigError
from .base import InputInterface, init_normal_
from .stats import STAT_KEYS
from .tiling import check_code_width_fits, tile_to_width, tiled_rms, tiling_properties

# A learned table is not a code: the code statistics (stats.py) do not apply.
NO_CODE_STATISTICS = dict.fromkeys(STAT_KEYS)


@dataclass(frozen=True)
class ReferenceCode:
    """The fixed code a learned table starts from (init=code / code_stats), built by build_input."""

    label: str             # what properties() reports: the variant's name, or its settings when unnamed
    values: torch.Tensor   # (V, K) float32 on CPU: the code exactly as its forward computes it, untiled


class LearnedEmbedding(InputInterface):
    """The control: an nn.Embedding table, initialised N(0, init_std^2) like Llama/SmolLM2.

    Variants used as controls:
      trainable=false   a frozen random table (the classic "random embedding" control)
      init=code         the table starts as an exact copy of a fixed code (`init_code`), then trains
      init=code_stats   each coordinate j starts N(mean_j, std_j^2), the mean and std of coordinate j
                        of the fixed code `init_code` over the vocabulary ("the learned table
                        initialised to match the fixed code's statistics")
    In the config `init_code` names another input variant (e.g. "binary16"); build.build_model
    replaces the name by that variant's settings and build_input builds the code and hands it
    over as a ReferenceCode.
    """

    kind = "learned"
    INITS = ("normal", "code", "code_stats")

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        init_std: float = 0.02,
        trainable: bool = True,
        init: str = "normal",
        init_code: ReferenceCode | None = None,
    ):
        super().__init__(vocab_size, d_model)
        self.check_init(init, init_code is not None)
        self.init_std = init_std
        self.trainable = bool(trainable)
        self.init = init
        self.init_code = init_code
        self.table = nn.Embedding(vocab_size, d_model)
        self.reset_parameters()
        self.table.weight.requires_grad_(self.trainable)

    @classmethod
    def check_init(cls, init: str, has_init_code: bool) -> None:
        """init is known, and init_code is given exactly when init uses it (build_input checks this
        before it builds the referenced code)."""
        if init not in cls.INITS:
            raise ConfigError("input.init", f"unknown init {init!r}", f"use one of {', '.join(cls.INITS)}")
        if (init == "normal") == has_init_code:
            raise ConfigError(
                "input.init_code",
                f"init_code is set but init={init!r} ignores it" if has_init_code
                else "init_code must be given exactly when init is 'code' or 'code_stats'",
                "set input.init=code_stats (or code) with input.init_code=<a conf/input name>, or drop init_code",
            )

    @classmethod
    def trainable_count(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
        return vocab_size * d_model if bool(settings.get("trainable", True)) else 0

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Initialise the table; random draws come from `generator` (the Decoder's input stream)."""
        weight = self.table.weight
        if weight.device.type == "meta":
            return
        if self.init == "normal":
            init_normal_(weight, self.init_std, generator)
            return
        values = self.init_code.values  # (V, K) float32, the code exactly as its forward computes it
        with torch.no_grad():
            if self.init == "code":
                weight.copy_(tile_to_width(values, self.d_model))
            else:  # code_stats: per-coordinate Gaussian with the code's mean and std (numpy's float32 sums)
                mean = tile_to_width(torch.from_numpy(values.numpy().mean(axis=0)), self.d_model)  # (d,)
                std = tile_to_width(torch.from_numpy(values.numpy().std(axis=0)), self.d_model)  # (d,)
                unit = torch.empty(weight.shape, dtype=torch.float32, device="cpu").normal_(generator=generator)
                weight.copy_(mean + std * unit)  # (V, d)

    def init_rms(self) -> float:
        """RMS of the table's entries at init, in expectation over the draw (exact for init=code):
        init_std for normal; for code and code_stats the reference code's tiled RMS, since coordinate
        j starts with mean_j^2 + std_j^2 = the code's mean square in both."""
        if self.init == "normal":
            return float(self.init_std)
        mean_square = (self.init_code.values.double() ** 2).mean(dim=0).numpy()  # (K,)
        return tiled_rms(mean_square, self.d_model)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx)  # (B, T, d)

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            "code_width": None,
            "values": "real",
            "init_std": self.init_std,
            "injective": None,  # a learned table is not a code: identity can be lost or kept
            "trainable": self.trainable,
            "init": self.init,
            "init_code": None if self.init_code is None else self.init_code.label,
            "code_rms": self.init_rms(),
            **NO_CODE_STATISTICS,
        }


class LearnedLowDim(InputInterface):
    """A trainable V x K table (K <= d_model, e.g. 16) tiled to d_model: learned coordinates with
    V*K parameters instead of V*d. Initialised N(0, init_std^2), so every coordinate has the
    learned table's RMS."""

    kind = "learned_lowdim"
    DEFAULT_WIDTH = 16

    def __init__(self, vocab_size: int, d_model: int, code_width: int = DEFAULT_WIDTH, init_std: float = 0.02,
                 trainable: bool = True):
        super().__init__(vocab_size, d_model)
        self.code_width = self.checked_width(code_width, d_model)
        self.init_std = init_std
        self.trainable = bool(trainable)
        self.table = nn.Embedding(vocab_size, self.code_width)
        self.reset_parameters()
        self.table.weight.requires_grad_(self.trainable)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        init_normal_(self.table.weight, self.init_std, generator)

    @staticmethod
    def checked_width(code_width: int | None, d_model: int) -> int:
        if code_width is None:
            raise ConfigError("input.code_width", "learned_lowdim needs a width K", "set input.code_width, e.g. 16")
        check_code_width_fits(int(code_width), d_model)
        return int(code_width)

    @classmethod
    def trainable_count(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
        width = cls.checked_width(settings.get("code_width", cls.DEFAULT_WIDTH), d_model)
        return vocab_size * width if bool(settings.get("trainable", True)) else 0

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return tile_to_width(self.table(idx), self.d_model)  # (B, T, K) -> (B, T, d)

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            **tiling_properties(self.code_width, self.d_model),
            "values": "real",
            "init_std": self.init_std,
            "injective": None,
            "trainable": self.trainable,
            "code_rms": float(self.init_std),  # expected RMS at init (tiling copies N(0, init_std^2) entries)
            **NO_CODE_STATISTICS,
        }
