"""The throughput a study's cost estimate assumes (`fixedcode sweep` prints the estimate: cost.py).

Apart from cost.py, which builds models, so that `fixedcode sweep --help` reads the rates' fields
(their docstrings are its help) without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass

# Cost assumptions, stated once (overridable on the command line).
GPU_PEAK_TFLOPS = 989.0   # H100 SXM dense bf16
GPU_MFU = 0.40
# Effective training FLOP/s on a 2-core CPU box: FLOPs (accounting.flops_per_token, PaLM's 6N + 12 L H D T)
# over wall time at the CPU default (bf16-mixed + compile, two jobs side by side): sweeps/model_size's
# 9.37e14 FLOPs took 3,188 s on 2 idle AMX cores (2026-12-01), ~300 GFLOP/s after the per-job overhead
# (cost.CPU_JOB_OVERHEAD_S). fp32 eager one job at a time was ~108. A calibration, not a peak: override with cpu_gflops=.
CPU_GFLOPS = 300.0


@dataclass(frozen=True)
class Rates:
    """The throughput a cost estimate assumes."""

    peak_tflops: float = GPU_PEAK_TFLOPS
    """GPU peak TFLOP/s the GPU-hours assume"""
    mfu: float = GPU_MFU
    """GPU model-FLOPs utilisation the GPU-hours assume"""
    cpu_gflops: float = CPU_GFLOPS
    """effective CPU training GFLOP/s the CPU-hours assume"""
