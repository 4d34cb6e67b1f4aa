"""How a job runs fast: CPU threads, torch.compile and the compiled loss.

Precision is the trainer's (`trainer.precision`, Lightning's own plugin: `bf16-mixed` autocasts
the matmuls to bf16, with weights, optimizer state, attention scores, the loss, the softmax and the
validation sums in fp32). On CPU, conf/trainer/cpu.yaml asks `hardware.cpu_precision`, which picks
bf16-mixed where it wins: a CPU with bf16 matmul instructions (AMX-BF16 or AVX512-BF16; elsewhere
bf16 is emulated and slower) and d_model >= 128. Measured on a 2-core AMX box (bench settings=...):
at d_model=64 (test_micro) eager bf16 steps are 1.6x slower than fp32 (the casts cost more than the
tiny matmuls save); at d_model=128 (cpu_tiny) 1.35x faster eager and 2.3x compiled; at 512 (cpu_30m)
2.2x eager, 2.8x compiled. The resolved precision is in the fingerprint (trainer.precision): the
same config trains in fp32 on a CPU without bf16, and says so. This module holds the rest (what
each setting resolves to is decided with the job's spec, spec/runtime.py; this module carries it out):

  threads   `threads` (top level): intra-op CPU threads of this job. `auto` leaves torch's default
            (all cores) unless a parallel launcher runs several jobs side by side, which sets
            FIXEDCODE_THREADS_PER_JOB for its workers (conf/hydra/launcher/parallel.yaml). The
            thread count can move the last bits of a CPU matmul, like the device count of a GPU
            run, so it is recorded (results.json "runtime") and, like trainer.devices, kept out of
            the job key and the fingerprint: bitwise equality holds at equal thread counts.
  compile   `train.compile`: true | false | auto. auto compiles when the job's training FLOPs reach
            `train.compile_min_flops`, below which the compile time (seconds per job, counted in
            the job's wall and train time) costs more than it saves. What auto resolved to is part
            of the fingerprint (`plan.compile`): compiled kernels fuse differently and change the
            last bits, so a compiled and an eager job never pass for each other.
            The whole decoder but its input layer is compiled on one device (the head and norms
            fuse too; the input stays eager, see compile_model); under FSDP each block is (the unit
            FSDP gathers). The loss is a compiled function of its own:
            the (B*T, V) log-softmax is the biggest elementwise op of a small model's step, and
            compiled it fuses into one pass.

  memory    `keep_freed_memory()`: glibc's malloc hands every block above its mmap threshold (128 KiB,
            raised to at most 32 MiB as such blocks are freed) back to the kernel when it is freed,
            and trims the heap's free top; a training step frees and allocates the same activations
            every step, so each step paid the page faults of mapping them again. Each job (and the
            bench's process) keeps freed memory in the heap instead: measured on a 2-core AMX box, a
            cpu_30m step at 2 threads 1.50 -> 1.19 s, a cpu_tiny step at 1 thread 125 -> 119 ms. It
            moves no number (where memory comes from, not what is computed); the cost is a resident
            size that stays at the step's peak. FIXEDCODE_KEEP_FREED_MEMORY=0 leaves malloc as it is;
            results.json `runtime.keep_freed_memory` says which.

Each job starts from an empty dynamo cache (`torch._dynamo.reset()`): a job's kernels then never
depend on which jobs ran before it in the same process, and a sweep of more jobs than dynamo's
recompile limit never falls back to eager without saying so. Compiled code is still reused from
inductor's on-disk cache, so the second job of a study compiles in a few seconds.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..spec.runtime import COMPILE_CHOICES, THREADS_ENV, resolve_compile, resolve_threads

if TYPE_CHECKING:
    from ..model import Decoder

__all__ = ["COMPILE_CHOICES", "KEEP_FREED_MEMORY_ENV", "THREADS_ENV", "apply_threads", "compile_model",
           "keep_freed_memory", "loss_functions", "resolve_compile", "resolve_threads"]

KEEP_FREED_MEMORY_ENV = "FIXEDCODE_KEEP_FREED_MEMORY"
# glibc mallopt parameters (malloc.h) and the values set: the largest mmap threshold glibc takes on a
# 64-bit machine (blocks below it come from the heap and go back to it), no trimming of the heap's
# top (the largest int mallopt takes), and 64 MiB of padding each time the heap grows.
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MALLOPT = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 2**31 - 1), (M_TOP_PAD, 64 << 20))


def apply_threads(threads: int) -> int:
    """Run this process's intra-op work on `threads` threads (the spec's resolved count)."""
    n = resolve_threads(threads)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


@lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Keep this process's freed memory in malloc's heap (module docstring, `memory`): True when set,
    False where the libc is not glibc (macOS, musl) or FIXEDCODE_KEEP_FREED_MEMORY=0. Once per process."""
    setting = os.environ.get(KEEP_FREED_MEMORY_ENV, "1").strip().lower()
    if setting not in ("1", "0", "true", "false"):
        raise ConfigError(KEEP_FREED_MEMORY_ENV, f"got {setting!r}", "set it to 1 (keep, the default) or 0 "
                          "(leave malloc as it is)")
    if setting in ("0", "false") or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False  # another libc: its allocator is left as it is
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all([mallopt(param, value) == 1 for param, value in MALLOPT])


def compile_model(model: Decoder, per_block: bool, input_eager: bool = True) -> None:
    """Compile our Decoder in place (state_dict keys unchanged): the whole model but its input layer,
    or each decoder block. input_eager=False (the bench only: `bench settings=fp32_compiled_input`)
    compiles the input layer too, the graph that was not bitwise repeatable at 2+ threads. Only our
    Decoder (it has `.input` and `.blocks`): the bench's HF reference is compiled whole, as HF users
    compile it (systems/fit.py compile_subject)."""
    torch._dynamo.reset()  # a fresh cache per job: see the module docstring
    if per_block:
        for block in model.blocks:
            block.compile()
    else:
        # The input layer stays eager (a graph break before the blocks). Compiled, a learned table's
        # backward was fused into a C++ kernel that adds the (V, d) gradient with atomic adds across
        # OpenMP threads, so two runs of one job at 2+ threads differed in the last bits (issue 26);
        # eager, the embedding backward is deterministic. Every input is treated alike, so the arms
        # keep the same compiled body; a fixed code's numbers are unchanged by it (measured).
        if input_eager:
            model.input.forward = torch.compiler.disable(model.input.forward)
        model.compile()


def _mean_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """logits (B, T, V) any float dtype, targets (B, T) -> mean next-token NLL, computed in fp32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def _token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """logits (B, T, V), targets (B, T) -> per-token NLL (B, T) in fp32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none").view_as(targets)


@lru_cache(maxsize=2)
def _compiled(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    return torch.compile(fn, dynamic=False)


def loss_functions(compiled: bool) -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    """(mean NLL for training, per-token NLL for validation), eager or compiled."""
    if not compiled:
        return _mean_nll, _token_nll
    return _compiled(_mean_nll), _compiled(_token_nll)
