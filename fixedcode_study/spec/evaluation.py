"""A job's evaluation settings, checked before any work: the `eval` group as lm-eval will run it.

`EvalSpec.of(eval_cfg)` is the eval config with every setting present and validated in
`__post_init__`, one line per bad value (errors.ConfigError); the harness runs it as it is, without
checking it again (evaluation/harness.py). DEFAULTS fills the settings a suite's YAML leaves out:
conf/eval/none.yaml declares only `name` and `tasks`, so `eval.tasks=[...]` on top of it (or a
suite written for an older version) is complete only with them; they equal conf/eval/builtin.yaml's
values. It is also the list of known keys: an unknown `eval.x` is refused by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .serial import from_json, to_json

__all__ = ["CONTEXT_RULE", "DEFAULTS", "EVAL_IDENTITY", "EvalSpec", "wants_eval"]

DEFAULTS: dict[str, Any] = {
    "name": "custom", "tasks": [], "metrics": {}, "num_fewshot": 0, "batch_size": 32, "limit": None,
    "data_dir": None, "prepared_root": None, "device": None, "dtype": "float32", "bootstrap_iters": 1000,
    "use_cache": False, "cache_dir": "~/.cache/fixedcode_study", "output": None, "builtin": {},
}
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class EvalSpec:
    """The `eval` group as lm-eval runs it (conf/eval/*.yaml: each setting is documented there)."""
    name: str
    tasks: tuple[str, ...]
    metrics: Mapping[str, Any]       # the headline metrics per task (every metric lm-eval reports is recorded)
    num_fewshot: int
    batch_size: int
    limit: int | float | None
    data_dir: str | None
    prepared_root: str | None
    device: str | None
    dtype: str
    bootstrap_iters: int
    use_cache: bool
    cache_dir: str
    output: str | None
    builtin: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ConfigError("eval.tasks", "no tasks to evaluate", "pick a suite: eval=builtin or eval=paper")
        for key, low in (("batch_size", 1), ("num_fewshot", 0), ("bootstrap_iters", 0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"eval.{key}", f"{value!r} is not an integer >= {low}", f"set eval.{key} to one")
        if self.limit is not None and not (isinstance(self.limit, (int, float)) and self.limit > 0):
            raise ConfigError("eval.limit", f"{self.limit!r} is not positive",
                              "use null (all documents), a count, or a fraction below 1")
        if self.dtype not in DTYPES:
            raise ConfigError("eval.dtype", f"{self.dtype!r} is not supported", "use float32, bfloat16 or float16")

    @classmethod
    def of(cls, eval_cfg: Mapping[str, Any]) -> "EvalSpec":
        unknown = sorted(set(eval_cfg) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"eval.{unknown[0]}", "is not an evaluation setting", f"use one of {sorted(DEFAULTS)}")
        settings = {**DEFAULTS, **eval_cfg}
        tasks = settings["tasks"]
        if isinstance(tasks, str):
            tasks = [t for t in tasks.split(",") if t]
        return cls(**{**settings, "tasks": tuple(tasks or ()), "metrics": dict(settings["metrics"] or {}),
                      "builtin": dict(settings["builtin"] or {}), "use_cache": bool(settings["use_cache"])})

    def with_paths(self, **paths: Any) -> "EvalSpec":
        """The same settings with data_dir / prepared_root made absolute where the harness found them."""
        return dataclasses.replace(self, **paths)

    def record(self) -> dict[str, Any]:
        """Every setting as plain data (results.json `eval.settings` keeps the ones that change numbers)."""
        return to_json(self)

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EvalSpec":
        return from_json(cls, data)


def wants_eval(eval_cfg: Mapping[str, Any] | None) -> bool:
    """Whether a composed `eval` group asks for any task (eval=none: no)."""
    return bool(eval_cfg and eval_cfg["tasks"])


# Evaluation settings that change the numbers; a stored evaluation with other values is stale.
EVAL_IDENTITY = ("num_fewshot", "limit", "data_dir", "dtype", "batch_size", "builtin")


# How a request longer than the model's context is scored, on both evaluation paths (this adapter, and
# lm-eval's HFLM through hf_lm.ContextClippedHFLM); the record states it under `context`.
CONTEXT_RULE = ("context + continuation cut from the left to max_length + 1 tokens; a continuation longer "
                "than max_length is scored on its last max_length tokens")
