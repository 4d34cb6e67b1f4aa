"""`fixedcode generate checkpoint=DIR prompt=TEXT [n, max_new_tokens, temperature, top_k, seed, out]`: seeded samples.

    fixedcode generate checkpoint=outputs/multirun/main/input=gf2,seed=1 prompt="KING HENRY:"
    fixedcode generate checkpoint=DIR prompt="To be" temperature=0                # greedy
    fixedcode generate checkpoint=outputs/multirun/main prompt="KING HENRY:" n=2  # every job
    python -m fixedcode_study.generate checkpoint=... prompt=...                  # the same command

checkpoint= is a final checkpoint folder, a job directory or a study directory (every completed
job below it). Sampling is seeded (seed=0 by default), so a command prints the same text every time
on CPU. A job keeps its samples in <job>/samples.json, which `fixedcode analyze` shows per variant;
out=FILE also writes a bare checkpoint's samples as JSON. The work is hub/generation.py's.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from ..hub.export import resolve_checkpoint
from ..hub.generation import SampleSettings, jobs_below, record_samples, sample
from ..record import atomic
from ..record.checkpoint import load_checkpoint
from ..record.jobdir import JobDir
from .args import REQUIRED, Command, Key, exit_with, run_command

_DEFAULTS = SampleSettings()
COMMAND = Command("generate", __doc__, keys=(
    Key("checkpoint", REQUIRED, "checkpoint, job or study folder"),
    Key("prompt", REQUIRED, "the text every sample continues"),
    Key("n", _DEFAULTS.n, "samples per prompt"),
    Key("max_new_tokens", _DEFAULTS.max_new_tokens, "tokens generated per sample"),
    Key("temperature", _DEFAULTS.temperature, "sampling temperature; 0 = greedy"),
    Key("top_k", _DEFAULTS.top_k, "keep the k likeliest tokens; 0 = no cut"),
    Key("seed", _DEFAULTS.seed, "sampling seed"),
    Key("out", "", "also write the samples as JSON to this file"),
))


def generate(values: dict[str, Any], _overrides: list[str]) -> int:
    settings = SampleSettings(**{f.name: values[f.name] for f in fields(SampleSettings)})
    settings.check()
    jobs = jobs_below(values["checkpoint"]) if Path(values["checkpoint"]).expanduser().is_dir() else []
    folders = [j.final_checkpoint for j in jobs] or [resolve_checkpoint(values["checkpoint"])]
    for folder in folders:
        ckpt = load_checkpoint(folder)
        result = sample(ckpt, values["prompt"], settings)
        result["checkpoint"] = str(ckpt.path)
        print(f"=== {ckpt.path}")
        for i, text in enumerate(result["samples"], 1):
            print(f"--- sample {i} (seed {settings.seed}, temperature {settings.temperature}, top_k {settings.top_k})")
            print(values["prompt"] + text)
        job = JobDir.of_final_checkpoint(ckpt.path)
        if job is not None and job.results.exists():
            record_samples(job, result)
            print(f"[generate] -> {job.samples}")
    if values["out"]:
        atomic.write_json(values["out"], result)
        print(f"[generate] wrote {values['out']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, generate)


if __name__ == "__main__":
    exit_with(main())
