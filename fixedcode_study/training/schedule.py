"""The callback that makes Lightning validate at the steps of the job's validation schedule.

The schedule itself (which optimizer steps) is decided with the rest of the job's spec
(spec/schedule.py). Lightning can only validate at a fixed cadence of micro-batches
(`val_check_interval`), checked as `(micro-batches done) % trainer.val_check_batch == 0`.
`ValidationSchedule` re-aims that number after every micro-batch at the next scheduled step: with
val_check_batch = n x grad_accum the test first holds at the last micro-batch of optimizer step n.
So validation runs exactly at the scheduled steps, inside Lightning's own loop (same hooks, same
point relative to logging and to the checkpoint taken at the next step's first micro-batch), and a
skipped step costs one integer comparison. Nothing of it is state: after a resume the next
scheduled step follows from global_step.

It also tells the data module what a validation about to run reads: an early one (before the last
step) the early subset of `train.val_early_tokens`, the final one (and any validation after the
fit) every window (data/batches.py). That choice has to be made here, before Lightning's loop
creates the validation iterator, which happens before any validation hook runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import lightning as L

from ..spec.schedule import SCHEDULES, every_steps, validation_schedule, validation_steps

__all__ = ["SCHEDULES", "ValidationSchedule", "every_steps", "validation_schedule", "validation_steps"]


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
        if n == trainer.global_step:
            _validation_reads(trainer, final=n >= trainer.max_steps)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.check_val_every_n_epoch is not None:
            raise ValueError("ValidationSchedule needs Trainer(check_val_every_n_epoch=None): it counts micro-batches over the whole run")
        self._aim(trainer)  # after the fit loop set val_check_batch from val_check_interval

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._aim(trainer)  # runs before Lightning decides whether to validate after this micro-batch

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        _validation_reads(trainer, final=True)  # a validation after the fit is a final one


def _validation_reads(trainer: L.Trainer, final: bool) -> None:
    reads = getattr(trainer.datamodule, "validation_reads", None)
    if reads is not None:
        reads(final)
