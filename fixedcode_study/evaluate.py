"""Alias: `python -m fixedcode_study.evaluate` is `fixedcode evaluate` (fixedcode_study/cli/evaluate.py)."""

from .cli.evaluate import main

if __name__ == "__main__":
    main()
