"""Input interfaces: modules that map token IDs (B, T) to input vectors (B, T, d_model).

The decoder is identical across variants; only this module changes.

- `learned`   a trainable V x d_model table (the control).
- `binary`    the canonical little-endian binary code of the ID, bit i = (id >> i) & 1, tiled to
              d_model. No parameters, no projection, no V x d table: computed from the ID.
- `gf2`       the binary code after a fixed invertible map over GF(2), y = A c (xor b), drawn once
              from a seed. Also computed on the fly (a K x K matrix is all it stores).
- `wide`      a code wider than ceil(log2 V): the minimal canonical code followed by extra fixed
              bits (concatenated independent GF(2) recodings, or seeded random bits).
- `random_fixed`   a frozen random Gaussian V x K code (a buffer drawn from `code_seed`), tiled.
- `learned_lowdim` a trainable V x K table (K small), tiled to d_model.
`learned` also covers the controls `trainable: false` (a frozen random table) and `init: code` /
`init: code_stats` (a learned table that starts at, or with the statistics of, a fixed code).

Scale ("scale matching"): every fixed code takes `scale` = a nonzero number (1.0 = none) or
`match_init`, which picks the number so that the code's root-mean-square entry (over the whole
vocabulary and all d_model coordinates) equals the learned table's initial std (model.init_std,
or `reference_std` when set): the learned table's RMS per coordinate.

Every interface reports `properties()` (code width, tile factor, values, injectivity, ...), which
the run records in results.json and W&B so analysis can group by them.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .errors import ConfigError
from .gf2 import gf2_rank, matrix_sha256, sample_constrained, weight_constraint_feasible


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


def tile_counts(width: int, d_model: int) -> np.ndarray:
    """(K,) how many of the d_model coordinates carry code coordinate k after tiling."""
    return np.bincount(np.arange(d_model) % width, minlength=width)


def tiled_rms(mean_square: np.ndarray, d_model: int) -> float:
    """RMS over all d_model coordinates of a tiled code, from each code coordinate's mean square."""
    counts = tile_counts(len(mean_square), d_model)
    return float(np.sqrt((counts * np.asarray(mean_square, dtype=np.float64)).sum() / d_model))


def parse_scale(scale: Any) -> tuple[str, float | None]:
    """`scale` setting -> (mode, value): ("fixed", number) or ("match_init", resolved later)."""
    if scale is None:
        return "fixed", 1.0  # none
    if isinstance(scale, str) and scale.strip().lower() == "match_init":
        return "match_init", None
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise ConfigError("input.scale", f"unknown scale {scale!r}", "use a nonzero number or 'match_init'") from None
    if value == 0.0 or not math.isfinite(value):
        raise ConfigError("input.scale", f"scale {scale!r} maps every ID to zero or is not finite",
                          "use a nonzero finite scale or 'match_init'")
    return "fixed", value


def rows_distinct(values: np.ndarray) -> bool:
    """True when every row of (N, K) is different (exact comparison of the stored numbers)."""
    values = np.asarray(values)
    if len(values) < 2:
        return True
    order = np.lexsort(values.T[::-1])  # sort rows lexicographically, then compare neighbours
    ordered = values[order]
    return not bool((ordered[1:] == ordered[:-1]).all(axis=1).any())


def check_code_width_fits(width: int, d_model: int) -> None:
    if width < 1:
        raise ConfigError("input.code_width", f"width {width} is not positive", "use input.code_width>=1")
    if d_model < width:
        raise ConfigError(
            "model.d_model",
            f"d_model={d_model} is smaller than input.code_width={width}, so tiling would drop coordinates",
            f"use model.d_model>={width} or input.code_width<={d_model}",
        )


def tiling_properties(code_width: int, d_model: int) -> dict[str, Any]:
    """How a K-wide code fills d_model: K, d/K, whole copies, and whether the last copy is cut."""
    tile, rem = divmod(d_model, code_width)
    return {"code_width": code_width, "tile_factor": d_model / code_width, "full_tiles": tile, "truncated": rem != 0}


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

    def properties(self) -> dict[str, Any]:
        return {"type": self.kind, "vocab_size": self.vocab_size, "d_model": self.d_model, **self.build_info}

    def finalize(self) -> None:
        """Checks that need the finished module (run by build_input); raise ConfigError on failure."""


class LearnedEmbedding(InputInterface):
    """The control: an nn.Embedding table, initialised N(0, init_std^2) like Llama/SmolLM2.

    Variants used as controls:
      trainable=false   a frozen random table (the classic "random embedding" control)
      init=code         the table starts as an exact copy of a fixed code (`init_code`), then trains
      init=code_stats   each coordinate j starts N(mean_j, std_j^2), the mean and std of coordinate j
                        of the fixed code `init_code` over the vocabulary ("the learned table
                        initialised to match the fixed code's statistics")
    `init_code` names an input variant in conf/input (e.g. "binary16"), or is an input mapping.
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
        init_code: str | Mapping[str, Any] | None = None,
    ):
        super().__init__(vocab_size, d_model)
        if init not in self.INITS:
            raise ConfigError("input.init", f"unknown init {init!r}", f"use one of {', '.join(self.INITS)}")
        if (init == "normal") != (init_code is None):
            raise ConfigError(
                "input.init_code",
                "init_code must be given exactly when init is 'code' or 'code_stats'" if init_code is None
                else f"init_code is set but init={init!r} ignores it",
                "set input.init=code_stats (or code) with input.init_code=<a conf/input name>, or drop init_code",
            )
        self.init_std = init_std
        self.trainable = bool(trainable)
        self.init = init
        self.init_code = init_code if init_code is None or isinstance(init_code, str) else dict(init_code)
        # The code's values (V, K) are computed here, on any device, so a bad init_code fails at
        # build time (describe too), not only when a real table is initialised.
        self._init_values = None if init_code is None else self._reference_code().numpy_scaled_values(
            np.arange(vocab_size))
        self.table = nn.Embedding(vocab_size, d_model)
        self.reset_parameters()
        self.table.weight.requires_grad_(self.trainable)

    def _reference_code(self) -> "FixedCode":
        cfg = load_input_config(self.init_code) if isinstance(self.init_code, str) else self.init_code
        code = build_input(cfg, self.vocab_size, self.d_model, self.init_std)
        if not isinstance(code, FixedCode):
            raise ConfigError("input.init_code.type", f"{code.kind!r} is not a fixed code",
                              "use a fixed code type (binary, gf2, wide, random_fixed)")
        return code

    def reset_parameters(self) -> None:
        weight = self.table.weight
        if weight.device.type == "meta":
            return
        if self.init == "normal":
            nn.init.normal_(weight, mean=0.0, std=self.init_std)
            return
        values = self._init_values  # (V, K) float32, the code exactly as its forward computes it
        with torch.no_grad():
            if self.init == "code":
                weight.copy_(tile_to_width(torch.from_numpy(values), self.d_model))
            else:  # code_stats: per-coordinate Gaussian with the code's mean and std
                mean = tile_to_width(torch.from_numpy(values.mean(axis=0)), self.d_model)  # (d,)
                std = tile_to_width(torch.from_numpy(values.std(axis=0)), self.d_model)  # (d,)
                weight.copy_(mean + std * torch.randn(weight.shape, dtype=weight.dtype))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx)  # (B, T, d)

    def properties(self) -> dict[str, Any]:
        props = {
            **super().properties(),
            "code_width": None,
            "values": "real",
            "init_std": self.init_std,
            "injective": None,  # a learned table is not a code: identity can be lost or kept
            "trainable": self.trainable,
            "init": self.init,
            "init_code": None,
        }
        if isinstance(self.init_code, str):
            props["init_code"] = self.init_code
        elif self.init_code is not None:
            props["init_code"] = ",".join(f"{k}={self.init_code[k]}" for k in sorted(self.init_code))
        return props


class LearnedLowDim(InputInterface):
    """A trainable V x K table (K <= d_model, e.g. 16) tiled to d_model: learned coordinates with
    V*K parameters instead of V*d. Initialised N(0, init_std^2), so every coordinate has the
    learned table's RMS."""

    kind = "learned_lowdim"

    def __init__(self, vocab_size: int, d_model: int, code_width: int = 16, init_std: float = 0.02,
                 trainable: bool = True):
        super().__init__(vocab_size, d_model)
        if code_width is None:
            raise ConfigError("input.code_width", "learned_lowdim needs a width K", "set input.code_width, e.g. 16")
        check_code_width_fits(int(code_width), d_model)
        self.code_width = int(code_width)
        self.init_std = init_std
        self.trainable = bool(trainable)
        self.table = nn.Embedding(vocab_size, self.code_width)
        if self.table.weight.device.type != "meta":
            nn.init.normal_(self.table.weight, mean=0.0, std=init_std)
        self.table.weight.requires_grad_(self.trainable)

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
        }


class FixedCode(InputInterface):
    """Base of the fixed (parameter-free) codes: code values (…, K) -> scale -> tile to d_model.

    Subclasses define `code_values` (torch) and `numpy_code_values` (the same numbers in numpy,
    used for checks, statistics and `scale=match_init`; works when the module is on `meta`).
    """

    values_label = "real"

    def _init_scale(self, scale: Any, reference_std: float) -> None:
        self.scale_mode, value = parse_scale(scale)
        self.reference_std = float(reference_std)
        self._scale_value = value  # None until match_init is resolved from the code itself

    @property
    def scale(self) -> float:
        if self._scale_value is None:
            raw = self.numpy_code_values(np.arange(self.vocab_size))  # (V, K) before scaling
            rms = tiled_rms((raw.astype(np.float64) ** 2).mean(axis=0), self.d_model)
            if rms == 0.0:
                raise ConfigError("input.scale", "the code is zero everywhere, so no scale can match an RMS",
                                  "use a fixed scale")
            self._scale_value = self.reference_std / rms
        return self._scale_value

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def numpy_code_values(self, ids: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def numpy_scaled_values(self, ids: np.ndarray) -> np.ndarray:
        """(N,) IDs -> (N, K) float32: exactly what forward puts in the first K coordinates."""
        return (self.numpy_code_values(ids).astype(np.float32) * np.float32(self.scale)).astype(np.float32)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        vals = self.code_values(idx)  # (B, T, K)
        if self.scale != 1.0:
            vals = vals * self.scale
        return tile_to_width(vals, self.d_model)  # (B, T, d)

    def check_injective(self) -> bool:
        """Every ID in [0, V) gets a distinct input vector, checked on the scaled float32 values.

        The first K of the d_model >= K tiled coordinates are one full copy of the code, so
        distinct K-vectors means distinct d_model-vectors: tiling cannot merge two IDs.
        """
        return rows_distinct(self.numpy_scaled_values(np.arange(self.vocab_size)))

    def finalize(self) -> None:
        if not self.check_injective():
            raise ConfigError("input", f"the {self.kind} code maps two token IDs to the same vector",
                              "use a wider code, another seed or a larger scale")

    def scale_properties(self) -> dict[str, Any]:
        raw = self.numpy_code_values(np.arange(self.vocab_size)).astype(np.float64)
        rms = tiled_rms((raw**2).mean(axis=0), self.d_model) * abs(self.scale)
        return {"scale_mode": self.scale_mode, "scale": self.scale, "reference_std": self.reference_std,
                "input_rms": rms}


class FixedBinaryCode(FixedCode):
    """Shared machinery of the binary codes: bits -> values -> scale -> tile. No parameters.

    code_width=None means the minimal width ceil(log2 V) (`binary`); binary16 fixes 16 bits.
    """

    kind = "binary"

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        code_width: int | None = 16,
        values: str = "01",
        scale: float | str = 1.0,
        reference_std: float = 0.02,
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
        self.register_buffer("bit_shifts", torch.arange(width), persistent=False)

    # -- the code itself ---------------------------------------------------------------------
    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        """(…) int IDs -> (…, K) float bits in {0,1}. Subclasses recode these."""
        return ((idx.unsqueeze(-1) >> self.bit_shifts) & 1).float()

    def numpy_code_bits(self, ids: np.ndarray) -> np.ndarray:
        """Same code computed in numpy (used for checks that must also run on the meta device)."""
        return binary_code_bits(ids, self.code_width)

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        bits = self.code_bits(idx)  # (B, T, K) in {0,1}
        return bits if self.values == "01" else 2.0 * bits - 1.0

    def numpy_code_values(self, ids: np.ndarray) -> np.ndarray:
        bits = self.numpy_code_bits(ids).astype(np.float32)
        return bits if self.values == "01" else 2.0 * bits - 1.0

    def check_injective(self) -> bool:
        """Fast exact form of FixedCode.check_injective for bit codes: the scaled float32 values are
        distinct per ID iff the two scaled levels stay distinct numbers and the bit patterns differ."""
        low, high = np.float32([0.0 if self.values == "01" else -1.0, 1.0]) * np.float32(self.scale)
        if low == high or not (np.isfinite(low) and np.isfinite(high)):
            return self.vocab_size <= 1
        bits = self.numpy_code_bits(np.arange(self.vocab_size))
        packed = np.packbits(bits, axis=1, bitorder="little")  # (V, ceil(K/8)) bytes
        if packed.shape[1] <= 8:  # one uint64 key per ID: a fast 1-D unique
            packed = np.pad(packed, ((0, 0), (0, 8 - packed.shape[1])))
            keys = np.ascontiguousarray(packed).view(np.uint64).ravel()
        else:
            keys = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).ravel()
        return len(np.unique(keys)) == self.vocab_size

    # -- metadata ----------------------------------------------------------------------------
    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            **tiling_properties(self.code_width, self.d_model),  # truncated: last copy cut short
            "minimal_code_width": minimal_code_width(self.vocab_size),
            "values": "{0,1}" if self.values == "01" else "{-1,+1}",
            **self.scale_properties(),
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
        self.matrix_np = a
        self.shift_np = b
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
        self.register_buffer("bit_shifts", torch.arange(m), persistent=False)  # canonical m bits only
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
            self.code_matrix_np = np.concatenate(blocks)[: self.code_width]  # (K, m)
            self.register_buffer("code_matrix", torch.from_numpy(self.code_matrix_np.astype(np.float32)))
        else:
            rng = np.random.default_rng(self.code_seed)
            self.extra_bits_np = rng.integers(0, 2, size=(vocab_size, n_extra), dtype=np.uint8)  # (V, E)
            self.register_buffer("extra_bits", torch.from_numpy(self.extra_bits_np.astype(np.float32)))

    def code_bits(self, idx: torch.Tensor) -> torch.Tensor:
        c = ((idx.unsqueeze(-1) >> self.bit_shifts) & 1).float()  # (…, m)
        if self.extra == "gf2":
            return torch.remainder(c.to(self.code_matrix.dtype) @ self.code_matrix.T, 2.0)  # (…, K); sums <= m are exact
        return torch.cat([c, self.extra_bits[idx]], dim=-1)  # (…, m + E)

    def numpy_code_bits(self, ids: np.ndarray) -> np.ndarray:
        c = binary_code_bits(ids, self.minimal_width)
        if self.extra == "gf2":
            return ((c.astype(np.int64) @ self.code_matrix_np.T.astype(np.int64)) % 2).astype(np.uint8)
        return np.concatenate([c, self.extra_bits_np[np.asarray(ids, dtype=np.int64)]], axis=1)

    def finalize(self) -> None:
        super().finalize()
        bits = self.numpy_code_bits(np.arange(self.vocab_size))[:, self.minimal_width:]
        constant = np.nonzero(bits.min(axis=0) == bits.max(axis=0))[0]
        if len(constant):
            raise ConfigError("input.code_seed" if self.extra == "random" else "input.matrix_seed",
                              f"extra bit {int(constant[0]) + self.minimal_width} is constant over the vocabulary",
                              "use another seed")

    def code_sha256(self) -> str:
        h = hashlib.sha256(f"{self.extra}:{self.vocab_size}:{self.code_width}:".encode())
        h.update(np.ascontiguousarray(self.numpy_code_bits(np.arange(self.vocab_size))).tobytes())
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
        self.code_np = rng.standard_normal((vocab_size, width), dtype=np.float32)  # (V, K)
        self.register_buffer("code_table", torch.from_numpy(self.code_np))

    def code_values(self, idx: torch.Tensor) -> torch.Tensor:
        return F.embedding(idx, self.code_table)  # (B, T, K)

    def numpy_code_values(self, ids: np.ndarray) -> np.ndarray:
        return self.code_np[np.asarray(ids, dtype=np.int64)]

    def properties(self) -> dict[str, Any]:
        return {
            **super().properties(),
            **tiling_properties(self.code_width, self.d_model),
            "values": self.values_label,
            **self.scale_properties(),
            "injective": self.check_injective(),
            "code_seed": self.code_seed,
            "storage": "buffer",
            "code_sha256": hashlib.sha256(np.ascontiguousarray(self.code_np).tobytes()).hexdigest(),
        }


INPUT_TYPES: dict[str, type[InputInterface]] = {
    "learned": LearnedEmbedding,
    "binary": FixedBinaryCode,
    "gf2": GF2Code,
    "wide": WideCode,
    "random_fixed": FixedGaussianCode,
    "learned_lowdim": LearnedLowDim,
}

# Keys in conf/input/*.yaml that describe the variant but are not constructor arguments.
# The size_match* keys are read by build.build_model via sizing.py (they change the body, not the input).
_META_KEYS = {"name", "type", "description",
              "size_match", "size_match_by", "size_match_tolerance", "size_match_multiple_of"}


def load_input_config(name: str) -> dict[str, Any]:
    """conf/input/<name>.yaml as a plain dict (for inputs defined by reference to another variant)."""
    from omegaconf import OmegaConf

    from .config import CONFIG_DIR

    path = Path(CONFIG_DIR) / "input" / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError("input.init_code", f"no input variant {name!r} in conf/input", f"use one of {', '.join(known)}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def build_input(cfg: Mapping[str, Any], vocab_size: int, d_model: int, init_std: float = 0.02) -> InputInterface:
    """Build the input interface named by `cfg.type` with the remaining keys as arguments.

    model.init_std reaches the learned tables as `init_std` and the fixed codes as
    `reference_std` (the RMS that scale=match_init matches), unless the input config sets them.
    """
    kind = cfg.get("type")
    if kind not in INPUT_TYPES:
        raise ConfigError(
            "input.type", f"unknown input type {kind!r}", f"choose one of {', '.join(sorted(INPUT_TYPES))}"
        )
    cls = INPUT_TYPES[kind]
    kwargs = {k: v for k, v in cfg.items() if k not in _META_KEYS}
    if cls is LearnedEmbedding:
        kwargs.pop("code_width", None)  # learned tables have no code width; null in the config
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "vocab_size", "d_model"}
    for default_key in ("init_std", "reference_std"):
        if default_key in accepted and kwargs.get(default_key) is None:
            kwargs[default_key] = init_std
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ConfigError(
            f"input.{unknown[0]}",
            f"not a setting of input type {kind!r}",
            f"remove it or use one of {', '.join(sorted(accepted))}",
        )
    for key, value in kwargs.items():  # numpy would reject these with a message naming no field
        if key.endswith("_seed") and not (isinstance(value, int) and 0 <= value < 2**63):
            raise ConfigError(f"input.{key}", f"{value!r} is not a non-negative integer seed", f"set input.{key}>=0")
    if isinstance(kwargs.get("init_code"), Mapping):
        kwargs["init_code"] = {k: v for k, v in kwargs["init_code"].items()}
    interface = cls(vocab_size=vocab_size, d_model=d_model, **kwargs)
    interface.finalize()
    return interface
