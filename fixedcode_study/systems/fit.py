"""One model under test, trained the way `run` trains it: built fresh, one Lightning Trainer.fit of N
optimizer steps of training.task.LanguageModelTask on a fixed batch, each step timed by a callback.

The subject is our Decoder of an input variant, or (REFERENCE) Hugging Face's LlamaForCausalLM of
the same preset behind systems.hf.HFCausalLM, converted from our learned model so both start from the
same weights. `Fit.config` is the architecture of the model actually built (size matching included;
for the reference, the Decoder it was converted from): the FLOPs of a row come from it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate

from ..build import build_decoder
from ..console import quiet_lightning
from ..model import Decoder, ModelConfig
from ..spec import JobSpec
from ..training.speed import compile_model
from ..training.task import LanguageModelTask
from .meters import live_state_bytes, sync

REFERENCE = "hf_llama"
STEP = ("Lightning Trainer.fit of training.task.LanguageModelTask (forward, loss, backward, clip, AdamW, "
        "LR schedule)")


@dataclass(frozen=True)
class Setting:
    """How a model is run: the trainer precision and whether it is compiled."""

    name: str
    precision: str   # a Lightning precision: 32-true | bf16-mixed
    compile: bool
    # Compiled with the input layer eager, as `run` does (bitwise repeatable at any thread count);
    # False compiles the input too: the pre-issue-26 graph, kept to measure what determinism costs.
    input_eager: bool = True

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.precision.startswith("bf16") else torch.float32


SETTINGS = {s.name: s for s in (Setting("fp32", "32-true", False), Setting("fp32_compiled", "32-true", True),
                                Setting("bf16", "bf16-mixed", False), Setting("bf16_compiled", "bf16-mixed", True),
                                Setting("fp32_compiled_input", "32-true", True, input_eager=False),
                                Setting("bf16_compiled_input", "bf16-mixed", True, input_eager=False))}
DEFAULT_ALL = ("fp32", "fp32_compiled", "bf16", "bf16_compiled")  # settings=all: what `run` can resolve to


def build_subject_model(name: str, spec: JobSpec, device: torch.device,
                        same_weights: bool = True) -> tuple[torch.nn.Module, ModelConfig]:
    """(module, its architecture). Our Decoder for an input variant (spec.model), or for name ==
    REFERENCE (a learned-input spec) the HF Llama of the same preset behind HFCausalLM: converted from
    our learned model built with the same seed (same weights, same first loss) or, with
    same_weights=False, HF's own init without building ours (the peak-memory pass, where the source
    model must not count)."""
    torch.manual_seed(spec.seed)
    if name != REFERENCE:
        model = build_decoder(spec.model, seed=spec.seed).to(device)
        return model, model.config
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from .hf import HFCausalLM, hf_llama_config, to_hf_llama

    hf_logging.disable_progress_bar()
    if same_weights:
        source = build_decoder(spec.model, seed=spec.seed).to(device)
        config = source.config
        hf = to_hf_llama(source)
        del source
    else:
        with torch.device("meta"):
            shape = build_decoder(spec.model, seed=spec.seed)
        config = shape.config
        with torch.device(device):
            hf = LlamaForCausalLM(hf_llama_config(shape))
        hf.config._attn_implementation = "sdpa"
    return HFCausalLM(hf), config


def compile_subject(model: torch.nn.Module, setting: Setting) -> None:
    """Compile a subject in place as its own users would: our Decoder as `run` compiles it, the
    reference as Hugging Face users compile theirs."""
    if isinstance(model, Decoder):
        compile_model(model, per_block=False, input_eager=setting.input_eager)
        return
    from .hf import HFCausalLM

    if not isinstance(model, HFCausalLM):
        raise TypeError(f"bench: no compile rule for a {type(model).__qualname__}")
    # The reference is torch.compile of the whole LlamaForCausalLM (`model.compile()`, what
    # `torch.compile(model)` or transformers' Trainer(torch_compile=True) does): that is the HF
    # baseline our numbers are set against. The input-eager split is our Decoder's own choice for
    # bitwise repeatability (training/speed.py compile_model) and needs its `.input`, which HF's
    # model has not, so `setting.input_eager` does not apply here.
    torch._dynamo.reset()  # a fresh cache per fit, as compile_model starts each of ours
    model.hf.compile()


def make_task(model: torch.nn.Module, spec: JobSpec, max_steps: int, tokens_per_step: int,
              compiled_loss: bool = False) -> LanguageModelTask:
    """The LightningModule `run` trains (token_bytes only feed validation, which the bench skips)."""
    return LanguageModelTask(model, spec.optim, max_steps, tokens_per_step, torch.ones(spec.model.preset.vocab_size),
                             spec.train.log_every, compiled_loss=compiled_loss)


def make_trainer(spec: JobSpec, device: torch.device, max_steps: int, callbacks: list[L.Callback],
                 root: Path, precision: str = "32-true") -> L.Trainer:
    """spec.trainer instantiated as training.procedure.build_trainer does (gradient clipping and any other
    setting it has), pinned to one device of the bench's choice with the bench's precision, and
    with nothing around the steps: no logger, checkpoints, progress bar or validation."""
    return instantiate(
        dict(spec.trainer.arguments), accelerator="cuda" if device.type == "cuda" else "cpu",
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
        sync(self.device)
        self._w0, self._c0 = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        sync(self.device)
        self.wall.append(time.perf_counter() - self._w0)
        self.cpu.append(time.process_time() - self._c0)
        if self.first_loss is None:
            self.first_loss = float(outputs["loss"] if isinstance(outputs, Mapping) else outputs)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        opt = trainer.optimizers[0]
        self.state = live_state_bytes(pl_module.model, opt)
        if self.release_state:
            opt.state.clear()


@dataclass
class Fit:
    """One finished Trainer.fit of one model: the task (model inside), what the callback saw, and the
    architecture of the model built (the one its FLOPs are counted from)."""

    name: str
    task: LanguageModelTask
    record: StepRecorder
    config: ModelConfig


def fit_steps(name: str, spec: JobSpec, device: torch.device, batch: torch.Tensor, steps: int, root: Path,
              same_weights: bool = True, setting: Setting = SETTINGS["fp32"]) -> Fit:
    """Build `name` fresh and train it `steps` optimizer steps on `batch` (B, T+1) through Trainer.fit,
    run as `setting` says (compiled as `run` compiles: training/speed.py)."""
    model, config = build_subject_model(name, spec, device, same_weights)
    if setting.compile:
        compile_subject(model, setting)
    B, T = batch.shape[0], batch.shape[1] - 1
    task = make_task(model, spec, steps, B * T, compiled_loss=setting.compile)
    record = StepRecorder(device)
    loader = torch.utils.data.DataLoader(FixedBatch(batch), batch_size=None)
    with quiet_lightning():
        trainer = make_trainer(spec, device, steps, [record], root, precision=setting.precision)
        trainer.fit(task, train_dataloaders=loader)
    if len(record.wall) != steps:
        raise RuntimeError(f"bench: {name} ran {len(record.wall)} steps, {steps} were asked for")
    return Fit(name, task, record, config)
