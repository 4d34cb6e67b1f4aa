"""Alias: `python -m fixedcode_study.export` is `fixedcode export` (fixedcode_study/cli/export.py)."""

from .cli.args import exit_with
from .cli.export import main

if __name__ == "__main__":
    exit_with(main())
