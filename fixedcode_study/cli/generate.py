"""`fixedcode generate checkpoint=DIR | hf=MODEL  prompt=TEXT [n, max_new_tokens, temperature, top_k, seed, out]`: seeded samples.

    fixedcode generate checkpoint=outputs/multirun/main/input=gf2,seed=1 prompt="KING HENRY:"
    fixedcode generate checkpoint=DIR prompt="To be" temperature=0                # greedy
    fixedcode generate checkpoint=outputs/multirun/main prompt="KING HENRY:" n=2  # every job
    fixedcode generate hf=exports/gf2-s1 prompt="KING HENRY:"                     # an exported folder
    python -m fixedcode_study.generate checkpoint=... prompt=...                  # the same command

checkpoint= is a job directory, its checkpoints/final folder, a study directory (every completed
job below it) or one of our exports whose source checkpoint is here (hub/source.py: the same rule
as export, evaluate, probe and lm-eval). hf= is a Hugging Face folder or Hub name (offline: from the
local cache): one of our exports, or a Llama-family model, mapped onto the workbench decoder
(hub/imported.py), so an export samples exactly the text its job does. Sampling is seeded (seed=0
by default), so a command prints the same text every time on CPU. A job keeps its samples in
<job>/samples.json, which `fixedcode analyze` shows per variant; out=FILE also writes the samples
(of the last model) as JSON. The work is hub/generation.py's.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError
from ..hub.generation import SampleSettings, jobs_below, record_samples, sample
from ..hub.source import checkpoint_folder
from ..record import atomic
from ..record.checkpoint import Checkpoint, load_checkpoint
from ..record.jobdir import JobDir
from .args import REQUIRED, Command, Key, exit_with, run_command

_DEFAULTS = SampleSettings()
COMMAND = Command("generate", __doc__, keys=(
    Key("checkpoint", None, "a job, checkpoint or study folder, or an export of one", kind=str),
    Key("hf", None, "a Hugging Face folder or Hub name instead", kind=str),
    Key("prompt", REQUIRED, "the text every sample continues"),
    Key("n", _DEFAULTS.n, "samples per prompt"),
    Key("max_new_tokens", _DEFAULTS.max_new_tokens, "tokens generated per sample"),
    Key("temperature", _DEFAULTS.temperature, "sampling temperature; 0 = greedy"),
    Key("top_k", _DEFAULTS.top_k, "keep the k likeliest tokens; 0 = no cut"),
    Key("seed", _DEFAULTS.seed, "sampling seed"),
    Key("out", "", "also write the samples as JSON to this file"),
))


def models(values: dict[str, Any]) -> Iterator[Checkpoint]:
    """The loaded models the command line names, one at a time."""
    if (values["checkpoint"] is None) == (values["hf"] is None):
        raise ConfigError("checkpoint", "missing" if values["checkpoint"] is None else "given together with hf=",
                          "pass checkpoint=<a job, checkpoint or study folder> or hf=<a Hugging Face folder or Hub name>")
    if values["hf"] is not None:
        from ..hub.external import resolve_hf
        from ..hub.imported import checkpoint_from_hf

        yield checkpoint_from_hf(resolve_hf(values["hf"]).path)
        return
    given = values["checkpoint"]
    jobs = jobs_below(given) if Path(given).expanduser().is_dir() else []
    for folder in [j.final_checkpoint for j in jobs] or [checkpoint_folder(given, f"pass hf={given}")]:
        yield load_checkpoint(folder)


def generate(values: dict[str, Any], _overrides: list[str]) -> int:
    settings = SampleSettings(**{f.name: values[f.name] for f in fields(SampleSettings)})
    settings.check()
    for ckpt in models(values):
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
