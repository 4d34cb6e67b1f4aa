"""Where a command reads a workbench model from: one rule for every `checkpoint=`.

    checkpoint_folder("outputs/multirun/main/input=gf2,seed=1", fix)   # -> .../checkpoints/final
    checkpoint_folder("exports/gf2-s1", fix)                          # -> the checkpoint it was exported from

`checkpoint=` (export, generate, evaluate, probe, and `fixedcode lm-eval`'s model_args) is one of:
- a job directory: its checkpoints/final (a job without final weights is refused, with its status);
- a final checkpoint folder (record/checkpoint.py): itself;
- one of our Hugging Face exports (config.json carries `fixedcode_export`, hub/export.py): the
  workbench checkpoint it was exported from, which that metadata names, provided the folder there
  still holds exactly the exported model: the same model and input configs, and every parameter
  equal to the export's weights mapped back onto the decoder (hub/imported.py). What the command
  records (samples.json, eval-<suite>.json, probes.json) then lands with that job, exactly as if
  the job had been given. An export whose source is not here (a copied or downloaded folder) or was
  retrained since is refused in one line with the command's way to read the folder itself (`hf=`
  for evaluate, probe and generate; lm-eval's own `hf` model for `fixedcode lm-eval`).
Why not rebuild the model from the export instead: a record belongs beside the workbench weights it
describes, and an export is the shipped artifact, which transformers' and lm-eval's own readers
(hf=) are the test of.
Anything else (a study directory, a typo) comes back as given, for the command's reader to accept
or to name what is missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from ..heads import is_default_output
from ..record.checkpoint import CHECKPOINT_CONFIG_FILE, EXPORT_META, weights_file
from ..record.jobdir import JobDir
from .imported import decoder_from_hf

FIELD = "checkpoint"


def read_export_meta(folder: Path) -> dict[str, Any]:
    """config.json's `fixedcode_export` entry of an exported folder ({} for any other HF folder)."""
    from transformers.utils import CONFIG_NAME

    path = Path(folder) / CONFIG_NAME
    return (json.loads(path.read_text()).get(EXPORT_META) or {}) if path.is_file() else {}


def is_export(path: str | os.PathLike) -> bool:
    """A folder our export wrote (config.json carries its `fixedcode_export` metadata)."""
    path = Path(path).expanduser()
    return path.is_dir() and bool(read_export_meta(path))


def checkpoint_folder(path: str | os.PathLike, fix: str, field: str = FIELD) -> Path:
    """The final checkpoint folder `path` stands for (the rule above); `fix` is what the refusal
    of an unusable export tells the user to do instead."""
    path = Path(path).expanduser()
    job = JobDir(path)
    if job.final_checkpoint.is_dir():
        return job.final_checkpoint
    if job.results.is_file():
        status = (job.read_results() or {}).get("status", "unknown")
        raise ConfigError(field, f"{path} is a job directory without final weights (status: {status})",
                          "re-run the job first, or pass a completed job")
    if is_export(path):
        return export_source(path, fix, field)
    return path


def export_source(folder: Path, fix: str, field: str = FIELD) -> Path:
    """The workbench checkpoint an export was made from, when it still holds the exported model."""
    meta = read_export_meta(folder)
    source = Path(meta.get("checkpoint") or "")
    if not meta.get("checkpoint") or not weights_file(source).is_file():
        why = f"the checkpoint it was exported from ({meta.get('checkpoint')}) is not here"
    elif not same_model(folder, source, meta):
        why = f"the checkpoint it was exported from ({source}) holds another model now"
    else:
        return source
    raise ConfigError(field, f"{folder} is a Hugging Face export and {why}", fix)


def same_model(export: Path, source: Path, meta: dict[str, Any]) -> bool:
    """The export's weights, mapped back onto the decoder, equal the source checkpoint's bit for bit
    (and both describe the same model, input and head): the same function, not merely the same job."""
    from safetensors.torch import load_file

    config = json.loads((source / CHECKPOINT_CONFIG_FILE).read_text())
    if config.get("model") != meta.get("model_config") or config.get("input") != meta.get("input_config"):
        return False
    # an export records the head only when it is not the untied default (export.py)
    if (None if is_default_output(config.get("output")) else config.get("output")) != meta.get("output_config"):
        return False
    rebuilt, _, _ = decoder_from_hf(export)
    saved = load_file(str(weights_file(source)))
    for name, param in rebuilt.named_parameters():
        theirs = saved.get(name)
        if theirs is None or theirs.shape != param.shape or not torch.equal(theirs.float(), param.detach().float()):
            return False
    return True
