"""The two-model ensemble: its held-out loss and its gain over the better member.

    record = ensemble_record(pair, held_out, own)   # own: each member's validate() numbers

The primary rule is the issue's: average the two models' logits, z = (z_a + z_b) / 2, and take its
softmax. Averaging log-probabilities instead gives the same distribution (log_softmax(z) differs
from z by one constant per position, which the softmax removes), so it is not computed twice. Beside
it the probability mixture, p = (p_a + p_b) / 2, the classical ensemble of probabilistic models,
which can only gain on the better member where the two disagree.
`gain_over_better` is the better member's val_loss minus the ensemble's (positive: the ensemble is
better), in nats per token like the losses. The logits are averaged in float32 whatever the
precision, so an ensemble of a model with itself is that model, bit for bit.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ..model import Decoder
from .pair import Pair
from .validation import HeldOut, validate


class LogitsHead:
    """What LanguageModelTask asks of a model's head: whether it scores by teacher forcing. An
    ensemble forms (B, T, V) logits whatever its members' heads (a bit chain's logits are its
    log-probabilities, model.Decoder.forward)."""

    teacher_forced = False


def mean_logits(za: torch.Tensor, zb: torch.Tensor) -> torch.Tensor:
    return (za.float() + zb.float()) / 2


def probability_mixture(za: torch.Tensor, zb: torch.Tensor) -> torch.Tensor:
    """log((p_a + p_b) / 2) as logits (already normalised)."""
    return torch.logaddexp(F.log_softmax(za.float(), dim=-1), F.log_softmax(zb.float(), dim=-1)) - math.log(2.0)


RULES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "logits": mean_logits,              # the primary: the logit-averaged ensemble
    "probabilities": probability_mixture,
}


class Ensemble(nn.Module):
    """Two models' logits combined by one rule: a model validation reads like any other."""

    def __init__(self, a: Decoder, b: Decoder, rule: str):
        super().__init__()
        self.a, self.b, self.rule = a, b, rule
        self.head = LogitsHead()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return RULES[self.rule](self.a(idx), self.b(idx))  # (B, T, V)


def ensemble_record(pair: Pair, held_out: HeldOut, own: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """compose.json `ensemble`: per rule its validation numbers and gain over the better member."""
    better = min(("a", "b"), key=lambda role: own[role]["val_loss"])
    record: dict[str, Any] = {"primary": "logits", "better_member": better}
    for rule in RULES:
        numbers = validate(Ensemble(pair.a.model, pair.b.model, rule), held_out)
        record[rule] = {**numbers, "gain_over_better": own[better]["val_loss"] - numbers["val_loss"],
                        "gain_over_better_bpb": own[better]["val_bpb"] - numbers["val_bpb"]}
    return record
