"""A job's evaluation settings, checked before any work: the `eval` group as lm-eval will run it.

`eval_settings` is the eval config with every setting present and validated, one line per bad
value (errors.ConfigError). DEFAULTS fills the settings a suite's YAML leaves out: conf/eval/none.yaml
declares only `name` and `tasks`, so `eval.tasks=[...]` on top of it (or a suite written for an
older version) is complete only with them; they equal conf/eval/builtin.yaml's values. It is also
the list of known keys: an unknown `eval.x` is refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError

__all__ = ["CONTEXT_RULE", "DEFAULTS", "EVAL_IDENTITY", "eval_settings", "wants_eval"]

DEFAULTS: dict[str, Any] = {
    "name": "custom", "tasks": [], "metrics": {}, "num_fewshot": 0, "batch_size": 32, "limit": None,
    "data_dir": None, "prepared_root": None, "device": None, "dtype": "float32", "bootstrap_iters": 1000,
    "use_cache": False, "cache_dir": "~/.cache/fixedcode_study", "output": None, "builtin": {},
}


def eval_settings(eval_cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    cfg = OmegaConf.to_container(eval_cfg, resolve=True) if isinstance(eval_cfg, DictConfig) else dict(eval_cfg)
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"eval.{unknown[0]}", "is not an evaluation setting", f"use one of {sorted(DEFAULTS)}")
    settings = {**DEFAULTS, **cfg}
    if isinstance(settings["tasks"], str):
        settings["tasks"] = [t for t in settings["tasks"].split(",") if t]
    if not settings["tasks"]:
        raise ConfigError("eval.tasks", "no tasks to evaluate", "pick a suite: eval=builtin or eval=paper")
    for key, low in (("batch_size", 1), ("num_fewshot", 0), ("bootstrap_iters", 0)):
        if not isinstance(settings[key], int) or settings[key] < low:
            raise ConfigError(f"eval.{key}", f"{settings[key]!r} is not an integer >= {low}", f"set eval.{key} to one")
    if settings["limit"] is not None and not (isinstance(settings["limit"], (int, float)) and settings["limit"] > 0):
        raise ConfigError("eval.limit", f"{settings['limit']!r} is not positive",
                          "use null (all documents), a count, or a fraction below 1")
    if settings["dtype"] not in ("float32", "bfloat16", "float16"):
        raise ConfigError("eval.dtype", f"{settings['dtype']!r} is not supported", "use float32, bfloat16 or float16")
    return settings


def wants_eval(eval_cfg: Mapping[str, Any] | None) -> bool:
    """Whether the `eval` group asks for any task (eval=none: no)."""
    return bool(eval_cfg and eval_cfg["tasks"])


# Evaluation settings that change the numbers; a stored evaluation with other values is stale.
EVAL_IDENTITY = ("num_fewshot", "limit", "data_dir", "dtype", "batch_size", "builtin")


# How a request longer than the model's context is scored, on both evaluation paths (this adapter, and
# lm-eval's HFLM through hf_lm.ContextClippedHFLM); the record states it under `context`.
CONTEXT_RULE = ("context + continuation cut from the left to max_length + 1 tokens; a continuation longer "
                "than max_length is scored on its last max_length tokens")
