"""One job's resolved spec: the composed config read once, at the front door, into frozen objects.

`JobSpec.from_cfg(cfg)` is the one place a composed config becomes what a job runs: every setting
validated (spec/settings.py, one line naming the field), the model as built (build.ModelSpec: the
preset parsed, the input's references resolved, size matching applied, once), the batch plan, the
validation schedule, the runtime decisions (threads; compile, from the built model's FLOPs),
checkpoint, evaluation and logger settings, and the fingerprint. Nothing below it (training/,
the data module, the W&B mirror, the record) reads the raw DictConfig again, so every figure of a
job (the compile decision, results.json's flops_per_token, the fingerprint) comes from one
resolution. The pattern is lm-eval's `EvaluatorConfig.from_cli` -> `simple_evaluate` and
litgpt's dataclass arguments.

Defaults live in conf/ only: every key below is read directly, so a key missing from a composed
config is a KeyError naming it, not a second default. The few `.get` left are keys conf/ leaves
out on purpose (Lightning Trainer arguments a trainer file may omit, the code width of inputs
that have none), each with its reason.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ..build import ModelSpec, resolve_model
from ..config import resolve_input_references, resolve_output_references
from ..data.split import identity as data_identity
from ..inputs import build_input
from ..heads import is_default_output
from ..record.fingerprint import fingerprint
from .evaluation import eval_settings, wants_eval
from .plan import BatchPlan, plan_batch
from .runtime import check_strategy_device, determinism, resolve_compile, resolve_threads
from .schedule import validation_schedule
from .settings import validate_settings

__all__ = ["CheckpointSpec", "JobSpec", "RuntimeSpec"]


@dataclass(frozen=True)
class CheckpointSpec:
    """conf/config.yaml `checkpoint`: resume state cadence, retention and preemption signals."""
    every_steps: int
    keep_every_steps: int
    keep_last: bool
    resume: bool
    preempt_signals: tuple[str, ...]


@dataclass(frozen=True)
class RuntimeSpec:
    """How the numbers are computed (not what): results.json "runtime", plus how to compile."""
    precision: str
    accelerator: str
    compile: bool            # train.compile, `auto` decided from the built model's training FLOPs
    compile_per_block: bool  # under FSDP each block is compiled (the unit it wraps and gathers)
    threads: int
    progress_bar: bool
    deterministic: Mapping[str, Any]  # {bitwise, scope, reason}: spec/runtime.determinism

    def record(self) -> dict[str, Any]:
        return {"precision": self.precision, "compile": self.compile, "threads": self.threads,
                "accelerator": self.accelerator, "deterministic": dict(self.deterministic)}


@dataclass(frozen=True)
class JobSpec:
    """Everything one job needs, resolved and validated (see the module docstring).

    The mappings it holds (trainer, optim, data, eval, wandb, config) are plain resolved containers
    and are not to be mutated; `config` is the whole resolved config, as results.json, config.yaml
    and the W&B run record it.
    """
    name: str                       # the study: W&B group, folder under out_root
    seed: int
    model_name: str
    input_name: str
    output_name: str                # the head (conf/output): untied unless the job asked for another
    model: ModelSpec
    plan: BatchPlan
    validation_steps: tuple[int, ...]
    runtime: RuntimeSpec
    checkpoint: CheckpointSpec
    trainer: Mapping[str, Any]      # Lightning Trainer arguments (hydra.utils.instantiate)
    optim: Mapping[str, Any]
    data: Mapping[str, Any]         # data/prepare.py's config
    log_every: int
    val_batch_size: int
    eval_name: str
    eval: Mapping[str, Any] | None  # validated evaluation settings; None: no evaluation asked
    wandb: Mapping[str, Any] | None  # logger.wandb (project, entity, mode); None: local files only
    force: bool
    config: Mapping[str, Any]
    fingerprint: Mapping[str, Any]

    @classmethod
    def from_cfg(cls, cfg: DictConfig | Mapping[str, Any]) -> "JobSpec":
        """Resolve and validate a composed config (config.compose, or the Hydra app's)."""
        config = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else copy.deepcopy(dict(cfg))
        validate_settings(config)
        threads = resolve_threads(config["threads"])
        # Input variants that name another (init_code / rms_reference: binary16) take that variant's
        # settings as they are today; the fingerprint hashes them too (editing binary16.yaml changes them).
        output = resolve_output_references(config.get("output"))
        model = resolve_model(config["model"], resolve_input_references(config["input"]), output)
        plan = plan_batch(config, model)
        steps = validation_schedule(config["train"], plan.max_steps)
        check_input(model)
        train_flops = float(model.flops_per_token(plan.seq_len)) * plan.tokens
        compiled = resolve_compile(config["train"], train_flops)
        eval_cfg = config["eval"]
        evaluation = eval_settings(eval_cfg) if wants_eval(eval_cfg) else None
        ckpt, trainer = config["checkpoint"], config["trainer"]
        # data.split enters only where it is not the rule the source's jobs had before the setting existed.
        hashed = {**config, "data": data_identity(config["data"]), "input": dict(model.input), "output": dict(model.output)}
        if is_default_output(model.output):
            # The untied head is what every job computed before output= existed: hashing its name
            # would move the fingerprint of every earlier job and stop reuse finding them.
            hashed.pop("output")
        # train.compile=auto hashes what it resolved to: compiled kernels change the last bits.
        current = fingerprint(hashed, list(config["job_key_ignore"]), {**plan.identity(), "compile": compiled})
        check_strategy_device(trainer.get("strategy"), str(trainer.get("accelerator", "auto")))
        return cls(
            name=str(config["name"]), seed=int(config["seed"]), model_name=str(config["model"]["name"]),
            input_name=str(config["input"]["name"]), output_name=str((config.get("output") or {}).get("name", "untied")),
            model=model, plan=plan, validation_steps=tuple(steps),
            runtime=RuntimeSpec(
                # precision, accelerator, strategy and the bar are Trainer arguments that a conf/trainer
                # file may leave to Lightning; these defaults are Lightning's own.
                precision=str(trainer.get("precision", "32-true")), accelerator=str(trainer.get("accelerator", "auto")),
                compile=compiled, compile_per_block="fsdp" in str(trainer.get("strategy", "")).lower(),
                threads=threads, progress_bar=bool(trainer.get("enable_progress_bar", True)),
                deterministic=determinism(str(trainer.get("accelerator", "auto")), compiled, threads,
                                          plan.world, trainer.get("deterministic"))),
            checkpoint=CheckpointSpec(
                every_steps=int(ckpt["every_steps"]), keep_every_steps=int(ckpt["keep_every_steps"]),
                keep_last=bool(ckpt["keep_last"]), resume=bool(ckpt["resume"]),
                preempt_signals=tuple(ckpt["preempt_signals"])),
            trainer=trainer, optim=config["optim"], data=config["data"], log_every=int(config["train"]["log_every"]),
            val_batch_size=int(config["train"]["val_batch_size"]), eval_name=str(eval_cfg["name"]), eval=evaluation,
            wandb=config["logger"]["wandb"], force=bool(config["force"]), config=config, fingerprint=current,
        )

    @property
    def code_width(self) -> Any:
        return self.config["input"]["code_width"]  # null for learned tables

    def record_config(self) -> dict[str, Any]:
        """A copy of the resolved config, for a record that may be changed later."""
        return copy.deepcopy(dict(self.config))

    def config_yaml(self) -> str:
        """config.yaml's text: the resolved config."""
        return OmegaConf.to_yaml(OmegaConf.create(self.record_config()))

    def config_node(self) -> DictConfig:
        """The resolved config as a DictConfig, for record-layer code that reads one (record/reuse.py)."""
        return OmegaConf.create(self.record_config())


def check_input(model: ModelSpec) -> None:
    """Build the input interface on the meta device (shapes only): a bad input setting (unknown key,
    bad seed, a reference that is not a fixed code) fails here, before the job directory is touched;
    the Decoder itself is built once, by training (training/job.py)."""
    mcfg = model.config
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        build_input(model.input, mcfg.vocab_size, mcfg.d_model, mcfg.init_std)
