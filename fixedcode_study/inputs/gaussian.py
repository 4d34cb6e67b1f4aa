"""`random_fixed`: a frozen random Gaussian code, the continuous counterpart of the binary codes."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .base import FixedCode, to_numpy
from .tiling import check_code_width_fits, tiling_properties


class FixedGaussianCode(FixedCode):
    """`random_fixed`: a frozen random Gaussian code, N(0, 1) per entry, V x K, tiled to d_model.

    Continuous, fixed, identity-preserving (rows distinct; checked). Held as a frozen BUFFER drawn
    once from `code_seed` with numpy's PCG64 (not table-free): persistent, so checkpoints carry the
    exact code; no trainable parameters. code_width=null uses K = d_model (no tiling).
    """

    kind = "random_fixed"
    values_label = "gaussian"

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        code_width: int | None = 64,
        scale: float | str = 1.0,
        code_seed: int = 0,
        reference_std: float = 0.02,
    ):
        super().__init__(vocab_size, d_model)
        width = d_model if code_width is None else int(code_width)
        check_code_width_fits(width, d_model)
        self.code_width, self.code_seed = width, int(code_seed)
        self._init_scale(scale, reference_std)
        rng = np.random.default_rng(self.code_seed)
        table = rng.standard_normal((vocab_size, width), dtype=np.float32)  # (V, K)
        self.register_buffer("code_table", torch.from_numpy(table))  # CPU even under a meta context

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        return F.embedding(idx, self.code_table)  # (B, T, K)

    def code_sha256(self) -> str:
        """Fingerprint of the (V, K) float32 table, row by row: the bytes of the values forward looks up."""
        return hashlib.sha256(to_numpy(self.code_values(self.all_ids())).tobytes()).hexdigest()

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            **tiling_properties(self.code_width, self.d_model),
            "values": self.values_label,
            **self.scale_properties(),
            "injective": self.check_injective(),
            **self.code_statistics(),  # real values: constant coordinates only; no bits, no Hamming
            "code_seed": self.code_seed,
            "storage": "buffer",
            "code_sha256": self.code_sha256(),
        }
