"""Alias: `python -m fixedcode_study.describe` is `fixedcode describe` (fixedcode_study/cli/describe.py)."""

from .cli.describe import main

if __name__ == "__main__":
    main()
