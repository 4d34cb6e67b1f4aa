"""The typed parts of a job's spec, one per config group, each validated where it is built.

    TrainSpec       conf/config.yaml `train`: budget, batch, window, validation cadence, compile, data part
    OptimSpec       conf/optim: AdamW and its warmup-cosine schedule
    DataSpec        conf/data: the corpus settings data/ reads (generic: a new key is carried along)
    TrainerSpec     conf/trainer: Lightning Trainer arguments, and the few this package reads itself
    LoggingSpec     conf/logger: the W&B run (None: local files only)
    CheckpointSpec  conf/config.yaml `checkpoint`: resume state cadence, retention, preemption signals

`<Spec>.of(mapping)` takes a composed group: every key the spec declares must be there (defaults
live in conf/ only; a missing key is named, not defaulted), a key it does not know is refused by
name (`+train.typo=1` is an error, not a silent no-op), and `__post_init__` checks every value's
range (spec/settings.py), so a spec that exists is a valid one. A frozen spec is plain data: it
goes to JSON and back unchanged (spec/serial.py), which is how results.json and every checkpoint
store it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError
from .runtime import COMPILE_CHOICES, check_strategy_device
from .schedule import SCHEDULES
from .serial import from_json, to_json
from .settings import check, check_betas, check_signals

__all__ = ["CheckpointSpec", "DataSpec", "LoggingSpec", "OptimSpec", "TrainSpec", "TrainerSpec", "WandbSpec",
           "group_values", "parse_data_part"]


def group_values(cls: type, group: str, values: Mapping[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keys of a composed group for the fields of `cls`: refused by name when one is unknown or
    (unless `optional`) missing."""
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{group}.{unknown[0]}", f"is not a {group} setting", f"use one of {', '.join(names)}")
    missing = [n for n in names if n not in values and n not in optional]
    if missing:
        raise ConfigError(f"{group}.{missing[0]}", "is missing from the composed config",
                          f"declare {group}.{missing[0]} in conf/ (its defaults live there)")
    return {n: values[n] for n in names if n in values}


class _Spec:
    """JSON of a frozen spec dataclass: `to_json()`, `from_json(data)`."""

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):
        return from_json(cls, data)


@dataclass(frozen=True)
class TrainSpec(_Spec):
    tokens: int                      # the budget; steps = tokens / tokens per step, rounded up (spec/plan.py)
    batch_size: int                  # sequences per micro-batch per device
    seq_len: int
    grad_accum: int
    global_batch_tokens: int | None  # set: grad_accum is derived from it
    val_schedule: str                # log | every (spec/schedule.py)
    val_points: int
    val_every: int
    val_early_tokens: int | None     # tokens an early validation reads (data/batches.early_windows); None: all
    log_every: int
    val_batch_size: int
    compile: bool | str              # true | false | auto (spec/runtime.resolve_compile)
    compile_min_flops: float
    data_part: str | None            # "k/n": train on the k-th of n equal parts of the training split; None: all
    heldout_fraction: float | None   # share of merged tokens held out of training (data/heldout.py); None: none
    heldout_seed: int                # the draw of the held-out set (one set for every arm and job seed)

    def __post_init__(self) -> None:
        for key in (*_TRAIN_INTEGERS, *_TRAIN_NULLABLE):
            check(f"train.{key}", getattr(self, key))
        if self.data_part is not None:
            parse_data_part(self.data_part)
        for key in ("heldout_fraction", "heldout_seed"):
            check(f"train.{key}", getattr(self, key))
        if self.val_schedule not in SCHEDULES:
            raise ConfigError("train.val_schedule", f"unknown schedule {self.val_schedule!r}",
                              f"use one of {', '.join(SCHEDULES)}")
        if self.compile not in COMPILE_CHOICES:
            raise ConfigError("train.compile", f"got {self.compile!r}", "use true, false or auto")
        threshold = self.compile_min_flops
        if self.compile == "auto" and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                       or threshold < 0):
            raise ConfigError("train.compile_min_flops", f"got {threshold!r}", "use a number of FLOPs >= 0, e.g. 1e12")

    @property
    def part(self) -> tuple[int, int] | None:
        """data_part as (k, n) for the data module (data/batches.part_bounds); None: the whole split."""
        return None if self.data_part is None else parse_data_part(self.data_part)

    @classmethod
    def of(cls, train: Mapping[str, Any]) -> "TrainSpec":
        v = group_values(cls, "train", train)
        for key in (*_TRAIN_INTEGERS, *_TRAIN_NULLABLE, "heldout_fraction", "heldout_seed"):
            check(f"train.{key}", v[key])  # as given: 5e5 is an integer, 0.5 is not
        return cls(**{**v, **{k: int(v[k]) for k in _TRAIN_INTEGERS},
                      **{k: None if v[k] is None else int(v[k]) for k in _TRAIN_NULLABLE},
                      "heldout_fraction": None if v["heldout_fraction"] is None else float(v["heldout_fraction"]),
                      "heldout_seed": int(v["heldout_seed"])})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TrainSpec":
        # A spec stored before val_early_tokens existed read every window at every validation; one
        # stored before data_part existed trained on the whole training split, one stored before
        # heldout_fraction existed on the whole vocabulary.
        return from_json(cls, {"val_early_tokens": None, "data_part": None, "heldout_fraction": None,
                               "heldout_seed": 0, **data})


def parse_data_part(value: Any) -> tuple[int, int]:
    """`train.data_part` "k/n" as (k, n): 1 <= k <= n, n >= 2; anything else is one line naming the field."""
    fix = 'write "k/n" with 1 <= k <= n and n >= 2 (train.data_part=1/2 and =2/2 are two disjoint halves), or null for all'
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError("train.data_part", f"{value!r} is not a part k/n", fix)
    k, n = int(match.group(1)), int(match.group(2))
    if not (n >= 2 and 1 <= k <= n):
        raise ConfigError("train.data_part", f"{value!r} is not a part of the split (k must be in 1..n, n >= 2)", fix)
    return k, n


_TRAIN_INTEGERS = ("tokens", "batch_size", "seq_len", "grad_accum", "val_points", "val_every", "log_every",
                   "val_batch_size")
_TRAIN_NULLABLE = ("global_batch_tokens", "val_early_tokens")


@dataclass(frozen=True)
class OptimSpec(_Spec):
    lr: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    weight_decay_input: bool   # does the learned input table decay?
    weight_decay_head: bool    # does the output head decay?
    warmup_fraction: float
    min_lr_ratio: float

    def __post_init__(self) -> None:
        for key in ("lr", "eps", "weight_decay", "warmup_fraction", "min_lr_ratio"):
            check(f"optim.{key}", getattr(self, key))
        check_betas(self.betas)

    @classmethod
    def of(cls, optim: Mapping[str, Any]) -> "OptimSpec":
        v = group_values(cls, "optim", optim)
        check_betas(v["betas"])
        return cls(**{**v, "betas": tuple(v["betas"]), "weight_decay_input": bool(v["weight_decay_input"]),
                      "weight_decay_head": bool(v["weight_decay_head"])})

    def groups_settings(self) -> dict[str, Any]:
        """The settings accounting.optimizer_groups reads (weight decay and where it applies)."""
        return {"weight_decay": self.weight_decay, "weight_decay_input": self.weight_decay_input,
                "weight_decay_head": self.weight_decay_head}


@dataclass(frozen=True)
class DataSpec(_Spec):
    """conf/data/<name>.yaml: `settings` is the whole group as composed, what data.prepare reads
    (each source has keys of its own; data/ checks them where it opens the corpus), so a new data
    key reaches data/ and the fingerprint without a change here. `name` and `source` are typed."""
    name: str
    source: str
    settings: Mapping[str, Any]

    def __post_init__(self) -> None:
        if "val_fraction" in self.settings:
            check("data.val_fraction", self.settings["val_fraction"])

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> "DataSpec":
        for key in ("name", "source"):
            if key not in data:
                raise ConfigError(f"data.{key}", "is missing from the composed config", "pick a data= option of conf/data")
        return cls(str(data["name"]), str(data["source"]), dict(data))


# Lightning's own defaults, for the Trainer arguments a conf/trainer file may leave out.
LIGHTNING_DEFAULTS = {"accelerator": "auto", "devices": "auto", "num_nodes": 1, "precision": "32-true",
                      "strategy": "auto", "gradient_clip_val": None, "deterministic": None,
                      "enable_progress_bar": True}


@dataclass(frozen=True)
class TrainerSpec(_Spec):
    """conf/trainer: `arguments` are the Lightning Trainer's, as composed (hydra.utils.instantiate
    builds the Trainer from them, training/procedure.py); the fields beside them are those this
    package reads, with Lightning's default where the file leaves one out."""
    arguments: Mapping[str, Any]
    accelerator: str
    devices: Any                     # an int, "auto", or a list of device indices
    num_nodes: int
    precision: str
    strategy: Any                    # a name, or a {_target_: ...} node (trainer=fsdp)
    gradient_clip_val: float | None
    deterministic: Any               # Lightning's: None | bool | "warn"
    enable_progress_bar: bool

    def __post_init__(self) -> None:
        check("trainer.gradient_clip_val", self.gradient_clip_val)
        check_strategy_device(self.strategy, self.accelerator)

    @classmethod
    def of(cls, trainer: Mapping[str, Any]) -> "TrainerSpec":
        v = {k: trainer.get(k, default) for k, default in LIGHTNING_DEFAULTS.items()}
        return cls(arguments=dict(trainer), accelerator=str(v["accelerator"]), devices=v["devices"],
                   num_nodes=int(v["num_nodes"]), precision=str(v["precision"]), strategy=v["strategy"],
                   gradient_clip_val=v["gradient_clip_val"], deterministic=v["deterministic"],
                   enable_progress_bar=bool(v["enable_progress_bar"]))


WANDB_MODES = ("auto", "online", "offline", "disabled")


@dataclass(frozen=True)
class WandbSpec(_Spec):
    project: str
    entity: str | None
    mode: str                        # auto = online with a key and a route to the server, else offline

    def __post_init__(self) -> None:
        if self.mode not in WANDB_MODES:
            raise ConfigError("logger.wandb.mode", f"unknown mode {self.mode!r}", f"use one of {', '.join(WANDB_MODES)}")


@dataclass(frozen=True)
class LoggingSpec(_Spec):
    wandb: WandbSpec | None          # None (logger=csv): metrics.csv and results.json only

    @classmethod
    def of(cls, logger: Mapping[str, Any]) -> "LoggingSpec":
        v = group_values(cls, "logger", logger)
        wandb = v["wandb"]
        return cls(None if wandb is None else WandbSpec(**group_values(WandbSpec, "logger.wandb", wandb)))


@dataclass(frozen=True)
class CheckpointSpec(_Spec):
    every_steps: int                 # last.ckpt every N optimizer steps (0: only on preemption)
    keep_every_steps: int            # step-XXXXXXX.ckpt snapshots every N steps (0: never)
    keep_last: bool
    resume: bool
    preempt_signals: tuple[str, ...]

    def __post_init__(self) -> None:
        check("checkpoint.every_steps", self.every_steps)
        check("checkpoint.keep_every_steps", self.keep_every_steps)
        check_signals(self.preempt_signals)

    @classmethod
    def of(cls, checkpoint: Mapping[str, Any]) -> "CheckpointSpec":
        v = group_values(cls, "checkpoint", checkpoint)
        check("checkpoint.every_steps", v["every_steps"])
        check("checkpoint.keep_every_steps", v["keep_every_steps"])
        check_signals(v["preempt_signals"])
        return cls(int(v["every_steps"]), int(v["keep_every_steps"]), bool(v["keep_last"]), bool(v["resume"]),
                   tuple(v["preempt_signals"]))
