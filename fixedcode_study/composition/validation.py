"""A model's held-out loss and bits per byte, computed exactly as a job's final validation computes them.

    held_out = HeldOut.of(pair, settings)
    validate(model, held_out)   # {"val_loss", "val_ppl", "val_bpb", "val_tokens", "val_loss_select", "val_loss_report"}

`model` is anything LanguageModelTask validates: a module whose `forward(idx)` returns (B, T, V)
logits, or with targets a per-token NLL when `model.head.teacher_forced` says so (model.Decoder,
and the ensembles, stitched and interpolated models of this package). There is no second loss
definition here: the numbers come from training/task.py's own validation step and epoch end
(token-weighted NLL sums in float64, bits per byte from the corpus's bytes per token), run by a
Lightning Trainer.validate over data/batches.py's ValidationWindows of the members' prepared corpus
(every non-overlapping window of the held-out split, as the final validation reads it), with the
members' seq_len, validation batch size and trainer precision. So a member validated here gives
its job's results.json `final.val_loss` bit for bit on CPU at the job's thread count, when the job
was not compiled (a compiled job's kernels move the last bits; tests/composition/test_compose.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch import nn

from ..console import quiet_lightning
from ..data.batches import TokenDataModule
from ..data.prepare import PreparedData, prepare
from ..errors import ConfigError
from ..spec import OptimSpec
from ..training.task import LanguageModelTask
from .pair import Pair
from .settings import ComposeSettings


@dataclass(frozen=True)
class HeldOut:
    """The members' held-out split and how their final validation read it."""

    prepared: PreparedData
    seq_len: int
    val_batch_size: int
    precision: str
    accelerator: str
    optim: OptimSpec  # LanguageModelTask's constructor takes one; validation never reads it

    @classmethod
    def of(cls, pair: Pair, settings: ComposeSettings) -> "HeldOut":
        a, b = pair.members
        precisions = {m.spec.trainer.precision for m in pair.members}
        if settings.precision is None and len(precisions) > 1:
            raise ConfigError("precision", f"a trained in {a.spec.trainer.precision}, b in {b.spec.trainer.precision}",
                              "pass precision=<one Lightning precision for both, e.g. 32-true>")
        prepared = prepare(a.spec.data.settings, progress=False)  # training's own call: the same cache
        key = a.checkpoint.data.get("cache_key")
        if prepared.meta.get("cache_key") != key:
            raise ConfigError("data", f"the members' data settings prepare cache {prepared.meta.get('cache_key')} "
                              f"here, not the {key} they trained on (a corpus or tokenizer changed)",
                              "restore the corpus the members trained on")
        return cls(prepared, a.spec.plan.seq_len, a.spec.train.val_batch_size,
                   settings.precision or a.spec.trainer.precision, settings.accelerator, a.spec.optim)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda" if self.accelerator == "gpu" else "cpu")

    def record(self) -> dict[str, Any]:
        """compose.json `held_out`: what every loss in the record was computed over."""
        meta = self.prepared.meta
        return {"cache_key": meta.get("cache_key"), "val_tokens_in_split": meta.get("val_tokens"), "seq_len": self.seq_len,
                "val_batch_size": self.val_batch_size, "precision": self.precision, "accelerator": self.accelerator, "threads": torch.get_num_threads()}


def validate(model: nn.Module, held_out: HeldOut) -> dict[str, float]:
    """The final validation's numbers for `model` (results.json `final`'s keys)."""
    task = LanguageModelTask(model, held_out.optim, max_steps=1, tokens_per_step=held_out.seq_len,
                             token_bytes=torch.from_numpy(held_out.prepared.token_bytes()))
    task.log_validation = False  # no logger: the numbers are read from task.last_val
    data = TokenDataModule(held_out.prepared, held_out.seq_len, held_out.val_batch_size, seed=0,
                           val_batch_size=held_out.val_batch_size)
    with quiet_lightning():
        trainer = L.Trainer(accelerator=held_out.accelerator, devices=1, precision=held_out.precision, logger=False,
                            enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                            use_distributed_sampler=False)  # the windows are the split's own (as in training)
        trainer.validate(task, datamodule=data, verbose=False)
    numbers = {key.replace("/", "_"): value for key, value in task.last_val.items()}
    return {**numbers, "val_tokens": int(numbers["val_tokens"])}  # a count, as results.json `final` has it
