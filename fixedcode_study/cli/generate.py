"""`fixedcode generate checkpoint=DIR | hf=MODEL  prompt=TEXT [n, max_new_tokens, temperature, top_k, seed, out]`: seeded samples.

    fixedcode generate checkpoint=outputs/multirun/main/input=gf2,seed=1 prompt="KING HENRY:"
    fixedcode generate checkpoint=DIR prompt="To be" temperature=0                # greedy
    fixedcode generate checkpoint=outputs/multirun/main prompt="KING HENRY:" n=2  # every job
    fixedcode generate hf=exports/gf2-s1 prompt="KING HENRY:"                     # an exported folder

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError
from ..hub.sampling import SampleSettings
from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class GenerateOptions:
    checkpoint: str | None = None
    """a job, checkpoint or study folder, or an export of one"""
    hf: str | None = None
    """a Hugging Face folder or Hub name instead"""
    prompt: str
    """the text every sample continues"""
    sample: SampleSettings = field(default_factory=SampleSettings)
    out: str = ""
    """also write the samples (of the last model) as JSON to this file"""

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.hf is None):
            raise ConfigError("checkpoint", "missing" if self.checkpoint is None else "given together with hf=",
                              "pass checkpoint=<a job, checkpoint or study folder> or hf=<a Hugging Face folder or "
                              "Hub name>")
        self.sample.check()


COMMAND = Command("generate", __doc__, GenerateOptions)


def models(options: GenerateOptions) -> Iterator[Any]:
    """The loaded models (record.checkpoint.Checkpoint) the command line names, one at a time."""
    if options.hf is not None:
        from ..hub.external import resolve_hf
        from ..hub.imported import checkpoint_from_hf

        yield checkpoint_from_hf(resolve_hf(options.hf).path)
        return
    from ..hub.generation import jobs_below
    from ..hub.source import checkpoint_folder
    from ..record.checkpoint import load_checkpoint

    given = options.checkpoint
    jobs = jobs_below(given) if Path(given).expanduser().is_dir() else []
    for folder in [j.final_checkpoint for j in jobs] or [checkpoint_folder(given, f"pass hf={given}")]:
        yield load_checkpoint(folder)


def generate(options: GenerateOptions, _overrides: list[str]) -> int:
    from ..hub.generation import record_samples, sample
    from ..record import atomic
    from ..record.jobdir import JobDir

    settings = options.sample
    for ckpt in models(options):
        result = sample(ckpt, options.prompt, settings)
        result["checkpoint"] = str(ckpt.path)
        print(f"=== {ckpt.path}")
        for i, text in enumerate(result["samples"], 1):
            print(f"--- sample {i} (seed {settings.seed}, temperature {settings.temperature}, top_k {settings.top_k})")
            print(options.prompt + text)
        job = JobDir.of_final_checkpoint(ckpt.path)
        if job is not None and job.results.exists():
            record_samples(job, result)
            print(f"[generate] -> {job.samples}")
    if options.out:
        atomic.write_json(options.out, result)
        print(f"[generate] wrote {options.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, generate)


if __name__ == "__main__":
    exit_with(main())
