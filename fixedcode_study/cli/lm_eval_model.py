"""`fixedcode lm-eval --model fixedcode --model_args checkpoint=PATH ...`: lm-eval's own command line.

Every `lm_eval` flag works unchanged (`python -m fixedcode_study.lm_eval_model` is the same
command), with our checkpoints registered as the `fixedcode` model first: lm-eval 0.4 reads no
plugin entry points, so the plain `lm_eval` command cannot find it. The model itself is
evaluation/lm.py (FixedCodeLM). lm-eval parses the arguments and prints its own --help; only a bad
argument is reported our way, as one line and exit 2.
"""

from __future__ import annotations

import sys

from ..evaluation import lm as _registers_fixedcode  # noqa: F401  (import registers the model)
from .args import exit_with


def _one_line_errors(parser) -> None:
    """argparse prints usage plus the error and exits 2; keep the exit, print the error alone."""
    def error(message: str) -> None:
        print(f"error: {parser.prog}: {message}; see fixedcode lm-eval --help", file=sys.stderr)
        sys.exit(2)

    parser.error = error


def cli() -> int:
    """lm-eval's `cli_evaluate` (lm_eval/__main__.py), reading sys.argv, with one-line argument errors."""
    from lm_eval.__main__ import setup_logging
    from lm_eval._cli.harness import HarnessCLI

    setup_logging()
    harness = HarnessCLI()
    for parser in (harness._parser, *harness._subparsers.choices.values()):
        _one_line_errors(parser)
    try:
        harness.execute(harness.parse_args())
    except SystemExit as stop:  # lm-eval's own exits (--help, errors): their code as ours
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)  # sys.exit("message"): what Python would print, exit 1
        return 1
    return 0


if __name__ == "__main__":
    exit_with(cli())
