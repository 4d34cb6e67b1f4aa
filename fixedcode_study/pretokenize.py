"""Alias: `python -m fixedcode_study.pretokenize` is `fixedcode pretokenize` (fixedcode_study/cli/pretokenize.py)."""

import sys

from .cli.pretokenize import main

if __name__ == "__main__":
    sys.exit(main())
