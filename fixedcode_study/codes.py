"""Input interfaces: modules that map token IDs (B, T) to input vectors (B, T, d_model).

The decoder is identical across variants; only this module changes.

- `learned`   a trainable V x d_model table (the control).
- `binary`    the canonical little-endian binary code of the ID, bit i = (id >> i) & 1, tiled to
              d_model. No parameters, no projection, no V x d table: computed from the ID.
- `gf2`       the binary code after a fixed invertible map over GF(2), y = A c (xor b), drawn once
              from a seed. Also computed on the fly (a K x K matrix is all it stores).

Every interface reports `properties()` (code width, tile factor, values, injectivity, ...), which
the run records in results.json and W&B so analysis can group by them.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from .errors import ConfigError
from .gf2 import gf2_rank, matrix_sha256, sample_invertible, weight_constraint_feasible


def minimal_code_width(vocab_size: int) -> int:
    """K = ceil(log2 V): the fewest bits that give every ID its own code."""
    return max(1, (vocab_size - 1).bit_length())


def binary_code_bits(ids: np.ndarray, width: int) -> np.ndarray:
    """(N,) ints -> (N, width) uint8 bits, bit i = (id >> i) & 1 (little-endian)."""
    ids = np.asarray(ids, dtype=np.int64)
    return ((ids[:, None] >> np.arange(width)) & 1).astype(np.uint8)


def tile_to_width(code: torch.Tensor, d_model: int) -> torch.Tensor:
    """(..., K) -> (..., d_model) by repeating the K-vector and truncating the last copy."""
    k = code.shape[-1]
    reps = math.ceil(d_model / k)
    return code.repeat(*([1] * (code.dim() - 1)), reps)[..., :d_model]


class InputInterface(nn.Module):
    """Base class: token IDs (B, T) -> (B, T, d_model)."""

    kind: str = "base"

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model

    def properties(self) -> dict[str, Any]:
        return {"type": self.kind, "vocab_size": self.vocab_size, "d_model": self.d_model}


class LearnedEmbedding(InputInterface):
    """The control: an nn.Embedding table, initialised N(0, init_std^2) like Llama/SmolLM2."""

    kind = "learned"

    def __init__(self, vocab_size: int, d_model: int, init_std: float = 0.02):
        super().__init__(vocab_size, d_model)
        self.init_std = init_std
        self.table = nn.Embedding(vocab_size, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.table.weight.device.type != "meta":
            nn.init.normal_(self.table.weight, mean=0.0, std=self.init_std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx)  # (B, T, d)

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            "code_width": None,
            "values": "real",
            "init_std": self.init_std,
            "injective": None,  # a learned table is not a code: identity can be lost or kept
        }


class FixedBinaryCode(InputInterface):
    """Shared machinery of the fixed codes: bits -> values -> scale -> tile. No parameters."""

    kind = "binary"

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        code_width: int | None = 16,
        values: str = "01",
        scale: float = 1.0,
    ):
        super().__init__(vocab_size, d_model)
        minimal = minimal_code_width(vocab_size)
        width = minimal if code_width is None else int(code_width)
        if width < minimal or vocab_size > 2**width:
            raise ConfigError(
                "input.code_width",
                f"{width} bits cannot give {vocab_size} token IDs distinct codes "
                f"(ceil(log2 {vocab_size}) = {minimal})",
                f"set input.code_width>={minimal} or lower model.vocab_size to <= {2**width}",
            )
        if d_model < width:
            raise ConfigError(
                "model.d_model",
                f"d_model={d_model} is smaller than input.code_width={width}, so tiling would drop bits",
                f"use model.d_model>={width} or a narrower code",
            )
        if values not in ("01", "pm1"):
            raise ConfigError("input.values", f"unknown value set {values!r}", "use '01' or 'pm1'")
        if float(scale) == 0.0:
            raise ConfigError("input.scale", "scale 0 maps every ID to zero", "use a nonzero scale")
        self.code_width = width
        self.values = values
        self.scale = float(scale)
        self.register_buffer("bit_shifts", torch.arange(width), persistent=False)

    # -- the code itself ---------------------------------------------------------------------
    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        """(…) int IDs -> (…, K) float bits in {0,1}. Subclasses recode these."""
        return ((idx.unsqueeze(-1) >> self.bit_shifts) & 1).float()

    def numpy_code_bits(self, ids: np.ndarray) -> np.ndarray:
        """Same code computed in numpy (used for checks that must also run on the meta device)."""
        return binary_code_bits(ids, self.code_width)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        bits = self.code_bits(idx)  # (B, T, K) in {0,1}
        vals = bits if self.values == "01" else 2.0 * bits - 1.0
        if self.scale != 1.0:
            vals = vals * self.scale
        return tile_to_width(vals, self.d_model)  # (B, T, d)

    # -- checks and metadata -----------------------------------------------------------------
    def check_injective(self) -> bool:
        """Every ID in [0, V) gets a distinct code (checked over the whole vocabulary)."""
        bits = self.numpy_code_bits(np.arange(self.vocab_size))
        packed = np.packbits(bits, axis=1, bitorder="little")
        return len(np.unique(packed, axis=0)) == self.vocab_size

    def properties(self) -> dict[str, Any]:
        tile, rem = divmod(self.d_model, self.code_width)
        return {
            **super().properties(),
            "code_width": self.code_width,
            "minimal_code_width": minimal_code_width(self.vocab_size),
            "tile_factor": self.d_model / self.code_width,
            "full_tiles": tile,
            "truncated": rem != 0,  # last copy cut short when K does not divide d_model
            "values": "{0,1}" if self.values == "01" else "{-1,+1}",
            "scale": self.scale,
            "injective": self.check_injective(),
        }


class GF2Code(FixedBinaryCode):
    """Binary code recoded by a fixed invertible GF(2) map: y = A c (xor b)."""

    kind = "gf2"

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        code_width: int | None = 16,
        values: str = "01",
        scale: float = 1.0,
        matrix_seed: int = 12345,
        min_weight: int = 4,
        affine: bool = False,
    ):
        super().__init__(vocab_size, d_model, code_width, values, scale)
        k = self.code_width
        if not weight_constraint_feasible(k, int(min_weight)):
            raise ConfigError(
                "input.min_weight",
                f"no invertible {k}x{k} GF(2) matrix has every row and column weight >= {min_weight}",
                f"use input.min_weight<={k - 1}",
            )
        try:
            a, b, draws = sample_invertible(k, int(matrix_seed), int(min_weight), bool(affine))
        except RuntimeError as err:
            raise ConfigError("input.min_weight", str(err), "lower input.min_weight") from None
        self.matrix_seed = int(matrix_seed)
        self.min_weight = int(min_weight)
        self.affine = bool(affine)
        self.draws = draws
        self.matrix_np = a
        self.shift_np = b
        self.rank = gf2_rank(a)
        assert self.rank == k, "sample_invertible returned a singular matrix"
        # Persistent buffers: the exact matrix travels inside every checkpoint.
        self.register_buffer("gf2_matrix", torch.from_numpy(a.astype(np.float32)))
        self.register_buffer(
            "gf2_shift", torch.from_numpy((b if b is not None else np.zeros(k, np.uint8)).astype(np.float32))
        )

    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        c = super().code_bits(idx)  # (…, K)
        # Integer-valued float matmul is exact here (sums <= K), then reduce mod 2.
        y = torch.remainder(c @ self.gf2_matrix.T + self.gf2_shift, 2.0)
        return y

    def numpy_code_bits(self, ids: np.ndarray) -> np.ndarray:
        c = binary_code_bits(ids, self.code_width).astype(np.int64)
        y = c @ self.matrix_np.T.astype(np.int64)
        if self.shift_np is not None:
            y = y + self.shift_np
        return (y % 2).astype(np.uint8)

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            "matrix_seed": self.matrix_seed,
            "min_weight": self.min_weight,
            "affine": self.affine,
            "gf2_rank": self.rank,
            "matrix_sha256": matrix_sha256(self.matrix_np, self.shift_np),
            "matrix_draws": self.draws,
            "min_row_weight": int(self.matrix_np.sum(axis=1).min()),
            "min_col_weight": int(self.matrix_np.sum(axis=0).min()),
        }

    def matrix_record(self) -> dict[str, Any]:
        """The matrix as plain data, saved beside the run (rows as bit strings, LSB first)."""
        return {
            "matrix_seed": self.matrix_seed,
            "min_weight": self.min_weight,
            "affine": self.affine,
            "rows": ["".join(str(int(v)) for v in row) for row in self.matrix_np],
            "shift": None if self.shift_np is None else "".join(str(int(v)) for v in self.shift_np),
            "sha256": matrix_sha256(self.matrix_np, self.shift_np),
        }


INPUT_TYPES: dict[str, type[InputInterface]] = {
    "learned": LearnedEmbedding,
    "binary": FixedBinaryCode,
    "gf2": GF2Code,
}

# Keys in conf/input/*.yaml that describe the variant but are not constructor arguments.
_META_KEYS = {"name", "type", "description"}


def build_input(cfg: Mapping[str, Any], vocab_size: int, d_model: int, init_std: float = 0.02) -> InputInterface:
    """Build the input interface named by `cfg.type` with the remaining keys as arguments."""
    kind = cfg.get("type")
    if kind not in INPUT_TYPES:
        raise ConfigError(
            "input.type", f"unknown input type {kind!r}", f"choose one of {', '.join(sorted(INPUT_TYPES))}"
        )
    cls = INPUT_TYPES[kind]
    kwargs = {k: v for k, v in cfg.items() if k not in _META_KEYS}
    if cls is LearnedEmbedding:
        kwargs.pop("code_width", None)  # learned tables have no code width; null in the config
        kwargs.setdefault("init_std", init_std)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "vocab_size", "d_model"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ConfigError(
            f"input.{unknown[0]}",
            f"not a setting of input type {kind!r}",
            f"remove it or use one of {', '.join(sorted(accepted))}",
        )
    return cls(vocab_size=vocab_size, d_model=d_model, **kwargs)
