"""Assemble a Decoder from the model preset and input config: the one place that does it.

Training, describe, evaluation and benchmarks all build through `build_model`, so a variant
defined here is the same model everywhere.
"""

from __future__ import annotations

from typing import Any, Mapping

from .codes import build_input
from .model import Decoder, ModelConfig


def build_model(model_cfg: Mapping[str, Any], input_cfg: Mapping[str, Any]) -> Decoder:
    """The one place a Decoder is assembled from configs (train, describe, evaluate, bench)."""
    mcfg = ModelConfig.from_mapping(model_cfg)
    return Decoder(mcfg, build_input(input_cfg, mcfg.vocab_size, mcfg.d_model, mcfg.init_std))
