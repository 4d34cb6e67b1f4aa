"""Every numeric setting of a job checked before any work starts: one line naming the field.

A NaN learning rate trains a model of NaNs for an hour; a negative one trains backwards; a
`train.seq_len` above `model.max_seq_len` used to surface as a confusing data-split error. Each
rule below is (field, test, what the value must be). Model shapes are checked by
ModelConfig.validate, the batch arithmetic by spec/plan.plan_batch and files by the code that opens
them (data/prepare.py, record/checkpoint.py); this module covers the rest of the numbers.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from ..errors import ConfigError


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _integer(value: Any) -> bool:
    number = _number(value)
    return number is not None and math.isfinite(number) and number == int(number)


Rule = tuple[str, Callable[[float], bool], str, bool]  # field, test, requirement, must be an integer

RULES: tuple[Rule, ...] = (
    ("seed", lambda v: 0 <= v < 2**32, "an integer in [0, 2^32)", True),
    ("train.tokens", lambda v: v > 0, "a positive integer", True),
    ("train.batch_size", lambda v: v >= 1, "an integer >= 1", True),
    ("train.seq_len", lambda v: v >= 2, "an integer >= 2", True),
    ("train.grad_accum", lambda v: v >= 1, "an integer >= 1", True),
    ("train.val_every", lambda v: v >= 1, "an integer >= 1", True),
    ("train.val_points", lambda v: v >= 1, "an integer >= 1", True),
    ("train.log_every", lambda v: v >= 1, "an integer >= 1", True),
    ("train.val_batch_size", lambda v: v >= 1, "an integer >= 1", True),
    ("optim.lr", lambda v: 0 < v < 10, "a finite number in (0, 10)", False),
    ("optim.eps", lambda v: 0 < v < 1, "a finite number in (0, 1)", False),
    ("optim.weight_decay", lambda v: 0 <= v < 10, "a finite number in [0, 10)", False),
    ("optim.warmup_fraction", lambda v: 0 <= v < 1, "a number in [0, 1)", False),
    ("optim.min_lr_ratio", lambda v: 0 <= v <= 1, "a number in [0, 1]", False),
    ("model.vocab_size", lambda v: v >= 2, "an integer >= 2", True),
    ("model.n_layer", lambda v: v >= 1, "an integer >= 1", True),
    ("model.n_head", lambda v: v >= 1, "an integer >= 1", True),
    ("model.d_model", lambda v: v >= 2, "an integer >= 2", True),
    ("model.d_ff", lambda v: v >= 1, "an integer >= 1", True),
    ("model.max_seq_len", lambda v: v >= 2, "an integer >= 2", True),
    ("model.init_std", lambda v: 0 < v < 10, "a finite number in (0, 10)", False),
    ("model.norm_eps", lambda v: 0 < v < 1, "a finite number in (0, 1)", False),
    ("model.rope_theta", lambda v: v > 0, "a finite positive number", False),
    ("data.val_fraction", lambda v: 0 < v < 1, "a number in (0, 1)", False),
    ("checkpoint.every_steps", lambda v: v >= 0, "an integer >= 0 (0: only on preemption)", True),
    ("checkpoint.keep_every_steps", lambda v: v >= 0, "an integer >= 0 (0: never)", True),
    ("trainer.gradient_clip_val", lambda v: v > 0, "a finite positive number or null", False),
)


def lookup(cfg: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def validate_settings(cfg: Mapping[str, Any]) -> None:
    """Raise ConfigError for the first setting out of range (absent optional settings pass)."""
    for field, test, requirement, integer in RULES:
        present, value = lookup(cfg, field)
        if not present or (value is None and field in _NULLABLE):
            continue
        number = _number(value)
        if number is None or not math.isfinite(number) or (integer and not _integer(value)) or not test(number):
            raise ConfigError(field, f"{value!r} is not {requirement}", f"set {field} to {requirement}")
    for i, beta in enumerate(lookup(cfg, "optim.betas")[1] or []):
        number = _number(beta)
        if number is None or not 0 <= number < 1:
            raise ConfigError(f"optim.betas[{i}]", f"{beta!r} is not in [0, 1)", "use betas like [0.9, 0.95]")
    import signal

    for name in lookup(cfg, "checkpoint.preempt_signals")[1] or []:
        if not isinstance(name, str) or not hasattr(signal, name):
            raise ConfigError("checkpoint.preempt_signals", f"{name!r} is not a signal name",
                              "use names like SIGTERM, SIGUSR1, SIGUSR2")
    present, seq_len = lookup(cfg, "train.seq_len")
    has_max, max_len = lookup(cfg, "model.max_seq_len")
    if present and has_max and int(seq_len) > int(max_len):
        raise ConfigError("train.seq_len", f"{seq_len} exceeds model.max_seq_len={max_len} (the RoPE tables' length)",
                          f"use train.seq_len <= {max_len} or raise model.max_seq_len")


_NULLABLE = {"trainer.gradient_clip_val", "data.val_fraction"}
