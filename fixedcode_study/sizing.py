"""Size-matched controls: widen or deepen a fixed-code model until its trainable parameter count
matches the learned-table baseline of the same preset.

A fixed code saves the V x d input table. To ask "is it the code, or just fewer trainable
parameters?", the control spends exactly those parameters on the body instead:

  input config                         effect on the model preset
  size_match: learned                  target = trainable count of the same preset with input=learned
  size_match_by: d_ff                  widen every SwiGLU MLP (3 d params per unit of d_ff per layer)
                 n_layer               add whole blocks (coarse: often cannot land within tolerance)
                 n_layer+d_ff          add as many whole blocks as fit, then widen d_ff for the rest
  size_match_tolerance: 0.01           |trainable - target| / target must end up <= this
  size_match_multiple_of: 1            keep d_ff a multiple of this (e.g. 64 for GPU-friendly shapes)

The adjustment is a pure function of (model preset, input config), applied in build.build_model,
so a checkpoint (which stores both) rebuilds the identical architecture.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import torch

from .errors import ConfigError
from .model import ModelConfig

SIZE_MATCH_KEYS = ("size_match", "size_match_by", "size_match_tolerance", "size_match_multiple_of")
METHODS = ("d_ff", "n_layer", "n_layer+d_ff")


def block_params(cfg: ModelConfig) -> int:
    """Parameters of one decoder block: fused qkv + output projection + SwiGLU + two RMSNorms."""
    d, hd = cfg.d_model, cfg.head_dim
    attn = d * (cfg.n_head + 2 * cfg.kv_heads) * hd + cfg.n_head * hd * d
    return attn + 3 * d * cfg.d_ff + 2 * d


def body_params(cfg: ModelConfig) -> int:
    """Blocks plus the final norm (what parameter_groups calls `body`)."""
    return cfg.n_layer * block_params(cfg) + cfg.d_model


def input_trainable(model_cfg: ModelConfig, input_cfg: Mapping[str, Any]) -> int:
    """Trainable parameters of the input interface, from a shapes-only build (no memory, no RNG use)."""
    from .codes import build_input

    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        layer = build_input(input_cfg, model_cfg.vocab_size, model_cfg.d_model, model_cfg.init_std)
    return sum(p.numel() for p in layer.parameters() if p.requires_grad)


def trainable_params(model_cfg: ModelConfig, input_cfg: Mapping[str, Any]) -> int:
    """Trainable count of Decoder(model_cfg, input): input + body + untied head."""
    head = model_cfg.d_model * model_cfg.vocab_size
    return input_trainable(model_cfg, input_cfg) + body_params(model_cfg) + head


def size_match_spec(input_cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    target = input_cfg.get("size_match")
    if target in (None, False, "none"):
        return None
    if target != "learned":
        raise ConfigError("input.size_match", f"unknown target {target!r}", "use 'learned' or null")
    by = input_cfg.get("size_match_by", "d_ff")
    if by not in METHODS:
        raise ConfigError("input.size_match_by", f"unknown method {by!r}", f"use one of {', '.join(METHODS)}")
    tol = float(input_cfg.get("size_match_tolerance", 0.01))
    multiple = int(input_cfg.get("size_match_multiple_of", 1))
    if not 0 < tol < 1 or multiple < 1:
        raise ConfigError("input.size_match_tolerance", f"tolerance {tol} / multiple_of {multiple} out of range",
                          "use 0 < size_match_tolerance < 1 and size_match_multiple_of >= 1")
    return {"target": target, "by": by, "tolerance": tol, "multiple_of": multiple}


def match_size(model_cfg: ModelConfig, input_cfg: Mapping[str, Any]) -> tuple[ModelConfig, dict[str, Any]]:
    """Return the preset adjusted per the input's size_match settings, and a flat record of it.

    Without size_match the preset comes back unchanged with an empty record.
    """
    spec = size_match_spec(input_cfg)
    if spec is None:
        return model_cfg, {}
    learned = {"type": "learned"}
    target = trainable_params(model_cfg, learned)
    start = trainable_params(model_cfg, input_cfg)
    deficit = target - start
    if deficit < 0:
        raise ConfigError("input.size_match", f"this input already has {start:,} trainable parameters, more than "
                          f"the learned baseline's {target:,}", "drop size_match for this input")

    def count(cfg: ModelConfig) -> int:
        return trainable_params(cfg, input_cfg)

    def widen(cfg: ModelConfig, missing: int) -> ModelConfig:
        """Closest d_ff (a multiple of multiple_of) for `missing` extra parameters."""
        per_unit = 3 * cfg.d_model * cfg.n_layer
        m = spec["multiple_of"]
        ideal = cfg.d_ff + missing / per_unit
        candidates = {max(m, int(ideal // m) * m), max(m, (int(ideal // m) + 1) * m)}
        return min((replace(cfg, d_ff=c) for c in candidates), key=lambda c: abs(count(c) - target))

    by = spec["by"]
    if by == "d_ff":
        matched = widen(model_cfg, deficit)
    elif by == "n_layer":
        per_block = block_params(model_cfg)
        options = [replace(model_cfg, n_layer=model_cfg.n_layer + k) for k in
                   {deficit // per_block, deficit // per_block + 1}]
        matched = min(options, key=lambda c: abs(count(c) - target))
    else:  # n_layer+d_ff: whole blocks first, the remainder by widening
        deeper = replace(model_cfg, n_layer=model_cfg.n_layer + deficit // block_params(model_cfg))
        matched = widen(deeper, target - count(deeper))
    matched.validate()
    final = count(matched)
    error = (final - target) / target
    if abs(error) > spec["tolerance"]:
        raise ConfigError(
            "input.size_match_by",
            f"by={by} gets no closer than {final:,} trainable parameters ({error:+.2%}) to the learned "
            f"baseline's {target:,} (tolerance {spec['tolerance']:.0%}) with n_layer={matched.n_layer}, d_ff={matched.d_ff}",
            "use input.size_match_by=d_ff (or n_layer+d_ff), a smaller size_match_multiple_of or a larger tolerance",
        )
    record = {
        "size_match": spec["target"],
        "size_match_by": by,
        "size_match_target_trainable": target,
        "size_match_unmatched_trainable": start,
        "size_match_trainable": final,
        "size_match_rel_error": error,
        "size_match_n_layer": matched.n_layer,
        "size_match_d_ff": matched.d_ff,
        "size_match_base_n_layer": model_cfg.n_layer,
        "size_match_base_d_ff": model_cfg.d_ff,
    }
    return matched, record
