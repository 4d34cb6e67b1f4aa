"""`fixedcode <command> [arguments]`: the workbench's one front door (also `python -m fixedcode_study <command>`).

Every command is one module of this package (thin: parse, resolve, call the library) with
`main(argv) -> int`; `fixedcode <command> --help` prints that command's own help. Its settings are
one dataclass (cli/args.py), except `run` (Hydra's own command line) and `lm-eval` (lm-eval's).
"""

from __future__ import annotations

import importlib
import sys

from .args import exit_with

# command -> (module, one line for the listing). A table, as litgpt's __main__; each module's `main`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("fixedcode_study.cli.run", "train jobs (Hydra app; -m for a sweep of jobs)"),
    "sweep": ("fixedcode_study.cli.sweep", "run one study preset of sweeps/ (dry_run=true: its jobs and cost)"),
    "describe": ("fixedcode_study.cli.describe", "parameter accounting and input properties (no training)"),
    "evaluate": ("fixedcode_study.cli.evaluate", "lm-evaluation-harness on a checkpoint or a Hugging Face model"),
    "probe": ("fixedcode_study.cli.probe", "representation probes of trained models"),
    "compose": ("fixedcode_study.cli.compose", "two models combined: ensemble, stitching, loss barrier"),
    "adapt": ("fixedcode_study.cli.adapt", "a model pretrained without some tokens learns them: curves per init"),
    "analyze": ("fixedcode_study.cli.analyze", "run directories -> tables, figures, report.md"),
    "regenerate": ("fixedcode_study.cli.regenerate", "the committed reports from their records, then the summary blocks"),
    "export": ("fixedcode_study.cli.export", "a checkpoint -> a Hugging Face folder"),
    "generate": ("fixedcode_study.cli.generate", "seeded text samples from trained models"),
    "pretokenize": ("fixedcode_study.cli.pretokenize", "tokenize a large corpus into shards"),
    "bench": ("fixedcode_study.cli.bench", "step time, memory and MFU per input interface"),
    "bench-input": ("fixedcode_study.cli.bench_input", "the input interface alone: time and memory"),
    "bench-output": ("fixedcode_study.cli.bench_output", "each output head: alone at paper width and in the model"),
    "eval-tasks": ("fixedcode_study.cli.eval_tasks", "task YAMLs for lm_eval --include_path"),
    "lm-eval": ("fixedcode_study.cli.lm_eval_model", "lm-eval's own CLI with the `fixedcode` model"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [__doc__.strip().splitlines()[0], "", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(lines + ["", "fixedcode <command> --help shows a command's settings."])


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"error: command: {name!r} is not a fixedcode command; use one of {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[name][0]).main(rest)


if __name__ == "__main__":
    exit_with(main())
