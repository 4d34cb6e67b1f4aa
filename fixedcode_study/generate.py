"""Alias: `python -m fixedcode_study.generate` is `fixedcode generate` (fixedcode_study/cli/generate.py)."""

from .cli.args import exit_with
from .cli.generate import main

if __name__ == "__main__":
    exit_with(main())
