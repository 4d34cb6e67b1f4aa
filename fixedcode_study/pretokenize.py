"""Alias: `python -m fixedcode_study.pretokenize` is `fixedcode pretokenize` (fixedcode_study/cli/pretokenize.py)."""

from .cli.args import exit_with
from .cli.pretokenize import main

if __name__ == "__main__":
    exit_with(main())
