"""The binary codes: bits of the token ID, optionally recoded over GF(2) or widened, computed on
the fly from the ID (no V x d table).

- `binary`  the canonical little-endian code, bit i = (id >> i) & 1; with `permutation_seed` the
            code of a seeded random permutation of the ID instead (same codewords, arbitrary
            assignment: the control for the code's structure).
- `gf2`     y = A c (xor b), a fixed invertible K x K map drawn once from a seed.
- `wide`    the minimal canonical code followed by extra fixed bits (GF(2) recodings or seeded
            random bits).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from .base import FixedCode
from .gf2 import gf2_rank, matrix_sha256, sample_constrained, weight_constraint_feasible
from .tiling import bit_rows_distinct, minimal_code_width, tiling_properties


def _shifts(width: int) -> torch.Tensor:
    """(width,) int64 shifts 0..width-1, on CPU even under a torch.device("meta") context, so the
    checks can compute the code of a shapes-only build."""
    return torch.from_numpy(np.arange(width, dtype=np.int64))


class FixedBinaryCode(FixedCode):
    """Shared machinery of the binary codes: bits -> values -> scale -> tile. No parameters.

    code_width=None means the minimal width ceil(log2 V) (`binary`); binary16 fixes 16 bits.
    permutation_seed (type binary only): token i gets the canonical code of pi(i), pi a permutation
    of [0, V) drawn from this seed. The V codewords, and so every statistic of the code (constant
    bits, bit balance, Hamming distances, RMS), stay exactly binary16's; only which ID gets which
    codeword becomes arbitrary. pi is a persistent (V,) buffer, so checkpoints carry it.
    """

    kind = "binary"
    binary_values = True

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        code_width: int | None = 16,
        values: str = "01",
        scale: float | str = 1.0,
        reference_std: float = 0.02,
        permutation_seed: int | None = None,
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
        self.code_width = width
        self.values = values
        self._init_scale(scale, reference_std)
        self.register_buffer("bit_shifts", _shifts(width), persistent=False)
        self.permutation_seed = None if permutation_seed is None else int(permutation_seed)
        if self.permutation_seed is not None:
            perm = np.random.default_rng(self.permutation_seed).permutation(vocab_size)  # (V,)
            self.register_buffer("id_permutation", torch.from_numpy(perm.astype(np.int64)))

    # -- the code itself ---------------------------------------------------------------------
    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        """(…) int IDs -> (…, K) float bits in {0,1}. Subclasses recode these."""
        if self.permutation_seed is not None:
            idx = self.id_permutation[idx]  # (…) the ID whose canonical code this token uses
        return ((idx.unsqueeze(-1) >> self.bit_shifts) & 1).float()

    def bit_values(self, bits: torch.Tensor) -> torch.Tensor:
        """Bits {0,1} -> the code's values: {0,1} or {-1,+1}."""
        return bits if self.values == "01" else 2.0 * bits - 1.0

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        return self.bit_values(self.code_bits(idx))  # (B, T, K)

    def all_bits(self) -> np.ndarray:
        """(V, K) uint8: the bits forward computes for every ID."""
        return self.code_bits(self.all_ids()).to(device="cpu", dtype=torch.uint8).contiguous().numpy()

    def statistics_values(self) -> np.ndarray:
        return self.all_bits()  # bits, whatever the value set ({0,1} or {-1,+1})

    def check_injective(self) -> bool:
        """Fast exact form of FixedCode.check_injective for bit codes: the scaled float32 values are
        distinct per ID iff the two scaled levels stay distinct numbers and the bit patterns differ."""
        levels = self.scaled(self.bit_values(torch.tensor([0.0, 1.0], dtype=torch.float32, device="cpu")))
        low, high = levels.numpy()
        if low == high or not (np.isfinite(low) and np.isfinite(high)):
            return self.vocab_size <= 1
        return bit_rows_distinct(self.all_bits())

    # -- metadata ----------------------------------------------------------------------------
    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            **tiling_properties(self.code_width, self.d_model),  # truncated: last copy cut short
            "minimal_code_width": minimal_code_width(self.vocab_size),
            "values": "{0,1}" if self.values == "01" else "{-1,+1}",
            **self.scale_properties(),
            "injective": self.check_injective(),
            **self.code_statistics(),
            "permutation_seed": self.permutation_seed,
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
        scale: float | str = 1.0,
        matrix_seed: int = 12345,
        min_weight: int = 4,
        affine: bool = False,
        reference_std: float = 0.02,
    ):
        super().__init__(vocab_size, d_model, code_width, values, scale, reference_std)
        k = self.code_width
        if not weight_constraint_feasible(k, int(min_weight)):
            raise ConfigError(
                "input.min_weight",
                f"no invertible {k}x{k} GF(2) matrix has every row and column weight >= {min_weight}",
                f"use input.min_weight<={k - 1}",
            )
        drawn = sample_constrained(k, int(matrix_seed), int(min_weight), bool(affine))
        a, b = drawn.matrix, drawn.shift
        self.matrix_seed = int(matrix_seed)
        self.min_weight = int(min_weight)
        self.affine = bool(affine)
        self.draws = drawn.draws
        self.sampler = drawn.method
        self.matrix_np = a  # (K, K) uint8: the drawn matrix, for its record and fingerprint
        self.shift_np = b  # (K,) uint8 or None
        self.rank = gf2_rank(a)
        if self.rank != k:  # checked, not assumed: the sampler must hand back an invertible matrix
            raise RuntimeError(f"GF(2) sampler returned a matrix of rank {self.rank} < {k}")
        # Persistent buffers: the exact matrix travels inside every checkpoint.
        self.register_buffer("gf2_matrix", torch.from_numpy(a.astype(np.float32)))
        self.register_buffer(
            "gf2_shift", torch.from_numpy((b if b is not None else np.zeros(k, np.uint8)).astype(np.float32))
        )

    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        c = super().code_bits(idx)  # (…, K)
        # Integer-valued float matmul is exact here (sums <= K), then reduce mod 2.
        # Cast to the buffer's dtype (bf16 after model.to(bf16)): sums <= K stay exact there too.
        y = torch.remainder(c.to(self.gf2_matrix.dtype) @ self.gf2_matrix.T + self.gf2_shift, 2.0)
        return y

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            "matrix_seed": self.matrix_seed,
            "min_weight": self.min_weight,
            "affine": self.affine,
            "gf2_rank": self.rank,
            "matrix_sha256": matrix_sha256(self.matrix_np, self.shift_np),
            "matrix_draws": self.draws,
            "matrix_sampler": self.sampler,
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


class WideCode(FixedBinaryCode):
    """A code of K > ceil(log2 V) bits: the minimal canonical code c (m bits) followed by E = K - m
    extra fixed bits that vary across the vocabulary.

    extra="gf2"    the extra bits are concatenated independent GF(2) recodings A_r c of the
                   minimal code (A_r invertible m x m, drawn from matrix_seed + r, r = 0, 1, ...;
                   the last one truncated). Each extra bit is a nonzero linear form of c, so it is
                   not constant over [0, V). Computed on the fly from one K x m matrix M = [I; A_0; ...]:
                   y = M c mod 2.
    extra="random" the extra bits are seeded uniform random bits per token ID, held in a frozen
                   V x E buffer drawn from code_seed (saved with checkpoints).
    The canonical prefix alone already gives every ID its own code, so the whole code is
    injective; finalize() still checks it, and checks that no extra bit is constant.
    """

    kind = "wide"

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        code_width: int = 32,
        values: str = "01",
        scale: float | str = 1.0,
        extra: str = "gf2",
        matrix_seed: int = 12345,
        min_weight: int = 4,
        code_seed: int = 0,
        reference_std: float = 0.02,
    ):
        if code_width is None:
            raise ConfigError("input.code_width", "a wide code needs an explicit total width K",
                              f"set input.code_width>{minimal_code_width(vocab_size)}")
        super().__init__(vocab_size, d_model, code_width, values, scale, reference_std)
        m = minimal_code_width(vocab_size)
        n_extra = self.code_width - m
        if extra not in ("gf2", "random"):
            raise ConfigError("input.extra", f"unknown extra-bit construction {extra!r}", "use 'gf2' or 'random'")
        self.minimal_width, self.n_extra, self.extra = m, n_extra, extra
        self.matrix_seed, self.min_weight, self.code_seed = int(matrix_seed), int(min_weight), int(code_seed)
        self.register_buffer("bit_shifts", _shifts(m), persistent=False)  # canonical m bits only
        self.recoding_hashes: list[str] = []
        if extra == "gf2":
            if not 1 <= self.min_weight <= max(1, m - 1) or not weight_constraint_feasible(m, self.min_weight):
                raise ConfigError("input.min_weight",
                                  f"no invertible {m}x{m} GF(2) matrix has every row and column weight >= "
                                  f"{self.min_weight} (a wide code needs >= 1 so extra bits are not constant)",
                                  f"use 1 <= input.min_weight <= {max(1, m - 1)}")
            blocks = [np.eye(m, dtype=np.uint8)]
            for r in range(math.ceil(n_extra / m)):
                drawn = sample_constrained(m, self.matrix_seed + r, self.min_weight, False)
                blocks.append(drawn.matrix)
                self.recoding_hashes.append(matrix_sha256(drawn.matrix, None))
            code_matrix = np.concatenate(blocks)[: self.code_width]  # (K, m)
            self.register_buffer("code_matrix", torch.from_numpy(code_matrix.astype(np.float32)))
        else:
            rng = np.random.default_rng(self.code_seed)
            extra_bits = rng.integers(0, 2, size=(vocab_size, n_extra), dtype=np.uint8)  # (V, E)
            self.register_buffer("extra_bits", torch.from_numpy(extra_bits.astype(np.float32)))

    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        c = super().code_bits(idx)  # (…, m): the canonical bits, bit_shifts holds m shifts here
        if self.extra == "gf2":
            # (…, K); integer sums <= m are exact in float, then reduce mod 2
            return torch.remainder(c.to(self.code_matrix.dtype) @ self.code_matrix.T, 2.0)
        return torch.cat([c, self.extra_bits[idx]], dim=-1)  # (…, m + E)

    def finalize(self) -> None:
        super().finalize()
        bits = self.all_bits()[:, self.minimal_width:]  # (V, E)
        constant = np.nonzero(bits.min(axis=0) == bits.max(axis=0))[0]
        if len(constant):
            raise ConfigError("input.code_seed" if self.extra == "random" else "input.matrix_seed",
                              f"extra bit {int(constant[0]) + self.minimal_width} is constant over the vocabulary",
                              "use another seed")

    def code_sha256(self) -> str:
        h = hashlib.sha256(f"{self.extra}:{self.vocab_size}:{self.code_width}:".encode())
        h.update(self.all_bits().tobytes())  # (V, K) uint8, C order
        return h.hexdigest()

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            "extra": self.extra,
            "extra_bits": self.n_extra,
            "matrix_seed": self.matrix_seed if self.extra == "gf2" else None,
            "min_weight": self.min_weight if self.extra == "gf2" else None,
            "n_recodings": len(self.recoding_hashes),
            "code_seed": self.code_seed if self.extra == "random" else None,
            "code_sha256": self.code_sha256(),
        }
