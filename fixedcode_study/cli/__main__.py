"""`fixedcode <command> [arguments]`: the workbench's one front door.

Every command is one module of this package (thin: parse, resolve, call the library), and each is
also `python -m fixedcode_study.<module>` and the script `fixedcode-<command>`. `fixedcode
<command> --help` prints that command's own help.
"""

from __future__ import annotations

import importlib
import sys

from .args import exit_with

# command -> (module, entry function, one line for the listing). A table, as litgpt's __main__.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("fixedcode_study.cli.run", "cli", "train jobs (Hydra app; -m for a sweep of jobs)"),
    "sweep": ("fixedcode_study.cli.sweep", "main", "run one study preset of sweeps/ (--dry-run: its jobs and cost)"),
    "describe": ("fixedcode_study.cli.describe", "main", "parameter accounting and input properties (no training)"),
    "evaluate": ("fixedcode_study.cli.evaluate", "main", "lm-evaluation-harness on a checkpoint or a Hugging Face model"),
    "probe": ("fixedcode_study.cli.probe", "main", "representation probes of trained models"),
    "analyze": ("fixedcode_study.analysis.__main__", "main", "run directories -> tables, figures, report.md"),
    "export": ("fixedcode_study.cli.export", "main", "a checkpoint -> a Hugging Face folder"),
    "generate": ("fixedcode_study.cli.generate", "main", "seeded text samples from trained models"),
    "pretokenize": ("fixedcode_study.cli.pretokenize", "main", "tokenize a large corpus into shards"),
    "bench": ("fixedcode_study.cli.bench", "main", "step time, memory and MFU per input interface"),
    "bench-input": ("fixedcode_study.cli.bench_input", "main", "the input interface alone: time and memory"),
    "bench-output": ("fixedcode_study.cli.bench_output", "main", "each output head: alone at paper width and in the model"),
    "eval-tasks": ("fixedcode_study.cli.eval_tasks", "main", "task YAMLs for lm_eval --include_path"),
    "lm-eval": ("fixedcode_study.cli.lm_eval_model", "cli", "lm-eval's own CLI with the `fixedcode` model"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [__doc__.strip().splitlines()[0], "", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, _, what) in COMMANDS.items()]
    return "\n".join(lines + ["", "fixedcode <command> --help shows a command's arguments."])


def main(argv: list[str] | None = None) -> int | None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"error: command: {name!r} is not a fixedcode command; use one of {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    module, function, _ = COMMANDS[name]
    entry = getattr(importlib.import_module(module), function)
    if function != "cli":
        return entry(rest)
    saved = sys.argv
    sys.argv = [f"fixedcode {name}", *rest]  # Hydra's app and lm-eval's CLI read sys.argv themselves
    try:
        return entry()
    finally:
        sys.argv = saved  # an in-process caller (a test, a notebook) gets its own argv back


if __name__ == "__main__":
    exit_with(main())
