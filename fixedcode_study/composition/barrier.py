"""The loss barrier on the straight line between two models' weights, without alignment.

    record = barrier_record(pair, held_out, own)

theta(alpha) = (1 - alpha) theta_a + alpha theta_b on every parameter, for the 11 alphas 0, 0.1, ..., 1
(exact decimal fractions i / 10), and the held-out loss at each. No permutation of hidden units or
heads is searched for (the issue asks for the line as it is: two models sharing a fixed input
already agree on what their first layer receives, and that is the alignment under test). Buffers
(a fixed code's matrix, the rotary tables) are not interpolated: pair.py refuses a pair whose buffers
differ. The endpoints are the members themselves, bit for bit: (1 - 0) x + 0 y = x and
0 x + 1 y = y in floating point, so loss(0) and loss(1) are each member's own loss.

    excess(alpha) = loss(alpha) - ((1 - alpha) loss_a + alpha loss_b)
    barrier       = max over alpha of excess(alpha)   (>= 0: the endpoints' excess is 0)
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import torch

from ..model import Decoder
from .pair import Pair
from .settings import BARRIER_POINTS
from .validation import HeldOut, validate


def alphas(points: int = BARRIER_POINTS) -> list[float]:
    """0, 1/(points-1), ..., 1 as exact quotients (linspace's steps would drift in the last bit)."""
    return [i / (points - 1) for i in range(points)]


def interpolate_into(model: Decoder, a: Decoder, b: Decoder, alpha: float) -> Decoder:
    """Set every parameter of `model` (a copy of a's architecture) to (1 - alpha) a + alpha b."""
    params_a, params_b = dict(a.named_parameters()), dict(b.named_parameters())
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_((1.0 - alpha) * params_a[name] + alpha * params_b[name])
    return model


def barrier_record(pair: Pair, held_out: HeldOut, own: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """compose.json `barrier`: the path (alpha, val numbers, the endpoints' line, the excess) and its maximum."""
    a, b = pair.a.model, pair.b.model
    model = copy.deepcopy(a)  # one working copy, overwritten at each alpha
    loss_a, loss_b = own["a"]["val_loss"], own["b"]["val_loss"]
    path = []
    for alpha in alphas():
        numbers = validate(interpolate_into(model, a, b, alpha), held_out)
        line = (1.0 - alpha) * loss_a + alpha * loss_b
        path.append({"alpha": alpha, **numbers, "linear": line, "excess": numbers["val_loss"] - line})
    worst = max(path, key=lambda row: row["excess"])
    return {"alignment": "none", "points": len(path), "barrier": worst["excess"], "at_alpha": worst["alpha"],
            "path": path}
