"""What an adapting model is measured on: the original held-out split, where H occurs.

    windows = measure_windows(prepared, seq_len, val_tokens)   # fixed for the whole adaptation
    measure(model, windows, held)    # {"heldout_loss", "after_heldout_loss", "other_loss", "loss", "heldout_mass", "counts"}

Over non-overlapping (T+1)-token windows of the held-out split (as validation reads them; with
val_tokens, that many tokens' worth of windows spread evenly over the split), each predicted
position t -> t+1 falls in one bucket by whether its input x_t and its target x_{t+1} are in H:
  heldout_loss        mean NLL (nats) where the target is in H: can the model predict a new token?
  after_heldout_loss  mean NLL where the input is in H and the target is not: can it read one?
  other_loss          mean NLL where neither is: what it knew before (a rise is forgetting);
  loss                mean NLL over every position;
  heldout_mass        the mean over every position of the probability on all of H together (at
                      step 0: how much mass the new head rows take before any update).
In fp32, sums in float64, windows in a fixed order: the same model gives the same numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..data.prepare import PreparedData

BATCH = 16  # windows per forward


def measure_windows(prepared: PreparedData, seq_len: int, val_tokens: int) -> torch.Tensor:
    """(n, T+1) windows of the held-out split: every one (val_tokens 0), else ceil(val_tokens / T)
    of them at evenly spaced window indices."""
    tokens = np.asarray(prepared.tokens("val"))
    n = (tokens.size - 1) // seq_len
    chosen = np.arange(n)
    if val_tokens and -(-val_tokens // seq_len) < n:
        chosen = np.unique(np.linspace(0, n - 1, -(-val_tokens // seq_len)).round().astype(np.int64))
    rows = [tokens[i * seq_len: i * seq_len + seq_len + 1].astype(np.int64) for i in chosen]
    return torch.from_numpy(np.stack(rows))


@torch.no_grad()
def measure(model: torch.nn.Module, windows: torch.Tensor, held: torch.Tensor) -> dict[str, Any]:
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    sums = {k: 0.0 for k in ("heldout", "after_heldout", "other", "all", "mass")}
    counts = {k: 0 for k in ("heldout", "after_heldout", "other", "all")}
    held = held.to(device)
    for start in range(0, windows.shape[0], BATCH):
        batch = windows[start: start + BATCH].to(device)
        x, y = batch[:, :-1], batch[:, 1:]
        logp = torch.log_softmax(model(x).float(), dim=-1)          # (B, T, V)
        nll = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1).double()  # (B, T)
        target_h, input_h = torch.isin(y, held), torch.isin(x, held)
        buckets = {"heldout": target_h, "after_heldout": input_h & ~target_h, "other": ~input_h & ~target_h,
                   "all": torch.ones_like(target_h)}
        for name, mask in buckets.items():
            sums[name] += float(nll[mask].sum())
            counts[name] += int(mask.sum())
        sums["mass"] += float(logp[..., held].exp().double().sum(dim=-1).sum())
    model.train(was_training)
    mean = {name: (sums[name] / counts[name] if counts[name] else math.nan) for name in counts}
    return {"heldout_loss": mean["heldout"], "after_heldout_loss": mean["after_heldout"], "other_loss": mean["other"],
            "loss": mean["all"], "heldout_mass": sums["mass"] / counts["all"], "counts": counts}
