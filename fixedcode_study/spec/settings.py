"""The range of every numeric setting of a job, checked before any work starts: one line naming the field.

A NaN learning rate trains a model of NaNs for an hour; a negative one trains backwards; a
`train.seq_len` above `model.max_seq_len` used to surface as a confusing data-split error. Each
rule below is (field, test, what the value must be); the spec that holds a field applies its rule
where it is built (`check` in the `__post_init__` of spec/parts.py's specs, `check_group` for the
model preset). Model shapes are checked by ModelConfig.validate, the batch arithmetic by
spec/plan.plan_batch and files by the code that opens them (data/prepare.py, record/checkpoint.py).
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
    ("train.global_batch_tokens", lambda v: v >= 1, "a positive integer or null", True),
    ("train.val_every", lambda v: v >= 1, "an integer >= 1", True),
    ("train.val_points", lambda v: v >= 1, "an integer >= 1", True),
    ("train.val_early_tokens", lambda v: v >= 1, "a positive integer or null (every window)", True),
    ("train.log_every", lambda v: v >= 1, "an integer >= 1", True),
    ("train.val_batch_size", lambda v: v >= 1, "an integer >= 1", True),
    ("train.heldout_fraction", lambda v: 0 < v < 1, "a share in (0, 1) such as 0.05, or null (no held-out tokens)", False),
    ("train.heldout_seed", lambda v: 0 <= v < 2**32, "an integer in [0, 2^32)", True),
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


def check(field: str, value: Any) -> None:
    """Raise ConfigError when `value` breaks the rule of `field` (RULES); None passes for nullable fields."""
    _, test, requirement, integer = _BY_FIELD[field]
    if value is None and field in _NULLABLE:
        return
    number = _number(value)
    if number is None or not math.isfinite(number) or (integer and not _integer(value)) or not test(number):
        raise ConfigError(field, f"{value!r} is not {requirement}", f"set {field} to {requirement}")


def check_group(group: str, values: Mapping[str, Any]) -> None:
    """Every rule of `group` (model, train, ...) on the keys `values` has (absent optional keys pass)."""
    for field, *_ in RULES:
        prefix, _, key = field.partition(".")
        if prefix == group and key in values:
            check(field, values[key])


def check_betas(betas: Any) -> None:
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise ConfigError("optim.betas", f"{betas!r} is not two numbers", "use betas like [0.9, 0.95]")
    for i, beta in enumerate(betas):
        number = _number(beta)
        if number is None or not 0 <= number < 1:
            raise ConfigError(f"optim.betas[{i}]", f"{beta!r} is not in [0, 1)", "use betas like [0.9, 0.95]")


def check_signals(names: Any) -> None:
    import signal

    for name in names or []:
        if not isinstance(name, str) or not hasattr(signal, name):
            raise ConfigError("checkpoint.preempt_signals", f"{name!r} is not a signal name",
                              "use names like SIGTERM, SIGUSR1, SIGUSR2")


def check_seq_len(seq_len: int, max_seq_len: int) -> None:
    if int(seq_len) > int(max_seq_len):
        raise ConfigError("train.seq_len", f"{seq_len} exceeds model.max_seq_len={max_seq_len} (the RoPE tables' length)",
                          f"use train.seq_len <= {max_seq_len} or raise model.max_seq_len")


_BY_FIELD = {rule[0]: rule for rule in RULES}
_NULLABLE = {"trainer.gradient_clip_val", "data.val_fraction", "train.global_batch_tokens", "train.val_early_tokens",
             "train.heldout_fraction"}
