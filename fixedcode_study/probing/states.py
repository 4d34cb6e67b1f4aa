"""What the probes look at: the models of a job (init, snapshots, final), held-out token windows of
the job's own data, and the hidden states of every layer, extracted without gradients.

Layers, in order (L = n_layer):
  input        what the input interface feeds the first block: the learned table row, or the fixed
               code tiled to d_model (model.input's output)
  block1..L    the residual stream after each block
  final_norm   after the final RMSNorm: what the untied head reads
Hidden states are read with forward hooks on the real modules, so the probes see exactly what
training and evaluation computed, and the head (a V x d matmul) is never run.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch

from ..build import build_decoder
from ..data import layout
from ..errors import ConfigError
from ..model import Decoder
from ..record.checkpoint import CHECKPOINT_CONFIG_FILE, load_checkpoint, spec_note, stored_model_spec
from ..record.jobdir import PROBES_FILE, RESULTS_FILE, WEIGHTS_FILE, JobDir

SNAPSHOT_PATTERN = re.compile(r"step-(\d+)\.ckpt$")


def layer_names(n_layer: int) -> list[str]:
    return ["input", *(f"block{i + 1}" for i in range(n_layer)), "final_norm"]


@dataclass
class ProbedModel:
    """One model to probe: a job's final weights, a periodic snapshot, or its initialisation."""

    label: str               # "final", "step-0000064", "init"
    step: int | None         # optimizer step (None: a bare checkpoint whose step is unknown)
    tokens_seen: int | None  # training tokens behind these weights
    model: Decoder
    source: str              # the file the weights came from ("" for the init)
    weights_sha: str         # sha256 of the weights as loaded (the init's too: it is exact on CPU)


def state_sha(model: torch.nn.Module) -> str:
    """sha256 over the state dict's names, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


@dataclass
class ProbeSubject:
    """A job (or a bare checkpoint) and what the probes need to know about it."""

    name: str                       # job key, or the checkpoint folder's name
    final_dir: Path                 # the final checkpoint folder
    job: JobDir | None              # None for a checkpoint outside a job directory
    config: dict[str, Any]          # the final checkpoint's config.json
    record: dict[str, Any] | None   # results.json (None outside a job)
    snapshots: list[Path] = field(default_factory=list)
    # An outside model (hub/external.py): how its final weights load, and where its probes.json goes
    loader: Callable[[], Decoder] | None = None
    out_dir: Path | None = None

    @property
    def input_type(self) -> str:
        return str(self.config["input"].get("name") or self.config["input"]["type"])

    @property
    def seed(self) -> int | None:
        seed = self.config.get("seed", (self.record or {}).get("seed"))
        return None if seed is None else int(seed)

    @property
    def tokens_per_step(self) -> int | None:
        plan = (self.record or {}).get("plan") or {}
        return plan.get("tokens_per_step")

    @property
    def seq_len(self) -> int:
        train = ((self.record or {}).get("config") or {}).get("train") or {}
        return int(train.get("seq_len") or self.config["model"]["max_seq_len"])

    @property
    def out_path(self) -> Path:
        """probes.json: beside results.json for a job, inside the folder for a bare checkpoint."""
        return (self.out_dir or (self.job.path if self.job else self.final_dir)) / PROBES_FILE


def _subject_of_job(job: JobDir) -> ProbeSubject:
    record = job.read_results()
    final = job.final_checkpoint
    if not (final / WEIGHTS_FILE).exists():
        status = (record or {}).get("status", "no record")
        raise ConfigError("checkpoint", f"{job.path} has no final checkpoint (status: {status})",
                          "probe completed jobs only (re-run the job first)")
    config = json.loads((final / CHECKPOINT_CONFIG_FILE).read_text())
    snapshots = sorted(job.checkpoints.glob("step-*.ckpt"), key=lambda p: int(SNAPSHOT_PATTERN.search(p.name)[1]))
    return ProbeSubject(job.name, final, job, config, record, snapshots)


def find_subjects(path: str | Path) -> list[ProbeSubject]:
    """A final checkpoint folder, a job directory, or a study directory (every job below it)."""
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise ConfigError("checkpoint", f"{path} does not exist",
                          "pass checkpoint=<a checkpoint folder, a job directory or a study directory>")
    if (path / WEIGHTS_FILE).exists():  # a checkpoint folder
        job = JobDir.of_final_checkpoint(path)
        if job is not None and job.results.exists():
            return [_subject_of_job(job)]
        config = json.loads((path / CHECKPOINT_CONFIG_FILE).read_text())
        return [ProbeSubject(path.name, path, None, config, None)]
    if JobDir(path).results.exists():
        return [_subject_of_job(JobDir(path))]
    jobs = sorted(p.parent for p in path.rglob(RESULTS_FILE))
    jobs = [j for j in jobs if (JobDir(j).final_checkpoint / WEIGHTS_FILE).exists()]
    if not jobs:
        raise ConfigError("checkpoint", f"{path} holds no job with a final checkpoint",
                          "pass a checkpoint folder, a job directory or a study directory of completed jobs")
    return [_subject_of_job(JobDir(j)) for j in jobs]


def final_model(subject: ProbeSubject) -> ProbedModel:
    record = subject.record or {}
    steps, tokens = record.get("steps"), record.get("tokens_seen")
    if subject.loader is not None:
        model = subject.loader()
        return ProbedModel("final", steps, tokens, model, str(subject.final_dir), state_sha(model))
    ckpt = load_checkpoint(subject.final_dir)
    return ProbedModel("final", steps, tokens, ckpt.model, str(subject.final_dir / WEIGHTS_FILE), state_sha(ckpt.model))


def _fresh_model(subject: ProbeSubject) -> Decoder:
    seed = subject.seed
    if seed is None:
        raise ConfigError("checkpoint", f"{subject.final_dir / CHECKPOINT_CONFIG_FILE} records no seed",
                          "probe.snapshots=false for checkpoints without a seed")
    spec, _ = stored_model_spec(subject.config)  # the model the checkpoint stores, not conf/'s today
    return build_decoder(spec, seed=seed)


def init_model(subject: ProbedModel | ProbeSubject) -> ProbedModel:
    """The job's model before its first step: the same per-group init streams (model.py) rebuild it
    bitwise on CPU. It is the random-feature baseline: what a probe finds without any training."""
    model = _fresh_model(subject).eval()
    return ProbedModel("init", 0, 0, model, "", state_sha(model))


def snapshot_model(subject: ProbeSubject, path: Path) -> ProbedModel:
    """A Lightning step-*.ckpt snapshot: its `model.*` weights loaded into the job's architecture."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    model = _fresh_model(subject)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Non-persistent buffers are not in checkpoints; anything else missing is a different model.
    if unexpected or [k for k in missing if not k.startswith("rope_")]:
        raise ConfigError("checkpoint", f"{path} does not match its job's model ({(missing or unexpected)[:3]})",
                          "probe snapshots with the code version that wrote them")
    step = int(ckpt["global_step"])
    tps = subject.tokens_per_step
    return ProbedModel(path.stem, step, step * tps if tps else None, model.eval(), str(path), state_sha(model))


def heldout_windows(root: Path, seq_len: int, tokens: int) -> np.ndarray:
    """(n, seq_len) int64 windows cut back to back from the start of the prepared held-out split
    (val.bin: documents no training batch ever read), enough for `tokens` tokens."""
    meta = layout.read_meta(root)
    if meta is None:
        raise ConfigError("probe.prepared_root", f"{root} holds no prepared data cache",
                          "point it at the data cache the job trained on")
    val = np.memmap(root / layout.VAL_TOKENS, dtype=np.dtype(meta["dtype"]), mode="r")
    n = min(-(-tokens // seq_len), len(val) // seq_len)
    if n < 4:
        raise ConfigError("probe.tokens", f"the held-out split holds {len(val):,} tokens, under 4 windows of {seq_len}",
                          "use a corpus with a larger held-out split (data.val_fraction)")
    return np.asarray(val[: n * seq_len], dtype=np.int64).reshape(n, seq_len)


@torch.no_grad()
def hidden_states(model: Decoder, windows: np.ndarray, batch_size: int,
                  device: str | torch.device = "cpu") -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Stream (ids (b, T), {layer: (b, T, d) float32}) batch by batch; nothing is kept between batches."""
    names = layer_names(model.config.n_layer)
    modules = [model.input, *model.blocks, model.norm]
    captured: dict[str, torch.Tensor] = {}
    hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: captured.__setitem__(name, out))
             for name, m in zip(names, modules)]
    model = model.to(device).eval()
    try:
        for start in range(0, len(windows), batch_size):
            ids = windows[start:start + batch_size]
            model.features(torch.from_numpy(ids).to(device))
            yield ids, {name: captured[name].float().cpu().numpy() for name in names}
            captured.clear()
    finally:
        for hook in hooks:
            hook.remove()


def code_bits(model: Decoder, ids: np.ndarray) -> np.ndarray | None:
    """(…, K) {0,1} code bits of `ids` for a fixed binary code, whatever its value set ({0,1} or
    {-1,+1}, as binary16_scaled) or scale; None otherwise (a learned table, a Gaussian code)."""
    idx = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    bits_of = getattr(model.input, "code_bits", None)  # binary codes: the bits before value set and scale
    if callable(bits_of):
        device = next(model.parameters()).device
        with torch.no_grad():
            return bits_of(idx.to(device)).cpu().numpy().astype(np.int8)
    code_values = getattr(model.input, "code_values", None)
    if code_values is None:
        return None
    try:
        values = code_values(idx).numpy()
    except NotImplementedError:
        return None
    if not np.isin(values, (0.0, 1.0)).all():
        return None
    return values.astype(np.int8)


def input_table(model: Decoder, ids: np.ndarray) -> np.ndarray:
    """(n, d) what the input layer gives each of `ids`: a learned model's table rows, or a code."""
    with torch.no_grad():
        return model.input(torch.from_numpy(np.asarray(ids, dtype=np.int64))[None]).float()[0].numpy()


def subject_summary(subject: ProbeSubject) -> Mapping[str, Any]:
    record = subject.record or {}
    return {"name": subject.name, "input": subject.input_type, "seed": subject.seed,
            "final_checkpoint": str(subject.final_dir), "job_dir": str(subject.job.path) if subject.job else None,
            "job_fingerprint": (record.get("fingerprint") or {}).get("sha"),
            "job_finished_at": record.get("finished_at"),
            "data_cache_key": (subject.config.get("data") or {}).get("cache_key"), "model_spec": _spec_note(subject)}


def _spec_note(subject: ProbeSubject) -> str:
    """Where the probed models' spec came from: the checkpoint's stored spec, or (a format-1
    checkpoint) reconstructed from conf/ at the load (record/checkpoint.py)."""
    if subject.loader is not None:
        return "imported"  # an outside model: its weights mapped onto the decoder (hub/imported.py)
    return spec_note(stored_model_spec(subject.config)[1])
