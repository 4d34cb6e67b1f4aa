"""Alias: `python -m fixedcode_study.lm_eval_model` is `fixedcode lm-eval` (fixedcode_study/cli/lm_eval_model.py)."""

from .cli.lm_eval_model import cli

if __name__ == "__main__":
    cli()
