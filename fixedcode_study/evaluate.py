"""Alias: `python -m fixedcode_study.evaluate` is `fixedcode evaluate` (fixedcode_study/cli/evaluate.py)."""

from .cli.args import exit_with
from .cli.evaluate import main

if __name__ == "__main__":
    exit_with(main())
