"""Alias: `python -m fixedcode_study.sweep` is `fixedcode sweep` (fixedcode_study/cli/sweep.py)."""

from .cli.args import exit_with
from .cli.sweep import main

if __name__ == "__main__":
    exit_with(main())
