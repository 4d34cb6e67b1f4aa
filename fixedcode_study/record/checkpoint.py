"""Final model checkpoints that load without executing code, and mean the same model whatever conf/ says later.

A checkpoint is a directory:
  model.safetensors  weights (and the GF(2) matrix buffer, so the exact recoding travels along)
  config.json        everything needed to rebuild the model and score with it (format 2):
                       spec         the job's resolved spec (spec.JobSpec.to_json): the model as built
                                    under spec.model (build.ModelSpec: preset, architecture after size
                                    matching, the input and head with every reference resolved), and
                                    every setting the job ran with
                       model, input, output  the model preset as composed, the input and head as built
                                    (readers of the old keys: export, the model card, probes)
                       input_props, output_props, data (cache key, vocabulary, end-of-text),
                       data_config (where the held-out documents come from), seed, sweep,
                       fingerprint, format_version
  tokenizer.json     the HF `tokenizers` tokenizer the model was trained with
The folder is written under a temporary name and renamed into place (record/atomic.py), so a
crash never leaves a half-written checkpoint under the final name.

`load_checkpoint` builds the model from the stored spec alone (build.build_decoder of spec.model):
it never reads conf/, so editing conf/input/binary16.yaml cannot change a stored gaussian16 model
(whose scale matches binary16's RMS: binary16's settings are in its spec). A format-1 checkpoint
(written before the spec was stored: its input named `rms_reference: binary16` and a load
re-resolved the name) still loads: its references are resolved against conf/ once, at the load,
and the Checkpoint says so (`model_spec = RECONSTRUCTED`), as does every record made from it
(evaluation, probes, samples, exports).
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
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..build import ModelSpec, build_decoder, resolve_model
from ..config import resolve_input_references, resolve_output_references
from ..errors import ConfigError, WriteFailed
from ..model import Decoder
from .atomic import FILE_MODE, atomic_dir
from .jobdir import WEIGHTS_FILE, JobDir

FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)  # 1: no stored spec (references re-resolved against conf/ at the load)
STORED, RECONSTRUCTED = "stored", "reconstructed"  # where a loaded model's spec came from (Checkpoint.model_spec)
RECONSTRUCTED_NOTE = ("a format-1 checkpoint (written before the spec was stored): the input and head references "
                      "were resolved against conf/ as it is now")
EXPORT_META = "fixedcode_export"  # the key of an export's config.json that names its source (hub/export.py)
CHECKPOINT_CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"


def save_checkpoint(directory: str | os.PathLike, model: Decoder, config: Mapping[str, Any],
                    tokenizer_path: str | os.PathLike) -> Path:
    """Write the checkpoint folder. `config`: config.json's keys about the job (spec.JobSpec.checkpoint_config:
    spec, model, input, output, data_config, seed, sweep, fingerprint; plus the data facts `data`);
    the format version and the built model's properties are added here.

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
        written = {"format_version": FORMAT_VERSION, "input_props": model.input.properties(),
                   "output_props": model.head.properties(), **config}
        (tmp / CHECKPOINT_CONFIG_FILE).write_text(json.dumps(written, indent=2, default=str))
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
    model_spec: str = STORED  # STORED: built from config.json's spec; RECONSTRUCTED: a format-1 checkpoint

    @property
    def spec_note(self) -> str:
        """One line for a record made from this model: where its spec came from."""
        return spec_note(self.model_spec)

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
    if config.get("format_version") not in READABLE_FORMATS:
        raise ConfigError("checkpoint", f"format_version {config.get('format_version')} in {cfg_path}",
                          f"this code reads formats {', '.join(map(str, READABLE_FORMATS))}")
    spec, source = stored_model_spec(config)
    model = build_decoder(spec)
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
    return Checkpoint(directory, model.to(device).eval(), tokenizer, config, source)


def spec_note(source: str) -> str:
    """What a record made from a loaded model says of its spec (STORED, or RECONSTRUCTED with why)."""
    return STORED if source == STORED else f"{RECONSTRUCTED}: {RECONSTRUCTED_NOTE}"


def stored_model_spec(config: Mapping[str, Any]) -> tuple[ModelSpec, str]:
    """The ModelSpec a checkpoint's config.json describes, and where it came from: the stored spec
    (format 2: STORED), or for a format-1 checkpoint its composed model, input and head resolved
    against conf/ once, now (RECONSTRUCTED)."""
    stored = config.get("spec")  # absent: format 1
    if stored is not None:
        return ModelSpec.from_json(stored["model"]), STORED
    output = resolve_output_references(config.get("output"))  # absent before the output axis: untied
    return resolve_model(config["model"], resolve_input_references(config["input"]), output), RECONSTRUCTED


def _data_config_from_job(directory: Path) -> dict[str, Any] | None:
    """Checkpoints written before config.json carried `data_config`: the job's record has it."""
    job = JobDir.of_final_checkpoint(directory)
    record = job.read_results() if job else None
    return ((record or {}).get("config") or {}).get("data")
