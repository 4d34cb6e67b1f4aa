"""Samples from a checkpoint, for a quick look at what a model learned.

For a job, the samples are also kept in <job>/samples.json (`record_samples`), stamped with the
job's fingerprint and finish time so analysis shows them only while they describe the job's current
weights; one entry per prompt, a new run with the same prompt replaces its entry.

The workbench model is converted in memory to its transformers form (export.hf_model: the same
function, checked by the export tests) and sampled with transformers' `generate` (KV cache,
temperature, top-k). The prompt follows an end-of-text token, as every training document does, and
sampling is seeded: the same checkpoint, prompt and settings give the same text on CPU.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..data.tokenizer import end_of_text_id
from ..errors import ConfigError
from ..record import atomic
from ..record.checkpoint import Checkpoint
from ..record.jobdir import COMPLETED, JobDir
from .sampling import SampleSettings

SAMPLES_SCHEMA = 1


def sample(ckpt: Checkpoint, prompt: str, settings: SampleSettings) -> dict[str, Any]:
    """{"prompt", "settings", "samples": [continuation text, ...]} for one prompt."""
    from transformers import GenerationConfig

    from .export import hf_model

    settings.check()
    tok = ckpt.tokenizer
    eot = end_of_text_id(tok, (ckpt.config.get("data") or {}).get("eot_token"), field="checkpoint")
    ids = [eot, *tok.encode(prompt).ids]
    room = ckpt.model.config.max_seq_len - settings.max_new_tokens
    if room < 1:
        raise ConfigError("max_new_tokens", f"{settings.max_new_tokens} leaves no room for a prompt in the "
                          f"model's context of {ckpt.model.config.max_seq_len}",
                          f"pass max_new_tokens<{ckpt.model.config.max_seq_len}")
    ids = ids[-room:]  # keep the end of a prompt longer than the context allows
    greedy = settings.temperature == 0
    config = GenerationConfig(
        do_sample=not greedy, max_new_tokens=settings.max_new_tokens, eos_token_id=eot, pad_token_id=eot,
        num_return_sequences=1 if greedy else settings.n,
        **({} if greedy else {"temperature": settings.temperature, "top_k": settings.top_k or None}))
    model = hf_model(ckpt.model.float())
    torch.manual_seed(settings.seed)
    prompt_ids = torch.tensor([ids])  # (1, len(ids))
    with torch.no_grad():
        # An explicit mask: otherwise generate takes the leading end-of-text (= pad id) for padding.
        out = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), generation_config=config)  # (n, len(ids) + new)
    samples = []
    for row in out[:, len(ids):].tolist():
        row = row[: row.index(eot)] if eot in row else row  # stop at the end of the document
        samples.append(tok.decode(row))
    return {"prompt": prompt, "settings": asdict(settings), "samples": samples, "model_spec": ckpt.spec_note}


def jobs_below(path: str) -> list[JobDir]:
    """Completed jobs with final weights at or below a directory (a job or a study directory)."""
    root = JobDir(path)
    if root.results.exists():
        return [root]
    jobs = [JobDir(p.parent) for p in sorted(Path(path).expanduser().rglob(root.results.name))]
    return [j for j in jobs if (j.read_results() or {}).get("status") == COMPLETED and j.final_checkpoint.is_dir()]


def record_samples(job: JobDir, result: dict[str, Any]) -> None:
    """Add (or replace, by prompt) this prompt's samples in <job>/samples.json."""
    record = job.read_results() or {}
    stamp = {"job_fingerprint": (record.get("fingerprint") or {}).get("sha"), "job_finished_at": record.get("finished_at")}
    old = {}
    if job.samples.exists():
        old = json.loads(job.samples.read_text())
    keep = [e for e in old.get("prompts", []) if e.get("prompt") != result["prompt"]] \
        if all(old.get("subject", {}).get(k) == v for k, v in stamp.items()) else []
    atomic.write_json(job.samples, {"schema": SAMPLES_SCHEMA, "subject": {**stamp, "input": record.get("input"),
                                                                         "seed": record.get("seed")},
                                    "prompts": [*keep, result]})
