"""One adaptation: a checkpoint pretrained without H and the settings -> the adapt.json record (the
`adapt` command's work).

    record = adapt_checkpoint(folder, AdaptSettings(tokens=131072))
    atomic.write_json(out, record)

For each init (a learned table: settings.inits; a fixed code: "code" alone), from the same final
weights: H's input rows start by the init and its head rows by settings.head_init (rows.py), then
every parameter trains for settings.tokens tokens of the original training split (H present) with
AdamW (the job's betas and eps, constant lr, no weight decay, gradient norm clipped at 1, fp32), in
batches drawn as training draws them (data/batches.py) from settings.seed, the same batches for
every init. The measures (measures.py) are taken at step 0, before any update, and at log-spaced
steps ending on the last.

The record (ADAPT_SCHEMA):
  model       the checkpoint: path, job, fingerprint, seed, input and output names, weights sha256
  heldout     H as the job recorded it (fraction, seed, size, ids) and the corpus it derives from,
              checked against the draw made here from the original corpus (equal, or refused)
  windows     what every measure read (cache key, seq_len, windows, tokens)
  settings    settings.record()
  runs        {init: {"curve": [{step, tokens, <measures>}], "final": the last step's measures,
              "first_mass": step 0's heldout_mass, "train_loss": every step's}}
  runtime, seconds (the one field that is not a function of the inputs)
Deterministic: on CPU the same checkpoint, settings and thread count give the same record.
"""

from __future__ import annotations

import copy
import math
import os
import time
from typing import Any

import numpy as np
import torch

from ..data.batches import TokenDataModule
from ..data.heldout import heldout_of
from ..data.prepare import prepare
from ..errors import ConfigError
from ..evaluation.harness import file_sha256
from ..record.checkpoint import Checkpoint, load_checkpoint, weights_file
from ..record.jobdir import JobDir
from ..spec import JobSpec
from ..training.task import LanguageModelTask
from .measures import measure, measure_windows
from .rows import FIXED, input_table, start_head_rows, start_input_rows
from .settings import GRAD_CLIP, AdaptSettings

ADAPT_SCHEMA = 1
DETERMINISM = ("bitwise on CPU for the same checkpoint, settings and thread count (timing aside); "
               "to float tolerance on another thread count")
NO_HELDOUT_FIX = "adapt a job of sweeps/new_tokens.yaml, or train one with train.heldout_fraction=0.05"


def measured_steps(steps: int, points: int) -> list[int]:
    """Step 0 and log-spaced steps from 1 to `steps` (the last included): at most `points` in all."""
    spaced = np.unique(np.geomspace(1, steps, max(points - 1, 1)).round().astype(int)) if steps else []
    return [0, *[int(s) for s in spaced]]


def load(folder: str | os.PathLike) -> tuple[Checkpoint, JobSpec, dict[str, Any]]:
    """The checkpoint, its spec and the held-out record it trained with; refused in one line when it
    held nothing out or stores no spec."""
    checkpoint = load_checkpoint(folder)
    stored = checkpoint.config.get("spec")
    if stored is None:
        raise ConfigError("checkpoint", f"{checkpoint.path} is a format-1 checkpoint, without its spec",
                          "retrain the job with today's code (force=true) to adapt it")
    spec = JobSpec.from_json(stored)
    recorded = checkpoint.data.get("heldout")
    if spec.train.heldout_fraction is None or recorded is None:
        raise ConfigError("checkpoint", f"{checkpoint.path} was trained on the whole vocabulary "
                          "(train.heldout_fraction=null): it has no new tokens to adapt to", NO_HELDOUT_FIX)
    return checkpoint, spec, recorded


def adapt_checkpoint(folder: str | os.PathLike, settings: AdaptSettings, say=print) -> dict[str, Any]:
    started = time.perf_counter()
    checkpoint, spec, recorded = load(folder)
    prepared = prepare(spec.data.settings, progress=False)  # the original corpus: H occurs here
    if prepared.meta["cache_key"] != recorded["parent_cache_key"]:
        raise ConfigError("data", f"the job's data settings prepare cache {prepared.meta['cache_key']} here, not the "
                          f"{recorded['parent_cache_key']} it held tokens out of", "restore the corpus the job trained on")
    held_ids, spelled = heldout_of(prepared, recorded["fraction"], recorded["seed"])
    if held_ids.tolist() != list(recorded["ids"]):
        raise ConfigError("train.heldout_fraction", "the held-out set drawn here differs from the one the job "
                          "recorded (data/heldout.py's draw changed)", "retrain the job with today's code (force=true)")
    held = torch.from_numpy(held_ids.astype(np.int64))
    seq_len = spec.plan.seq_len
    windows = measure_windows(prepared, seq_len, settings.val_tokens)
    steps = -(-settings.tokens // (seq_len * settings.batch_size))
    at = measured_steps(steps, settings.val_points)
    inits = settings.input_inits if input_table(checkpoint.model) is not None else (FIXED,)
    runs = {}
    for init in inits:
        runs[init] = adapt_one(checkpoint.model, spec, prepared, held, spelled, init, settings, windows, steps, at)
        final = runs[init]["final"]
        say(f"[adapt] {spec.input_name} init={init}: step 0 mass on H {runs[init]['first_mass']:.4f}; after "
            f"{steps} steps loss on H {final['heldout_loss']:.4f}, after H {final['after_heldout_loss']:.4f}, "
            f"other {final['other_loss']:.4f}")
    job = JobDir.of_final_checkpoint(checkpoint.path)
    config = checkpoint.config
    return {
        "schema": ADAPT_SCHEMA,
        "model": {"checkpoint": str(checkpoint.path.resolve()), "job": str(job.path) if job else None,
                  "fingerprint": config.get("fingerprint"), "sweep": config.get("sweep"), "seed": config.get("seed"),
                  "model": spec.model_name, "input": spec.input_name, "output": spec.output_name,
                  "weights_sha256": file_sha256(weights_file(checkpoint.path))},
        "heldout": dict(recorded),
        "windows": {"cache_key": prepared.meta["cache_key"], "seq_len": seq_len, "windows": int(windows.shape[0]),
                    "tokens": int(windows.shape[0] * seq_len)},
        "settings": settings.record(), "steps": steps, "measured_steps": at, "runs": runs,
        "runtime": {"torch": torch.__version__, "threads": torch.get_num_threads(), "deterministic": DETERMINISM},
        "seconds": round(time.perf_counter() - started, 3),
    }


def adapt_one(pretrained, spec: JobSpec, prepared, held: torch.Tensor, spelled, init: str, settings: AdaptSettings,
              windows: torch.Tensor, steps: int, at: list[int]) -> dict[str, Any]:
    """One init's adaptation from the pretrained weights (left untouched): its curve and train losses."""
    model = copy.deepcopy(pretrained).float()
    start_input_rows(model, held, init, spelled, settings.seed)
    start_head_rows(model, held, settings.head_init, settings.seed)
    seq_len, batch = spec.plan.seq_len, settings.batch_size
    data = TokenDataModule(prepared, seq_len, batch, seed=settings.seed)  # training's draw, seeded here
    data.setup("fit")
    batches = iter(data.train_set)
    task = LanguageModelTask(model, spec.optim, max_steps=steps, tokens_per_step=seq_len * batch,
                             token_bytes=torch.ones(model.config.vocab_size))  # its training loss only
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.lr, betas=tuple(spec.optim.betas), eps=float(spec.optim.eps),
                            weight_decay=0.0, foreach=True)
    torch.manual_seed(settings.seed)  # nothing below should draw from the global generator; if it does, seeded
    curve, train_loss = [], []
    model.train()
    for step in range(steps + 1):
        if step in at:
            curve.append({"step": step, "tokens": step * seq_len * batch, **measure(model, windows, held)})
        if step == steps:
            break
        loss = task.training_step(next(batches), step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
        opt.step()
        train_loss.append(float(loss.detach()))
    final = {k: v for k, v in curve[-1].items() if k not in ("step", "tokens")}
    return {"curve": curve, "final": final, "first_mass": curve[0]["heldout_mass"], "train_loss": train_loss,
            "finite": all(math.isfinite(v) for v in train_loss)}
