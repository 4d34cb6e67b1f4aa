"""Alias: `python -m fixedcode_study.run` is `fixedcode run` (fixedcode_study/cli/run.py)."""

from .cli.args import exit_with
from .cli.run import cli

if __name__ == "__main__":
    exit_with(cli())
