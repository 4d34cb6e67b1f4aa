"""Alias: `python -m fixedcode_study.describe` is `fixedcode describe` (fixedcode_study/cli/describe.py)."""

from .cli.args import exit_with
from .cli.describe import main

if __name__ == "__main__":
    exit_with(main())
