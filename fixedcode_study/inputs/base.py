"""The two base classes: InputInterface (every input) and FixedCode (every parameter-free code),
and `init_normal_`, the one normal draw the decoder and the learned inputs initialise with.

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
from .stats import code_statistics
from .tiling import parse_scale, rows_distinct, tile_to_width, tiled_rms


def init_normal_(tensor: torch.Tensor, std: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill `tensor` with N(0, std^2) drawn from `generator` (a CPU generator; the global RNG when
    None). The numbers are drawn on the CPU in fp32 whatever the tensor's device or dtype, so one
    generator state gives one init everywhere. A meta tensor (shapes-only build) is left as it is."""
    if tensor.device.type == "meta":
        return tensor
    with torch.no_grad():
        if tensor.device.type == "cpu" and tensor.dtype == torch.float32:
            return tensor.normal_(0.0, std, generator=generator)
        draw = torch.empty(tensor.shape, dtype=torch.float32, device="cpu").normal_(0.0, std, generator=generator)
        return tensor.copy_(draw)


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

    @classmethod
    def trainable_split(cls, settings: Mapping[str, Any], vocab_size: int, d_model: int) -> dict[str, int]:
        """trainable_count split into token-specific parameters (one row per token ID: a table) and
        shared ones (a map every token goes through). A full or low-dimensional table is all
        token-specific; the continuum's inputs (mapped.py) override this."""
        return {"token_specific": cls.trainable_count(settings, vocab_size, d_model), "shared": 0}

    def token_specific_names(self) -> set[str]:
        """Names (relative to this module) of the trainable parameters that hold one row per token ID."""
        return {name for name, p in self.named_parameters() if self.vocab_size in p.shape}

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw this input's random initial values, if it has any, from `generator`: the Decoder
        passes its `input` generator (model.py), so the input never touches the body's or the head's
        random stream. Fixed codes have nothing to draw (their own seeds build them: matrix_seed,
        code_seed, permutation_seed)."""

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

    def input_rms(self) -> float:
        """RMS of the input vectors' entries as the first block receives them: scaled and tiled,
        over every ID (uniformly, not weighted by token frequency) and every d_model coordinate."""
        return tiled_rms(self.code_mean_squares(), self.d_model) * abs(self.scale)

    def scale_properties(self) -> dict[str, Any]:
        rms = self.input_rms()
        # code_rms is the name every input reports (learned tables: their RMS at init); input_rms
        # is the same number under the name earlier records used.
        return {"scale_mode": self.scale_mode, "scale": self.scale, "reference_std": self.reference_std,
                "input_rms": rms, "code_rms": rms}

    # -- the code's geometry over the vocabulary (stats.py) ---------------------------------------
    binary_values = False  # True for codes whose values are bits (statistics computed on the bits)

    def statistics_values(self) -> np.ndarray:
        """(V, K) what the statistics describe: the unscaled code values (binary codes: their bits)."""
        return to_numpy(self.code_values(self.all_ids()))

    def code_statistics(self) -> dict[str, Any]:
        """stats.code_statistics of this code, computed once (the code never changes)."""
        if getattr(self, "_code_statistics", None) is None:
            self._code_statistics = code_statistics(self.statistics_values(), binary=self.binary_values)
        return {k: list(v) if isinstance(v, list) else v for k, v in self._code_statistics.items()}
