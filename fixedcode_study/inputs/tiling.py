"""The maths every code shares: how wide a code must be, how a K-wide code fills d_model, its RMS
after tiling, the `scale` setting, and whether rows are distinct. numpy here is for statistics on
values a code's torch forward already computed; no code is implemented in this file.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError


def minimal_code_width(vocab_size: int) -> int:
    """K = ceil(log2 V): the fewest bits that give every ID its own code."""
    return max(1, (vocab_size - 1).bit_length())


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


def tiling_properties(code_width: int, d_model: int) -> dict[str, Any]:
    """How a K-wide code fills d_model: K, d/K, whole copies, and whether the last copy is cut."""
    tile, rem = divmod(d_model, code_width)
    return {"code_width": code_width, "tile_factor": d_model / code_width, "full_tiles": tile, "truncated": rem != 0}


def check_code_width_fits(width: int, d_model: int) -> None:
    if width < 1:
        raise ConfigError("input.code_width", f"width {width} is not positive", "use input.code_width>=1")
    if d_model < width:
        raise ConfigError(
            "model.d_model",
            f"d_model={d_model} is smaller than input.code_width={width}, so tiling would drop coordinates",
            f"use model.d_model>={width} or input.code_width<={d_model}",
        )


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
    """True when every row of (N, K) is different (exact comparison of the stored numbers, -0.0 == 0.0)."""
    values = np.asarray(values)
    if len(values) < 2:
        return True
    if values.dtype.kind == "f":
        values = values + values.dtype.type(0)  # -0.0 + 0.0 is +0.0: equal numbers, equal bytes
    # each row's bytes as one key: a 1-D sort, not K passes of a lexsort (10 s at 49,152 x 2,048)
    rows = np.ascontiguousarray(values).view(np.dtype((np.void, values.shape[1] * values.itemsize))).ravel()
    return len(np.unique(rows)) == len(values)


def bit_rows_distinct(bits: np.ndarray) -> bool:
    """rows_distinct for (N, K) 0/1 uint8 rows, each row packed into bytes first."""
    return rows_distinct(np.packbits(bits, axis=1, bitorder="little"))
