"""Model checkpoints that load without executing code.

A checkpoint is a directory:
  model.safetensors  weights (and the GF(2) matrix buffer, so the exact recoding travels along)
  config.json        everything needed to rebuild the model: model preset, input config and its
                     recorded properties, data/tokenizer facts, format version
  tokenizer.json     the HF `tokenizers` tokenizer the model was trained with
Files are written into a temporary directory and renamed into place, so a crash never leaves a
half-written checkpoint under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf
from safetensors.torch import load_file, save_file

from .build import build_model
from .errors import ConfigError
from .model import Decoder

FORMAT_VERSION = 1


def _plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved plain dict: nested OmegaConf nodes would otherwise be written as strings."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)
    return dict(cfg)


def save_checkpoint(
    directory: str | os.PathLike,
    model: Decoder,
    model_cfg: Mapping[str, Any],
    input_cfg: Mapping[str, Any],
    tokenizer_path: str | os.PathLike,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(tmp / "model.safetensors"), metadata={"format_version": str(FORMAT_VERSION)})
        config = {
            "format_version": FORMAT_VERSION,
            "model": _plain(model_cfg),
            "input": _plain(input_cfg),
            "input_props": model.input.properties(),
            **(dict(extra) if extra else {}),
        }
        (tmp / "config.json").write_text(json.dumps(config, indent=2, default=str))
        shutil.copyfile(tokenizer_path, tmp / "tokenizer.json")
        if directory.exists():
            shutil.rmtree(directory)
        os.rename(tmp, directory)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return directory


def load_checkpoint(directory: str | os.PathLike, device: str | torch.device = "cpu") -> tuple[Decoder, dict[str, Any]]:
    """Rebuild the exact model; a config that does not match the weights is a clear error."""
    directory = Path(directory)
    cfg_path, weights_path = directory / "config.json", directory / "model.safetensors"
    for p in (cfg_path, weights_path):
        if not p.exists():
            raise ConfigError("checkpoint", f"{p} does not exist", "point checkpoint= at a directory written by run")
    config = json.loads(cfg_path.read_text())
    if config.get("format_version") != FORMAT_VERSION:
        raise ConfigError("checkpoint", f"format_version {config.get('format_version')} in {cfg_path}",
                          f"this code reads format {FORMAT_VERSION}")
    model = build_model(config["model"], config["input"])
    state = load_file(str(weights_path))
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    if missing or unexpected or wrong:
        detail = (f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}" if unexpected
                  else f"shape of {wrong[0]}: weights {tuple(state[wrong[0]].shape)} vs config {tuple(expected[wrong[0]].shape)}")
        raise ConfigError("checkpoint", f"config.json does not match model.safetensors ({detail})",
                          "use the config.json written with these weights")
    if "input.gf2_matrix" in state and not torch.equal(state["input.gf2_matrix"], expected["input.gf2_matrix"]):
        raise ConfigError("checkpoint", "the saved GF(2) matrix differs from the one its seed rebuilds",
                          "check input.matrix_seed/min_weight in config.json")
    model.load_state_dict(state)
    return model.to(device).eval(), config
