"""`python -m analysis` from a checkout: an alias of `fixedcode analyze` (fixedcode_study/analysis)."""

import sys

from fixedcode_study.analysis.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
