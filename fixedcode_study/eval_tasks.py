"""Alias: `python -m fixedcode_study.eval_tasks` is `fixedcode eval-tasks` (fixedcode_study/cli/eval_tasks.py)."""

from .cli.args import exit_with
from .cli.eval_tasks import main

if __name__ == "__main__":
    exit_with(main())
