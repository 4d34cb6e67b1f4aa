"""What this machine's CPU can do, for decisions made while a config resolves (no torch import).

`cpu_precision` is the `${cpu_precision:${model.d_model}}` resolver of conf/trainer/cpu.yaml; the
measurements behind its rule are in training/speed.py's docstring.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

CPU_BF16_MIN_D_MODEL = 128  # below it the autocast casts cost more than bf16 matmuls save


@lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Whether this CPU has bf16 matmul instructions (Linux cpuinfo flags amx_bf16 / avx512_bf16)."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def cpu_precision(d_model: Any) -> str:
    """The CPU trainer's precision for a model of this width: bf16-mixed where it wins, else 32-true."""
    return "bf16-mixed" if native_bf16() and int(d_model) >= CPU_BF16_MIN_D_MODEL else "32-true"
