"""Alias: `python -m fixedcode_study.bench_input` is `fixedcode bench-input` (fixedcode_study/cli/bench_input.py)."""

from .cli.args import exit_with
from .cli.bench_input import main

if __name__ == "__main__":
    exit_with(main())
