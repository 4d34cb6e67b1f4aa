"""Alias: `python -m fixedcode_study.probe` is `fixedcode probe` (fixedcode_study/cli/probe.py)."""

from .cli.args import exit_with
from .cli.probe import main

if __name__ == "__main__":
    exit_with(main())
