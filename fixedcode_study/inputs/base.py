"""The two base classes: InputInterface (every input) and FixedCode (every parameter-free code).

Scale ("scale matching"): every fixed code takes `scale` = a nonzero number (1.0 = none) or
`match_init`, which picks the number so that the code's root-mean-square entry (over the whole
vocabulary and all d_model coordinates) equals the learned table's initial std (model.init_std,
or `reference_std` when set): the learned table's RMS per coordinate.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from ..errors import ConfigError
from .tiling import parse_scale, rows_distinct, tile_to_width, tiled_rms


def to_numpy(values: torch.Tensor) -> np.ndarray:
    """A code's torch values as a C-ordered float32 numpy array, for statistics and hashes."""
    return values.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()


class InputInterface(nn.Module):
    """Base class: token IDs (B, T) -> (B, T, d_model)."""

    kind: str = "base"

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model
        # Facts the builder adds about the model around this input (e.g. size matching), so they
        # reach results.json and W&B with the rest of the properties. Flat scalar values only.
        self.build_info: dict[str, Any] = {}

    @classmethod
    def trainable_count(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> int:
        """Trainable parameters an input of this type with these settings would have, from shapes
        alone (size matching needs it for inputs it never builds). Fixed codes have none."""
        return 0

    def properties(self) -> dict[str, Any]:
        return {"type": self.kind, "vocab_size": self.vocab_size, "d_model": self.d_model, **self.build_info}

    def finalize(self) -> None:
        """Checks that need the finished module (run by build_input); raise ConfigError on failure."""


class FixedCode(InputInterface):
    """Base of the fixed (parameter-free) codes: code values (…, K) -> scale -> tile to d_model.

    Subclasses define `code_values` in torch, the code's one implementation. The checks (injectivity,
    statistics, `scale=match_init`, hashes) run that same function over every ID, so they see the
    numbers forward computes. They run where the code's constants live: CPU tensors made with
    torch.from_numpy, which a `torch.device("meta")` context does not redirect, so the checks work
    on a shapes-only build too (describe, sweeps).
    """

    values_label = "real"

    def _init_scale(self, scale: Any, reference_std: float) -> None:
        self.scale_mode, value = parse_scale(scale)
        self.reference_std = float(reference_std)
        self._scale_value = value  # None until match_init is resolved from the code itself

    @property
    def scale(self) -> float:
        if self._scale_value is None:
            rms = tiled_rms(self.code_mean_squares(), self.d_model)
            if rms == 0.0:
                raise ConfigError("input.scale", "the code is zero everywhere, so no scale can match an RMS",
                                  "use a fixed scale")
            self._scale_value = self.reference_std / rms
        return self._scale_value

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        """(…) int IDs -> (…, K) float values before scaling."""
        raise NotImplementedError

    def scaled(self, values: torch.Tensor) -> torch.Tensor:
        return values * self.scale if self.scale != 1.0 else values

    def scaled_code(self, idx: torch.Tensor) -> torch.Tensor:
        """(…) IDs -> (…, K): exactly what forward puts in the first K coordinates."""
        return self.scaled(self.code_values(idx))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return tile_to_width(self.scaled_code(idx), self.d_model)  # (B, T, K) -> (B, T, d)

    # -- checks and statistics over the whole vocabulary ----------------------------------------
    def all_ids(self) -> torch.Tensor:
        """(V,) every token ID, on the device of the code's constants (CPU unless the module was moved)."""
        device = next((b.device for b in self.buffers()), torch.device("cpu"))
        return torch.arange(self.vocab_size, device=device)

    def code_mean_squares(self) -> np.ndarray:
        """(K,) mean over the vocabulary of each unscaled code coordinate squared, in float64."""
        raw = to_numpy(self.code_values(self.all_ids())).astype(np.float64)  # (V, K)
        return (raw**2).mean(axis=0)

    def check_injective(self) -> bool:
        """Every ID in [0, V) gets a distinct input vector, checked on the scaled float32 values.

        The first K of the d_model >= K tiled coordinates are one full copy of the code, so
        distinct K-vectors means distinct d_model-vectors: tiling cannot merge two IDs.
        """
        return rows_distinct(to_numpy(self.scaled_code(self.all_ids())))

    def finalize(self) -> None:
        if not self.check_injective():
            raise ConfigError("input", f"the {self.kind} code maps two token IDs to the same vector",
                              "use a wider code, another seed or a larger scale")

    def scale_properties(self) -> dict[str, Any]:
        rms = tiled_rms(self.code_mean_squares(), self.d_model) * abs(self.scale)
        return {"scale_mode": self.scale_mode, "scale": self.scale, "reference_std": self.reference_std,
                "input_rms": rms}
