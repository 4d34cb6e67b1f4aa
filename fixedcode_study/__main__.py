"""`python -m fixedcode_study <command> ...` is `fixedcode <command> ...` (fixedcode_study/cli/__main__.py)."""

import sys

from .cli.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
