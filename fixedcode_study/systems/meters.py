"""The benchmark's meters: peak FLOP/s (the MFU denominator), peak memory, live training-state bytes
and checkpoint size on disk. Each measures; none runs a model (systems/timing.py does).

  peak FLOP/s       on CPU a dense matmul peak measured in this process, per precision, refined by
                    sampling before, between and after the timed fits; on CUDA the datasheet dense
                    bf16 peak (CUDA_BF16_PEAKS), or a measured one for fp32 and unknown devices
  peak memory       CPU: peak RSS above the pre-build RSS (VmHWM, reset per model); CUDA: max
                    allocated above the pre-build allocation
  state bytes       parameters, gradients and optimizer state of the live tensors
  checkpoint size   what a run saves: record.checkpoint.save_checkpoint (ours), save_pretrained (HF)
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import platform
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from ..record.checkpoint import CHECKPOINT_CONFIG_FILE, save_checkpoint, weights_file
from ..spec import JobSpec
from .hf import HFCausalLM

# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA datasheets, FLOP/s. Matched against
# torch.cuda.get_device_name in this order (so "A100" is tested before "A10").
CUDA_BF16_PEAKS: list[tuple[tuple[str, ...], float, str]] = [
    (("H200", "NVL"), 835e12, "NVIDIA H200 NVL datasheet"),
    (("H200",), 989.4e12, "NVIDIA H200 SXM datasheet"),
    (("H100", "NVL"), 835e12, "NVIDIA H100 NVL datasheet"),
    (("H100", "PCIe"), 756.5e12, "NVIDIA H100 PCIe datasheet"),
    (("H100",), 989.4e12, "NVIDIA H100 SXM datasheet"),
    (("GH200",), 989.4e12, "NVIDIA GH200 datasheet"),
    (("A100",), 312e12, "NVIDIA A100 datasheet"),
    (("L40S",), 362.05e12, "NVIDIA L40S datasheet"),
    (("L4",), 121e12, "NVIDIA L4 datasheet"),
    (("A10",), 125e12, "NVIDIA A10 datasheet"),
]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so a clock read after it covers that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- peak FLOP/s -----------------------------------------------------------------------------------

class MatmulPeak:
    """Best observed dense n x n matmul FLOP/s in this process. Sampled before, between and after the
    timed fits and the best kept: load from other processes only ever slows a sample down, so the
    best one is the machine's peak under the conditions the steps ran in."""

    def __init__(self, device: torch.device, dtype: torch.dtype, n: int = 1024):
        self.device, self.n = device, n
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)
        self.inner = 4 if device.type == "cpu" else 50
        self.best_s = float("inf")
        self.samples = 0

    def sample(self, repeats: int = 1) -> None:
        for _ in range(repeats):
            sync(self.device)
            t0 = time.perf_counter()
            for _ in range(self.inner):
                self.a @ self.b
            sync(self.device)
            self.best_s = min(self.best_s, (time.perf_counter() - t0) / self.inner)
            self.samples += 1

    @property
    def flops(self) -> float:
        return 2 * self.n**3 / self.best_s


def peak_flops(device: torch.device, dtype: torch.dtype = torch.float32) -> tuple[dict[str, Any], MatmulPeak | None]:
    """The MFU denominator of one precision, and the sampler that keeps refining it (CPU, or a GPU
    off the table). On CUDA fp32 rows are measured (TF32 may or may not be on: what runs is what counts)."""
    if device.type == "cuda" and dtype == torch.float32:
        sampler = MatmulPeak(device, torch.float32, n=8192)
        sampler.sample(5)
        return {"flops": sampler.flops, "source": "measured fp32 8192^3 matmul, best sample",
                "device_name": torch.cuda.get_device_name(device)}, sampler
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for keys, value, source in CUDA_BF16_PEAKS:
            if all(k in name for k in keys):
                return {"flops": value, "source": f"{source} (dense bf16)", "device_name": name}, None
        sampler = MatmulPeak(device, torch.bfloat16, n=8192)
        sampler.sample(10)
        return {"flops": sampler.flops, "source": "measured bf16 8192^3 matmul, best sample (device not in "
                "the datasheet table)", "device_name": name}, sampler
    sampler = MatmulPeak(device, dtype)
    sampler.sample(12)
    kind = "bf16" if dtype == torch.bfloat16 else "fp32"
    return {"flops": sampler.flops, "source": f"measured {kind} 1024^3 matmul in this process, "
            f"{torch.get_num_threads()} threads, best sample", "device_name": platform.processor() or platform.machine()}, sampler


class PeakMeters:
    """One MFU denominator per precision the bench runs in, kept refined over the run: `sample()`
    between fits, `finish()` after the last (12 more samples, and the source says how many)."""

    def __init__(self, device: torch.device, dtypes: list[torch.dtype]):
        self.peaks: dict[str, dict[str, Any]] = {}
        self.samplers: dict[str, MatmulPeak] = {}
        for dtype in dict.fromkeys(dtypes):
            peak, sampler = peak_flops(device, dtype)
            self.peaks[str(dtype)] = peak
            if sampler:
                self.samplers[str(dtype)] = sampler

    def sample(self) -> None:
        for sampler in self.samplers.values():
            sampler.sample()

    def finish(self) -> dict[str, dict[str, Any]]:
        for dtype, sampler in self.samplers.items():
            sampler.sample(12)
            self.peaks[dtype]["flops"] = sampler.flops
            self.peaks[dtype]["source"] += f" of {sampler.samples} (before, between and after the timed fits)"
        return self.peaks


# -- memory ----------------------------------------------------------------------------------------

class PeakMemory:
    """Peak memory of what runs between start() and peak(), above the level at start().

    CPU: Linux VmHWM, reset through /proc/self/clear_refs. glibc keeps freed heap pages, so the
    meter first asks malloc to return large blocks to the OS on free (mmap threshold 64 KiB) and to
    trim now; otherwise one model's freed activations would hide inside the next model's baseline.
    Call it only after timing, since small-mmap allocation is slower.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.kind = "cuda_max_allocated" if device.type == "cuda" else "cpu_peak_rss"
        self._libc = None
        if device.type == "cpu":
            with contextlib.suppress(OSError, AttributeError):
                self._libc = ctypes.CDLL("libc.so.6")
                self._libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD; fixed also disables its auto-raise
        self.base = 0

    @staticmethod
    def _status(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"{key} missing from /proc/self/status")

    def start(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return
        if self._libc is not None:
            self._libc.malloc_trim(0)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        self.base = self._status("VmRSS")

    def peak(self) -> int:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return torch.cuda.max_memory_allocated(self.device) - self.base
        return self._status("VmHWM") - self.base


# -- state and checkpoint bytes --------------------------------------------------------------------

def live_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes actually held: weights, gradients (same dtype as their parameter), optimizer state."""
    trainable = [p for g in optimizer.param_groups for p in g["params"]]
    opt_bytes = sum(t.numel() * t.element_size() for s in optimizer.state.values()
                    for t in s.values() if isinstance(t, torch.Tensor))
    out = {
        "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "grad_bytes": sum(p.numel() * p.element_size() for p in trainable),
        "optimizer_state_bytes": opt_bytes,
        "buffer_bytes": sum(b.numel() * b.element_size() for b in model.buffers()),
    }
    out["total_bytes"] = sum(out.values())
    return out


def checkpoint_bytes(name: str, model: torch.nn.Module, spec: JobSpec, workdir: Path) -> dict[str, int]:
    """Sizes on disk of what a run saves: ours through save_checkpoint, the HF reference (HFCausalLM)
    through save_pretrained."""
    target = workdir / f"ckpt-{name}"
    try:
        if isinstance(model, HFCausalLM):
            from transformers.utils import CONFIG_NAME  # HF's own config file name

            model.hf.save_pretrained(target)
            files = {p.name: p.stat().st_size for p in target.iterdir()}
            weights = sum(v for k, v in files.items() if k.endswith(".safetensors"))
            config = files.get(CONFIG_NAME, 0)
        else:
            tokenizer = workdir / "scratch-tokenizer"
            if not tokenizer.exists():  # a real (tiny) tokenizer file; its size is reported apart
                from tokenizers import Tokenizer, models

                Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")).save(str(tokenizer))
            save_checkpoint(target, model, {**spec.checkpoint_config(), "data": {}}, tokenizer)
            weights = weights_file(target).stat().st_size
            config = (target / CHECKPOINT_CONFIG_FILE).stat().st_size
        return {"weights_bytes": weights, "config_bytes": config, "total_bytes": weights + config}
    finally:
        shutil.rmtree(target, ignore_errors=True)  # 1.7B checkpoints are 7 GB each
