"""A job's resolved spec: what the front door turns a composed config into (JobSpec.from_cfg).

job.py          JobSpec, the whole job: its typed parts, the model as built, the plan, the runtime
                decisions and the fingerprint, resolved once from a composed config; to_json/from_json
parts.py        the typed parts of one config group each: train, optim, data, trainer, logger, checkpoint
evaluation.py   the evaluation settings (EvalSpec)
plan.py         the batch plan: tokens per step, accumulation, steps
schedule.py     the validation steps
runtime.py      threads and the compile decision
settings.py     range checks of every numeric setting (applied by the parts where they are built)
serial.py       a frozen spec as JSON and back
description.py  what `fixedcode describe` prints: accounting, recipe, the ladder and inputs tables

Layer: above data, below evaluation and training; it reads no conf/ file itself except through
config.resolve_input_references (an input naming another variant), once per job.
"""

from .evaluation import EvalSpec
from .job import JobSpec, RuntimeSpec
from .parts import CheckpointSpec, DataSpec, LoggingSpec, OptimSpec, TrainerSpec, TrainSpec, WandbSpec

__all__ = ["CheckpointSpec", "DataSpec", "EvalSpec", "JobSpec", "LoggingSpec", "OptimSpec", "RuntimeSpec",
           "TrainSpec", "TrainerSpec", "WandbSpec"]
