"""One job's resolved spec: the composed config read once, at the front door, into frozen, typed objects.

`JobSpec.from_cfg(cfg)` is the one place a composed config becomes what a job runs: every part
typed and validated where it is built (spec/parts.py: train, optim, data, trainer, logger,
checkpoint; spec/evaluation.py: eval; one line naming the field), the model as built (build.ModelSpec:
the preset parsed, every reference resolved: an input naming another variant, `init_code: binary16`
or `rms_reference: binary16`, a code_map's `code: binary16` and an output head's `code: binary16`, carry
that variant's settings from then on; a spelling code's `vocabulary: data` the job's token strings
(spec/vocabulary.py); size matching applied), the batch plan, the validation schedule, the runtime
decisions (threads; compile, from the built model's FLOPs) and the fingerprint. Nothing below it
(training/, the data module, the W&B mirror, the record, evaluation, systems, studies) reads a
composed config again: each takes the JobSpec or a part of it. The pattern is lm-eval's
`EvaluatorConfig.from_cli` -> `simple_evaluate` and litgpt's dataclass arguments.

`to_json()` / `from_json()` round-trip exactly (tests/spec/test_spec.py). The JSON is stored verbatim
in results.json (`spec`) and in every checkpoint (the final one's config.json, and last.ckpt), so a
stored model is rebuilt from what it was trained with, whatever conf/ says later
(record/checkpoint.py). `composed` is the config as the user composed it (references by name):
results.json `config`, config.yaml and the W&B run config record it; nothing decides anything from it.

Defaults live in conf/ only: a key missing from a composed group is named, not defaulted, and a key
no spec knows is refused by name. The Lightning Trainer arguments a conf/trainer file may leave out
get Lightning's own defaults (spec/parts.TrainerSpec).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ..build import ModelSpec, resolve_model
from ..config import job_config, resolve_input_references, resolve_output_references, to_yaml
from ..errors import ConfigError
from ..data.split import identity as data_identity
from ..heads import is_default_output
from ..inputs import build_input
from ..record.fingerprint import fingerprint
from .evaluation import EvalSpec, wants_eval
from .parts import CheckpointSpec, DataSpec, LoggingSpec, OptimSpec, TrainerSpec, TrainSpec
from .plan import BatchPlan, plan_batch
from .runtime import determinism, resolve_compile, resolve_threads
from .schedule import validation_schedule
from .serial import from_json, to_json
from .settings import check, check_group, check_seq_len
from .vocabulary import resolve_vocabulary

__all__ = ["CheckpointSpec", "DataSpec", "EvalSpec", "JobSpec", "LoggingSpec", "OptimSpec", "RuntimeSpec",
           "TrainSpec", "TrainerSpec"]

# The top-level settings of a composed job config (conf/config.yaml), each read into a part below.
TOP_LEVEL = ("name", "seed", "out_root", "force", "reuse", "threads", "train", "checkpoint", "job_key_ignore",
             "input", "output", "model", "data", "trainer", "optim", "logger", "eval")


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
    """Everything one job needs, resolved and validated (see the module docstring)."""
    name: str                       # the study: W&B group, folder under out_root
    seed: int
    out_root: str                   # where studies live: reuse looks for completed twins under it
    force: bool                     # retrain from scratch whatever the job directory holds
    reuse: bool                     # link a completed job of the same fingerprint in (record/reuse.py)
    model_name: str
    model_source: str               # the preset's `source` line (where its architecture comes from)
    input_name: str
    output_name: str                # the head (conf/output): untied unless the job asked for another
    model: ModelSpec                # the model as built: every reference resolved, size matching applied
    train: TrainSpec
    optim: OptimSpec
    data: DataSpec
    trainer: TrainerSpec
    logging: LoggingSpec
    checkpoint: CheckpointSpec
    eval_name: str
    eval: EvalSpec | None           # None: no evaluation asked
    plan: BatchPlan
    validation_steps: tuple[int, ...]
    runtime: RuntimeSpec
    composed: Mapping[str, Any]     # the config as composed: a record only (see the module docstring)
    fingerprint: Mapping[str, Any]

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> "JobSpec":
        """Resolve and validate a composed config (Hydra's, config.compose's, or plain data of one)."""
        config = job_config(cfg)
        unknown = sorted(set(config) - set(TOP_LEVEL))
        if unknown:
            raise ConfigError(unknown[0], "is not a setting of a job", f"use one of {', '.join(TOP_LEVEL)}")
        missing = [k for k in TOP_LEVEL if k not in config and k != "output"]  # output: absent in older records
        if missing:
            raise ConfigError(missing[0], "is missing from the composed config",
                              "compose the job from conf/ (its defaults live there)")
        check("seed", config["seed"])
        train, optim = TrainSpec.of(config["train"]), OptimSpec.of(config["optim"])
        check_group("model", config["model"])
        check_seq_len(train.seq_len, config["model"]["max_seq_len"])
        data, trainer = DataSpec.of(config["data"]), TrainerSpec.of(config["trainer"])
        checkpoint, logging = CheckpointSpec.of(config["checkpoint"]), LoggingSpec.of(config["logger"])
        threads = resolve_threads(config["threads"])
        # Every reference resolved here, once: from now on the variant named is these settings.
        output = resolve_output_references(config.get("output"))
        input_cfg = resolve_vocabulary(resolve_input_references(config["input"]), data.settings,
                                       int(config["model"]["vocab_size"]))  # `vocabulary: data` (spelling codes)
        model = resolve_model(config["model"], input_cfg, output)
        plan = plan_batch(train, trainer, model)
        steps = validation_schedule(train.val_schedule, train.val_points, train.val_every, plan.max_steps)
        check_input(model)
        train_flops = float(model.flops_per_token(plan.seq_len)) * plan.tokens
        compiled = resolve_compile(train.compile, train.compile_min_flops, train_flops)
        eval_cfg = config["eval"]
        evaluation = EvalSpec.of(eval_cfg) if wants_eval(eval_cfg) else None
        # data.split enters only where it is not the rule the source's jobs had before the setting existed.
        hashed = {**config, "data": data_identity(config["data"]), "input": dict(model.input), "output": dict(model.output)}
        if is_default_output(model.output):
            # The untied head is what every job computed before output= existed: hashing its name
            # would move the fingerprint of every earlier job and stop reuse finding them.
            hashed.pop("output")
        # train.compile=auto hashes what it resolved to: compiled kernels change the last bits.
        current = fingerprint(hashed, list(config["job_key_ignore"]), {**plan.identity(), "compile": compiled})
        return cls(
            name=str(config["name"]), seed=int(config["seed"]), out_root=str(config["out_root"]),
            force=bool(config["force"]), reuse=bool(config["reuse"]), model_name=str(config["model"]["name"]),
            model_source=config["model"]["source"],
            input_name=str(config["input"]["name"]),
            output_name=str((config.get("output") or {}).get("name", "untied")),  # no output: a record from before the axis
            model=model, train=train, optim=optim, data=data, trainer=trainer, logging=logging, checkpoint=checkpoint,
            eval_name=str(eval_cfg["name"]), eval=evaluation, plan=plan, validation_steps=tuple(steps),
            runtime=RuntimeSpec(
                precision=trainer.precision, accelerator=trainer.accelerator, compile=compiled,
                compile_per_block="fsdp" in str(trainer.strategy).lower(), threads=threads,
                progress_bar=trainer.enable_progress_bar,
                deterministic=determinism(trainer.accelerator, compiled, threads, plan.world, trainer.deterministic)),
            composed=config, fingerprint=current,
        )

    # -- the spec as data ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Plain JSON data; `from_json` gives back an equal spec (results.json `spec`, checkpoints)."""
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JobSpec":
        return from_json(cls, data)

    def to_text(self) -> str:
        """The JSON as one string (a Lightning checkpoint stores it so, loadable with weights_only=True)."""
        return json.dumps(self.to_json(), sort_keys=True)

    # -- what the record says about it -----------------------------------------------------------
    @property
    def code_width(self) -> Any:
        code = self.model.input.get("code")  # a code_map's fixed code carries the width
        source = code if isinstance(code, Mapping) else self.model.input
        return source.get("code_width")  # null for learned tables (learned_lowrank has no key)

    @property
    def wandb(self):
        return self.logging.wandb

    def record_config(self) -> dict[str, Any]:
        """A copy of the composed config, for a record that may be changed later (results.json `config`)."""
        return json.loads(json.dumps(self.composed))

    def config_yaml(self) -> str:
        """config.yaml's text: the composed config, resolved."""
        return to_yaml(self.composed)

    def checkpoint_config(self) -> dict[str, Any]:
        """What a final checkpoint's config.json says about the job beside its weights: the spec it
        was trained under (the model as built among it), and for readers of older checkpoints the
        same facts under their old keys: the model preset as composed, the input and head as built."""
        return {"spec": self.to_json(), "model": self.record_config()["model"], "input": dict(self.model.input),
                "output": dict(self.model.output),
                "data_config": dict(self.data.settings), "seed": self.seed, "sweep": self.name,
                "fingerprint": self.fingerprint["sha"]}


def check_input(model: ModelSpec) -> None:
    """Build the input interface on the meta device (shapes only): a bad input setting (unknown key,
    bad seed, a reference that is not a fixed code) fails here, before the job directory is touched;
    the Decoder itself is built once, by training (training/procedure.py)."""
    mcfg = model.config
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        build_input(model.input, mcfg.vocab_size, mcfg.d_model, mcfg.init_std)
