"""`python -m analysis` from a checkout: `fixedcode analyze` (fixedcode_study/cli/analyze.py)."""

from fixedcode_study.cli.analyze import main
from fixedcode_study.cli.args import exit_with

if __name__ == "__main__":
    exit_with(main())
