"""Systems cost of each input interface (the library behind `python -m fixedcode_study.bench`).

For one model preset and each input variant it measures, in one process and with identical shapes:
  training step time and tokens/s   one optimizer step exactly as `run` takes it: a Lightning
                                    Trainer.fit of training.task.LanguageModelTask (forward,
                                    cross-entropy, backward, grad clip from cfg.trainer, AdamW over
                                    accounting.optimizer_groups, warmup/cosine LR schedule) on a fixed
                                    random batch; a callback times every step from on_train_batch_start
                                    to on_train_batch_end (wall and process CPU time); median after warm-up
  peak memory                       CPU: peak RSS above the pre-build RSS (VmHWM, reset per model);
                                    CUDA: max allocated above the pre-build allocation; each model alone
  state bytes                       parameters, gradients and optimizer state, measured on the live
                                    tensors (the Trainer's optimizer) after the timed steps
  checkpoint size                   what a run saves: record.checkpoint.save_checkpoint (ours),
                                    save_pretrained (the reference)
  MFU                               model FLOPs/s (accounting.flops_per_token) over a stated peak: on CPU
                                    a dense fp32 matmul peak measured in this process; on CUDA the
                                    datasheet dense bf16 peak
and the same for the reference: Hugging Face LlamaForCausalLM with identical dimensions (untied head,
same vocabulary, SDPA attention), converted from our learned model by systems.hf.to_hf_llama so both
start from the same weights (their first losses agree), and trained through the same task and
optimizer code behind systems.hf.HFCausalLM.

Settings (`--settings`): how each model is run, side by side in the same process --
  fp32           trainer.precision=32-true, eager
  fp32_compiled  32-true, torch.compile (training/speed.py: the whole model, and the loss)
  bf16           bf16-mixed (Lightning's autocast plugin), eager
  bf16_compiled  bf16-mixed, compiled
`default` is what `run` uses for a job of this config (cfg.trainer.precision, train.compile) and
`all` is the four. The reference runs in every setting too, and each row is compared with the
fastest reference row ("HF in its fastest equivalent setting") and with the reference in its own
setting. The first step of a compiled fit includes compiling; it is reported apart (compile_s:
first-step time minus the median step) and left out of the medians by the warm-up steps.
MFU is taken against the measured matmul peak of the precision the row runs in (fp32 or bf16;
on CPU both are measured in this process; on CUDA bf16 is the datasheet peak).
`--jobs N` (CPU) adds one row per setting run as N jobs side by side: N spawned processes with
cores/N threads each, started together, each timing its own fit; the row's tokens/s is their sum
(what a parallel sweep gets, hydra/launcher=parallel).

Timing order (schedule "abba"): each model gets its own Trainer.fit, so steps of different models
cannot alternate; instead the timed steps are split over two passes, the models in order (A B C D)
and then reversed (D C B A), each fit from a fresh build with its own warm-up steps, and the median
is taken over both passes. A load change that drifts linearly over the run then hits every model
alike (each one's two fits sit symmetrically around the middle of the run); medians damp the rest.
On CPU the per-step process CPU time is recorded too: a second view, robust to load from other
processes. Schedule "sequential": one pass, all steps of each model in one fit.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import platform
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from .. import accounting
from ..build import build_model
from ..config import compose_variant
from ..errors import ConfigError
from ..model import ModelConfig
from ..record.checkpoint import CHECKPOINT_CONFIG_FILE, save_checkpoint, weights_file
from ..training.speed import compile_model
from ..training.task import LanguageModelTask

BENCH_VERSION = 3
DEFAULT_INPUTS = ("learned", "binary16", "gf2")
REFERENCE = "hf_llama"
SCHEDULES = ("abba", "sequential")
STEP = ("Lightning Trainer.fit of training.task.LanguageModelTask (forward, loss, backward, clip, AdamW, "
        "LR schedule)")

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


# -- settings --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """How a model is run: the trainer precision and whether it is compiled."""

    name: str
    precision: str   # a Lightning precision: 32-true | bf16-mixed
    compile: bool

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.precision.startswith("bf16") else torch.float32


SETTINGS = {s.name: s for s in (Setting("fp32", "32-true", False), Setting("fp32_compiled", "32-true", True),
                                Setting("bf16", "bf16-mixed", False), Setting("bf16_compiled", "bf16-mixed", True))}


def default_setting(cfg: DictConfig, device: torch.device) -> Setting:
    """The setting `run` uses for a job of this config (precision of cfg.trainer, train.compile)."""
    from ..training.job import compiles
    from ..training.plan import plan_batch

    precision = "bf16-mixed" if device.type == "cuda" else str(cfg.trainer.get("precision", "32-true"))
    compiled = compiles(cfg, plan_batch(cfg))
    named = [s for s in SETTINGS.values() if s.precision == precision and s.compile == compiled]
    return named[0] if named else Setting(f"{precision}{'_compiled' if compiled else ''}", precision, compiled)


def resolve_settings(spec: str, cfg: DictConfig, device: torch.device) -> list[Setting]:
    """`default`, `all`, or a comma-separated list of SETTINGS names (and `default`)."""
    out: list[Setting] = []
    for part in [p for p in spec.split(",") if p]:
        if part == "all":
            chosen = list(SETTINGS.values())
        elif part == "default":
            chosen = [default_setting(cfg, device)]
        elif part in SETTINGS:
            chosen = [SETTINGS[part]]
        else:
            raise ConfigError("--settings", f"unknown setting {part!r}", f"use default, all or {', '.join(SETTINGS)}")
        out += [s for s in chosen if s not in out]
    if not out:
        raise ConfigError("--settings", "no setting given", "use default, all or a list such as fp32,bf16_compiled")
    return out


# -- peaks -----------------------------------------------------------------------------------------

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


# -- one model under test, trained the way `run` trains ------------------------------------------------

def build_subject_model(name: str, cfg: DictConfig, device: torch.device, same_weights: bool = True) -> torch.nn.Module:
    """Our Decoder for an input variant (cfg.input), or for name == REFERENCE (cfg.input = learned)
    the HF Llama of the same preset behind HFCausalLM: converted from our learned model built with
    the same seed (same weights, same first loss) or, with same_weights=False, HF's own init
    without building ours (the peak-memory pass, where the source model must not count)."""
    torch.manual_seed(int(cfg.seed))
    if name != REFERENCE:
        return build_model(cfg.model, cfg.input).to(device)
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from .hf import HFCausalLM, hf_llama_config, to_hf_llama

    hf_logging.disable_progress_bar()
    if same_weights:
        source = build_model(cfg.model, cfg.input).to(device)
        hf = to_hf_llama(source)
        del source
    else:
        with torch.device("meta"):
            shape = build_model(cfg.model, cfg.input)
        with torch.device(device):
            hf = LlamaForCausalLM(hf_llama_config(shape))
        hf.config._attn_implementation = "sdpa"
    return HFCausalLM(hf)


def make_task(model: torch.nn.Module, cfg: DictConfig, max_steps: int, tokens_per_step: int,
              compiled_loss: bool = False) -> LanguageModelTask:
    """The LightningModule `run` trains (token_bytes only feed validation, which the bench skips)."""
    vocab = int(ModelConfig.from_mapping(cfg.model).vocab_size)
    return LanguageModelTask(model, cfg.optim, max_steps, tokens_per_step, torch.ones(vocab),
                             int(cfg.train.log_every), compiled_loss=compiled_loss)


def make_trainer(cfg: DictConfig, device: torch.device, max_steps: int, callbacks: list[L.Callback],
                 root: Path, precision: str = "32-true") -> L.Trainer:
    """cfg.trainer instantiated as training.job.build_trainer does (gradient clipping and any other
    setting it has), pinned to one device of the bench's choice with the bench's precision, and
    with nothing around the steps: no logger, checkpoints, progress bar or validation."""
    return instantiate(
        cfg.trainer, accelerator="cuda" if device.type == "cuda" else "cpu",
        devices=[device.index or 0] if device.type == "cuda" else 1, num_nodes=1, strategy="auto",
        precision=precision, max_steps=max_steps, max_epochs=-1,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, accumulate_grad_batches=1,
        use_distributed_sampler=False, callbacks=callbacks, default_root_dir=str(root),
    )


class FixedBatch(torch.utils.data.IterableDataset):
    """The same (B, T+1) int64 batch, forever: every timed step does identical work."""

    def __init__(self, batch: torch.Tensor):
        self.batch = batch

    def __iter__(self):
        while True:
            yield self.batch


class StepRecorder(L.Callback):
    """Times each optimizer step of a fit (on_train_batch_start -> on_train_batch_end: forward, loss,
    backward, clip, AdamW and the LR scheduler step; CUDA synchronised at both ends) in wall and
    process CPU time, and keeps the first loss, the LightningModule's type, the optimizer's groups
    and, at the end, the live training-state bytes.

    release_state: drop the AdamW moments once measured, so the Trainer's teardown (which moves
    model and optimizer to the CPU) does not copy gigabytes of state of a large model to the host.
    """

    def __init__(self, device: torch.device, release_state: bool = True):
        self.device, self.release_state = device, release_state
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.first_loss: float | None = None
        self.module_type: type | None = None
        self.optimizer_groups: dict[str, int] = {}
        self.optimizer_param_ids: dict[str, list[int]] = {}
        self.state: dict[str, int] = {}
        self._w0 = self._c0 = 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.module_type = type(pl_module)
        opt = trainer.optimizers[0]
        self.optimizer_groups = {g["name"]: sum(p.numel() for p in g["params"]) for g in opt.param_groups}
        self.optimizer_param_ids = {g["name"]: [id(p) for p in g["params"]] for g in opt.param_groups}

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int) -> None:
        _sync(self.device)
        self._w0, self._c0 = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        _sync(self.device)
        self.wall.append(time.perf_counter() - self._w0)
        self.cpu.append(time.process_time() - self._c0)
        if self.first_loss is None:
            self.first_loss = float(outputs["loss"] if isinstance(outputs, Mapping) else outputs)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        opt = trainer.optimizers[0]
        self.state = live_state_bytes(pl_module.model, opt)
        if self.release_state:
            opt.state.clear()


@contextlib.contextmanager
def _quiet_lightning():
    """No per-fit banner ("GPU available ...") or data-loader hints between the bench's own lines."""
    from lightning.fabric.utilities.warnings import PossibleUserWarning

    names = ("lightning.pytorch", "lightning.fabric", "lightning")
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():  # (resets "print once": without these, every fit repeats them)
            warnings.simplefilter("ignore", PossibleUserWarning)
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")  # Lightning vs newer torch
            yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


@dataclass
class Fit:
    """One finished Trainer.fit of one model: the task (model inside) and what the callback saw."""

    name: str
    task: LanguageModelTask
    record: StepRecorder


def fit_steps(name: str, cfg: DictConfig, device: torch.device, batch: torch.Tensor, steps: int, root: Path,
              same_weights: bool = True, setting: Setting = SETTINGS["fp32"]) -> Fit:
    """Build `name` fresh and train it `steps` optimizer steps on `batch` (B, T+1) through Trainer.fit,
    run as `setting` says (compiled as `run` compiles: training/speed.py)."""
    model = build_subject_model(name, cfg, device, same_weights)
    if setting.compile:
        compile_model(model, per_block=False)
    B, T = batch.shape[0], batch.shape[1] - 1
    task = make_task(model, cfg, steps, B * T, compiled_loss=setting.compile)
    record = StepRecorder(device)
    loader = torch.utils.data.DataLoader(FixedBatch(batch), batch_size=None)
    with _quiet_lightning():
        trainer = make_trainer(cfg, device, steps, [record], root, precision=setting.precision)
        trainer.fit(task, train_dataloaders=loader)
    if len(record.wall) != steps:
        raise RuntimeError(f"bench: {name} ran {len(record.wall)} steps, {steps} were asked for")
    return Fit(name, task, record)


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


def checkpoint_bytes(name: str, model: torch.nn.Module, cfg: DictConfig, workdir: Path) -> dict[str, int]:
    """Sizes on disk of what a run saves: ours through save_checkpoint, HF through save_pretrained."""
    target = workdir / f"ckpt-{name}"
    try:
        if name == REFERENCE:
            model.hf.save_pretrained(target)
            files = {p.name: p.stat().st_size for p in target.iterdir()}
            weights = sum(v for k, v in files.items() if k.endswith(".safetensors"))
            config = files.get("config.json", 0)
        else:
            tokenizer = workdir / "tokenizer.json"
            if not tokenizer.exists():  # a real (tiny) tokenizer file; its size is reported apart
                from tokenizers import Tokenizer, models

                Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")).save(str(tokenizer))
            save_checkpoint(target, model, OmegaConf.to_container(cfg.model, resolve=True),
                            OmegaConf.to_container(cfg.input, resolve=True), tokenizer)
            weights = weights_file(target).stat().st_size
            config = (target / CHECKPOINT_CONFIG_FILE).stat().st_size
        return {"weights_bytes": weights, "config_bytes": config, "total_bytes": weights + config}
    finally:
        shutil.rmtree(target, ignore_errors=True)  # 1.7B checkpoints are 7 GB each


# -- the benchmark ---------------------------------------------------------------------------------

def variant_configs(overrides: list[str], inputs: Sequence[str]) -> dict[str, DictConfig]:
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
    """AdamW fp32 training-state accounting per variant from a meta-device build (the groups
    training uses: accounting.optimizer_groups), plus each variant's saving relative to learned."""
    out: dict[str, Any] = {}
    for name, cfg in cfgs.items():
        with torch.device("meta"):
            model = build_model(cfg.model, cfg.input)
        out[name] = accounting.adamw_state_bytes(model, accounting.optimizer_groups(model, cfg.optim))
    if "learned" in out:
        base = out["learned"]["total_bytes"]
        for name, acc in out.items():
            acc["saving_vs_learned_bytes"] = base - acc["total_bytes"]
            acc["saving_vs_learned_fraction"] = (base - acc["total_bytes"]) / base
    return out


def state_report(overrides: list[str], inputs: Sequence[str]) -> dict[str, Any]:
    """The --state-only report: no model is run, nothing is allocated."""
    cfgs = variant_configs(overrides, inputs)
    first = next(iter(cfgs.values()))
    return {"bench_version": BENCH_VERSION, "overrides": overrides, "model": str(first.model.name),
            "architecture": ModelConfig.from_mapping(first.model).to_dict(), "state_accounting": state_only(cfgs)}


def resolve_schedule(schedule: str, steps: int) -> str:
    """"auto" and the former name "interleaved" mean abba; one timed step cannot be split, so it is sequential."""
    schedule = {"auto": "abba", "interleaved": "abba"}.get(schedule, schedule)
    if schedule not in SCHEDULES:
        raise ConfigError("--schedule", f"unknown schedule {schedule!r}", f"use one of auto, {', '.join(SCHEDULES)}")
    return "sequential" if steps < 2 else schedule


def pass_plan(names: list[str], steps: int, schedule: str) -> list[tuple[list[str], int]]:
    """(model order, timed steps per model) of each pass: abba splits the steps over an in-order and
    a reversed pass (the first gets the odd one); sequential is one in-order pass."""
    if schedule == "sequential":
        return [(list(names), steps)]
    first = (steps + 1) // 2
    return [(list(names), first), (list(names)[::-1], steps - first)]


def subject_key(name: str, setting: Setting, several: bool) -> str:
    """The row name: `learned`, or `learned@bf16_compiled` when several settings are compared."""
    return f"{name}@{setting.name}" if several else name


def run_bench(overrides: list[str], *, inputs: Sequence[str] = DEFAULT_INPUTS, steps: int = 10,
              warmup: int = 2, reference: bool = True, device_arg: str = "auto", schedule: str = "auto",
              memory_steps: int = 2, settings: str = "default", jobs: int = 1,
              log: Callable[[str], None] = print) -> dict[str, Any]:
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
    if jobs < 1 or (jobs > 1 and device.type != "cpu"):
        raise ConfigError("--jobs", f"got {jobs} on {device.type}", "use --jobs >= 1, and > 1 only on CPU")
    chosen = resolve_settings(settings, first, device)
    if any(s.compile for s in chosen) and warmup < 1:
        raise ConfigError("--warmup", "0 with a compiled setting: the compile would be timed as a step",
                          "use --warmup >= 1")
    several = len(chosen) > 1
    schedule = resolve_schedule(schedule, steps)
    models = list(cfgs) + ([REFERENCE] if reference else [])
    subjects = [(m, st) for st in chosen for m in models]
    keys = {subject_key(m, st, several): (m, st) for m, st in subjects}
    ref_cfg = cfgs["learned"] if "learned" in cfgs else compose_variant(overrides, "learned")

    def cfg_of(name: str) -> DictConfig:
        return ref_cfg if name == REFERENCE else cfgs[name]

    load_start = os.getloadavg()
    if device.type == "cpu" and torch.get_num_threads() > 1 and load_start[0] > (os.cpu_count() or 1):
        log(f"note: load average {load_start[0]:.1f} exceeds {os.cpu_count()} cores; with "
            f"{torch.get_num_threads()} threads each step waits on descheduled workers, so absolute "
            "timings are unreliable (--threads 1 is steadier on a shared machine)")

    peaks: dict[str, dict[str, Any]] = {}
    samplers: dict[str, MatmulPeak] = {}
    for dtype in dict.fromkeys(st.dtype for st in chosen):
        peak, sampler = peak_flops(device, dtype)
        peaks[str(dtype)] = peak
        if sampler:
            samplers[str(dtype)] = sampler
    fpt = accounting.flops_per_token(mcfg, T)
    g = torch.Generator().manual_seed(int(first.seed))
    batch = torch.randint(0, mcfg.vocab_size, (B, T + 1), generator=g).to(device)  # (B, T+1)
    plan = pass_plan(list(keys), steps, schedule)

    log(f"bench: model={first.model.name} B={B} T={T} device={device} settings={','.join(s.name for s in chosen)} "
        f"schedule={schedule} threads={torch.get_num_threads()} steps={steps} warmup={warmup} per fit")
    results: dict[str, dict[str, Any]] = {k: {"wall": [], "cpu": [], "first_losses": [], "first_step": []}
                                          for k in keys}
    workdir = Path(tempfile.mkdtemp(prefix="fixedcode-bench-"))
    try:
        for order, timed_steps in plan:
            for k in order:
                n, st = keys[k]
                for sampler in samplers.values():
                    sampler.sample()
                fit = fit_steps(n, cfg_of(n), device, batch, warmup + timed_steps, workdir, setting=st)
                r, rec = results[k], fit.record
                r["wall"] += rec.wall[warmup:]
                r["cpu"] += rec.cpu[warmup:]
                r["first_losses"].append(rec.first_loss)
                r["first_step"].append(rec.wall[0])
                if "state" not in r:  # measured once, on the live model after its first fit
                    r.update(state=rec.state, checkpoint=checkpoint_bytes(n, fit.task.model, cfg_of(n), workdir),
                             optimizer_groups=rec.optimizer_groups,
                             trainable_params=sum(rec.optimizer_groups.values()),
                             lightning_module=f"{rec.module_type.__module__}.{rec.module_type.__qualname__}")
                del fit, rec
                gc.collect()

        # Memory: each model built fresh and alone (the HF model without the model it is converted
        # from), after all timing (the CPU meter makes small allocations slower).
        meter = PeakMemory(device)
        for k, (n, st) in keys.items():
            meter.start()
            fit = fit_steps(n, cfg_of(n), device, batch, max(1, memory_steps), workdir, same_weights=False,
                            setting=st)
            results[k]["peak_memory_bytes"] = meter.peak()
            del fit
            gc.collect()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for dtype, sampler in samplers.items():
        sampler.sample(12)
        peaks[dtype]["flops"] = sampler.flops
        peaks[dtype]["source"] += f" of {sampler.samples} (before, between and after the timed fits)"
    side_by_side = [parallel_row(models[0], st, overrides, inputs, jobs, steps, warmup, device) for st in chosen] \
        if jobs > 1 else []
    load_end = os.getloadavg()

    variants = []
    for k, (n, st) in keys.items():
        r = results[k]
        med = statistics.median(r["wall"])
        tps = B * T / med
        peak = peaks[str(st.dtype)]
        row = {
            "name": k,
            "model_name": n,
            "setting": st.name, "precision": st.precision, "compiled": st.compile,
            "kind": "reference" if n == REFERENCE else "ours",
            "step_ms_median": med * 1e3,
            "step_ms_min": min(r["wall"]) * 1e3,
            "first_step_s": max(r["first_step"]),
            "compile_s": max(r["first_step"]) - med if st.compile else 0.0,
            "tokens_per_s": tps,
            "mfu": tps * fpt["total"] / peak["flops"],
            "peak_flops": peak["flops"],
            "first_loss": r["first_losses"][0],
            "trainable_params": r["trainable_params"],
            "optimizer_groups": r["optimizer_groups"],
            "lightning_module": r["lightning_module"],
            "state": r["state"],
            "checkpoint": r["checkpoint"],
            "peak_memory_bytes": r["peak_memory_bytes"],
        }
        if device.type == "cpu":
            row["step_cpu_ms_median"] = statistics.median(r["cpu"]) * 1e3
        variants.append(row)
    for row in side_by_side:
        row["mfu"] = row["tokens_per_s"] * fpt["total"] / peaks[str(SETTINGS[row["setting"]].dtype)]["flops"]
    refs = {v["setting"]: v for v in variants if v["kind"] == "reference"}
    if refs:
        fastest = max(refs.values(), key=lambda v: v["tokens_per_s"])
        for row in variants + side_by_side:
            row["tokens_per_s_vs_reference"] = row["tokens_per_s"] / fastest["tokens_per_s"]
            row["reference_row"] = fastest["name"]
            same = refs.get(row["setting"])
            if same:
                row["tokens_per_s_vs_reference_same_setting"] = row["tokens_per_s"] / same["tokens_per_s"]
                if "step_cpu_ms_median" in row and "step_cpu_ms_median" in same:
                    row["cpu_time_speedup_vs_reference"] = same["step_cpu_ms_median"] / row["step_cpu_ms_median"]

    return {
        "bench_version": BENCH_VERSION,
        "overrides": overrides,
        "model": str(first.model.name),
        "architecture": mcfg.to_dict(),
        "device": {"type": device.type, "name": next(iter(peaks.values()))["device_name"],
                   "threads": torch.get_num_threads(), "cores": os.cpu_count(),
                   "torch": torch.__version__, "lightning": L.__version__, "python": platform.python_version()},
        "settings": [vars(st) for st in chosen],
        "precision": ",".join(dict.fromkeys(st.precision for st in chosen)),
        "batch_size": B, "seq_len": T, "tokens_per_step": B * T,
        "steps": steps, "warmup": warmup, "schedule": schedule,
        "passes": [{"order": order, "timed_steps": k, "warmup": warmup} for order, k in plan if k > 0],
        "step": STEP,
        "peaks": peaks,
        "peak_flops": peaks[str(chosen[0].dtype)]["flops"], "peak_flops_source": peaks[str(chosen[0].dtype)]["source"],
        "flops_per_token": fpt["total"], "flops_per_token_terms": fpt,
        "flops_formula": accounting.FLOPS_FORMULA,
        "memory_kind": meter.kind,
        "load_average": {"start": load_start, "end": load_end},
        "variants": variants,
        "side_by_side": side_by_side,
        "state_accounting": state_only(cfgs),
    }


# -- jobs side by side -----------------------------------------------------------------------------

def _side_by_side_worker(args: tuple, barrier: Any, results: Any) -> None:
    """One of N spawned jobs: set its threads, build its model, wait for the others, time its fit."""
    name, setting_name, overrides, inputs, steps, warmup, threads = args
    torch.set_num_threads(threads)
    cfgs = variant_configs(overrides, inputs)
    cfg = cfgs.get(name) or compose_variant(overrides, "learned")
    mcfg = ModelConfig.from_mapping(cfg.model)
    B, T = int(cfg.train.batch_size), int(cfg.train.seq_len)
    g = torch.Generator().manual_seed(int(cfg.seed))
    batch = torch.randint(0, mcfg.vocab_size, (B, T + 1), generator=g)
    workdir = Path(tempfile.mkdtemp(prefix="fixedcode-bench-job-"))
    try:
        barrier.wait()
        fit = fit_steps(name, cfg, torch.device("cpu"), batch, warmup + steps, workdir, setting=SETTINGS[setting_name])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results.put({"median_s": statistics.median(fit.record.wall[warmup:]), "tokens_per_step": B * T})


def parallel_row(name: str, setting: Setting, overrides: list[str], inputs: Sequence[str], jobs: int, steps: int,
                 warmup: int, device: torch.device) -> dict[str, Any]:
    """`jobs` fits of the same model run at once, cores/jobs threads each: aggregate tokens/s."""
    import multiprocessing as mp

    cores = os.cpu_count() or 1
    threads = max(1, cores // jobs)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(jobs), ctx.Queue()
    args = (name, setting.name, overrides, list(inputs), steps, warmup, threads)
    procs = [ctx.Process(target=_side_by_side_worker, args=(args, barrier, results)) for _ in range(jobs)]
    for proc in procs:
        proc.start()
    out = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
        if proc.exitcode:
            raise RuntimeError(f"bench: a side-by-side job exited with {proc.exitcode}")
    tps = sum(o["tokens_per_step"] / o["median_s"] for o in out)
    return {"name": f"{name}@{setting.name} x{jobs} jobs", "model_name": name, "setting": setting.name,
            "precision": setting.precision, "compiled": setting.compile, "kind": "side_by_side", "jobs": jobs,
            "threads_per_job": threads, "tokens_per_s": tps,
            "per_job_step_ms_median": [o["median_s"] * 1e3 for o in out]}


# -- output ----------------------------------------------------------------------------------------

def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def _ratio(r: float | None) -> str:
    return f"{r:.2f}x" if r else "-"


def format_table(report: dict[str, Any]) -> str:
    cpu = report["device"]["type"] == "cpu"
    width = max([10] + [len(v["name"]) for v in report["variants"] + report.get("side_by_side", [])])
    head = (f"{'variant':<{width}} {'step ms':>9} {'tok/s':>9} {'vs HF':>6} "
            + (f"{'cpu ms':>8} " if cpu else "")
            + f"{'MFU':>6} {'compile s':>9} {'peak MiB':>9} {'state MiB':>9} {'ckpt MiB':>8} {'trainable':>12} {'loss0':>7}")
    peaks = "; ".join(f"{k.removeprefix('torch.')} {p['flops'] / 1e12:.3f} TFLOP/s ({p['source']})"
                      for k, p in report["peaks"].items())
    ref = next((v.get("reference_row") for v in report["variants"] if v.get("reference_row")), None)
    lines = [
        (f"model={report['model']} B={report['batch_size']} T={report['seq_len']} on {report['device']['type']} "
         f"({report['device']['threads']} threads); {report['steps']} timed steps over {len(report['passes'])} "
         f"pass(es), {report['warmup']} warm-up per fit, median; schedule={report['schedule']}"),
        f"step: {report['step']}",
        f"peaks (MFU denominators, per precision): {peaks}",
        (f"{report['flops_per_token'] / 1e6:.2f} MFLOP/token; vs HF = tokens/s over the fastest reference row"
         + (f" ({ref})" if ref else "") + f"; load avg {report['load_average']['start'][0]:.1f} -> "
         f"{report['load_average']['end'][0]:.1f}"),
        head, "-" * len(head),
    ]
    for v in report["variants"]:
        lines.append(
            f"{v['name']:<{width}} {v['step_ms_median']:>9.1f} {v['tokens_per_s']:>9,.0f} "
            f"{_ratio(v.get('tokens_per_s_vs_reference')):>6} "
            + (f"{v['step_cpu_ms_median']:>8.1f} " if cpu else "")
            + f"{100 * v['mfu']:>5.1f}% {v['compile_s']:>9.1f} {_mib(v['peak_memory_bytes']):>9} "
            f"{_mib(v['state']['total_bytes']):>9} {_mib(v['checkpoint']['total_bytes']):>8} "
            f"{v['trainable_params']:>12,} {v['first_loss']:>7.4f}"
        )
    for v in report.get("side_by_side", []):
        lines.append(f"{v['name']:<{width}} {'':>9} {v['tokens_per_s']:>9,.0f} "
                     f"{_ratio(v.get('tokens_per_s_vs_reference')):>6} " + (f"{'':>8} " if cpu else "")
                     + f"{100 * v['mfu']:>5.1f}%   ({v['threads_per_job']} thread(s) per job; aggregate tokens/s)")
    return "\n".join(lines)


def format_state(acc: dict[str, Any], model: str) -> str:
    lines = [f"AdamW fp32 training state (weights + grads + 2 moments + buffers), model={model}, meta-device build:",
             f"{'variant':<10} {'trainable':>14} {'state MiB':>12} {'saving MiB':>11} {'saving':>7}"]
    for name, a in acc.items():
        lines.append(f"{name:<10} {a['trainable_params']:>14,} {_mib(a['total_bytes']):>12} "
                     f"{_mib(a.get('saving_vs_learned_bytes', 0)):>11} "
                     f"{100 * a.get('saving_vs_learned_fraction', 0):>6.2f}%")
    return "\n".join(lines)
