"""`python -m fixedcode_study.run [-m] [overrides]`, the study's own command: `fixedcode run` (cli/run.py).

The one module kept beside the package for a command: the README and the sweeps' grids
(studies/grids.py) launch it, and it needs no installed script.
"""

from .cli.args import exit_with
from .cli.run import main

if __name__ == "__main__":
    exit_with(main())
