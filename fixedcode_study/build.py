"""Assemble a Decoder from the model preset and input config: the one place that does it.

Training, describe, evaluation, checkpoint loading and benchmarks all build through `build_model`,
so a variant defined here is the same model everywhere. An input config with `size_match` also
adjusts the body (sizing.match_size) — a pure function of the two configs, so the checkpoint
rebuild path (which stores both) reproduces the same architecture.
"""

from __future__ import annotations

from typing import Any, Mapping

from .codes import build_input
from .model import Decoder, ModelConfig
from .sizing import match_size


def resolve_model_config(model_cfg: Mapping[str, Any], input_cfg: Mapping[str, Any]) -> tuple[ModelConfig, dict[str, Any]]:
    """The architecture that will actually be built, and the size-matching record (empty if none)."""
    return match_size(ModelConfig.from_mapping(model_cfg), input_cfg)


def build_model(model_cfg: Mapping[str, Any], input_cfg: Mapping[str, Any]) -> Decoder:
    """The one place a Decoder is assembled from configs (train, describe, evaluate, bench)."""
    mcfg, size_record = resolve_model_config(model_cfg, input_cfg)
    input_layer = build_input(input_cfg, mcfg.vocab_size, mcfg.d_model, mcfg.init_std)
    input_layer.build_info.update(size_record)  # reaches results.json via properties()
    return Decoder(mcfg, input_layer)
