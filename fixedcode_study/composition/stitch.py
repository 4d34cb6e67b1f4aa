"""Model stitching (Bansal, Nakkiran & Barak 2021, arXiv 2106.07682): a's bottom feeding b's top.

    stitched = Stitched(a, b, k, stitch)   # blocks 0..k-1 of a, the stitch, blocks k.. of b, b's norm and head
    record = stitch_record(pair, held_out, settings, own)

k runs over 0..n_layer: k = 0 feeds a's input (its embedding or fixed code) to all of b's blocks;
k = n_layer feeds a's whole body (before a's final norm) to b's final norm and head. Two stitches:
  identity  nothing between the two halves: do a's hidden states mean to b what b's own would?
  affine    h -> W h + b, starting at W = I, b = 0, trained on the members' training split with
            everything else frozen: how far is a's representation from b's up to an affine map?
            AdamW (lr stitch_lr, the members' betas and eps, no weight decay: it would pull W
            towards 0, away from the identity), constant lr, gradient norm clipped at 1 as the
            members trained, in fp32, for stitch_tokens tokens in batches of stitch_batch_size
            windows drawn as training draws them (data/batches.py) from `seed`, the same batches
            for every k. The loss is training's own (LanguageModelTask.training_step).
Each stitched model's loss comes with each member's own (`minus_a`, `minus_b`: the stitched val_loss
minus the member's; 0 is a stitch that costs nothing). A stitch of a model with itself through the
identity is that model, bit for bit, at every k (the forward below is Decoder.features' own steps).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch
from torch import nn

from ..data.batches import TokenDataModule
from ..model import Decoder
from ..training.task import LanguageModelTask
from .pair import Pair
from .settings import STITCH_GRAD_CLIP, ComposeSettings
from .validation import HeldOut, validate

KINDS = ("identity", "affine")


class AffineStitch(nn.Module):
    """h -> W h + b over d_model, initialised at the identity (W = I, b = 0)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.linear = nn.Linear(d_model, d_model, bias=True)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(d_model))
            self.linear.bias.zero_()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear(h)

    def distance_from_identity(self) -> dict[str, float]:
        """||W - I||_F / ||I||_F and ||b|| / sqrt(d): how far training moved it."""
        w, b = self.linear.weight.detach().float(), self.linear.bias.detach().float()
        d = w.shape[0]
        eye = torch.eye(d, device=w.device)
        return {"weight_rel_change": float((w - eye).norm() / math.sqrt(d)), "bias_rms": float(b.norm() / math.sqrt(d))}


class Stitched(nn.Module):
    """Blocks 0..k-1 of `a`, `stitch`, blocks k..n_layer-1 of `b`, then b's final norm and head."""

    def __init__(self, a: Decoder, b: Decoder, k: int, stitch: nn.Module):
        super().__init__()
        if not 0 <= k <= a.config.n_layer:
            raise ValueError(f"k={k} is outside 0..{a.config.n_layer}")
        self.a, self.b, self.k, self.stitch = a, b, k, stitch
        self.head = b.head  # validation asks the head whether it is teacher-forced

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        # Decoder.features' steps, with the body split at k: the same casts, rotary tables and blocks.
        T = idx.shape[1]
        x = self.a.input(idx).to(self.a.norm.weight.dtype)  # (B, T, d)
        cos, sin = self.a.rope_cos[:T].to(x.dtype), self.a.rope_sin[:T].to(x.dtype)
        for block in self.a.blocks[: self.k]:
            x = block(x, cos, sin)
        x = self.stitch(x)
        for block in self.b.blocks[self.k :]:
            x = block(x, cos, sin)
        return self.b.norm(x)  # (B, T, d)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """As Decoder.forward: logits (B, T, V), or with targets a teacher-forced head's NLL (B, T)."""
        h = self.features(idx)
        return self.b.head(h) if targets is None else self.b.head.nll(h, targets)


@contextmanager
def frozen(*modules: nn.Module) -> Iterator[None]:
    """Parameters of these modules take no gradient inside; their flags are restored after."""
    params = [p for m in modules for p in m.parameters()]
    saved = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, saved):
            p.requires_grad_(flag)


def train_stitch(stitched: Stitched, held_out: HeldOut, settings: ComposeSettings) -> dict[str, Any]:
    """Train stitched.stitch alone (module docstring); returns what the record says of its training."""
    seq_len, batch = held_out.seq_len, settings.stitch_batch_size
    steps = -(-settings.stitch_tokens // (seq_len * batch))
    # The training split's batches, drawn as a job draws them (a job's data module, seeded here).
    data = TokenDataModule(held_out.prepared, seq_len, batch, seed=settings.seed)
    data.setup("fit")
    batches = iter(data.train_set)
    vocab = stitched.b.config.vocab_size
    task = LanguageModelTask(stitched, held_out.optim, max_steps=steps, tokens_per_step=seq_len * batch,
                             token_bytes=torch.ones(vocab))  # the training loss; bytes only feed validation
    params = list(stitched.stitch.parameters())
    optim = held_out.optim
    opt = torch.optim.AdamW(params, lr=settings.stitch_lr, betas=tuple(optim.betas), eps=float(optim.eps),
                            weight_decay=0.0, foreach=True)
    device = held_out.device
    stitched.to(device).eval()  # eval: the members' modules as validation runs them (no dropout either way)
    losses = []
    with frozen(stitched.a, stitched.b):
        for step in range(steps):
            loss = task.training_step(next(batches).to(device), step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, STITCH_GRAD_CLIP)
            opt.step()
            losses.append(float(loss.detach()))
    return {"steps": steps, "tokens": steps * seq_len * batch, "first_train_loss": losses[0] if losses else None,
            "last_train_loss": losses[-1] if losses else None, **stitched.stitch.distance_from_identity()}


def stitch_record(pair: Pair, held_out: HeldOut, settings: ComposeSettings,
                  own: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """compose.json `stitch`: for each kind, one entry per k (val numbers, minus each member's own)."""
    a, b = pair.a.model, pair.b.model
    kinds = KINDS if settings.stitch_tokens > 0 else ("identity",)
    record: dict[str, Any] = {"direction": "a -> b", "ks": list(range(a.config.n_layer + 1))}
    for kind in kinds:
        rows = []
        for k in record["ks"]:
            stitch = nn.Identity() if kind == "identity" else AffineStitch(a.config.d_model)
            stitched = Stitched(a, b, k, stitch)
            row: dict[str, Any] = {"k": k}
            if kind == "affine":
                row["training"] = train_stitch(stitched, held_out, settings)
            numbers = validate(stitched, held_out)
            row.update(numbers, minus_a=numbers["val_loss"] - own["a"]["val_loss"],
                       minus_b=numbers["val_loss"] - own["b"]["val_loss"])
            rows.append(row)
        record[kind] = rows
    return record
