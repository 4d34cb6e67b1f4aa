"""A job's resolved spec: what the front door turns a composed config into (JobSpec.from_cfg).

job.py          JobSpec and its parts (checkpoint, runtime), resolved once from a composed config
plan.py         the batch plan: tokens per step, accumulation, steps
schedule.py     the validation steps
runtime.py      threads and the compile decision
settings.py     range checks of every numeric setting
evaluation.py   the evaluation settings
description.py  what `fixedcode describe` prints: accounting, recipe, the ladder and inputs tables

Layer: above data, below evaluation and training; it reads no conf/ file itself except through
config.resolve_input_references (an input naming another variant).
"""

from .job import CheckpointSpec, JobSpec, RuntimeSpec

__all__ = ["CheckpointSpec", "JobSpec", "RuntimeSpec"]
