"""`python -m fixedcode_study.generate checkpoint=DIR prompt=TEXT [n, max_new_tokens, temperature, top_k, seed]`.

    python -m fixedcode_study.generate checkpoint=outputs/multirun/main/input=gf2,seed=1 prompt="KING HENRY:"
    python -m fixedcode_study.generate checkpoint=DIR prompt="To be" temperature=0   # greedy

    python -m fixedcode_study.generate checkpoint=outputs/multirun/main prompt="KING HENRY:" n=2   # every job

checkpoint= is a final checkpoint folder, a job directory or a study directory (every completed
job below it). Sampling is seeded (seed=0 by default), so a command prints the same text every time
on CPU. A job keeps its samples in <job>/samples.json, which `python -m analysis` shows per variant;
out=FILE also writes a bare checkpoint's samples as JSON. The work is hub/generation.py's.
"""

from __future__ import annotations

from pathlib import Path
from dataclasses import asdict, fields

from . import args as cliargs
from ..hub.export import resolve_checkpoint
from ..hub.generation import SampleSettings, jobs_below, record_samples, sample
from ..record import atomic
from ..record.checkpoint import load_checkpoint
from ..record.jobdir import JobDir

USAGE = ("usage: checkpoint=<checkpoint or job folder> prompt=<text> [n=3] [max_new_tokens=48] [temperature=0.8] "
         "[top_k=50] [seed=0] [out=<file.json>]")


def generate(args: list[str]) -> None:
    opts = cliargs.parse(args, {"checkpoint": cliargs.REQUIRED, "prompt": cliargs.REQUIRED, "out": "",
                                **asdict(SampleSettings())}, USAGE)
    settings = SampleSettings(**{f.name: opts[f.name] for f in fields(SampleSettings)})
    settings.check()
    jobs = jobs_below(opts["checkpoint"]) if Path(opts["checkpoint"]).expanduser().is_dir() else []
    folders = [j.final_checkpoint for j in jobs] or [resolve_checkpoint(opts["checkpoint"])]
    for folder in folders:
        ckpt = load_checkpoint(folder)
        result = sample(ckpt, opts["prompt"], settings)
        result["checkpoint"] = str(ckpt.path)
        print(f"=== {ckpt.path}")
        for i, text in enumerate(result["samples"], 1):
            print(f"--- sample {i} (seed {settings.seed}, temperature {settings.temperature}, top_k {settings.top_k})")
            print(opts["prompt"] + text)
        job = JobDir.of_final_checkpoint(ckpt.path)
        if job is not None and job.results.exists():
            record_samples(job, result)
            print(f"[generate] -> {job.samples}")
    if opts["out"]:
        atomic.write_json(opts["out"], result)
        print(f"[generate] wrote {opts['out']}")


def main(argv: list[str] | None = None) -> None:
    cliargs.run_command(argv, __doc__, generate)


if __name__ == "__main__":
    main()
