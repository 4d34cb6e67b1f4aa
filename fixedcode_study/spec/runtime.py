"""How a job runs, decided before it runs: CPU threads and whether it trains a compiled model.

training/speed.py's docstring explains both settings and carries out the decisions (sets the
threads, compiles the model); this module only decides, from the settings and the model that is
built (ModelSpec.config, size matching included), so the fingerprint, results.json's runtime and
the training itself read one decision.

  threads   `threads`: auto (the parallel launcher's FIXEDCODE_THREADS_PER_JOB, else torch's
            default) or a positive int.
  compile   `train.compile`: true | false | auto; auto compiles when the job's training FLOPs
            (the built model's FLOPs per token x the tokens it trains) reach `train.compile_min_flops`.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import torch

from ..errors import ConfigError

THREADS_ENV = "FIXEDCODE_THREADS_PER_JOB"  # set by the parallel launcher for its workers
COMPILE_CHOICES = (True, False, "auto")


def resolve_threads(setting: Any) -> int:
    """The intra-op thread count a job runs with (`threads`: auto or a positive int)."""
    if setting in (None, "auto"):
        from_launcher = os.environ.get(THREADS_ENV)
        return int(from_launcher) if from_launcher else torch.get_num_threads()
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ConfigError("threads", f"got {setting!r}", "use auto or a positive number of threads")
    return setting


def resolve_compile(train: Mapping[str, Any], train_flops: float) -> bool:
    """train.compile (true | false | auto) for a job of `train_flops` training FLOPs."""
    setting = train["compile"]
    if setting not in COMPILE_CHOICES:
        raise ConfigError("train.compile", f"got {setting!r}", "use true, false or auto")
    if setting != "auto":
        return bool(setting)
    threshold = train["compile_min_flops"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold < 0:
        raise ConfigError("train.compile_min_flops", f"got {threshold!r}", "use a number of FLOPs >= 0, e.g. 1e12")
    return train_flops >= float(threshold)
