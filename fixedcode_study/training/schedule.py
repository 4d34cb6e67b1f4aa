"""When validation runs: a fixed list of optimizer steps, and the callback that triggers it.

Curves are read on a log-tokens axis, where a fixed cadence (`train.val_every`) puts almost all
points at the end: 2^19 tokens in 256 steps validated every 64 steps gives 4 points, none in the
first quarter of training. `train.val_schedule: log` spaces `train.val_points` validations
geometrically from step 1 to the last step instead (dense early, sparse late);
`train.val_schedule: every` keeps the fixed cadence. Both always end on the last step, so a job's
final numbers come from a validation inside the fit.

The schedule is a pure function of (max_steps, settings), computed in exact integer arithmetic, so
every rank of a ddp/fsdp job derives the same list without talking to the others, and a resumed
job the same list as the attempt it continues.

Lightning can only validate at a fixed cadence of micro-batches (`val_check_interval`), checked
as `(micro-batches done) % trainer.val_check_batch == 0`. `ValidationSchedule` re-aims that number
after every micro-batch at the next scheduled step: with val_check_batch = n x grad_accum the test
first holds at the last micro-batch of optimizer step n. So validation runs exactly at the
scheduled steps, inside Lightning's own loop (same hooks, same point relative to logging and to
the checkpoint taken at the next step's first micro-batch), and a skipped step costs one integer
comparison. Nothing of it is state: after a resume the next scheduled step follows from global_step.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import lightning as L

from ..errors import ConfigError

SCHEDULES = ("log", "every")


def _floor_root(value: int, k: int, lo: int, hi: int) -> int:
    """The largest n in [lo, hi] with n**k <= value (given lo**k <= value), exactly.

    A float estimate, then integer comparisons: the answer never depends on float rounding,
    only the number of correcting steps does.
    """
    n = min(hi, max(lo, int(math.exp(math.log(value) / k))))
    while n > lo and n**k > value:
        n -= 1
    while n < hi and (n + 1) ** k <= value:
        n += 1
    return n


def validation_steps(max_steps: int, points: int, first: int = 1) -> list[int]:
    """`points` optimizer steps from `first` to `max_steps`, geometrically spaced, strictly increasing.

    Each next step is the geometric interpolation from the current one to max_steps over the
    points still to place, rounded to the nearest integer in log space, but at least one step on:
    early on, where the ideal spacing is below one step, consecutive steps are taken, and the ratio
    of the rest adapts so that exactly `points` steps come out (all steps when there are fewer).
    The last is always max_steps. Integer arithmetic only: identical on every machine and rank.
    """
    max_steps, points, first = int(max_steps), int(points), int(first)
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    first = min(max(1, first), max_steps)
    if points >= max_steps - first + 1:
        return list(range(first, max_steps + 1))
    if points == 1:
        return [max_steps]
    steps = [first]
    while len(steps) < points:
        left = points - len(steps)  # still to place, the last of them being max_steps
        s = steps[-1]
        # ideal = s * (max_steps / s) ** (1 / left); ideal ** left = s ** (left - 1) * max_steps exactly
        target = s ** (left - 1) * max_steps
        lower = _floor_root(target, left, s, max_steps)
        upper = lower + 1
        # nearest in log space: upper iff ideal >= sqrt(lower * upper) iff target^2 >= (lower*upper)^left
        nearest = upper if lower**left != target and target * target >= (lower * upper) ** left else lower
        # at least one step on, and room left for the remaining points below max_steps
        steps.append(min(max(s + 1, nearest), max_steps - (left - 1)))
    return steps


def every_steps(max_steps: int, every: int) -> list[int]:
    """Every `every`-th optimizer step, and the last one."""
    return sorted(set(range(int(every), int(max_steps) + 1, int(every))) | {int(max_steps)})


def validation_schedule(train: Mapping[str, Any], max_steps: int) -> list[int]:
    """The validation steps of a job from its `train` settings (`val_schedule`, `val_points`, `val_every`).

    A config without `val_schedule` (composed before it existed) keeps the fixed cadence it meant.
    """
    kind = str(train.get("val_schedule") or "every")
    if kind == "log":
        points = int(train.get("val_points") or 0)
        if points < 1:
            raise ConfigError("train.val_points", f"{points} is below 1", "use the number of validations wanted, e.g. 16")
        return validation_steps(max_steps, points)
    if kind == "every":
        every = int(train.get("val_every") or 0)
        if every < 1:
            raise ConfigError("train.val_every", f"{every} is below 1", "use a positive number of optimizer steps")
        return every_steps(max_steps, every)
    raise ConfigError("train.val_schedule", f"unknown schedule {kind!r}", f"use one of {', '.join(SCHEDULES)}")


class ValidationSchedule(L.Callback):
    """Makes Lightning validate at exactly the given optimizer steps (see the module docstring).

    The Trainer must count validation intervals over the whole run (check_val_every_n_epoch=None)
    with an integer val_check_interval; its value only matters until the first hook below runs.
    """

    def __init__(self, steps: Sequence[int], grad_accum: int):
        self.steps = sorted({int(s) for s in steps})
        if not self.steps or self.steps[0] < 1:
            raise ValueError(f"validation steps must be positive optimizer steps, got {list(steps)[:5]}")
        self.grad_accum = int(grad_accum)

    def next_step(self, step: int) -> int | None:
        """The first scheduled step >= step (None once the schedule is done)."""
        i = bisect.bisect_left(self.steps, step)
        return self.steps[i] if i < len(self.steps) else None

    def _aim(self, trainer: L.Trainer) -> None:
        # global_step counts completed optimizer steps. If it is a scheduled step, this is the
        # micro-batch that completed it and validation must run now: (micro-batches done) equals
        # n x grad_accum exactly here. Otherwise the next scheduled step is further on, and no
        # micro-batch before it is a multiple of n x grad_accum.
        n = self.next_step(trainer.global_step)
        trainer.val_check_batch = n * self.grad_accum if n is not None else float("inf")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.check_val_every_n_epoch is not None:
            raise ValueError("ValidationSchedule needs Trainer(check_val_every_n_epoch=None): it counts micro-batches over the whole run")
        self._aim(trainer)  # after the fit loop set val_check_batch from val_check_interval

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._aim(trainer)  # runs before Lightning decides whether to validate after this micro-batch
