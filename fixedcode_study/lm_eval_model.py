"""Alias: `python -m fixedcode_study.lm_eval_model` is `fixedcode lm-eval` (fixedcode_study/cli/lm_eval_model.py)."""

from .cli.args import exit_with
from .cli.lm_eval_model import cli

if __name__ == "__main__":
    exit_with(cli())
