"""Final model checkpoints that load without executing code.

A checkpoint is a directory:
  model.safetensors  weights (and the GF(2) matrix buffer, so the exact recoding travels along)
  config.json        everything needed to rebuild the model and score with it: model preset,
                     input config and its recorded properties, data facts (`data`: cache key,
                     vocabulary, end-of-text) and the job's data settings (`data_config`: where
                     the held-out documents come from), format version
  tokenizer.json     the HF `tokenizers` tokenizer the model was trained with
The folder is written under a temporary name and renamed into place (record/atomic.py), so a
crash never leaves a half-written checkpoint under the final name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..build import build_model
from ..errors import ConfigError, WriteFailed
from ..model import Decoder
from .atomic import FILE_MODE, atomic_dir
from .jobdir import WEIGHTS_FILE, JobDir

FORMAT_VERSION = 1
EXPORT_META = "fixedcode_export"  # the key of an export's config.json that names its source (hub/export.py)
CHECKPOINT_CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"


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
    """Write the checkpoint folder; `extra` adds top-level config.json keys (data, data_config, seed, ...).

    A write that finds no room raises errors.WriteFailed naming the file (the half-written folder is
    removed, an earlier checkpoint under `directory` stays). The weights get the mode every record
    file has (0666 minus the umask): safetensors writes them 0600, unreadable to others sharing the folder.
    """
    directory = Path(directory)
    with atomic_dir(directory) as tmp:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        try:
            save_file(state, str(tmp / WEIGHTS_FILE), metadata={"format_version": str(FORMAT_VERSION)})
        except SafetensorError as err:
            # The library reports an OS error as text only ("I/O error: No space left on device
            # (os error 28)"); its errno makes it the OSError it is, naming the file.
            found = re.search(r"os error (\d+)|code: (\d+)", str(err))
            if found is None:
                raise
            code, target = int(found.group(1) or found.group(2)), directory / WEIGHTS_FILE
            raise WriteFailed.of(OSError(code, os.strerror(code)), target) or OSError(
                code, os.strerror(code), str(target)) from err
        os.chmod(tmp / WEIGHTS_FILE, FILE_MODE)
        config = {
            "format_version": FORMAT_VERSION,
            "model": _plain(model_cfg),
            "input": _plain(input_cfg),
            "input_props": model.input.properties(),
            "output_props": model.head.properties(),
            **({k: _plain(v) if isinstance(v, DictConfig) else v for k, v in extra.items()} if extra else {}),
        }
        (tmp / CHECKPOINT_CONFIG_FILE).write_text(json.dumps(config, indent=2, default=str))
        shutil.copyfile(tokenizer_path, tmp / TOKENIZER_FILE)
    return directory


def weights_file(directory: str | os.PathLike) -> Path:
    """The safetensors file of a checkpoint folder."""
    return Path(directory) / WEIGHTS_FILE


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode), its tokenizer and what config.json says."""

    path: Path
    model: Decoder
    tokenizer: Any          # tokenizers.Tokenizer
    config: dict[str, Any]  # config.json as written

    @property
    def data(self) -> dict[str, Any]:
        """Facts about the training data (cache_key, vocab sizes, eot_token, ...)."""
        return dict(self.config.get("data") or {})

    @property
    def data_config(self) -> dict[str, Any] | None:
        """The job's data settings (conf `data` group, resolved), to find or rebuild its held-out split
        (for checkpoints older than this field, read from the job's results.json when it is there)."""
        return self.config.get("data_config")


def load_tokenizer(path: str | os.PathLike):
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.exists():
        raise ConfigError("checkpoint", f"{path} does not exist", "point checkpoint= at a folder written by run")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # noqa: BLE001 - the tokenizers library raises a bare Exception
        raise ConfigError("checkpoint", f"{path} is not a readable tokenizer ({str(err).splitlines()[0]})",
                          "point checkpoint= at a folder written by run") from None


def load_checkpoint(directory: str | os.PathLike, device: str | torch.device = "cpu") -> Checkpoint:
    """Rebuild the exact model; a config that does not match the weights is a clear error."""
    directory = Path(directory)
    cfg_path, weights_path = directory / CHECKPOINT_CONFIG_FILE, directory / WEIGHTS_FILE
    for p in (cfg_path, weights_path):
        if not p.exists():
            raise ConfigError("checkpoint", f"{p} does not exist", "point checkpoint= at a directory written by run")
    config = json.loads(cfg_path.read_text())
    if config.get(EXPORT_META):  # hub/export.py wrote it: transformers' config.json, not ours
        raise ConfigError("checkpoint", f"{directory} is one of our Hugging Face exports, not a workbench checkpoint",
                          "pass the job it was exported from (the commands map an export to it themselves), "
                          "or read the folder with transformers or lm-eval's hf model (trust_remote_code=True)")
    if config.get("format_version") != FORMAT_VERSION:
        raise ConfigError("checkpoint", f"format_version {config.get('format_version')} in {cfg_path}",
                          f"this code reads format {FORMAT_VERSION}")
    model = build_model(config["model"], config["input"], output_cfg=config.get("output"))  # no output: untied
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as err:
        raise ConfigError("checkpoint", f"{weights_path} is unreadable ({str(err).splitlines()[0]})",
                          "re-save the checkpoint (re-run the job with force=true)") from None
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
    tokenizer = load_tokenizer(directory / TOKENIZER_FILE)
    if "data_config" not in config:
        config["data_config"] = _data_config_from_job(directory)
    return Checkpoint(directory, model.to(device).eval(), tokenizer, config)


def _data_config_from_job(directory: Path) -> dict[str, Any] | None:
    """Checkpoints written before config.json carried `data_config`: the job's record has it."""
    job = JobDir.of_final_checkpoint(directory)
    record = job.read_results() if job else None
    return ((record or {}).get("config") or {}).get("data")
