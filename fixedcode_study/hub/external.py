"""Outside causal LMs (a local Hugging Face folder or a Hub name) as reference models.

    fixedcode evaluate hf=HuggingFaceTB/SmolLM2-135M eval=builtin
    fixedcode evaluate hf=exports/gf2-s1 eval=builtin study=outputs/multirun/main

`resolve_hf` pins what is evaluated: a local folder by the sha256 of its weight files, a Hub name by
the commit of its snapshot (taken from the local Hugging Face cache when offline; nothing is
downloaded then). `evaluate_external` scores it with lm-eval's own `hf` model (HFLM) on the suite's
tasks and writes `<study>/external/<slug>/external.json`: the same task record as a trained job's
evaluation, plus `external` (what was evaluated, its revision, parameters, architecture). analysis
shows it as a marked reference row beside the trained runs and never uses it in a statistic.

Built-in tasks score the held-out documents of a corpus: `eval.prepared_root`, or else the corpus
of the data config the command passes (conf/config.yaml's data, prepared if needed; the command
composes it, cli/evaluate.py and cli/probe.py: this module reads no config). Word perplexity and bits
per byte do not depend on the tokenizer, so an outside model with its own tokenizer is comparable.

Remote code runs only when asked (trust_remote_code=true), except for folders written by our own
export whose modeling file is byte-identical to this package's modeling_fixedcode.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from ..evaluation.harness import evaluation_log, file_sha256, library_output_to, run_suite
from ..spec.evaluation import EvalSpec
from ..record import atomic
from ..record.jobdir import EXTERNAL_DIR, EXTERNAL_FILE
from . import modeling_fixedcode
from .export import MODELING_FILE
from .source import read_export_meta

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


@dataclass
class HFModel:
    spec: str          # what the user passed: a folder or a Hub name
    path: Path         # the local folder evaluated
    source: str        # "local" | "hub"
    revision: str      # Hub commit, or "sha256:<first 16 hex of the weight files' hash>"
    trust_remote_code: bool
    exported_by_us: dict[str, Any]


def weights_digest(folder: Path) -> str:
    """sha256 over the folder's weight files (names and contents), in name order."""
    files = sorted(f for f in folder.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file())
    if not files:
        raise ConfigError("hf", f"{folder} holds no weight files ({', '.join(WEIGHT_SUFFIXES)})",
                          "point hf= at a Hugging Face model folder")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + file_sha256(f).encode())
    return h.hexdigest()


def _ours(folder: Path) -> bool:
    """The folder's modeling file is exactly the one this package ships."""
    shipped = folder / MODELING_FILE
    return shipped.is_file() and shipped.read_bytes() == Path(modeling_fixedcode.__file__).read_bytes()


def resolve_hf(spec: str, revision: str | None = None, trust_remote_code: bool = False) -> HFModel:
    from transformers.utils import CONFIG_NAME

    local = Path(spec).expanduser()
    if local.is_dir():
        if not (local / CONFIG_NAME).is_file():
            raise ConfigError("hf", f"{local} has no {CONFIG_NAME}", "point hf= at a Hugging Face model folder")
        path, source, rev = local.resolve(), "local", "sha256:" + weights_digest(local)[:16]
    else:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

        try:
            path = Path(snapshot_download(spec, revision=revision))
        except (LocalEntryNotFoundError, HFValidationError, OSError) as err:
            raise ConfigError("hf", f"{spec!r} is not a local folder and could not be fetched from the Hub "
                              f"({type(err).__name__})",
                              "pass a local model folder, or a Hub name once online (it is then cached)") from None
        source, rev = "hub", path.name  # snapshots/<commit>
    ours = _ours(path)
    return HFModel(spec, path, source, rev, trust_remote_code or ours, read_export_meta(path))


def slug(model: HFModel) -> str:
    name = model.spec if model.source == "hub" else model.path.name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") + "@" + model.revision.replace("sha256:", "")[:12]


def corpus_root(data_cfg: Mapping[str, Any] | None) -> Path:
    """The prepared cache of a data config (built once if absent): where built-in tasks find documents."""
    if data_cfg is None:
        raise ConfigError("eval.prepared_root", "no corpus for the built-in tasks",
                          "pass eval.prepared_root=<data cache folder>, or evaluate through the command")
    from ..data.prepare import prepare

    return prepare(dict(data_cfg), progress=False).root.resolve()


def evaluate_external(spec: str, settings: EvalSpec, study: str | os.PathLike,
                      revision: str | None = None, trust_remote_code: bool = False,
                      write: bool = True, data_cfg: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Evaluate an outside model on the suite; returns the record (written to the study's external/).

    settings: the validated evaluation settings (spec.evaluation.EvalSpec); data_cfg: the corpus
    built-in tasks score when eval.prepared_root is unset (the command passes the composed config's data).
    """
    from ..evaluation.tasks import BUILTIN_TASKS

    t0 = time.time()
    model = resolve_hf(spec, revision, trust_remote_code)
    if settings.data_dir:
        settings = settings.with_paths(data_dir=str(Path(settings.data_dir).expanduser().resolve()))
    if any(t in BUILTIN_TASKS for t in settings.tasks):
        settings = settings.with_paths(prepared_root=str(Path(settings.prepared_root).expanduser().resolve()
                                                         if settings.prepared_root else corpus_root(data_cfg)))
    output = Path(settings.output or Path(study).expanduser() / EXTERNAL_DIR / slug(model) / EXTERNAL_FILE)
    with library_output_to(evaluation_log(output) if write else None, settings.name, model.spec):
        record = _evaluate(model, settings, t0)
    if write:
        atomic.write_json(output, record)
        record["output"] = str(output)
    return record


def _evaluate(model: HFModel, settings: EvalSpec, t0: float) -> dict[str, Any]:
    """lm-eval's HFLM (ContextClippedHFLM) on the suite: the record, without `output`."""
    from ..evaluation.hf_lm import ContextClippedHFLM

    try:
        lm = ContextClippedHFLM(pretrained=str(model.path), tokenizer=str(model.path), trust_remote_code=model.trust_remote_code,
                  batch_size=settings.batch_size, device=settings.device or "cpu", dtype=settings.dtype)
    except ValueError as err:
        if "trust_remote_code" in str(err):
            raise ConfigError("trust_remote_code", f"{model.spec} needs its own modeling code",
                              "read it, then pass trust_remote_code=true") from None
        raise
    record = run_suite(lm, settings)
    hf_config = lm.model.config
    record.update(
        external={"name": model.spec, "source": model.source, "path": str(model.path), "revision": model.revision,
                  "architecture": (getattr(hf_config, "architectures", None) or [type(lm.model).__name__])[0],
                  "model_type": getattr(hf_config, "model_type", None),
                  "params": int(sum(p.numel() for p in lm.model.parameters())),
                  "vocab_size": getattr(hf_config, "vocab_size", None),
                  "trust_remote_code": model.trust_remote_code, "fixedcode_export": model.exported_by_us},
        device=str(lm.device), seconds=round(time.time() - t0, 2), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return record


def external_subject(spec: str, study: str | os.PathLike, data_cfg: Mapping[str, Any],
                     revision: str | None = None):
    """An outside model as a probing.states.ProbeSubject: its weights mapped onto the workbench
    Decoder (hub/imported.py), probed on the held-out documents of `data_cfg` (the command passes the
    default corpus) tokenized with the model's own tokenizer (prepared once, like any corpus),
    probes.json under the study's external/."""
    from ..data.prepare import prepare
    from ..probing.states import ProbeSubject
    from .imported import decoder_from_hf, workbench_configs, workbench_output_config
    from transformers.utils import CONFIG_NAME

    model = resolve_hf(spec, revision)
    hf_config = json.loads((model.path / CONFIG_NAME).read_text())
    model_cfg, input_cfg = workbench_configs(hf_config)
    data_cfg = dict(data_cfg)
    data_cfg.update(tokenizer=str(model.path), vocab_size=model_cfg["vocab_size"])
    prepared = prepare(data_cfg, progress=False)
    config = {"model": model_cfg, "input": input_cfg, "output": workbench_output_config(hf_config) or None,
              "seed": None, "data": dict(prepared.meta), "data_config": data_cfg}
    out_dir = Path(study).expanduser() / EXTERNAL_DIR / slug(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    return ProbeSubject(slug(model), model.path, None, config, None,
                        loader=lambda: decoder_from_hf(model.path)[0], out_dir=out_dir)
