"""`python -m fixedcode_study.bench [options] [hydra overrides]`: systems cost of each input interface.

For one model preset and each input variant it measures, in one process and with identical shapes:
  training step time and tokens/s   forward + cross-entropy + backward + grad clip + AdamW + LR
                                    schedule (what LanguageModelTask does per step), after warm-up,
                                    median over timed steps
  peak memory                       CPU: peak RSS above the pre-build RSS (VmHWM, reset per model);
                                    CUDA: max allocated above the pre-build allocation
  state bytes                       parameters, gradients and optimizer state, measured on the
                                    live tensors after the timed steps
  checkpoint size                   model.safetensors + config.json written by checkpoint.save_checkpoint
  MFU                               model FLOPs/s over a stated peak: on CPU a dense fp32 matmul peak
                                    measured in this process; on CUDA the datasheet dense bf16 peak
and the same for the reference: Hugging Face LlamaForCausalLM with identical dimensions (untied head,
same vocabulary, SDPA attention), converted from our learned model by hf.to_hf_llama so both start
from the same weights (their first losses agree). Our tokens/s is printed as a ratio to it.

Timing is interleaved: every round runs one step of each model in turn (order reversed every other
round), so load from other processes on a shared machine hits every model alike; medians damp the
rest. On CPU the per-step process CPU time is recorded too, a second, load-robust view.

Examples:
  python -m fixedcode_study.bench                                   # cpu_tiny, all three inputs + HF
  python -m fixedcode_study.bench model=cpu_30m --steps 8
  python -m fixedcode_study.bench model=paper_1p7b --state-only      # AdamW state accounting (meta)
  python -m fixedcode_study.bench model=paper_1p7b train.batch_size=4 train.seq_len=2048  # on a GPU
Options come before or after the overrides; everything that is not an option is a Hydra override.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from .build import build_model
from .checkpoint import save_checkpoint
from .describe import compose_config
from .errors import ConfigError
from .model import Decoder, ModelConfig
from .task import LanguageModelTask, warmup_cosine

BENCH_VERSION = 1
DEFAULT_INPUTS = ("learned", "binary16", "gf2")
REFERENCE = "hf_llama"

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


# -- accounting ------------------------------------------------------------------------------------

def matmul_params(cfg: ModelConfig) -> int:
    """Weights that take part in a matmul per token: every block projection and the head.

    The input layer is a lookup or a computed code, not a matmul, so it adds no model FLOPs.
    """
    d, hd = cfg.d_model, cfg.head_dim
    attn = d * (cfg.n_head + 2 * cfg.kv_heads) * hd + cfg.n_head * hd * d
    return cfg.n_layer * (attn + 3 * d * cfg.d_ff) + d * cfg.vocab_size


def flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    """Training FLOPs per token, PaLM appendix B: 6 N + 12 L H D T (attention counted without the
    causal halving, as PaLM and nanoGPT do), N = matmul parameters."""
    return 6 * matmul_params(cfg) + 12 * cfg.n_layer * cfg.n_head * cfg.head_dim * seq_len


def adamw_state_accounting(model: torch.nn.Module, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Bytes of fp32 training state per AdamW parameter group: trainable parameters carry the
    weight, its gradient and two moments (16 bytes each); frozen ones only the weight; buffers as
    stored. Works on the meta device (sizes come from numel and dtype), so 1.7B costs nothing.
    """
    per_group = {}
    for g in groups:
        n = sum(p.numel() for p in g["params"])
        b = sum(p.numel() * p.element_size() for p in g["params"])
        per_group[g["name"]] = {"params": n, "param_bytes": b, "grad_bytes": b, "adam_moment_bytes": 2 * b}
    trainable_ids = {id(p) for g in groups for p in g["params"]}
    param_bytes = sum(g["param_bytes"] for g in per_group.values())
    out: dict[str, Any] = {
        "groups": per_group,
        "trainable_params": sum(g["params"] for g in per_group.values()),
        "trainable_param_bytes": param_bytes,
        "grad_bytes": param_bytes,
        "adam_moment_bytes": 2 * param_bytes,
        "frozen_param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()
                                  if id(p) not in trainable_ids),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in model.buffers()),
    }
    out["total_bytes"] = 4 * param_bytes + out["frozen_param_bytes"] + out["buffer_bytes"]
    return out


def our_param_groups(model: Decoder, optim_cfg: Any) -> list[dict[str, Any]]:
    """The AdamW groups training uses: LanguageModelTask.param_groups itself."""
    task = LanguageModelTask(model, optim_cfg, max_steps=1, tokens_per_step=1,
                             token_bytes=torch.ones(model.config.vocab_size, device="meta"))
    return task.param_groups()


def hf_param_groups(hf: torch.nn.Module, optim_cfg: Any) -> list[dict[str, Any]]:
    """LanguageModelTask.param_groups' rule applied to LlamaForCausalLM's parameter names."""
    wd = float(optim_cfg["weight_decay"])
    decay_of = {"input": wd if optim_cfg.get("weight_decay_input", False) else 0.0,
                "head": wd if optim_cfg.get("weight_decay_head", True) else 0.0, "decay": wd, "no_decay": 0.0}
    groups: dict[str, list[torch.nn.Parameter]] = {k: [] for k in decay_of}
    for name, p in hf.named_parameters():
        if p.requires_grad:
            key = ("input" if name.startswith("model.embed_tokens.") else "head" if name.startswith("lm_head.")
                   else "decay" if p.dim() >= 2 else "no_decay")
            groups[key].append(p)
    return [{"params": ps, "weight_decay": decay_of[g], "name": g} for g, ps in groups.items() if ps]


def make_optimizer(groups: list[dict[str, Any]], optim_cfg: Any, total_steps: int):
    """AdamW + warmup/cosine as LanguageModelTask.configure_optimizers builds them."""
    opt = torch.optim.AdamW(groups, lr=float(optim_cfg["lr"]), betas=tuple(optim_cfg["betas"]),
                            eps=float(optim_cfg["eps"]))
    warmup = max(1, int(round(float(optim_cfg["warmup_fraction"]) * total_steps)))
    min_ratio = float(optim_cfg["min_lr_ratio"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, total_steps, warmup, min_ratio))
    return opt, sched


# -- peaks -----------------------------------------------------------------------------------------

class MatmulPeak:
    """Best observed dense n x n matmul FLOP/s in this process. Sampled before, between and after the
    timed rounds and the best kept: load from other processes only ever slows a sample down, so the
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
            _sync(self.device)
            t0 = time.perf_counter()
            for _ in range(self.inner):
                self.a @ self.b
            _sync(self.device)
            self.best_s = min(self.best_s, (time.perf_counter() - t0) / self.inner)
            self.samples += 1

    @property
    def flops(self) -> float:
        return 2 * self.n**3 / self.best_s


def peak_flops(device: torch.device) -> tuple[dict[str, Any], MatmulPeak | None]:
    """The MFU denominator, and the sampler that keeps refining it (CPU, or a GPU off the table)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for keys, value, source in CUDA_BF16_PEAKS:
            if all(k in name for k in keys):
                return {"flops": value, "source": f"{source} (dense bf16)", "device_name": name}, None
        sampler = MatmulPeak(device, torch.bfloat16, n=8192)
        sampler.sample(10)
        return {"flops": sampler.flops, "source": "measured bf16 8192^3 matmul, best sample (device not in "
                "the datasheet table)", "device_name": name}, sampler
    sampler = MatmulPeak(device, torch.float32)
    sampler.sample(12)
    return {"flops": sampler.flops, "source": f"measured fp32 1024^3 matmul in this process, "
            f"{torch.get_num_threads()} threads, best sample", "device_name": platform.processor() or platform.machine()}, sampler


# -- memory ----------------------------------------------------------------------------------------

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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


# -- one model under test ----------------------------------------------------------------------------

@dataclass
class Subject:
    """A model with its optimizer and a step function; `name` is an input variant or REFERENCE."""

    name: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    groups: list[dict[str, Any]]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    first_loss: float | None = None


def build_subject(name: str, cfg: DictConfig, device: torch.device, total_steps: int,
                  same_weights: bool = True) -> Subject:
    """Our model for an input variant (cfg.input), or for name == REFERENCE (cfg.input = learned) the
    HF Llama of the same preset: converted from our learned model built with the same seed (so both start from the same
    weights and the same first loss) or, with same_weights=False, HF's own init without building ours."""
    torch.manual_seed(int(cfg.seed))
    if name == REFERENCE:
        from transformers import LlamaForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        from .hf import hf_llama_config, to_hf_llama

        if same_weights:
            source = build_model(cfg.model, cfg.input).to(device)
            model = to_hf_llama(source).train()
            del source
        else:
            with torch.device("meta"):
                shape = build_model(cfg.model, cfg.input)
            with torch.device(device):
                model = LlamaForCausalLM(hf_llama_config(shape)).train()
            model.config._attn_implementation = "sdpa"
        groups = hf_param_groups(model, cfg.optim)
    else:
        model = build_model(cfg.model, cfg.input).to(device).train()
        groups = our_param_groups(model, cfg.optim)
    opt, sched = make_optimizer(groups, cfg.optim, total_steps)
    return Subject(name, model, opt, sched, groups)


def make_step(subject: Subject, x: torch.Tensor, y: torch.Tensor, clip: float | None,
              device: torch.device) -> Callable[[], torch.Tensor]:
    """One optimizer step as LanguageModelTask + Lightning run it (fp32 on CPU, bf16 autocast on CUDA)."""
    model, opt, sched = subject.model, subject.optimizer, subject.scheduler
    params = [p for g in subject.groups for p in g["params"]]

    def step() -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = model(x)
            logits = out if isinstance(out, torch.Tensor) else out.logits  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def timed(step: Callable[[], torch.Tensor], device: torch.device) -> tuple[float, float, torch.Tensor]:
    _sync(device)
    w0, c0 = time.perf_counter(), time.process_time()
    loss = step()
    _sync(device)
    return time.perf_counter() - w0, time.process_time() - c0, loss


def live_state_bytes(subject: Subject) -> dict[str, int]:
    """Bytes actually held: weights, gradients (same dtype as their parameter), optimizer state."""
    params = list(subject.model.parameters())
    trainable = [p for g in subject.groups for p in g["params"]]
    opt_bytes = sum(t.numel() * t.element_size() for s in subject.optimizer.state.values()
                    for t in s.values() if isinstance(t, torch.Tensor))
    out = {
        "param_bytes": sum(p.numel() * p.element_size() for p in params),
        "grad_bytes": sum(p.numel() * p.element_size() for p in trainable),
        "optimizer_state_bytes": opt_bytes,
        "buffer_bytes": sum(b.numel() * b.element_size() for b in subject.model.buffers()),
    }
    out["total_bytes"] = sum(out.values())
    return out


def checkpoint_bytes(subject: Subject, cfg: DictConfig, workdir: Path) -> dict[str, int]:
    """Sizes on disk of what a run saves: ours through save_checkpoint, HF through save_pretrained."""
    target = workdir / f"ckpt-{subject.name}"
    try:
        return _checkpoint_bytes(subject, cfg, workdir, target)
    finally:
        shutil.rmtree(target, ignore_errors=True)  # 1.7B checkpoints are 7 GB each


def _checkpoint_bytes(subject: Subject, cfg: DictConfig, workdir: Path, target: Path) -> dict[str, int]:
    if subject.name == REFERENCE:
        subject.model.save_pretrained(target)
        files = {p.name: p.stat().st_size for p in target.iterdir()}
        weights = sum(v for k, v in files.items() if k.endswith(".safetensors"))
        return {"weights_bytes": weights, "config_bytes": files.get("config.json", 0),
                "total_bytes": weights + files.get("config.json", 0)}
    tokenizer = workdir / "tokenizer.json"
    if not tokenizer.exists():  # a real (tiny) tokenizer file; its size is reported apart
        from tokenizers import Tokenizer, models

        Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")).save(str(tokenizer))
    save_checkpoint(target, subject.model, OmegaConf.to_container(cfg.model, resolve=True),
                    OmegaConf.to_container(cfg.input, resolve=True), tokenizer)
    weights = (target / "model.safetensors").stat().st_size
    config = (target / "config.json").stat().st_size
    return {"weights_bytes": weights, "config_bytes": config, "total_bytes": weights + config}


# -- the benchmark ---------------------------------------------------------------------------------

def compose_variant(overrides: list[str], input_name: str) -> DictConfig:
    return compose_config([o for o in overrides if not o.startswith("input=")] + [f"input={input_name}"])


def variant_configs(overrides: list[str], inputs: list[str]) -> dict[str, DictConfig]:
    """One composed config per input variant; an `input=` override picks the single variant."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.startswith("input=")]
    return {name: compose_variant(overrides, name) for name in (chosen or inputs)}


def pick_device(arg: str) -> torch.device:
    if arg == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if arg == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device", "cuda was asked for but torch sees no CUDA device", "use --device cpu or auto")
    return torch.device(arg)


def state_only(cfgs: dict[str, DictConfig]) -> dict[str, Any]:
    """AdamW fp32 training-state accounting per variant from a meta-device build, plus the saving
    of each variant relative to the learned input."""
    out: dict[str, Any] = {}
    for name, cfg in cfgs.items():
        with torch.device("meta"):
            model = build_model(cfg.model, cfg.input)
        out[name] = adamw_state_accounting(model, our_param_groups(model, cfg.optim))
    if "learned" in out:
        base = out["learned"]["total_bytes"]
        for name, acc in out.items():
            acc["saving_vs_learned_bytes"] = base - acc["total_bytes"]
            acc["saving_vs_learned_fraction"] = (base - acc["total_bytes"]) / base
    return out


def estimated_bytes(cfgs: dict[str, DictConfig], with_reference: bool) -> int:
    acc = state_only(cfgs)
    total = sum(a["total_bytes"] for a in acc.values())
    if with_reference and "learned" in acc:
        total += acc["learned"]["total_bytes"]
    return total


def available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 8 << 30


def run_bench(overrides: list[str], *, inputs: list[str] = list(DEFAULT_INPUTS), steps: int = 10,
              warmup: int = 2, reference: bool = True, device_arg: str = "auto", schedule: str = "auto",
              memory_steps: int = 2, log: Callable[[str], None] = print) -> dict[str, Any]:
    device = pick_device(device_arg)
    cfgs = variant_configs(overrides, inputs)
    first = next(iter(cfgs.values()))
    mcfg = ModelConfig.from_mapping(first.model)
    B, T = int(first.train.batch_size), int(first.train.seq_len)
    if T > mcfg.max_seq_len:
        raise ConfigError("train.seq_len", f"{T} exceeds model.max_seq_len={mcfg.max_seq_len}",
                          "lower train.seq_len or raise model.max_seq_len")
    if steps < 1 or warmup < 0:
        raise ConfigError("--steps", f"steps={steps}, warmup={warmup}", "use --steps >= 1 and --warmup >= 0")
    clip = first.trainer.get("gradient_clip_val")
    names = list(cfgs) + ([REFERENCE] if reference else [])
    if schedule == "auto":
        fits = estimated_bytes(cfgs, reference) * 2 < available_bytes(device)
        schedule = "interleaved" if fits else "sequential"
    load_start = os.getloadavg()
    if device.type == "cpu" and torch.get_num_threads() > 1 and load_start[0] > (os.cpu_count() or 1):
        log(f"note: load average {load_start[0]:.1f} exceeds {os.cpu_count()} cores; with "
            f"{torch.get_num_threads()} threads each step waits on descheduled workers, so absolute "
            "timings are unreliable (--threads 1 is steadier on a shared machine)")

    peak, sampler = peak_flops(device)
    fpt = flops_per_token(mcfg, T)
    g = torch.Generator().manual_seed(int(first.seed))
    batch = torch.randint(0, mcfg.vocab_size, (B, T + 1), generator=g).to(device)  # (B, T+1)
    x, y = batch[:, :-1], batch[:, 1:]
    total_steps = warmup + steps + memory_steps + 1

    ref_cfg = cfgs["learned"] if "learned" in cfgs else compose_variant(overrides, "learned")

    def build(name: str, same_weights: bool = True) -> Subject:
        return build_subject(name, ref_cfg if name == REFERENCE else cfgs[name], device, total_steps, same_weights)

    def warm(subject: Subject, step: Callable[[], torch.Tensor]) -> None:
        for i in range(warmup):
            loss = step()
            if i == 0:
                subject.first_loss = float(loss)

    results: dict[str, dict[str, Any]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="fixedcode-bench-"))

    def finish(subject: Subject) -> None:
        """Everything measured on a live subject after its timed steps."""
        cfg = cfgs.get(subject.name, ref_cfg)
        results[subject.name] = {
            "wall": subject.wall, "cpu": subject.cpu, "first_loss": subject.first_loss,
            "state": live_state_bytes(subject),
            "checkpoint": checkpoint_bytes(subject, cfg, workdir),
            "trainable_params": sum(p.numel() for g in subject.groups for p in g["params"]),
        }

    log(f"bench: model={first.model.name} B={B} T={T} device={device} schedule={schedule} "
        f"threads={torch.get_num_threads()} steps={steps} warmup={warmup}")
    if schedule == "interleaved":
        subjects = [build(n) for n in names]
        stepper = {s.name: make_step(s, x, y, clip, device) for s in subjects}
        for s in subjects:
            warm(s, stepper[s.name])
        for r in range(steps):
            if sampler:
                sampler.sample()
            order = subjects if r % 2 == 0 else subjects[::-1]  # ABBA: no model always runs first
            for s in order:
                w, c, loss = timed(stepper[s.name], device)
                s.wall.append(w)
                s.cpu.append(c)
                if s.first_loss is None:
                    s.first_loss = float(loss)
        for s in subjects:
            finish(s)
        del subjects, stepper
    else:
        for n in names:
            s = build(n)
            step = make_step(s, x, y, clip, device)
            warm(s, step)
            for _ in range(steps):
                if sampler:
                    sampler.sample()
                w, c, loss = timed(step, device)
                s.wall.append(w)
                s.cpu.append(c)
                if s.first_loss is None:
                    s.first_loss = float(loss)
            finish(s)
            del s, step
    gc.collect()

    # Memory: each model built fresh and alone, so its peak is its own.
    meter = PeakMemory(device)
    for n in names:
        meter.start()
        s = build(n, same_weights=False)  # the HF model alone, without the model it is converted from
        step = make_step(s, x, y, clip, device)
        for _ in range(max(1, memory_steps)):
            step()
        results[n]["peak_memory_bytes"] = meter.peak()
        del s, step
        gc.collect()

    shutil.rmtree(workdir, ignore_errors=True)
    if sampler:
        sampler.sample(12)
        peak["flops"] = sampler.flops
        peak["source"] += f" of {sampler.samples} (before, between and after the timed steps)"
    load_end = os.getloadavg()
    variants = []
    ref_tps = ref_cpu = None
    for n in names:
        r = results[n]
        med = statistics.median(r["wall"])
        tps = B * T / med
        row = {
            "name": n,
            "kind": "reference" if n == REFERENCE else "ours",
            "step_ms_median": med * 1e3,
            "step_ms_min": min(r["wall"]) * 1e3,
            "tokens_per_s": tps,
            "mfu": tps * fpt / peak["flops"],
            "first_loss": r["first_loss"],
            "trainable_params": r["trainable_params"],
            "state": r["state"],
            "checkpoint": r["checkpoint"],
            "peak_memory_bytes": r["peak_memory_bytes"],
        }
        if device.type == "cpu":
            row["step_cpu_ms_median"] = statistics.median(r["cpu"]) * 1e3
        variants.append(row)
        if n == REFERENCE:
            ref_tps, ref_cpu = tps, row.get("step_cpu_ms_median")
    if ref_tps:
        for row in variants:
            row["tokens_per_s_vs_reference"] = row["tokens_per_s"] / ref_tps
            if ref_cpu:
                row["cpu_time_speedup_vs_reference"] = ref_cpu / row["step_cpu_ms_median"]

    return {
        "bench_version": BENCH_VERSION,
        "overrides": overrides,
        "model": str(first.model.name),
        "architecture": mcfg.to_dict(),
        "device": {"type": device.type, "name": peak["device_name"], "threads": torch.get_num_threads(),
                   "torch": torch.__version__, "python": platform.python_version()},
        "precision": "bf16-autocast" if device.type == "cuda" else "fp32",
        "batch_size": B, "seq_len": T, "tokens_per_step": B * T,
        "steps": steps, "warmup": warmup, "schedule": schedule,
        "step": "forward + cross-entropy + backward + clip_grad_norm + AdamW + LR schedule",
        "peak_flops": peak["flops"], "peak_flops_source": peak["source"],
        "flops_per_token": fpt,
        "flops_formula": "6 * matmul params (blocks + head) + 12 * n_layer * n_head * head_dim * seq_len",
        "memory_kind": meter.kind,
        "load_average": {"start": load_start, "end": load_end},
        "variants": variants,
        "state_accounting": state_only(cfgs),
    }


# -- output ----------------------------------------------------------------------------------------

def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def _ratio(r: float | None) -> str:
    return f"{r:.2f}x" if r else "-"


def format_table(report: dict[str, Any]) -> str:
    cpu = report["device"]["type"] == "cpu"
    head = (f"{'variant':<10} {'step ms':>9} {'tok/s':>9} {'vs HF':>6} "
            + (f"{'cpu ms':>8} {'cpu vs HF':>9} " if cpu else "")
            + f"{'MFU':>6} {'peak MiB':>9} {'state MiB':>9} {'ckpt MiB':>8} {'trainable':>12} {'loss0':>7}")
    lines = [
        f"model={report['model']} B={report['batch_size']} T={report['seq_len']} {report['precision']} "
        f"on {report['device']['type']} ({report['device']['threads']} threads); {report['steps']} timed steps "
        f"after {report['warmup']} warm-up, median; schedule={report['schedule']}",
        f"peak {report['peak_flops'] / 1e12:.3f} TFLOP/s ({report['peak_flops_source']}); "
        f"{report['flops_per_token'] / 1e6:.2f} MFLOP/token; load avg {report['load_average']['start'][0]:.1f} -> "
        f"{report['load_average']['end'][0]:.1f}",
        head, "-" * len(head),
    ]
    for v in report["variants"]:
        ratio = v.get("tokens_per_s_vs_reference")
        lines.append(
            f"{v['name']:<10} {v['step_ms_median']:>9.1f} {v['tokens_per_s']:>9,.0f} "
            f"{_ratio(ratio):>6} "
            + (f"{v['step_cpu_ms_median']:>8.1f} {_ratio(v.get('cpu_time_speedup_vs_reference')):>9} " if cpu else "")
            + f"{100 * v['mfu']:>5.1f}% {_mib(v['peak_memory_bytes']):>9} {_mib(v['state']['total_bytes']):>9} "
            f"{_mib(v['checkpoint']['total_bytes']):>8} {v['trainable_params']:>12,} {v['first_loss']:>7.4f}"
        )
    return "\n".join(lines)


def format_state(acc: dict[str, Any], model: str) -> str:
    lines = [f"AdamW fp32 training state (weights + grads + 2 moments + buffers), model={model}, meta-device build:",
             f"{'variant':<10} {'trainable':>14} {'state MiB':>12} {'saving MiB':>11} {'saving':>7}"]
    for name, a in acc.items():
        lines.append(f"{name:<10} {a['trainable_params']:>14,} {_mib(a['total_bytes']):>12} "
                     f"{_mib(a.get('saving_vs_learned_bytes', 0)):>11} "
                     f"{100 * a.get('saving_vs_learned_fraction', 0):>6.2f}%")
    return "\n".join(lines)


def default_json_path(cfg: DictConfig, device: str, state_only_mode: bool) -> Path:
    kind = "state" if state_only_mode else device
    return Path(str(cfg.out_root)) / "bench" / f"bench-{cfg.model.name}-{kind}.json"


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m fixedcode_study.bench", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", default=",".join(DEFAULT_INPUTS), help="comma-separated conf/input names")
    p.add_argument("--steps", type=int, default=10, help="timed steps per model (median reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model first")
    p.add_argument("--memory-steps", type=int, default=2, help="steps per model in the peak-memory pass")
    p.add_argument("--no-reference", action="store_true", help="skip the HF LlamaForCausalLM reference")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--schedule", default="auto", choices=["auto", "interleaved", "sequential"],
                   help="interleaved keeps every model alive and alternates steps (default when they fit)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads for CPU runs")
    p.add_argument("--state-only", action="store_true", help="only the meta-device AdamW state accounting")
    p.add_argument("--json", default=None, help="output path (default ${out_root}/bench/bench-<model>-<device>.json)")
    return p.parse_known_args(argv)


def main(argv: list[str] | None = None) -> None:
    args, overrides = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        unknown = [o for o in overrides if o.startswith("--")]
        if unknown:
            raise ConfigError(unknown[0], "not an option of the benchmark", "see python -m fixedcode_study.bench --help")
        if args.threads:
            torch.set_num_threads(args.threads)
        inputs = [s for s in args.inputs.split(",") if s]
        if not inputs:
            raise ConfigError("--inputs", "no input variant given", f"use e.g. --inputs {','.join(DEFAULT_INPUTS)}")
        cfgs = variant_configs(overrides, inputs)
        first = next(iter(cfgs.values()))
        if args.state_only:
            report = {"bench_version": BENCH_VERSION, "overrides": overrides, "model": str(first.model.name),
                      "architecture": ModelConfig.from_mapping(first.model).to_dict(),
                      "state_accounting": state_only(cfgs)}
        else:
            report = run_bench(overrides, inputs=inputs, steps=args.steps, warmup=args.warmup,
                               reference=not args.no_reference, device_arg=args.device, schedule=args.schedule,
                               memory_steps=args.memory_steps)
            print(format_table(report))
        print(format_state(report["state_accounting"], report["model"]))
        device = report.get("device", {}).get("type", "cpu")
        out = Path(args.json) if args.json else default_json_path(first, device, args.state_only)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(report, indent=2))
        os.replace(tmp, out)  # never a half-written report under the final name
        print(f"wrote {out}")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except HydraException as err:  # unknown preset or malformed override
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"error: overrides: {first_line}; see conf/ for the groups and keys", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
