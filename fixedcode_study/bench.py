"""Alias: `python -m fixedcode_study.bench` is `fixedcode bench` (fixedcode_study/cli/bench.py)."""

from .cli.args import exit_with
from .cli.bench import main

if __name__ == "__main__":
    exit_with(main())
