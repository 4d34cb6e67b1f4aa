"""`python -m fixedcode_study <command> ...` is `fixedcode <command> ...` (fixedcode_study/cli/__main__.py)."""

from .cli.__main__ import main
from .cli.args import exit_with

if __name__ == "__main__":
    exit_with(main())
