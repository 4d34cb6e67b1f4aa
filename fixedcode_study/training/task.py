"""The LightningModule: next-token training of a Decoder with AdamW, warmup + cosine, token budget.

Metrics go to every attached logger with the number of training tokens seen, so curves from runs
with different batch sizes share an x-axis:
  train/loss, train/lr, train/tokens_per_second  (every `log_every` optimizer steps)
  val/loss, val/ppl, val/bpb, val/tokens          (at the validation steps, training/schedule.py;
                                                  val/tokens: the held-out tokens it read, data/batches.py)
  val/loss_select, val/loss_report                (the same, over the even / odd validation windows)
  val/loss@<source>                               (the same, per source, when the data has several)
At the final validation (global step = max_steps) the same per-token sums are also added up per
bucket of each breakdown of breakdown.py (target frequency, input code weight, position), reduced
in one more collective and handed to the job through callback_metrics ("breakdown/*"): results.json
`val_breakdown`, never a curve.
Validation is a token-weighted sum over the whole held-out split, reduced with a sum across ranks
(not a mean of batch means, which would overweight short batches and differ with world size).
The select/report halves split the windows by the parity of their global index (batches.py), so
they are the same windows whatever the world size or batch size: a study that tunes a setting on
val/loss_select can report val/loss_report, a held-out number the choice never saw.
"""

from __future__ import annotations

import math
import time
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F

from ..accounting import optimizer_group_names, optimizer_groups
from ..model import Decoder
from ..spec.parts import OptimSpec
from .breakdown import INPUT, TARGET, LossBreakdown
from .speed import loss_functions

# The reduced bucket sums of the final validation, and the whole's (nats, tokens, bytes) beside them.
BREAKDOWN_SUMS, BREAKDOWN_TOTAL = "breakdown/sums", "breakdown/total"
# Tokens per masked-sum chunk of the breakdown: bounds its (chunk, buckets, 3) float64 temporary.
_BREAKDOWN_CHUNK = 8192


def warmup_cosine(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """LR multiplier: linear warmup to 1, cosine decay to min_ratio at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _group_sums(per_window: torch.Tensor, groups: torch.Tensor, n: int) -> torch.Tensor:
    """(n, k) sums of the (B, k) rows of each group. A masked sum rather than index_add_, whose
    CUDA atomics add in a different order from run to run."""
    onehot = F.one_hot(groups.to(per_window.device), n).to(per_window.dtype)  # (B, n)
    return (onehot.unsqueeze(2) * per_window.unsqueeze(1)).sum(dim=0)


class LanguageModelTask(L.LightningModule):
    def __init__(
        self,
        model: Decoder,
        optim: OptimSpec,
        max_steps: int,
        tokens_per_step: int,
        token_bytes: torch.Tensor,
        log_every: int = 10,
        compiled_loss: bool = False,
        breakdown: LossBreakdown | None = None,
    ):
        super().__init__()
        self.model = model
        # Groups by name, fixed now: a strategy may wrap and flatten the parameters before the
        # optimizer is built (FSDP), after which a matrix no longer looks like one.
        self._group_names = optimizer_group_names(model)
        self.optim = optim
        self.max_steps = max_steps
        self.tokens_per_step = tokens_per_step  # global: micro-batch x accumulation x world size
        self.log_every = log_every
        # Same arithmetic either way (fp32 cross-entropy); compiled, the log-softmax fuses (speed.py).
        self._mean_nll, self._token_nll = loss_functions(compiled_loss)
        # UTF-8 bytes per token id, for bits-per-byte; a buffer so it follows the model's device.
        self.register_buffer("token_bytes", token_bytes.to(torch.float64), persistent=False)
        # The bucket of each token id (position) per breakdown, built once per job. int32: half of
        # int64 (DDP broadcasts buffers with every forward), and a type gloo broadcasts (int16 is not).
        # Not in any checkpoint.
        self.breakdown = breakdown
        for b in (breakdown.breakdowns if breakdown else []):
            self.register_buffer(f"bucket_{b.name}", torch.from_numpy(b.table.astype("int32")), persistent=False)
        self._bucket_sums: torch.Tensor | None = None
        # False for a validation that only adds the breakdown to numbers already logged (job.py)
        self.log_validation = True
        self.last_val: dict[str, float] = {}
        self.last_val_step = -1
        self._val_sums: torch.Tensor | None = None
        self._val_sources: list[str] = []
        self._train_time = 0.0
        self._t_batch = 0.0
        self._window_loss = torch.zeros(())
        self._window_n = 0
        self._last_logged_step = -1

    # -- helpers -----------------------------------------------------------------------------
    @property
    def tokens_seen(self) -> int:
        return self.global_step * self.tokens_per_step

    def _emit(self, metrics: dict[str, float]) -> None:
        """Send metrics to every logger with tokens as the shared x-axis (rank 0 only)."""
        if self.trainer.is_global_zero:
            payload = {**metrics, "tokens": float(self.tokens_seen)}
            for logger in self.loggers:
                logger.log_metrics(payload, step=self.global_step)

    # -- training ----------------------------------------------------------------------------
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self._t_batch = time.perf_counter()

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        x, y = batch[:, :-1], batch[:, 1:]  # (B, T) each
        if self.model.head.teacher_forced:  # the bit chain walks the target's path: no (B, T, V) logits
            loss = self.model(x, y).mean()
        else:
            logits = self.model(x)  # (B, T, V)
            loss = self._mean_nll(logits, y)
        # Summed as a tensor: no host sync per step; .item() only when logging.
        self._window_loss = self._window_loss.to(loss.device) + loss.detach().float()
        self._window_n += 1
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._train_time += time.perf_counter() - self._t_batch
        step = self.global_step  # already advanced past the optimizer step that just ran
        due = step % self.log_every == 0 or step == self.max_steps
        # With gradient accumulation several micro-batches share one global step: log once, at
        # the micro-batch whose optimizer step completed it (step 0 is never a completed step).
        if self._window_n and due and step > 0 and step != self._last_logged_step:
            self._last_logged_step = step
            # Mean over ranks too, so the curve is the global batch's loss whatever the world size.
            window_sum = self.trainer.strategy.reduce(self._window_loss, reduce_op="sum")
            self._emit({
                "train/loss": window_sum.item() / (self._window_n * self.trainer.world_size),
                "train/lr": self.trainer.optimizers[0].param_groups[0]["lr"],
                "train/tokens_per_second": self.tokens_seen / max(self._train_time, 1e-9),
            })
            self._window_loss, self._window_n = torch.zeros(()), 0

    @property
    def train_seconds(self) -> float:
        return self._train_time

    # -- resume ------------------------------------------------------------------------------
    # Host-side counters travel in the checkpoint so a resumed run logs exactly what an
    # uninterrupted one would: the partial train/loss window, and train time that accumulates
    # across attempts (tokens_seen follows from the restored global_step).
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["task_state"] = {
            "train_seconds": self._train_time,
            "window_loss": self._window_loss.detach().cpu(),
            "window_n": self._window_n,
            "last_logged_step": self._last_logged_step,
            "last_val": dict(self.last_val),
            "last_val_step": self.last_val_step,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint["task_state"]
        self._train_time = float(state["train_seconds"])
        self._window_loss, self._window_n = state["window_loss"].clone(), int(state["window_n"])
        self._last_logged_step = int(state["last_logged_step"])
        self.last_val, self.last_val_step = dict(state["last_val"]), int(state["last_val_step"])

    # -- validation --------------------------------------------------------------------------
    def _val_source_names(self) -> list[str]:
        datamodule = getattr(self.trainer, "datamodule", None)
        return list(getattr(datamodule, "val_sources", None) or [])

    def on_validation_epoch_start(self) -> None:
        # Rows of (nll, tokens, bytes) sums: 0 all windows, 1 even ("select"), 2 odd ("report"),
        # 3.. one per source when there are several. One tensor, so one collective reduces them all.
        names = self._val_source_names()
        self._val_sources = names if len(names) > 1 else []
        self._val_sums = torch.zeros(3 + len(self._val_sources), 3, dtype=torch.float64, device=self.device)
        final = self.global_step >= self.max_steps and not self.trainer.sanity_checking
        self._bucket_sums = (torch.zeros(self.breakdown.n_rows, 3, dtype=torch.float64, device=self.device)
                             if final and self.breakdown is not None else None)

    def validation_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        # (B, T+1), (B,): weight 0 marks a rank's padding window; global window index and source label (B,)
        windows, weight, index, source = batch
        x, y = windows[:, :-1], windows[:, 1:]
        if self.model.head.teacher_forced:
            nll = self.model(x, y)  # (B, T) fp32
        else:
            nll = self._token_nll(self.model(x), y)  # (B, T) fp32
        w = weight.to(torch.float64)
        terms = (nll.double().sum(dim=1) * w, w * y.shape[1], self.token_bytes[y].sum(dim=1) * w)  # (B,) each
        # Row 0 is summed exactly as it always was (a sum of each contiguous (B,) term, then onto
        # the running sum): summing a strided or 2-D view may add in another order and move
        # val/loss in the last bit. The group rows add up the same per-window terms.
        self._val_sums[0] += torch.stack([t.sum() for t in terms])
        per_window = torch.stack(terms, dim=1)  # (B, 3)
        self._val_sums[1:3] += _group_sums(per_window, index % 2, 2)
        if self._val_sources:
            self._val_sums[3:] += _group_sums(per_window, source, len(self._val_sources))
        if self._bucket_sums is not None:
            self._add_breakdown(x, y, nll, w)

    def _add_breakdown(self, x: torch.Tensor, y: torch.Tensor, nll: torch.Tensor, w: torch.Tensor) -> None:
        """Per-token (nll, 1, bytes) * window weight, added to the bucket rows of every breakdown."""
        wt = w.unsqueeze(1).expand_as(nll)  # (B, T) float64
        values = torch.stack((nll.double() * wt, wt, self.token_bytes[y] * wt), dim=-1).reshape(-1, 3)  # (B*T, 3)
        positions = torch.arange(y.shape[1], device=y.device).expand_as(y)  # (B, T)
        for b, start in zip(self.breakdown.breakdowns, self.breakdown.offsets()):
            source = y if b.of == TARGET else x if b.of == INPUT else positions
            ids = getattr(self, f"bucket_{b.name}")[source].reshape(-1).long()  # (B*T,)
            for lo in range(0, ids.numel(), _BREAKDOWN_CHUNK):
                hi = lo + _BREAKDOWN_CHUNK
                self._bucket_sums[start : start + b.n] += _group_sums(values[lo:hi], ids[lo:hi], b.n)

    def on_validation_epoch_end(self) -> None:
        sums = self.trainer.strategy.reduce(self._val_sums, reduce_op="sum")
        nll, n_tokens, n_bytes = (float(v) for v in sums[0])
        loss = nll / n_tokens
        self.last_val = {
            "val/loss": loss,
            "val/ppl": math.exp(loss),
            "val/bpb": nll / math.log(2) / max(n_bytes, 1.0),
            "val/tokens": n_tokens,
        }
        groups = [("val/loss_select", sums[1]), ("val/loss_report", sums[2])]
        groups += [(f"val/loss@{name}", row) for name, row in zip(self._val_sources, sums[3:])]
        for key, row in groups:
            if float(row[1]) > 0:  # a half or source with no whole window has no loss to report
                self.last_val[key] = float(row[0]) / float(row[1])
        self.last_val_step = self.global_step
        if self._bucket_sums is not None:  # the final validation: one more collective, once per job
            buckets = self.trainer.strategy.reduce(self._bucket_sums, reduce_op="sum")
            self.trainer.callback_metrics[BREAKDOWN_SUMS] = buckets.detach().cpu()
            self.trainer.callback_metrics[BREAKDOWN_TOTAL] = sums[0].detach().cpu()
            self._bucket_sums = None
        if not self.trainer.sanity_checking and self.log_validation:
            self._emit(dict(self.last_val))  # val/tokens too: an early validation reads a subset
            self.publish_summary()

    def on_train_end(self) -> None:
        self.publish_summary()

    def publish_summary(self) -> None:
        """Put the numbers results.json needs into trainer.callback_metrics ("summary/*").

        That dict is what Lightning carries back from worker processes (ddp_spawn), so the caller
        reads one place whichever strategy ran the loop.
        """
        values = {"global_step": self.global_step, "train_seconds": self._train_time,
                  "last_val_step": self.last_val_step,
                  **{k.replace("/", "_"): v for k, v in self.last_val.items()}}
        for key, value in values.items():
            self.trainer.callback_metrics[f"summary/{key}"] = torch.tensor(float(value), dtype=torch.float64)

    # -- optimisation ------------------------------------------------------------------------
    def param_groups(self) -> list[dict[str, Any]]:
        """AdamW groups (accounting.optimizer_groups: the one rule for every model)."""
        return optimizer_groups(self.model, self.optim.groups_settings(), self._group_names)

    def configure_optimizers(self):
        optim = self.optim
        # foreach: multi-tensor ops over each group. On CPU torch's default is the per-tensor Python
        # loop, ~10% of a cpu_tiny step (profiled). (fused=True is refused by Lightning's mixed
        # precision plugin together with gradient clipping.)
        opt = torch.optim.AdamW(
            self.param_groups(), lr=float(optim.lr), betas=tuple(optim.betas), eps=float(optim.eps), foreach=True,
        )
        warmup = max(1, int(round(float(optim.warmup_fraction) * self.max_steps)))
        min_ratio = float(optim.min_lr_ratio)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: warmup_cosine(s, self.max_steps, warmup, min_ratio)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
