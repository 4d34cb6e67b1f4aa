"""Alias: `python -m fixedcode_study.bench_output` is `fixedcode bench-output` (fixedcode_study/cli/bench_output.py)."""

from .cli.args import exit_with
from .cli.bench_output import main

if __name__ == "__main__":
    exit_with(main())
